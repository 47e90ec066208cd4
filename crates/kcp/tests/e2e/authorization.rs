//! Tenant separation: users from `--token-auth-file` get what RBAC grants them in each
//! workspace and nothing else. Entering a workspace needs verb `access` there (root grants it to
//! every authenticated user); bindings may name the bootstrap ClusterRoles (`edit`,
//! `system:kcp:workspace:access`) that no workspace holds a copy of; denials use
//! kube-apiserver's words; a revoked grant stops working; wildcard requests are for privileged
//! identities only. (A server of its own: the token file is a flag.)

use kcp_testing::wait;

use super::support::{Kcp, without_namespace_defaults, write_file};

/// A server of its own whose token file holds `lines` (`token,user,uid[,"groups"]`), with its
/// temporary directory (files the test writes go there too).
fn start_with_tokens(lines: &str) -> (tempfile::TempDir, Kcp) {
    let dir = tempfile::tempdir().unwrap();
    let tokens = write_file(dir.path(), "tokens.csv", lines);
    let kcp = Kcp::start(&dir.path().join("root"), &["--token-auth-file", &tokens]);
    (dir, kcp)
}

/// Waits until `run` succeeds (a grant holds once the server's policy has followed it).
fn until_succeeds(what: &str, mut run: impl FnMut() -> std::process::Output) {
    wait::until(what, || {
        let output = run();
        if output.status.success() {
            Ok(())
        } else {
            Err(stderr(&output))
        }
    });
}

fn stderr(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).trim().to_string()
}

#[test]
fn rbac_grants_hold_in_their_workspace_only() {
    let (dir, kcp) = start_with_tokens("alice-token,alice,1001,\"team-a\"\nbob-token,bob,1002,\n");
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
    let created = kcp.kubectl_in_as(
        "alice-token",
        &a,
        &["create", "configmap", "mine", "-n", "default"],
    );
    assert!(created.status.success(), "{}", stderr(&created));
    let listed = kcp.kubectl_in_as(
        "alice-token",
        &a,
        &["get", "configmaps", "-n", "default", "-o", "name"],
    );
    assert_eq!(
        without_namespace_defaults(&String::from_utf8_lossy(&listed.stdout)),
        "configmap/mine"
    );

    // Elsewhere in a: kube-apiserver's words, and kcp's reason.
    let denied = stderr(&kcp.kubectl_in_as(
        "alice-token",
        &a,
        &["get", "configmaps", "-n", "kube-system"],
    ));
    assert!(
        denied.contains(r#"configmaps is forbidden: User "alice" cannot list resource "configmaps" in API group "" in the namespace "kube-system": access denied"#),
        "{denied}"
    );
    // A namespace is addressed inside itself, as kube-apiserver reads the path.
    let denied = stderr(&kcp.kubectl_in_as("alice-token", &a, &["delete", "namespace", "default"]));
    assert!(
        denied.contains(r#"namespaces "default" is forbidden: User "alice" cannot delete resource "namespaces" in API group "" in the namespace "default""#),
        "{denied}"
    );
    let denied = stderr(&kcp.kubectl_in_as("alice-token", &a, &["get", "namespaces"]));
    assert!(
        denied.contains(r#"namespaces is forbidden: User "alice" cannot list resource "namespaces" in API group "" at the cluster scope"#),
        "{denied}"
    );
    let denied = stderr(&kcp.kubectl_in_as(
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
        let denied =
            stderr(&kcp.kubectl_in_as(token, cluster, &["get", "configmaps", "-n", "default"]));
        assert!(denied.contains("Error from server (Forbidden)"), "{denied}");
        let path = format!("/clusters/{cluster}/api/v1/namespaces/default/configmaps");
        let denied = stderr(&kcp.kubectl_in_as(token, cluster, &["get", "--raw", &path]));
        assert!(
            denied.contains(&format!(r#"User "{user}" cannot list resource "configmaps" in API group "" in the namespace "default": access denied"#)),
            "{denied}"
        );
        let discovery = kcp.kubectl_in_as(
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
    let root = kcp.kubectl_in_as("bob-token", "root", &["get", "--raw", "/clusters/root/api"]);
    assert!(root.status.success(), "{}", stderr(&root));
    let denied =
        stderr(&kcp.kubectl_in_as("bob-token", "root", &["get", "configmaps", "-n", "default"]));
    assert!(
        denied.contains(r#"User "bob" cannot list resource "configmaps" in API group "" in the namespace "default""#),
        "{denied}"
    );
    // Wildcard requests are for privileged identities.
    let denied = stderr(&kcp.kubectl_in_as("alice-token", "*", &["get", "configmaps", "-A"]));
    assert!(denied.contains("Error from server (Forbidden)"), "{denied}");
    let denied = stderr(&kcp.kubectl_in_as(
        "alice-token",
        "*",
        &["get", "--raw", "/clusters/*/api/v1/configmaps"],
    ));
    assert!(
        denied.contains(r#"configmaps is forbidden: User "alice" cannot list resource "configmaps" in API group "" at the cluster scope: access denied"#),
        "{denied}"
    );
    assert!(
        kcp.kubectl_in("*", &["get", "configmaps", "-A"])
            .status
            .success()
    );
    // Not even kcp's admin (`kcp-admin`, cluster-admin in every workspace) reads across them.
    let denied = kcp.kubectl_err(&[
        "--server",
        &format!("{}/clusters/*", kcp.base_url()),
        "get",
        "--raw",
        "/clusters/*/api/v1/configmaps",
    ]);
    assert!(
        denied.contains(r#"configmaps is forbidden: User "kcp-admin" cannot list resource "configmaps" in API group "" at the cluster scope: access denied"#),
        "{denied}"
    );

    // `kubectl ws` says so when alice may not enter a workspace, and enters one she may.
    let kubeconfig = dir.path().join("alice.kubeconfig");
    let admin = std::fs::read_to_string(kcp.kubeconfig()).unwrap();
    let admin_token = kcp_testing::kubeconfig::admin_token(&kcp.root, "kcp-admin");
    std::fs::write(
        &kubeconfig,
        admin.replace(admin_token.trim(), "alice-token"),
    )
    .unwrap();
    let ws = |target: &str| super::support::kubectl_with_plugins(&kubeconfig, &["ws", target]);
    let refused = stderr(&ws(&b));
    assert!(
        refused.contains(&format!("access to workspace {b:?} denied")),
        "{refused}"
    );
    let entered = ws(&a);
    assert!(entered.status.success(), "{}", stderr(&entered));

    // A restart keeps every grant.
    kcp.stop();
    let tokens = dir.path().join("tokens.csv").to_string_lossy().into_owned();
    let kcp = Kcp::start(&dir.path().join("root"), &["--token-auth-file", &tokens]);
    let listed = kcp.kubectl_in_as(
        "alice-token",
        &a,
        &["get", "configmaps", "-n", "default", "-o", "name"],
    );
    assert_eq!(
        without_namespace_defaults(&String::from_utf8_lossy(&listed.stdout)),
        "configmap/mine",
        "{}",
        stderr(&listed)
    );
    let denied = stderr(&kcp.kubectl_in_as(
        "bob-token",
        &a,
        &["get", "--raw", &format!("/clusters/{a}/api")],
    ));
    assert!(denied.contains("access denied"), "{denied}");

    // A revoked grant stops working.
    kcp.kubectl_in_ok(
        &a,
        &["delete", "rolebinding", "alice-edit", "-n", "default"],
    );
    wait::until("alice's revoked grant no longer works", || {
        let output = kcp.kubectl_in_as("alice-token", &a, &["get", "configmaps", "-n", "default"]);
        if output.status.success() {
            Err(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Ok(())
        }
    });
    let denied =
        stderr(&kcp.kubectl_in_as("alice-token", &a, &["get", "configmaps", "-n", "default"]));
    assert!(
        denied.contains(r#"User "alice" cannot list resource "configmaps""#),
        "{denied}"
    );
}

#[test]
fn reviews_say_what_a_user_may_do_and_who_they_are() {
    let (dir, kcp) = start_with_tokens("carol-token,carol,1003,\"team-c\"\n");
    let ws = kcp.workspace("reviews");
    kcp.kubectl_in_ok(
        &ws,
        &[
            "create",
            "clusterrolebinding",
            "carol-access",
            "--clusterrole=system:kcp:workspace:access",
            "--user=carol",
        ],
    );
    kcp.kubectl_in_ok(
        &ws,
        &[
            "create",
            "rolebinding",
            "carol-view",
            "-n",
            "default",
            "--clusterrole=view",
            "--user=carol",
        ],
    );
    // kubectl auth can-i: a SelfSubjectAccessReview, sent as protobuf.
    let can = |args: &[&str]| {
        let mut all = vec!["auth", "can-i"];
        all.extend_from_slice(args);
        let output = kcp.kubectl_in_as("carol-token", &ws, &all);
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    };
    assert_eq!(can(&["list", "configmaps", "-n", "default"]), "yes");
    assert_eq!(can(&["get", "configmaps/x", "-n", "default"]), "yes");
    assert!(can(&["create", "configmaps", "-n", "default"]).starts_with("no"));
    assert!(can(&["list", "configmaps", "-n", "kube-system"]).starts_with("no"));
    assert!(can(&["list", "secrets", "-n", "default"]).starts_with("no"));
    assert_eq!(can(&["get", "/api"]), "yes");
    // --list: a SelfSubjectRulesReview, the view role's rules among them.
    let listed = can(&["--list", "-n", "default"]);
    let configmaps = listed
        .lines()
        .find(|line| line.starts_with("configmaps "))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(configmaps.ends_with("[get list watch]"), "{listed}");
    assert!(!listed.contains("secrets "), "{listed}");
    // The admin may do anything.
    let admin = kcp.kubectl_in_ok(&ws, &["auth", "can-i", "*", "*"]);
    assert_eq!(admin.trim(), "yes");

    // kubectl auth whoami: a SelfSubjectReview.
    let whoami = kcp.kubectl_in_as("carol-token", &ws, &["auth", "whoami", "-o", "json"]);
    let whoami: serde_json::Value = serde_json::from_slice(&whoami.stdout).unwrap();
    assert_eq!(whoami["status"]["userInfo"]["username"], "carol");
    assert_eq!(
        whoami["status"]["userInfo"]["groups"],
        serde_json::json!(["team-c", "system:authenticated"])
    );

    // A SubjectAccessReview asks about another user; computed, never stored.
    let review = write_file(
        dir.path(),
        "sar.json",
        r#"{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"carol","groups":["system:authenticated"],"resourceAttributes":{"namespace":"default","verb":"watch","resource":"configmaps"}}}"#,
    );
    let path = format!("/clusters/{ws}/apis/authorization.k8s.io/v1/subjectaccessreviews");
    let answered: serde_json::Value =
        serde_json::from_str(&kcp.kubectl_in_ok(&ws, &["create", "--raw", &path, "-f", &review]))
            .unwrap();
    assert_eq!(answered["status"]["allowed"], true, "{answered}");
    let denied = write_file(
        dir.path(),
        "sar-denied.json",
        r#"{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"carol","groups":["system:authenticated"],"resourceAttributes":{"namespace":"default","verb":"delete","resource":"configmaps"}}}"#,
    );
    let answered: serde_json::Value =
        serde_json::from_str(&kcp.kubectl_in_ok(&ws, &["create", "--raw", &path, "-f", &denied]))
            .unwrap();
    assert_eq!(answered["status"]["allowed"], false, "{answered}");
    let nobody = write_file(
        dir.path(),
        "sar-nobody.json",
        r#"{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"resourceAttributes":{"verb":"get","resource":"configmaps"}}}"#,
    );
    let refused = kcp.kubectl_in_err(&ws, &["create", "--raw", &path, "-f", &nobody]);
    assert!(
        refused.contains("at least one of user or group must be specified"),
        "{refused}"
    );
    // A TokenReview says whose a token is (and that a wrong one is no one's).
    let reviews = format!("/clusters/{ws}/apis/authentication.k8s.io/v1/tokenreviews");
    for (token, expected) in [
        (
            "carol-token",
            serde_json::json!({"authenticated": true, "user": {"username": "carol", "uid": "1003", "groups": ["team-c", "system:authenticated"]}}),
        ),
        ("wrong-token", serde_json::json!({"user": {}})),
    ] {
        let review = write_file(
            dir.path(),
            "token-review.json",
            &format!(
                r#"{{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview","spec":{{"token":"{token}"}}}}"#
            ),
        );
        let answered: serde_json::Value = serde_json::from_str(
            &kcp.kubectl_in_ok(&ws, &["create", "--raw", &reviews, "-f", &review]),
        )
        .unwrap();
        assert_eq!(answered["status"], expected, "{token}");
    }

    // Impersonation: the admin acts as carol (kubectl --as), carol may not act as others...
    let as_carol = kcp.kubectl_in_ok(
        &ws,
        &[
            "auth",
            "can-i",
            "list",
            "configmaps",
            "-n",
            "default",
            "--as=carol",
        ],
    );
    assert_eq!(as_carol.trim(), "yes");
    let as_carol = kcp.kubectl_in(
        &ws,
        &[
            "auth",
            "can-i",
            "create",
            "configmaps",
            "-n",
            "default",
            "--as=carol",
        ],
    );
    assert_eq!(
        String::from_utf8_lossy(&as_carol.stdout).trim(),
        "no - access denied"
    );
    let whoami = kcp.kubectl_in_ok(
        &ws,
        &[
            "auth",
            "whoami",
            "--as=carol",
            "--as-group=team-x",
            "-o",
            "json",
        ],
    );
    let whoami: serde_json::Value = serde_json::from_str(&whoami).unwrap();
    assert_eq!(
        whoami["status"]["userInfo"],
        serde_json::json!({"username": "carol", "groups": ["team-x", "system:authenticated"]})
    );
    let refused = stderr(&kcp.kubectl_in_as(
        "carol-token",
        &ws,
        &["get", "configmaps", "-n", "default", "--as=root-user"],
    ));
    assert!(
        refused.contains(r#"users "root-user" is forbidden: User "carol" cannot impersonate resource "users" in API group "" at the cluster scope"#),
        "{refused}"
    );
    // ... until she may impersonate that one user.
    let impersonator = write_file(
        dir.path(),
        "impersonator.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: impersonate-dave\nrules:\n- apiGroups: [\"\"]\n  resources: [users]\n  resourceNames: [dave]\n  verbs: [impersonate]\n",
    );
    kcp.kubectl_in_ok(&ws, &["create", "-f", &impersonator]);
    kcp.kubectl_in_ok(
        &ws,
        &[
            "create",
            "clusterrolebinding",
            "carol-impersonates",
            "--clusterrole=impersonate-dave",
            "--user=carol",
        ],
    );
    // Dave has no access to the workspace: the refusal names dave, so carol acted as him.
    let configmaps = format!("/clusters/{ws}/api/v1/namespaces/default/configmaps");
    wait::until("carol acts as dave", || {
        let output = kcp.kubectl_in_as(
            "carol-token",
            &ws,
            &["get", "--raw", &configmaps, "--as=dave"],
        );
        let error = stderr(&output);
        if error.contains(r#"User "dave" cannot list resource "configmaps""#) {
            Ok(())
        } else {
            Err(error)
        }
    });
    let refused = stderr(&kcp.kubectl_in_as(
        "carol-token",
        &ws,
        &[
            "get",
            "--raw",
            &path,
            "--as=dave",
            "--as-group=system:masters",
        ],
    ));
    assert!(
        refused.contains(r#"groups "system:masters" is forbidden: User "carol" cannot impersonate resource "groups""#),
        "{refused}"
    );

    // Users may not ask about others.
    let refused = stderr(&kcp.kubectl_in_as(
        "carol-token",
        &ws,
        &["create", "--raw", &path, "-f", &review],
    ));
    assert!(
        refused.contains(r#"User "carol" cannot create resource "subjectaccessreviews""#),
        "{refused}"
    );
}

#[test]
fn the_creator_of_a_workspace_administers_it() {
    let (dir, kcp) = start_with_tokens("dana-token,dana,1004,\"team-d\"\nerin-token,erin,1005,\n");
    let creator = write_file(
        dir.path(),
        "creator.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: workspace-creator\nrules:\n- apiGroups: [tenancy.kcp.io]\n  resources: [workspaces]\n  verbs: [create, get, list, watch]\n",
    );
    kcp.kubectl_in_ok("root", &["create", "-f", &creator]);
    kcp.kubectl_in_ok(
        "root",
        &[
            "create",
            "clusterrolebinding",
            "creators",
            "--clusterrole=workspace-creator",
            "--user=dana",
            "--user=erin",
        ],
    );
    let workspace = write_file(
        dir.path(),
        "ws.yaml",
        "apiVersion: tenancy.kcp.io/v1alpha1\nkind: Workspace\nmetadata:\n  name: danas\n",
    );
    // A type of the admin's own needs verb `use`, which root does not grant.
    let restricted = write_file(
        dir.path(),
        "type.yaml",
        "apiVersion: tenancy.kcp.io/v1alpha1\nkind: WorkspaceType\nmetadata:\n  name: restricted\nspec:\n  extend:\n    with:\n    - {name: universal, path: root}\n",
    );
    kcp.kubectl_in_ok("root", &["create", "-f", &restricted]);
    let typed = write_file(
        dir.path(),
        "typed.yaml",
        "apiVersion: tenancy.kcp.io/v1alpha1\nkind: Workspace\nmetadata:\n  name: typed\nspec:\n  type: {name: restricted, path: root}\n",
    );
    let refused = stderr(&kcp.kubectl_in_as("dana-token", "root", &["create", "-f", &typed]));
    assert!(
        refused.contains("unable to use workspace type root:restricted: missing verb='use' permission on workspacetype"),
        "{refused}"
    );
    // The default type (organization in root) is one every authenticated user may use.
    let created = kcp.kubectl_in_as("dana-token", "root", &["create", "-f", &workspace]);
    assert!(created.status.success(), "{}", stderr(&created));
    let ready = kcp.kubectl_in_as(
        "dana-token",
        "root",
        &[
            "wait",
            "--for=jsonpath={.status.phase}=Ready",
            "workspace/danas",
            "--timeout=20s",
        ],
    );
    assert!(ready.status.success(), "{}", stderr(&ready));
    // kcp records who created it, whatever the client sent.
    let owner = kcp.kubectl_in_ok(
        "root",
        &[
            "get",
            "workspace",
            "danas",
            "-o",
            "jsonpath={.metadata.annotations.experimental\\.tenancy\\.kcp\\.io/owner}",
        ],
    );
    assert_eq!(
        owner,
        r#"{"username":"dana","uid":"1004","groups":["team-d","system:authenticated"]}"#
    );
    // The creator is the new workspace's admin; another user may not even enter.
    let ws = "root:danas";
    let binding = kcp.kubectl_in_ok(
        ws,
        &[
            "get",
            "clusterrolebinding",
            "workspace-admin",
            "-o",
            "jsonpath={.roleRef.name} {.subjects[0].name}",
        ],
    );
    assert_eq!(binding, "cluster-admin dana");
    for args in [
        &["create", "namespace", "apps"][..],
        &["create", "configmap", "c", "-n", "apps"],
        &[
            "create",
            "rolebinding",
            "erin-view",
            "-n",
            "apps",
            "--clusterrole=view",
            "--user=erin",
        ],
    ] {
        let done = kcp.kubectl_in_as("dana-token", ws, args);
        assert!(done.status.success(), "{args:?}: {}", stderr(&done));
    }
    let path = format!("/clusters/{ws}/api/v1/namespaces/apps/configmaps");
    let denied = stderr(&kcp.kubectl_in_as("erin-token", ws, &["get", "--raw", &path]));
    assert!(denied.contains("access denied"), "{denied}");
    // Once the admin lets erin in, her view binding applies.
    let granted = kcp.kubectl_in_as(
        "dana-token",
        ws,
        &[
            "create",
            "clusterrolebinding",
            "erin-access",
            "--clusterrole=system:kcp:workspace:access",
            "--user=erin",
        ],
    );
    assert!(granted.status.success(), "{}", stderr(&granted));
    until_succeeds("erin reads the configmaps", || {
        kcp.kubectl_in_as("erin-token", ws, &["get", "--raw", &path])
    });
    let refused = stderr(&kcp.kubectl_in_as(
        "erin-token",
        ws,
        &["delete", "configmap", "c", "-n", "apps"],
    ));
    assert!(
        refused.contains(r#"User "erin" cannot delete resource "configmaps""#),
        "{refused}"
    );

    // A user's home is theirs.
    let home = "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces/~";
    until_succeeds("erin's home is Ready", || {
        kcp.kubectl_in_as("erin-token", "root", &["get", "--raw", home])
    });
    let done = kcp.kubectl_in_as(
        "erin-token",
        "user:erin",
        &["create", "configmap", "mine", "-n", "default"],
    );
    assert!(done.status.success(), "{}", stderr(&done));
    let denied = stderr(&kcp.kubectl_in_as(
        "dana-token",
        "user:erin",
        &[
            "get",
            "--raw",
            "/clusters/user:erin/api/v1/namespaces/default/configmaps",
        ],
    ));
    assert!(denied.contains("access denied"), "{denied}");
}

#[test]
fn roles_and_bindings_grant_only_what_their_writer_holds() {
    let (_dir, kcp) = start_with_tokens("frank-token,frank,1006\n");
    let ws = kcp.workspace("escalation");
    for args in [
        &[
            "create",
            "clusterrolebinding",
            "frank-access",
            "--clusterrole=system:kcp:workspace:access",
            "--user=frank",
        ][..],
        &[
            "create",
            "rolebinding",
            "frank-admin",
            "-n",
            "default",
            "--clusterrole=admin",
            "--user=frank",
        ],
    ] {
        kcp.kubectl_in_ok(&ws, args);
    }
    let frank = |args: &[&str]| kcp.kubectl_in_as("frank-token", &ws, args);
    // What frank holds, he may grant.
    let done = frank(&[
        "create",
        "role",
        "cm-reader",
        "-n",
        "default",
        "--verb=get",
        "--resource=configmaps",
    ]);
    assert!(done.status.success(), "{}", stderr(&done));
    let done = frank(&[
        "create",
        "rolebinding",
        "edit-for-x",
        "-n",
        "default",
        "--clusterrole=edit",
        "--user=x",
    ]);
    assert!(done.status.success(), "{}", stderr(&done));
    // Not more.
    let refused = stderr(&frank(&[
        "create",
        "role",
        "crd-reader",
        "-n",
        "default",
        "--verb=get",
        "--resource=customresourcedefinitions",
    ]));
    assert!(
        refused.contains(r#"roles.rbac.authorization.k8s.io "crd-reader" is forbidden: user "frank" (groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:"#)
            && refused.contains(r#"{APIGroups:["apiextensions.k8s.io"], Resources:["customresourcedefinitions"], Verbs:["get"]}"#),
        "{refused}"
    );
    let refused = stderr(&frank(&[
        "create",
        "rolebinding",
        "root-for-x",
        "-n",
        "default",
        "--clusterrole=cluster-admin",
        "--user=x",
    ]));
    assert!(
        refused.contains(
            r#"rolebindings.rbac.authorization.k8s.io "root-for-x" is forbidden: user "frank""#
        ) && refused.contains(r#"{APIGroups:["*"], Resources:["*"], Verbs:["*"]}"#),
        "{refused}"
    );
    // An update is held to the same rule.
    let refused = stderr(&frank(&[
        "patch",
        "role",
        "cm-reader",
        "-n",
        "default",
        "--type=json",
        "-p",
        r#"[{"op":"add","path":"/rules/0/resources/-","value":"nodes"}]"#,
    ]));
    assert!(
        refused.contains("attempting to grant RBAC permissions not currently held"),
        "{refused}"
    );
    // Verb bind on the role lets him bind it anyway.
    kcp.kubectl_in_ok(
        &ws,
        &[
            "create",
            "role",
            "bind-cluster-admin",
            "-n",
            "default",
            "--verb=bind",
            "--resource=clusterroles",
            "--resource-name=cluster-admin",
        ],
    );
    kcp.kubectl_in_ok(
        &ws,
        &[
            "create",
            "rolebinding",
            "frank-binds",
            "-n",
            "default",
            "--role=bind-cluster-admin",
            "--user=frank",
        ],
    );
    until_succeeds("frank may bind cluster-admin", || {
        frank(&[
            "create",
            "rolebinding",
            "root-for-x",
            "-n",
            "default",
            "--clusterrole=cluster-admin",
            "--user=x",
        ])
    });
}

#[test]
fn requests_without_credentials_are_anonymous_unless_turned_off() {
    // On by default, as kube-apiserver: system:anonymous, whom nothing grants anything.
    let kcp = Kcp::shared("anonymous");
    let (code, body) = kcp.anonymous_get("/clusters/root/api");
    assert_eq!(code, "403", "{body}");
    assert!(
        body.contains(
            r#"forbidden: User \"system:anonymous\" cannot get path \"/api\": access denied"#
        ),
        "{body}"
    );
    assert_eq!(kcp.anonymous_get("/healthz").0, "200");

    // Off: a 401, health checks still open.
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::start(&dir.path().join("root"), &["--anonymous-auth=false"]);
    let (code, body) = kcp.anonymous_get("/clusters/root/api");
    assert_eq!(code, "401", "{body}");
    assert!(body.contains(r#""reason":"Unauthorized""#), "{body}");
    assert_eq!(kcp.anonymous_get("/readyz").0, "200");
}

#[test]
fn a_client_certificate_names_its_user_and_groups() {
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    };
    let dir = tempfile::tempdir().unwrap();
    // A CA of the test's own, and a client certificate for grace in team-g.
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "test client CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let client_key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, "grace");
    params
        .distinguished_name
        .push(DnType::OrganizationName, "team-g");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client_cert = params.signed_by(&client_key, &issuer).unwrap();
    let client_ca = write_file(dir.path(), "client-ca.crt", &ca_cert.pem());
    let cert = write_file(dir.path(), "grace.crt", &client_cert.pem());
    let key = write_file(dir.path(), "grace.key", &client_key.serialize_pem());

    let kcp = Kcp::start(&dir.path().join("root"), &["--client-ca-file", &client_ca]);
    let ws = kcp.workspace("certs");
    kcp.kubectl_in_ok(
        &ws,
        &[
            "create",
            "clusterrolebinding",
            "team-g",
            "--clusterrole=cluster-admin",
            "--group=team-g",
        ],
    );
    // A kubeconfig with the certificate instead of a token.
    let kubeconfig = dir.path().join("grace.kubeconfig");
    let server = format!("{}/clusters/{ws}", kcp.base_url());
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kcp\n  cluster:\n    server: {server}\n    certificate-authority: {}\ncontexts:\n- name: grace\n  context: {{cluster: kcp, user: grace}}\ncurrent-context: grace\nusers:\n- name: grace\n  user:\n    client-certificate: {cert}\n    client-key: {key}\n",
            kcp.root.join("ca.crt").display()
        ),
    )
    .unwrap();
    let grace = |args: &[&str]| {
        std::process::Command::new("kubectl")
            .env("KUBECONFIG", &kubeconfig)
            .args(args)
            .output()
            .expect("run kubectl")
    };
    let whoami = grace(&["auth", "whoami", "-o", "json"]);
    let whoami: serde_json::Value =
        serde_json::from_slice(&whoami.stdout).unwrap_or_else(|_| panic!("{}", stderr(&whoami)));
    assert_eq!(
        whoami["status"]["userInfo"],
        serde_json::json!({"username": "grace", "groups": ["team-g", "system:authenticated"]})
    );
    let created = grace(&["create", "configmap", "by-cert", "-n", "default"]);
    assert!(created.status.success(), "{}", stderr(&created));
    // Her group's grant holds in this workspace only.
    let root = format!("--server={}/clusters/root", kcp.base_url());
    let denied = stderr(&grace(&[&root, "get", "configmaps", "-n", "default"]));
    assert!(
        denied.contains(r#"User "grace" cannot list resource "configmaps""#),
        "{denied}"
    );
    // The admin's token still works beside client certificates.
    kcp.kubectl_in_ok(&ws, &["get", "configmap", "by-cert", "-n", "default"]);
}
