//! Deleting CRDs and their custom resources with kubectl: a deleted CRD terminates (finalizer,
//! `Terminating` condition, creates refused with 405), its custom resources are deleted in its
//! own logical cluster only, finalizers on them hold it, and once it is gone its resources leave
//! discovery; a CRD created again starts empty; deleting a namespace deletes its custom
//! resources.

use kcp_testing::crd::Crd;
use kcp_testing::wait;

use super::support::{Kcp, write_file};

fn widgets_crd() -> String {
    Crd::namespaced("widgets", "Widget")
        .singular("widget")
        .storage_version(
            "v1",
            "
            type: object
            properties:
              spec: {type: object, properties: {size: {type: integer}}}
            ",
        )
        .yaml()
}

fn widget(name: &str, namespace: &str, finalizers: &str) -> String {
    format!(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: {name}\n  namespace: {namespace}\n  finalizers: [{finalizers}]\nspec:\n  size: 1\n"
    )
}

/// Creates the widgets CRD in `cluster` and waits until it is Established.
fn create_crd(kcp: &Kcp, cluster: &str, crd: &str) {
    kcp.kubectl_in_ok(cluster, &["create", "-f", crd]);
    kcp.wait_established(cluster, "widgets.example.com");
}

fn widgets(kcp: &Kcp, cluster: &str) -> String {
    kcp.kubectl_in_ok(
        cluster,
        &[
            "get",
            "widgets",
            "-A",
            "-o",
            "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {end}",
        ],
    )
    .trim()
    .to_string()
}

#[test]
fn deleting_a_crd_deletes_its_resources_then_itself() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("crd-del");
    let (cluster, other) = (&kcp.home().to_string(), &kcp.workspace("other"));
    let crd = write_file(dir.path(), "crd.yaml", &widgets_crd());
    let mut objects = String::new();
    for (name, namespace, finalizers) in [
        ("one", "a", ""),
        ("two", "b", ""),
        ("held", "b", "example.com/hold"),
    ] {
        objects.push_str("---\n");
        objects.push_str(&widget(name, namespace, finalizers));
    }
    let objects = write_file(dir.path(), "widgets.yaml", &objects);
    for cluster in [cluster, other] {
        kcp.kubectl_in_ok(cluster, &["create", "namespace", "a"]);
        kcp.kubectl_in_ok(cluster, &["create", "namespace", "b"]);
        create_crd(&kcp, cluster, &crd);
    }
    kcp.kubectl_in_ok(cluster, &["create", "-f", &objects]);
    let kept = write_file(dir.path(), "kept.yaml", &widget("kept", "a", ""));
    kcp.kubectl_in_ok(other, &["create", "-f", &kept]);

    // The first delete only starts termination.
    kcp.kubectl_in_ok(
        cluster,
        &["delete", "crd", "widgets.example.com", "--wait=false"],
    );
    let crd_state = kcp.kubectl_in_ok(
        cluster,
        &[
            "get",
            "crd",
            "widgets.example.com",
            "-o",
            "jsonpath={.metadata.finalizers} {.metadata.deletionTimestamp}",
        ],
    );
    assert!(
        crd_state.starts_with(r#"["customresourcecleanup.apiextensions.k8s.io"] 20"#),
        "{crd_state}"
    );
    let late = write_file(dir.path(), "late.yaml", &widget("late", "a", ""));
    let stderr = kcp.kubectl_in_err(cluster, &["create", "-f", &late]);
    assert!(
        stderr.contains("(MethodNotAllowed): error when creating \"")
            && stderr
                .contains("create not allowed while custom resource definition is terminating"),
        "{stderr}"
    );

    // The cleanup deletes every widget; the held one waits for its finalizer, and so does the CRD.
    kcp.kubectl_in_ok(
        cluster,
        &[
            "wait",
            "--for=jsonpath={.status.conditions[?(@.type==\"Terminating\")].reason}=InstanceDeletionInProgress",
            "crd/widgets.example.com",
            "--timeout=10s",
        ],
    );
    wait::until("only the held widget is left", || {
        let left = widgets(&kcp, cluster);
        if left == "b/held" { Ok(()) } else { Err(left) }
    });
    let condition = kcp.kubectl_in_ok(
        cluster,
        &[
            "get",
            "crd",
            "widgets.example.com",
            "-o",
            r#"jsonpath={.status.conditions[?(@.type=="Terminating")].status}/{.status.conditions[?(@.type=="Terminating")].message}"#,
        ],
    );
    assert_eq!(condition, "True/CustomResource deletion is in progress");
    let deleting = kcp.kubectl_in_ok(
        cluster,
        &[
            "get",
            "widget",
            "held",
            "-n",
            "b",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}",
        ],
    );
    assert!(!deleting.is_empty());

    kcp.kubectl_in_ok(
        cluster,
        &[
            "patch",
            "widget",
            "held",
            "-n",
            "b",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
    );
    kcp.kubectl_in_ok(
        cluster,
        &[
            "wait",
            "--for=delete",
            "crd/widgets.example.com",
            "--timeout=15s",
        ],
    );
    let resources = kcp.kubectl_in_ok(cluster, &["api-resources", "--api-group=example.com"]);
    assert!(!resources.contains("widgets"), "{resources}");
    let stderr = kcp.kubectl_in_err(cluster, &["get", "widgets", "-A"]);
    assert!(
        stderr.contains("the server doesn't have a resource type \"widgets\""),
        "{stderr}"
    );

    // The other cluster's CRD and widget are untouched.
    assert_eq!(widgets(&kcp, other), "a/kept");

    // Created again, the CRD starts empty; a plain delete waits until the CRD is gone.
    create_crd(&kcp, cluster, &crd);
    assert_eq!(widgets(&kcp, cluster), "");
    kcp.kubectl_in_ok(cluster, &["create", "-f", &late]);
    let deleted = kcp.kubectl_in_ok(
        cluster,
        &["delete", "crd", "widgets.example.com", "--timeout=20s"],
    );
    assert_eq!(
        deleted.trim(),
        "customresourcedefinition.apiextensions.k8s.io \"widgets.example.com\" deleted"
    );
    let stderr = kcp.kubectl_in_err(cluster, &["get", "crd", "widgets.example.com"]);
    assert!(stderr.contains("NotFound"), "{stderr}");
}

#[test]
fn deleting_a_namespace_deletes_its_custom_resources() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("crd-del-ns");
    let cluster = &kcp.home().to_string();
    let crd = write_file(dir.path(), "crd.yaml", &widgets_crd());
    kcp.kubectl_in_ok(cluster, &["create", "namespace", "doomed"]);
    kcp.kubectl_in_ok(cluster, &["create", "namespace", "kept"]);
    create_crd(&kcp, cluster, &crd);
    let objects = format!(
        "{}---\n{}",
        widget("w", "doomed", ""),
        widget("w", "kept", "")
    );
    let objects = write_file(dir.path(), "widgets.yaml", &objects);
    kcp.kubectl_in_ok(cluster, &["create", "-f", &objects]);
    kcp.kubectl_in_ok(cluster, &["delete", "namespace", "doomed", "--timeout=20s"]);
    let stderr = kcp.kubectl_in_err(cluster, &["get", "namespace", "doomed"]);
    assert!(stderr.contains("NotFound"), "{stderr}");
    assert_eq!(widgets(&kcp, cluster), "kept/w");
}
