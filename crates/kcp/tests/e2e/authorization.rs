//! Tenant separation: users from `--token-auth-file` get what RBAC grants them in each
//! workspace and nothing else. Entering a workspace needs verb `access` there (root grants it to
//! every authenticated user); bindings may name the bootstrap ClusterRoles (`edit`,
//! `system:kcp:workspace:access`) that no workspace holds a copy of; denials use
//! kube-apiserver's words; a revoked grant stops working; wildcard requests are for privileged
//! identities only. (A server of its own: the token file is a flag.)

use kcp_testing::wait;

use super::support::{Kcp, write_file};

/// Runs kubectl in `cluster` as the token file's user with `token`.
fn as_user(kcp: &Kcp, token: &str, cluster: &str, args: &[&str]) -> std::process::Output {
    let token = format!("--token={token}");
    let mut all = vec![token.as_str()];
    all.extend_from_slice(args);
    kcp.kubectl_in(cluster, &all)
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).trim().to_string()
}

#[test]
fn rbac_grants_hold_in_their_workspace_only() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = write_file(
        dir.path(),
        "tokens.csv",
        "alice-token,alice,1001,\"team-a\"\nbob-token,bob,1002,\n",
    );
    let kcp = Kcp::start(&dir.path().join("root"), &["--token-auth-file", &tokens]);
    let (a, b) = (kcp.workspace("tenant-a"), kcp.workspace("tenant-b"));
    // In a: alice's group may enter, and alice may edit namespace default.
    kcp.kubectl_in_ok(
        &a,
        &[
            "create",
            "clusterrolebinding",
            "team-a-access",
            "--clusterrole=system:kcp:workspace:access",
            "--group=team-a",
        ],
    );
    kcp.kubectl_in_ok(
        &a,
        &[
            "create",
            "rolebinding",
            "alice-edit",
            "-n",
            "default",
            "--clusterrole=edit",
            "--user=alice",
        ],
    );

    // What the grants allow.
    let created = as_user(
        &kcp,
        "alice-token",
        &a,
        &["create", "configmap", "mine", "-n", "default"],
    );
    assert!(created.status.success(), "{}", stderr(&created));
    let listed = as_user(
        &kcp,
        "alice-token",
        &a,
        &["get", "configmaps", "-n", "default", "-o", "name"],
    );
    assert_eq!(
        String::from_utf8_lossy(&listed.stdout).trim(),
        "configmap/mine"
    );

    // Elsewhere in a: kube-apiserver's words, and kcp's reason.
    let denied = stderr(&as_user(
        &kcp,
        "alice-token",
        &a,
        &["get", "configmaps", "-n", "kube-system"],
    ));
    assert!(
        denied.contains(r#"configmaps is forbidden: User "alice" cannot list resource "configmaps" in API group "" in the namespace "kube-system": access denied"#),
        "{denied}"
    );
    // A namespace is addressed inside itself, as kube-apiserver reads the path.
    let denied = stderr(&as_user(
        &kcp,
        "alice-token",
        &a,
        &["delete", "namespace", "default"],
    ));
    assert!(
        denied.contains(r#"namespaces "default" is forbidden: User "alice" cannot delete resource "namespaces" in API group "" in the namespace "default""#),
        "{denied}"
    );
    let denied = stderr(&as_user(&kcp, "alice-token", &a, &["get", "namespaces"]));
    assert!(
        denied.contains(r#"namespaces is forbidden: User "alice" cannot list resource "namespaces" in API group "" at the cluster scope"#),
        "{denied}"
    );
    let denied = stderr(&as_user(
        &kcp,
        "alice-token",
        &a,
        &[
            "create",
            "clusterrolebinding",
            "escalate",
            "--clusterrole=cluster-admin",
            "--user=alice",
        ],
    ));
    assert!(denied.contains("forbidden"), "{denied}");

    // b is closed to alice, and a to bob, whatever they ask (discovery included).
    for (token, user, cluster) in [("alice-token", "alice", &b), ("bob-token", "bob", &a)] {
        // kubectl stops at discovery, which is refused too.
        let denied = stderr(&as_user(
            &kcp,
            token,
            cluster,
            &["get", "configmaps", "-n", "default"],
        ));
        assert!(denied.contains("Error from server (Forbidden)"), "{denied}");
        let path = format!("/clusters/{cluster}/api/v1/namespaces/default/configmaps");
        let denied = stderr(&as_user(&kcp, token, cluster, &["get", "--raw", &path]));
        assert!(
            denied.contains(&format!(r#"User "{user}" cannot list resource "configmaps" in API group "" in the namespace "default": access denied"#)),
            "{denied}"
        );
        let discovery = as_user(
            &kcp,
            token,
            cluster,
            &["get", "--raw", &format!("/clusters/{cluster}/api")],
        );
        assert!(
            stderr(&discovery).contains(&format!(
                r#"forbidden: User "{user}" cannot get path "/api": access denied"#
            )),
            "{}",
            stderr(&discovery)
        );
    }
    // Root lets every authenticated user in, and grants nothing more.
    let root = as_user(
        &kcp,
        "bob-token",
        "root",
        &["get", "--raw", "/clusters/root/api"],
    );
    assert!(root.status.success(), "{}", stderr(&root));
    let denied = stderr(&as_user(
        &kcp,
        "bob-token",
        "root",
        &["get", "configmaps", "-n", "default"],
    ));
    assert!(
        denied.contains(r#"User "bob" cannot list resource "configmaps" in API group "" in the namespace "default""#),
        "{denied}"
    );
    // Wildcard requests are for privileged identities.
    let denied = stderr(&as_user(
        &kcp,
        "alice-token",
        "*",
        &["get", "configmaps", "-A"],
    ));
    assert!(denied.contains("Error from server (Forbidden)"), "{denied}");
    let denied = stderr(&as_user(
        &kcp,
        "alice-token",
        "*",
        &["get", "--raw", "/clusters/*/api/v1/configmaps"],
    ));
    assert!(
        denied.contains("wildcard requests are for privileged identities"),
        "{denied}"
    );
    assert!(
        kcp.kubectl_in("*", &["get", "configmaps", "-A"])
            .status
            .success()
    );

    // A revoked grant stops working.
    kcp.kubectl_in_ok(
        &a,
        &["delete", "rolebinding", "alice-edit", "-n", "default"],
    );
    wait::until("alice's revoked grant no longer works", || {
        let output = as_user(
            &kcp,
            "alice-token",
            &a,
            &["get", "configmaps", "-n", "default"],
        );
        if output.status.success() {
            Err(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Ok(())
        }
    });
    let denied = stderr(&as_user(
        &kcp,
        "alice-token",
        &a,
        &["get", "configmaps", "-n", "default"],
    ));
    assert!(
        denied.contains(r#"User "alice" cannot list resource "configmaps""#),
        "{denied}"
    );
}
