//! Patches through kubectl: label, annotate, patch (strategic, merge, json), edit and apply.

use std::process::Command;

use super::support::Kcp;

fn get(kcp: &Kcp, jsonpath: &str) -> String {
    kcp.kubectl_ok(&["get", "cm", "demo", "-o", &format!("jsonpath={jsonpath}")])
}

#[test]
fn kubectl_patch_label_annotate_edit_and_apply() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("patch-kubectl");
    let file = dir.path().join("cm.yaml");
    std::fs::write(&file, "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n  labels: {app: web}\ndata:\n  a: \"1\"\n  b: \"2\"\n").unwrap();
    let file = file.to_string_lossy().into_owned();
    kcp.kubectl_ok(&["create", "-f", &file]);

    assert_eq!(
        kcp.kubectl_ok(&["label", "cm", "demo", "tier=front"])
            .trim(),
        "configmap/demo labeled"
    );
    kcp.kubectl_ok(&["annotate", "cm", "demo", "note=hi"]);
    assert_eq!(
        get(&kcp, "{.metadata.labels.tier} {.metadata.annotations.note}"),
        "front hi"
    );
    kcp.kubectl_ok(&["label", "cm", "demo", "tier-"]);
    assert_eq!(get(&kcp, "{.metadata.labels}"), r#"{"app":"web"}"#);

    kcp.kubectl_ok(&["patch", "cm", "demo", "-p", r#"{"data":{"c":"3"}}"#]);
    kcp.kubectl_ok(&[
        "patch",
        "cm",
        "demo",
        "--type",
        "merge",
        "-p",
        r#"{"data":{"a":null}}"#,
    ]);
    kcp.kubectl_ok(&[
        "patch",
        "cm",
        "demo",
        "--type",
        "json",
        "-p",
        r#"[{"op":"replace","path":"/data/b","value":"20"}]"#,
    ]);
    assert_eq!(get(&kcp, "{.data}"), r#"{"b":"20","c":"3"}"#);
    let failed = kcp.kubectl(&[
        "patch",
        "cm",
        "demo",
        "--type",
        "json",
        "-p",
        r#"[{"op":"test","path":"/data/b","value":"x"}]"#,
    ]);
    assert!(
        !failed.status.success(),
        "a failing JSON patch test is refused"
    );
    assert_eq!(
        get(&kcp, "{.data.b}"),
        "20",
        "a refused patch changes nothing"
    );

    // Strategic merge: finalizers merge as a set instead of being replaced.
    kcp.kubectl_ok(&[
        "patch",
        "cm",
        "demo",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/a"]}}"#,
    ]);
    kcp.kubectl_ok(&[
        "patch",
        "cm",
        "demo",
        "-p",
        r#"{"metadata":{"finalizers":["example.com/b"]}}"#,
    ]);
    assert_eq!(
        get(&kcp, "{.metadata.finalizers}"),
        r#"["example.com/a","example.com/b"]"#
    );
    kcp.kubectl_ok(&[
        "patch",
        "cm",
        "demo",
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);

    let edit = Command::new("kubectl")
        .env("KUBECONFIG", kcp.kubeconfig())
        .env("EDITOR", "sed -i s/app:\\ web/app:\\ edited/")
        .args(["edit", "cm", "demo"])
        .output()
        .unwrap();
    assert!(
        edit.status.success(),
        "{}",
        String::from_utf8_lossy(&edit.stderr)
    );
    assert_eq!(get(&kcp, "{.metadata.labels.app}"), "edited");

    // apply: change a key and drop another; the dropped key is removed.
    std::fs::write(
        dir.path().join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\ndata:\n  a: \"1\"\n  b: \"2\"\n",
    )
    .unwrap();
    kcp.kubectl_ok(&["apply", "-f", &file]);
    std::fs::write(
        dir.path().join("cm.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\ndata:\n  a: \"10\"\n",
    )
    .unwrap();
    assert_eq!(
        kcp.kubectl_ok(&["apply", "-f", &file]).trim(),
        "configmap/demo configured"
    );
    let data = get(&kcp, "{.data}");
    assert!(
        data.contains(r#""a":"10""#) && !data.contains(r#""b""#),
        "{data}"
    );
}

#[test]
fn server_dry_run_and_diff_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("patch-dry-run");
    let file = dir.path().join("cm.yaml");
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\ndata:\n  a: \"1\"\n",
    )
    .unwrap();
    let file = file.to_string_lossy().into_owned();
    let dry = kcp.kubectl_ok(&["apply", "-f", &file, "--dry-run=server"]);
    assert_eq!(dry.trim(), "configmap/demo created (server dry run)");
    assert!(
        !kcp.kubectl(&["get", "cm", "demo"]).status.success(),
        "a dry run stores nothing"
    );
    kcp.kubectl_ok(&[
        "create",
        "configmap",
        "typed",
        "--from-literal=a=b",
        "--dry-run=server",
    ]);
    assert!(!kcp.kubectl(&["get", "cm", "typed"]).status.success());

    kcp.kubectl_ok(&["apply", "-f", &file]);
    std::fs::write(
        &file,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\ndata:\n  a: \"2\"\n",
    )
    .unwrap();
    let diff = kcp.kubectl(&["diff", "-f", &file]);
    assert_eq!(
        diff.status.code(),
        Some(1),
        "diff exits 1 when there are differences"
    );
    let shown = String::from_utf8_lossy(&diff.stdout);
    assert!(
        shown.contains("-  a: \"1\"") && shown.contains("+  a: \"2\""),
        "{shown}"
    );
    assert_eq!(get(&kcp, "{.data.a}"), "1", "diff changes nothing");
    kcp.kubectl_ok(&["delete", "cm", "demo", "--dry-run=server"]);
    assert_eq!(
        get(&kcp, "{.data.a}"),
        "1",
        "a dry-run delete keeps the object"
    );
}
