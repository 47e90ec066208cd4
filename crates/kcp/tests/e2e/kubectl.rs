//! The real kubectl against the real binary over TLS with the admin token.

use super::support::Kcp;

#[test]
fn kubectl_version_reports_kubernetes_1_32() {
    let kcp = Kcp::shared("kubectl-version");
    let version: serde_json::Value =
        serde_json::from_str(&kcp.kubectl_ok(&["version", "-o", "json"])).unwrap();
    assert_eq!(version["serverVersion"]["major"], "1");
    assert_eq!(version["serverVersion"]["minor"], "32");
}

#[test]
fn admin_kubeconfig_contexts_reach_the_server_over_verified_tls() {
    let kcp = Kcp::shared("kubectl-contexts");
    let contexts = kcp.kubectl_ok(&["config", "get-contexts", "-o", "name"]);
    let mut contexts: Vec<&str> = contexts.lines().collect();
    contexts.sort();
    assert_eq!(contexts, ["base", "root", "system:admin"]);
    assert_eq!(
        kcp.kubectl_ok(&["config", "current-context"]).trim(),
        "root"
    );
    // No --insecure-skip-tls-verify anywhere: the CA in the kubeconfig verifies the server.
    assert_eq!(kcp.kubectl_ok(&["get", "--raw", "/readyz"]), "ok");
    assert_eq!(
        kcp.kubectl_ok(&["--context", "base", "get", "--raw", "/livez"]),
        "ok"
    );
    assert_eq!(
        kcp.kubectl_ok(&["--context", "system:admin", "get", "--raw", "/healthz"]),
        "ok"
    );
}

#[test]
fn a_wrong_token_is_unauthorized() {
    let kcp = Kcp::shared("kubectl-wrong-token");
    let output = kcp.kubectl(&["--token", "not-the-admin-token", "get", "--raw", "/api"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("Unauthorized"), "{stderr}");
    // The admin token gets past authentication.
    assert!(
        kcp.kubectl_ok(&["get", "--raw", "/api"])
            .contains("APIVersions")
    );
}

#[test]
fn kubectl_discovers_the_built_in_apis() {
    let kcp = Kcp::shared("kubectl-discovery");
    let versions = kcp.kubectl_ok(&["api-versions"]);
    for expected in [
        "v1",
        "rbac.authorization.k8s.io/v1",
        "coordination.k8s.io/v1",
        "apiextensions.k8s.io/v1",
    ] {
        assert!(
            versions.lines().any(|l| l == expected),
            "{expected} missing from:\n{versions}"
        );
    }
    assert!(
        !versions.contains("apps/"),
        "kcp serves no workload APIs:\n{versions}"
    );

    let resources = kcp.kubectl_ok(&["api-resources", "--no-headers"]);
    let row = |name: &str| {
        resources
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .find(|cols| cols[0] == name)
            .unwrap_or_else(|| panic!("{name} missing from:\n{resources}"))
    };
    assert_eq!(
        row("configmaps"),
        ["configmaps", "cm", "v1", "true", "ConfigMap"]
    );
    assert_eq!(
        row("namespaces"),
        ["namespaces", "ns", "v1", "false", "Namespace"]
    );
    assert_eq!(
        row("roles"),
        ["roles", "rbac.authorization.k8s.io/v1", "true", "Role"]
    );
    let namespaced = kcp.kubectl_ok(&["api-resources", "--namespaced=false", "-o", "name"]);
    assert!(
        namespaced
            .lines()
            .any(|l| l == "customresourcedefinitions.apiextensions.k8s.io")
    );
    assert!(!namespaced.lines().any(|l| l == "configmaps"));
}

#[test]
fn restarts_reuse_the_ca_and_the_admin_token() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::start(dir.path(), &[]);
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    let (ca, token) = (read("ca.crt"), read("admin-token"));
    let old_kubeconfig = read("admin.kubeconfig");
    kcp.stop();
    let kcp = Kcp::start(dir.path(), &[]);
    assert_eq!(read("ca.crt"), ca);
    assert_eq!(read("admin-token"), token);
    assert!(old_kubeconfig.contains(token.trim()));
    assert_eq!(kcp.kubectl_ok(&["get", "--raw", "/readyz"]), "ok");
    use std::os::unix::fs::PermissionsExt;
    for name in ["admin.kubeconfig", "admin-token", "ca.key", "apiserver.key"] {
        let mode = std::fs::metadata(dir.path().join(name))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{name} is readable by others: {mode:o}");
    }
    kcp.stop();
}
