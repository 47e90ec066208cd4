//! The kubectl plugins (`kubectl ws`, `kubectl create-workspace`, `kubectl kcp`) run by the real
//! kubectl against the real server: create root → org → team, list them Ready with URLs, move
//! around with names, `..`, `-`, `~` and absolute paths, and keep the kubeconfig's contexts.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kcp_testing::output;

use super::support::{Kcp, write_file};

/// kubectl with the plugins on PATH and its own copy of the admin kubeconfig.
struct Plugins {
    kubeconfig: PathBuf,
    path: String,
}

impl Plugins {
    fn new(kcp: &Kcp, dir: &Path) -> Plugins {
        let kubeconfig = dir.join("plugin.kubeconfig");
        std::fs::copy(kcp.kubeconfig(), &kubeconfig).unwrap();
        let path = super::support::plugins_path();
        Plugins { kubeconfig, path }
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("kubectl")
            .env("KUBECONFIG", &self.kubeconfig)
            .env("PATH", &self.path)
            .args(args)
            .output()
            .expect("run kubectl")
    }

    fn ok(&self, args: &[&str]) -> String {
        output::stdout(&self.run(args))
    }

    fn err(&self, args: &[&str]) -> String {
        output::stderr(&self.run(args))
    }
}

#[test]
fn plugins_create_and_navigate_a_workspace_tree() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::start(&dir.path().join(".kcp"), &[]);
    let ws = Plugins::new(&kcp, dir.path());

    assert_eq!(ws.ok(&["ws", "."]), "Current workspace is 'root'.\n");
    assert_eq!(
        ws.ok(&["create-workspace", "org"]),
        "Workspace \"org\" (type root:organization) created. Waiting for it to be ready...\n\
         Workspace \"org\" (type root:organization) is ready to use.\n"
    );
    let refused = ws.err(&["create-workspace", "org"]);
    assert!(refused.contains("already exists"), "{refused}");
    assert!(
        ws.ok(&["create-workspace", "org", "--ignore-existing"])
            .contains("Workspace \"org\" (type root:organization) already exists.")
    );
    assert_eq!(
        ws.ok(&["ws", "org"]),
        "Current workspace is 'root:org' (type root:organization).\n"
    );
    let created = ws.ok(&["create", "workspace", "team", "--type", "team", "--enter"]);
    assert!(
        created.ends_with(
            "Workspace \"team\" (type root:team) is ready to use.\n\
             Current workspace is 'root:org:team' (type root:team).\n"
        ),
        "{created}"
    );
    assert_eq!(ws.ok(&["ws", "current", "--short"]), "root:org:team\n");

    // kubectl get ws in the org lists the team Ready with its URL.
    let listed = ws.ok(&["ws", ".."]);
    assert_eq!(
        listed,
        "Current workspace is 'root:org' (type root:organization).\n"
    );
    let table = ws.ok(&["get", "ws"]);
    let row: Vec<&str> = table.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..3], ["team", "team", "Ready"], "{table}");
    assert!(row[3].ends_with("/clusters/root:org:team"), "{table}");

    // A CRD in the team is not in a sibling.
    ws.ok(&["ws", "create", "other", "--type", "root:team"]);
    ws.ok(&["ws", "team"]);
    let crd = write_file(
        dir.path(),
        "crd.yaml",
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: things.example.com\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {plural: things, kind: Thing}\n  versions:\n  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}\n",
    );
    ws.ok(&["apply", "-f", &crd]);
    ws.ok(&[
        "wait",
        "--for=condition=Established",
        "crd/things.example.com",
    ]);
    assert!(
        ws.ok(&["api-resources", "--api-group=example.com"])
            .contains("things")
    );
    assert_eq!(
        ws.ok(&["ws", "..:other"]),
        "Current workspace is 'root:org:other' (type root:team).\n"
    );
    assert!(ws.ok(&["get", "crd", "-o", "name"]).is_empty());

    // Back and forth, absolute, root, home.
    assert_eq!(
        ws.ok(&["ws", "-"]),
        "Current workspace is 'root:org:team'.\n"
    );
    assert_eq!(
        ws.ok(&["ws", "-"]),
        "Current workspace is 'root:org:other'.\n"
    );
    assert_eq!(
        ws.ok(&["ws", ":root:org"]),
        "Current workspace is 'root:org' (type root:organization).\n"
    );
    assert_eq!(ws.ok(&["kcp", "ws", ":"]), "Current workspace is 'root'.\n");
    // Home is shown by its logical cluster's name, as kcp's plugin shows it.
    let home: serde_json::Value = serde_json::from_str(&kcp.kubectl_in_ok(
        "root",
        &[
            "get",
            "--raw",
            "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces/~",
        ],
    ))
    .unwrap();
    let home_cluster = home["spec"]["cluster"].as_str().unwrap();
    assert_eq!(
        ws.ok(&["kcp", "workspace", "~"]),
        format!("Current workspace is '{home_cluster}'.\n")
    );
    let home = ws.run(&["ws"]);
    assert_eq!(
        String::from_utf8_lossy(&home.stdout),
        format!("Current workspace is '{home_cluster}'.\n")
    );
    assert!(String::from_utf8_lossy(&home.stderr).contains("go to home workspace"));
    assert_eq!(
        ws.ok(&["ws", "use", ":root:org:team"]),
        "Current workspace is 'root:org:team' (type root:team).\n"
    );
    assert_eq!(
        ws.err(&["ws", "nope"]),
        "Error: workspace \"root:org:team:nope\" not found"
    );
    assert_eq!(ws.err(&["ws", ":root:.."]), "Error: cannot go up from root");

    // The tree from root, and the kubeconfig's two workspace contexts.
    ws.ok(&["ws", ":root"]);
    assert_eq!(
        ws.ok(&["ws", "tree"]),
        ".\n└── root\n    └── org\n        ├── other\n        └── team\n\n"
    );
    let contexts = ws.ok(&["config", "get-contexts", "-o", "name"]);
    assert!(contexts.contains("workspace.kcp.io/current"), "{contexts}");
    assert!(contexts.contains("workspace.kcp.io/previous"), "{contexts}");
    assert_eq!(
        ws.ok(&["config", "current-context"]),
        "workspace.kcp.io/current\n"
    );
    let base_untouched = ws.ok(&[
        "config",
        "view",
        "-o",
        "jsonpath={.clusters[?(@.name==\"root\")].cluster.server}",
    ]);
    assert!(
        base_untouched.ends_with("/clusters/root"),
        "{base_untouched}"
    );
}
