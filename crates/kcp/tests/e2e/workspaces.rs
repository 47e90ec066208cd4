//! Workspaces with kubectl alone (the plugins have their own tests): creation walks to Ready with
//! a URL, paths and logical cluster names reach the same workspace, types constrain where
//! workspaces may live, initializers hold a workspace in Initializing, deletion removes a whole
//! tree, homes, and a restart keeps it all; only the server names and owns logical clusters (no
//! aliasing another workspace's cluster, no directly deletable LogicalClusters by users).

use kcp_testing::wait;

use super::support::{Kcp, without_namespace_defaults, write_file};

fn workspace(name: &str, type_name: Option<&str>) -> String {
    let spec = type_name
        .map(|t| format!("spec:\n  type:\n    name: {t}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: tenancy.kcp.io/v1alpha1\nkind: Workspace\nmetadata:\n  name: {name}\n{spec}"
    )
}

/// Creates the workspace `name` in `parent` and waits until it is Ready.
fn create_ready(kcp: &Kcp, dir: &std::path::Path, parent: &str, name: &str, ty: Option<&str>) {
    let file = write_file(dir, &format!("{parent}-{name}.yaml"), &workspace(name, ty));
    kcp.kubectl_in_ok(parent, &["create", "-f", &file]);
    wait_phase(kcp, parent, name, "Ready");
}

fn wait_phase(kcp: &Kcp, parent: &str, name: &str, phase: &str) {
    let condition = format!("--for=jsonpath={{.status.phase}}={phase}");
    kcp.kubectl_in_ok(
        parent,
        &[
            "wait",
            &condition,
            &format!("workspace/{name}"),
            "--timeout=10s",
        ],
    );
}

fn field(kcp: &Kcp, cluster: &str, args: &[&str], path: &str) -> String {
    let jsonpath = format!("-o=jsonpath={path}");
    let mut all = args.to_vec();
    all.push(&jsonpath);
    kcp.kubectl_in_ok(cluster, &all)
}

#[test]
fn workspaces_become_ready_and_are_reached_by_path_and_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::start(&dir.path().join(".kcp"), &[]);
    create_ready(&kcp, dir.path(), "root", "org", None);
    create_ready(&kcp, dir.path(), "root:org", "team", Some("team"));

    let listed = kcp.kubectl_in_ok("root", &["get", "ws"]);
    let header: Vec<&str> = listed.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "TYPE", "REGION", "PHASE", "URL", "AGE"]);
    let row: Vec<&str> = listed.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..3], ["org", "organization", "Ready"], "{listed}");
    assert!(row[3].starts_with("https://127.0.0.1:"), "{listed}");
    assert!(row[3].ends_with("/clusters/root:org"), "{listed}");
    let team_url = field(&kcp, "root:org", &["get", "ws", "team"], "{.spec.URL}");
    assert!(team_url.ends_with("/clusters/root:org:team"), "{team_url}");
    assert_eq!(
        field(
            &kcp,
            "root:org",
            &["get", "ws", "team"],
            "{.spec.type.path}:{.spec.type.name}"
        ),
        "root:team"
    );

    // The universal bootstrap made the namespaces; the LogicalCluster knows its path.
    let namespaces = kcp.kubectl_in_ok("root:org:team", &["get", "ns", "-o", "name"]);
    assert_eq!(namespaces, "namespace/default\nnamespace/kube-system\n");
    assert_eq!(
        field(
            &kcp,
            "root:org:team",
            &["get", "logicalcluster", "cluster"],
            "{.metadata.annotations.kcp\\.io/path} {.status.phase}"
        ),
        "root:org:team Ready"
    );

    // The path and the logical cluster name are the same workspace.
    let cluster = field(&kcp, "root:org", &["get", "ws", "team"], "{.spec.cluster}");
    assert_eq!(cluster.len(), 16, "{cluster}");
    assert!(
        cluster
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    );
    kcp.kubectl_in_ok(
        "root:org:team",
        &["create", "configmap", "shared", "--from-literal=k=v"],
    );
    assert_eq!(
        field(&kcp, &cluster, &["get", "configmap", "shared"], "{.data.k}"),
        "v"
    );

    // Every object carries the logical cluster it lives in.
    assert_eq!(
        field(
            &kcp,
            "root:org:team",
            &["get", "configmap", "shared"],
            "{.metadata.annotations.kcp\\.io/cluster}"
        ),
        cluster
    );
    assert_eq!(
        field(
            &kcp,
            "root",
            &["get", "ws", "org"],
            "{.metadata.annotations.kcp\\.io/cluster}"
        ),
        "root"
    );

    // Unknown paths answer kcp's 404.
    let missing = kcp.kubectl_in_err(
        "root",
        &["get", "--raw", "/clusters/root:org:nope/api/v1/namespaces"],
    );
    assert!(
        missing.contains(r#"workspaces.tenancy.kcp.io \"root:org:nope\" not found"#)
            || missing.contains(r#"workspaces.tenancy.kcp.io "root:org:nope" not found"#),
        "{missing}"
    );

    // Only the server makes and removes LogicalClusters (unless one is directly deletable).
    let refused = kcp.kubectl_in_err("root:org:team", &["delete", "logicalcluster", "cluster"]);
    assert!(
        refused.contains(r#"logicalclusters.core.kcp.io "cluster" is forbidden: LogicalCluster cannot be deleted"#),
        "{refused}"
    );
    let lc = write_file(
        dir.path(),
        "lc.yaml",
        "apiVersion: core.kcp.io/v1alpha1\nkind: LogicalCluster\nmetadata:\n  name: cluster\n",
    );
    let refused = kcp.kubectl_in_err("root:org:team", &["create", "-f", &lc]);
    assert!(
        refused.contains("LogicalCluster cannot be created"),
        "{refused}"
    );
    // A cluster nobody created cannot be written to (nor is any other name a cluster).
    let phantom = kcp.kubectl_in_err("phantom", &["create", "namespace", "x"]);
    assert!(
        phantom.contains(r#"workspaces.tenancy.kcp.io \"phantom\" not found"#)
            || phantom.contains(r#"workspaces.tenancy.kcp.io "phantom" not found"#),
        "{phantom}"
    );
    let invalid = kcp.kubectl_in_err(
        "root",
        &["get", "--raw", "/clusters/%2e%2e/api/v1/namespaces"],
    );
    assert!(
        invalid.contains(r#"invalid cluster: \"..\" does not match the regex"#)
            || invalid.contains(r#"invalid cluster: ".." does not match the regex"#),
        "{invalid}"
    );

    // kcp's kinds are served everywhere but are not CRDs anyone can delete.
    let resources = kcp.kubectl_in_ok(
        "root:org:team",
        &["api-resources", "--api-group=tenancy.kcp.io"],
    );
    assert!(
        resources.contains("workspaces") && resources.contains(" ws "),
        "{resources}"
    );
    assert!(
        kcp.kubectl_in_ok("root:org:team", &["get", "crd", "-o", "name"])
            .is_empty()
    );
    let refused = kcp.kubectl_in_err("root", &["delete", "crd", "workspaces.tenancy.kcp.io"]);
    assert!(
        refused.contains("NotFound") || refused.contains("not found"),
        "{refused}"
    );
}

#[test]
fn types_decide_where_workspaces_may_live_and_initializers_hold_them() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::start(&dir.path().join(".kcp"), &[]);
    let unknown = write_file(dir.path(), "unknown.yaml", &workspace("u", Some("nosuch")));
    let refused = kcp.kubectl_in_err("root", &["create", "-f", &unknown]);
    assert!(
        refused.contains(r#"workspaces.tenancy.kcp.io "u" is forbidden: workspace type "nosuch" cannot be resolved"#),
        "{refused}"
    );
    let team = write_file(dir.path(), "team.yaml", &workspace("t", Some("team")));
    let refused = kcp.kubectl_in_err("root", &["create", "-f", &team]);
    assert!(
        refused.contains("workspace type root:team only allows [root:organization root:team] parent workspaces, but parent type root:root only implements [root:root root:universal]"),
        "{refused}"
    );

    // A type with its own initializer keeps its workspaces Initializing until it is removed.
    let custom = write_file(
        dir.path(),
        "custom.yaml",
        "apiVersion: tenancy.kcp.io/v1alpha1\nkind: WorkspaceType\nmetadata:\n  name: gated\nspec:\n  initializer: true\n  extend:\n    with:\n    - name: universal\n      path: root\n",
    );
    kcp.kubectl_in_ok("root", &["create", "-f", &custom]);
    let gated = write_file(dir.path(), "gated.yaml", &workspace("gated", Some("gated")));
    kcp.kubectl_in_ok("root", &["create", "-f", &gated]);
    wait_phase(&kcp, "root", "gated", "Initializing");
    let waiting = || {
        field(
            &kcp,
            "root",
            &["get", "ws", "gated"],
            "{.status.initializers}",
        )
    };
    wait::until("the workspace shows the gated initializer", || {
        let initializers = waiting();
        if initializers == r#"["root:gated"]"# {
            Ok(())
        } else {
            Err(initializers)
        }
    });
    // Deliberately a fixed window: the phase must NOT move on while the initializer is there.
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        field(&kcp, "root", &["get", "ws", "gated"], "{.status.phase}"),
        "Initializing"
    );
    kcp.kubectl_in_ok(
        "root:gated",
        &[
            "patch",
            "logicalcluster",
            "cluster",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"initializers":[]}}"#,
        ],
    );
    // Ready once nothing initializes it any more (the universal bootstrap already ran).
    wait_phase(&kcp, "root", "gated", "Ready");
    let namespaces = kcp.kubectl_in_ok("root:gated", &["get", "ns", "-o", "name"]);
    assert!(namespaces.contains("namespace/default"), "{namespaces}");
}

#[test]
fn deleting_a_workspace_deletes_its_tree_and_honours_finalizers() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("ws-delete");
    let ws = kcp.home().to_string();
    create_ready(&kcp, dir.path(), &ws, "doomed", None);
    create_ready(&kcp, dir.path(), &format!("{ws}:doomed"), "team", None);
    create_ready(&kcp, dir.path(), &ws, "kept", None);
    let team_cluster = field(
        &kcp,
        &format!("{ws}:doomed"),
        &["get", "ws", "team"],
        "{.spec.cluster}",
    );
    kcp.kubectl_in_ok(
        &format!("{ws}:doomed:team"),
        &["create", "namespace", "apps"],
    );
    kcp.kubectl_in_ok(
        &format!("{ws}:doomed:team"),
        &["-n", "apps", "create", "configmap", "held"],
    );
    kcp.kubectl_in_ok(
        &format!("{ws}:doomed:team"),
        &[
            "-n",
            "apps",
            "patch",
            "configmap",
            "held",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":["example.com/hold"]}}"#,
        ],
    );
    kcp.kubectl_in_ok(&format!("{ws}:kept"), &["create", "configmap", "safe"]);

    kcp.kubectl_in_ok(&ws, &["delete", "ws", "doomed", "--wait=false"]);
    // The finalizer holds the configmap, and so the team, and so the org, which says so.
    let status = || {
        field(
            &kcp,
            &format!("{ws}:doomed"),
            &["get", "ws", "team"],
            "{.status.phase} {.status.conditions[?(@.type==\"WorkspaceContentDeleted\")].reason}",
        )
    };
    wait::until("the team says some of its resources remain", || {
        let status = status();
        if status == "Deleting SomeResourcesRemain" {
            Ok(())
        } else {
            Err(status)
        }
    });
    assert_eq!(
        field(&kcp, &ws, &["get", "ws", "doomed"], "{.status.phase}"),
        "Deleting"
    );
    assert!(
        field(
            &kcp,
            &ws,
            &["get", "ws", "doomed"],
            "{.metadata.deletionTimestamp}"
        )
        .starts_with("20")
    );
    assert_eq!(
        field(
            &kcp,
            &team_cluster,
            &["-n", "apps", "get", "configmap", "held"],
            "{.metadata.name}"
        ),
        "held"
    );
    kcp.kubectl_in_ok(
        &team_cluster,
        &[
            "-n",
            "apps",
            "patch",
            "configmap",
            "held",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
    );
    kcp.kubectl_in_ok(&ws, &["wait", "--for=delete", "ws/doomed", "--timeout=20s"]);
    let gone = kcp.kubectl_in_err(
        &ws,
        &[
            "get",
            "--raw",
            &format!("/clusters/{ws}:doomed/api/v1/namespaces"),
        ],
    );
    assert!(gone.contains(&format!("{ws}:doomed")), "{gone}");
    // The team's logical cluster is gone, and nothing is left behind in it.
    let gone = kcp.kubectl_in_err(&team_cluster, &["get", "configmaps", "-A"]);
    assert!(gone.contains(&team_cluster), "{gone}");
    for resource in ["configmaps", "namespaces", "logicalclusters", "workspaces"] {
        let left = kcp.kubectl_in_ok(
            "*",
            &[
                "get",
                resource,
                "-A",
                "-o",
                "jsonpath={.items[*].metadata.annotations}",
            ],
        );
        assert!(!left.contains(&team_cluster), "{resource}: {left}");
    }
    // The sibling is untouched.
    assert_eq!(
        field(
            &kcp,
            &format!("{ws}:kept"),
            &["get", "configmap", "safe"],
            "{.metadata.name}"
        ),
        "safe"
    );
}

#[test]
fn homes_are_made_on_first_use_and_everything_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join(".kcp");
    let kcp = Kcp::start(&root, &[]);
    let home = kcp.kubectl_in_ok(
        "root",
        &[
            "get",
            "--raw",
            "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces/~",
        ],
    );
    // As kcp answers it: the home's LogicalCluster, reached by its name.
    let home: serde_json::Value = serde_json::from_str(&home).unwrap();
    assert_eq!(home["kind"], "Workspace");
    assert_eq!(home["metadata"]["name"], "cluster");
    assert_eq!(home["status"]["phase"], "Ready");
    let cluster = home["spec"]["cluster"].as_str().unwrap();
    assert!(
        home["spec"]["URL"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/clusters/{cluster}")),
        "{home}"
    );
    assert_eq!(
        kcp.kubectl_in_ok(cluster, &["get", "ns", "default", "-o", "name"]),
        "namespace/default\n"
    );
    let namespaces = kcp.kubectl_in_ok("user:kcp-admin", &["get", "ns", "-o", "name"]);
    assert!(namespaces.contains("namespace/default"), "{namespaces}");

    create_ready(&kcp, dir.path(), "root", "org", None);
    create_ready(&kcp, dir.path(), "root:org", "team", None);
    kcp.kubectl_in_ok(
        "root:org:team",
        &["create", "configmap", "kept", "--from-literal=a=1"],
    );
    kcp.stop();

    let kcp = Kcp::start(&root, &[]);
    assert_eq!(
        field(&kcp, "root:org", &["get", "ws", "team"], "{.status.phase}"),
        "Ready"
    );
    assert_eq!(
        field(
            &kcp,
            "root:org:team",
            &["get", "configmap", "kept"],
            "{.data.a}"
        ),
        "1"
    );
    // The URL follows the new port.
    let url = field(
        &kcp,
        "root",
        &["get", "logicalcluster", "cluster"],
        "{.status.URL}",
    );
    let server = std::fs::read_to_string(kcp.kubeconfig()).unwrap();
    assert!(server.contains(&url), "{url}");
    create_ready(
        &kcp,
        dir.path(),
        "root:org:team",
        "after",
        Some("universal"),
    );
}

#[test]
fn only_the_server_names_and_owns_logical_clusters() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("ws-owned");
    let ws = kcp.home().to_string();
    create_ready(&kcp, dir.path(), &ws, "victim", None);
    let victim = field(&kcp, &ws, &["get", "ws", "victim"], "{.spec.cluster}");
    kcp.kubectl_in_ok(
        &victim,
        &["create", "configmap", "secret-plans", "-n", "default"],
    );

    // Neither spec.cluster nor the cluster annotation aliases another workspace's cluster.
    let by_spec = write_file(
        dir.path(),
        "by-spec.yaml",
        &format!("{}spec:\n  cluster: {victim}\n", workspace("by-spec", None)),
    );
    let refused = kcp.kubectl_in_err(&ws, &["create", "-f", &by_spec]);
    assert!(
        refused.contains(r#"workspaces.tenancy.kcp.io "by-spec" is forbidden: spec.Cluster can only be set by system privileged users"#),
        "{refused}"
    );
    let by_annotation = write_file(
        dir.path(),
        "by-annotation.yaml",
        &format!(
            "{}  annotations:\n    internal.tenancy.kcp.io/cluster: {victim}\n",
            workspace("by-annotation", None)
        ),
    );
    let refused = kcp.kubectl_in_err(&ws, &["create", "-f", &by_annotation]);
    assert!(
        refused.contains(
            r#"modification of reserved annotation: \"internal.tenancy.kcp.io/cluster\""#
        ) || refused
            .contains(r#"modification of reserved annotation: "internal.tenancy.kcp.io/cluster""#),
        "{refused}"
    );
    create_ready(&kcp, dir.path(), &ws, "mine", None);
    let moved = kcp.kubectl_in_err(
        &ws,
        &[
            "patch",
            "ws",
            "mine",
            "--type=merge",
            "-p",
            &format!(r#"{{"spec":{{"cluster":"{victim}"}}}}"#),
        ],
    );
    assert!(
        moved.contains("spec.cluster can only be changed by system privileged users"),
        "{moved}"
    );
    let mine = field(&kcp, &ws, &["get", "ws", "mine"], "{.spec.cluster}");
    assert_ne!(mine, victim);
    assert!(
        without_namespace_defaults(&kcp.kubectl_in_ok(
            &format!("{ws}:mine"),
            &["get", "configmaps", "-n", "default", "-o", "name"]
        ))
        .is_empty()
    );

    // A LogicalCluster cannot be made directly deletable, so its content stays.
    let deletable = kcp.kubectl_in_err(
        &format!("{ws}:victim"),
        &[
            "patch",
            "logicalcluster",
            "cluster",
            "--type=merge",
            "-p",
            r#"{"spec":{"directlyDeletable":true}}"#,
        ],
    );
    assert!(
        deletable.contains("spec.directlyDeletable can only be changed by system privileged users"),
        "{deletable}"
    );
    kcp.kubectl_in_err(
        &format!("{ws}:victim"),
        &["delete", "logicalcluster", "cluster"],
    );
    assert_eq!(
        field(&kcp, &ws, &["get", "ws", "victim"], "{.status.phase}"),
        "Ready"
    );
    assert_eq!(
        kcp.kubectl_in_ok(
            &format!("{ws}:victim"),
            &[
                "get",
                "configmap",
                "secret-plans",
                "-n",
                "default",
                "-o",
                "name"
            ]
        )
        .trim(),
        "configmap/secret-plans"
    );

    // A body of the wrong shape is the schema's 422, not a crash.
    let stringy = write_file(
        dir.path(),
        "stringy.json",
        r#"{"apiVersion":"tenancy.kcp.io/v1alpha1","kind":"Workspace","metadata":{"name":"stringy"},"spec":"x"}"#,
    );
    let invalid = kcp.kubectl_in_err(
        &ws,
        &[
            "create",
            "--raw",
            &format!("/clusters/{ws}/apis/tenancy.kcp.io/v1alpha1/workspaces"),
            "-f",
            &stringy,
        ],
    );
    assert!(
        invalid.contains("spec in body must be of type object"),
        "{invalid}"
    );
}
