//! ResourceQuota object counts with kubectl, in two workspaces at once: `status.used` counts a
//! namespace's objects (built-in, by their old name too, and custom), creates past a limit are
//! refused with Kubernetes' message, a deletion gives the place back, and each workspace's
//! quotas count only its own objects.

use kcp_testing::crd::Crd;
use kcp_testing::wait;

use super::support::{Kcp, write_file};

fn quota(limit: u32) -> String {
    format!(
        "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: objects\n  namespace: q\nspec:\n  hard:\n    count/configmaps: \"{limit}\"\n    secrets: \"1\"\n    count/widgets.example.com: \"1\"\n"
    )
}

fn widget(name: &str) -> String {
    format!("apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: {name}\n  namespace: q\n")
}

fn used(kcp: &Kcp, cluster: &str, resource: &str) -> String {
    let quota = kcp.kubectl_in_ok(
        cluster,
        &["get", "resourcequota", "objects", "-n", "q", "-o", "json"],
    );
    let quota: serde_json::Value = serde_json::from_str(&quota).unwrap();
    quota["status"]["used"][resource]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn wait_used(kcp: &Kcp, cluster: &str, resource: &str, expected: &str) {
    wait::until(&format!("{resource} used {expected} in {cluster}"), || {
        let seen = used(kcp, cluster, resource);
        if seen == expected { Ok(()) } else { Err(seen) }
    });
}

#[test]
fn quotas_count_objects_and_refuse_creates_past_their_limits_per_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("resource-quota");
    let (home, other) = (kcp.home().to_string(), kcp.workspace("other"));
    let crd = Crd::namespaced("widgets", "Widget")
        .singular("widget")
        .storage_version("v1", "type: object")
        .yaml();
    let crd = write_file(dir.path(), "crd.yaml", &crd);
    for (cluster, limit) in [(&home, 3), (&other, 10)] {
        kcp.kubectl_in_ok(cluster, &["create", "namespace", "q"]);
        kcp.kubectl_in_ok(cluster, &["create", "-f", &crd]);
        kcp.wait_established(cluster, "widgets.example.com");
        // The namespace's own kube-root-ca.crt first, so that it is counted from the start.
        wait::until("kube-root-ca.crt", || {
            kcp.kubectl_in(
                cluster,
                &["get", "configmap", "kube-root-ca.crt", "-n", "q"],
            )
            .status
            .success()
        });
        let file = write_file(dir.path(), "quota.yaml", &quota(limit));
        kcp.kubectl_in_ok(cluster, &["create", "-f", &file]);
        wait_used(&kcp, cluster, "count/configmaps", "1");
    }
    wait_used(&kcp, &home, "secrets", "0");
    wait_used(&kcp, &home, "count/widgets.example.com", "0");

    for name in ["cm-1", "cm-2"] {
        kcp.kubectl_in_ok(&home, &["create", "configmap", name, "-n", "q"]);
    }
    wait_used(&kcp, &home, "count/configmaps", "3");
    let refused = kcp.kubectl_in_err(&home, &["create", "configmap", "cm-3", "-n", "q"]);
    assert_eq!(
        refused,
        "error: failed to create configmap: configmaps \"cm-3\" is forbidden: exceeded quota: \
         objects, requested: count/configmaps=1, used: count/configmaps=3, limited: \
         count/configmaps=3"
    );
    // By the old name, and a custom resource.
    kcp.kubectl_in_ok(&home, &["create", "secret", "generic", "s-1", "-n", "q"]);
    let refused = kcp.kubectl_in_err(&home, &["create", "secret", "generic", "s-2", "-n", "q"]);
    assert!(
        refused.contains(
            "exceeded quota: objects, requested: secrets=1, used: secrets=1, limited: secrets=1"
        ),
        "{refused}"
    );
    let first = write_file(dir.path(), "w1.yaml", &widget("w-1"));
    let second = write_file(dir.path(), "w2.yaml", &widget("w-2"));
    kcp.kubectl_in_ok(&home, &["create", "-f", &first]);
    let refused = kcp.kubectl_in_err(&home, &["create", "-f", &second]);
    assert!(
        refused.contains("exceeded quota: objects, requested: count/widgets.example.com=1"),
        "{refused}"
    );

    // The other workspace counts its own objects only, and has room.
    for name in ["cm-1", "cm-2", "cm-3", "cm-4"] {
        kcp.kubectl_in_ok(&other, &["create", "configmap", name, "-n", "q"]);
    }
    wait_used(&kcp, &other, "count/configmaps", "5");

    // A deletion gives its place back.
    kcp.kubectl_in_ok(&home, &["delete", "configmap", "cm-1", "-n", "q"]);
    wait_used(&kcp, &home, "count/configmaps", "2");
    kcp.kubectl_in_ok(&home, &["create", "configmap", "cm-3", "-n", "q"]);
    wait_used(&kcp, &home, "count/configmaps", "3");
}
