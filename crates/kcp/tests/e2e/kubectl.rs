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
    assert_eq!(contexts, ["base", "root", "shard-base", "system:admin"]);
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
fn restarts_reuse_the_ca_and_the_shard_admin_token_kept_only_as_a_digest() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::start(dir.path(), &[]);
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    let token = |user| kcp_testing::kubeconfig::admin_token(dir.path(), user);
    let (ca, shard_admin, kcp_admin) = (read("ca.crt"), token("shard-admin"), token("kcp-admin"));
    kcp.stop();
    let kcp = Kcp::start(dir.path(), &[]);
    assert_eq!(read("ca.crt"), ca);
    // The shard admin's token is kept; kcp-admin gets a new one at every start, as in kcp.
    assert_eq!(token("shard-admin"), shard_admin);
    assert_ne!(token("kcp-admin"), kcp_admin);
    let with_token = |token: &str, context: &str| {
        kcp.kubectl(&[
            "--context",
            context,
            "--token",
            token,
            "get",
            "--raw",
            "/api",
        ])
    };
    assert!(with_token(&shard_admin, "shard-base").status.success());
    let stale = with_token(&kcp_admin, "base");
    assert!(!stale.status.success());
    assert!(kcp_testing::output::stderr(&stale).contains("Unauthorized"));
    assert_eq!(kcp.kubectl_ok(&["get", "--raw", "/readyz"]), "ok");
    // Only the kubeconfig holds the shard admin's token; the root directory keeps its digest.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() && !path.ends_with("admin.kubeconfig") {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !String::from_utf8_lossy(&bytes).contains(&shard_admin),
                "{} holds the admin token",
                path.display()
            );
        }
    }
    // Both admins as kcp has them: shard-admin in system:masters, kcp-admin in system:kcp:admin.
    let whoami = |context: &str| {
        let out = kcp.kubectl_ok(&["--context", context, "auth", "whoami", "-o", "json"]);
        kcp_testing::output::json(&out)["status"]["userInfo"].clone()
    };
    let shard = whoami("system:admin");
    assert_eq!(shard["username"], "shard-admin");
    assert_eq!(shard["groups"][0], "system:masters");
    let admin = whoami("root");
    assert_eq!(admin["username"], "kcp-admin");
    assert_eq!(admin["groups"][0], "system:kcp:admin");
    use std::os::unix::fs::PermissionsExt;
    for name in [
        "admin.kubeconfig",
        ".admin-token-store",
        "service-account.key",
        "ca.key",
        "apiserver.key",
    ] {
        let mode = std::fs::metadata(dir.path().join(name))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "{name} is readable by others: {mode:o}");
    }
    kcp.stop();
}
