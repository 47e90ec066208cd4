//! Namespaces as kube-apiserver keeps them: Active on create, Terminating on delete, emptied and
//! removed by the namespace controller, no new content while terminating; the status and
//! finalize subresources; collection deletes through kubectl and the raw deletecollection verb.
//! (`--raw` paths are absolute on the server, so they name the logical cluster.)

use kcp_testing::output::{json, stderr};

use super::support::{Kcp, is_namespace_default, without_namespace_defaults, write_file};

#[test]
fn deleting_a_namespace_removes_it_and_its_content() {
    let kcp = Kcp::shared("ns-delete");
    let ws = kcp.home().to_string();
    kcp.kubectl_ok(&["create", "namespace", "doomed"]);
    assert_eq!(
        kcp.kubectl_ok(&["get", "ns", "doomed", "-o", "jsonpath={.status.phase}"]),
        "Active"
    );
    assert_eq!(
        kcp.kubectl_ok(&["get", "ns", "doomed", "-o", "jsonpath={.spec.finalizers}"]),
        r#"["kubernetes"]"#
    );
    kcp.kubectl_ok(&[
        "create",
        "configmap",
        "one",
        "-n",
        "doomed",
        "--from-literal=a=b",
    ]);
    kcp.kubectl_ok(&["create", "configmap", "two", "-n", "doomed"]);
    kcp.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "s",
        "-n",
        "doomed",
        "--from-literal=k=v",
    ]);
    kcp.kubectl_ok(&["create", "namespace", "kept"]);
    kcp.kubectl_ok(&["create", "configmap", "one", "-n", "kept"]);

    // kubectl waits until the namespace is gone.
    assert_eq!(
        kcp.kubectl_ok(&["delete", "ns", "doomed", "--timeout=60s"])
            .trim(),
        r#"namespace "doomed" deleted"#
    );
    assert!(stderr(&kcp.kubectl(&["get", "ns", "doomed"])).contains("NotFound"));
    for resource in ["configmaps", "secrets"] {
        let list = json(&kcp.kubectl_ok(&[
            "get",
            "--raw",
            &format!("/clusters/{ws}/api/v1/namespaces/doomed/{resource}"),
        ]));
        assert_eq!(list["items"], serde_json::json!([]), "{resource}");
    }
    assert_eq!(
        without_namespace_defaults(&kcp.kubectl_ok(&["get", "cm", "-n", "kept", "-o", "name"])),
        "configmap/one"
    );

    let refused = stderr(&kcp.kubectl(&["delete", "ns", "default"]));
    assert!(
        refused.contains(r#"namespaces "default" is forbidden: this namespace may not be deleted"#),
        "{refused}"
    );
}

#[test]
fn a_terminating_namespace_refuses_new_content_until_finalizers_let_it_go() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("ns-terminating");
    kcp.kubectl_ok(&["create", "namespace", "held"]);
    let hold = write_file(
        dir.path(),
        "hold.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hold\n  namespace: held\n  finalizers: [example.com/hold]\n",
    );
    kcp.kubectl_ok(&["create", "-f", &hold, "--validate=false"]);
    kcp.kubectl_ok(&["create", "configmap", "plain", "-n", "held"]);

    kcp.kubectl_ok(&["delete", "ns", "held", "--wait=false"]);
    assert_eq!(
        kcp.kubectl_ok(&["get", "ns", "held", "-o", "jsonpath={.status.phase}"]),
        "Terminating"
    );
    let refused = stderr(&kcp.kubectl(&["create", "configmap", "late", "-n", "held"]));
    assert!(
        refused.contains(r#"configmaps "late" is forbidden: unable to create new content in namespace held because it is being terminated"#),
        "{refused}"
    );

    // The controller deletes what it can; the finalizer keeps `hold` and with it the namespace.
    kcp.kubectl_ok(&[
        "wait",
        "--for=delete",
        "configmap/plain",
        "-n",
        "held",
        "--timeout=30s",
    ]);
    assert!(
        !kcp.kubectl_ok(&[
            "get",
            "cm",
            "hold",
            "-n",
            "held",
            "-o",
            "jsonpath={.metadata.deletionTimestamp}"
        ])
        .is_empty()
    );
    assert_eq!(
        kcp.kubectl_ok(&["get", "ns", "held", "-o", "name"]).trim(),
        "namespace/held"
    );
    // Its conditions say what holds it, as Kubernetes words them.
    let condition = |kind: &str| {
        kcp.kubectl_ok(&[
            "get",
            "ns",
            "held",
            "-o",
            &format!(
                "jsonpath={{.status.conditions[?(@.type==\"{kind}\")].status}} {{.status.conditions[?(@.type==\"{kind}\")].reason}}: {{.status.conditions[?(@.type==\"{kind}\")].message}}"
            ),
        ])
    };
    kcp.kubectl_ok(&[
        "wait",
        "--for=condition=NamespaceContentRemaining",
        "ns/held",
        "--timeout=30s",
    ]);
    assert_eq!(
        condition("NamespaceContentRemaining"),
        "True SomeResourcesRemain: Some resources are remaining: configmaps. has 1 resource instances"
    );
    assert_eq!(
        condition("NamespaceFinalizersRemaining"),
        "True SomeFinalizersRemain: Some content in the namespace has finalizers remaining: \
         example.com/hold in 1 resource instances"
    );
    assert_eq!(
        condition("NamespaceDeletionContentFailure"),
        "False ContentDeleted: All content successfully deleted, may be waiting on finalization"
    );

    kcp.kubectl_ok(&[
        "patch",
        "configmap",
        "hold",
        "-n",
        "held",
        "--type=merge",
        "-p",
        r#"{"metadata":{"finalizers":null}}"#,
    ]);
    kcp.kubectl_ok(&["wait", "--for=delete", "ns/held", "--timeout=30s"]);
}

#[test]
fn status_and_finalize_subresources_change_only_their_part() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("ns-subresources");
    let ws = kcp.home().to_string();
    kcp.kubectl_ok(&["create", "namespace", "parts"]);
    // Selected by the label every namespace carries with its name.
    let selected = kcp.kubectl_ok(&[
        "get",
        "ns",
        "-l",
        "kubernetes.io/metadata.name=parts",
        "-o",
        "name",
    ]);
    assert_eq!(selected.trim(), "namespace/parts");
    let namespace = json(&kcp.kubectl_ok(&[
        "get",
        "--raw",
        &format!("/clusters/{ws}/api/v1/namespaces/parts/status"),
    ]));
    assert_eq!(namespace["kind"], "Namespace");

    let mut body = namespace.clone();
    body["metadata"]["labels"] = serde_json::json!({"ignored": "yes"});
    body["status"]["conditions"] = serde_json::json!([{"type": "Example", "status": "True"}]);
    let file = write_file(dir.path(), "status.json", &body.to_string());
    let updated = json(&kcp.kubectl_ok(&[
        "replace",
        "--raw",
        &format!("/clusters/{ws}/api/v1/namespaces/parts/status"),
        "-f",
        &file,
    ]));
    assert_eq!(updated["status"]["conditions"][0]["type"], "Example");
    assert_eq!(
        updated["metadata"]["labels"],
        serde_json::json!({"kubernetes.io/metadata.name": "parts"}),
        "the status subresource changed labels"
    );

    kcp.kubectl_ok(&[
        "patch",
        "ns",
        "parts",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"phase":"Terminating"},"spec":{"finalizers":[]}}"#,
    ]);
    let patched = json(&kcp.kubectl_ok(&["get", "ns", "parts", "-o", "json"]));
    assert_eq!(patched["status"]["phase"], "Terminating");
    assert_eq!(
        patched["spec"]["finalizers"],
        serde_json::json!(["kubernetes"])
    );
    let refused = stderr(&kcp.kubectl(&["create", "configmap", "late", "-n", "parts"]));
    assert!(refused.contains("is being terminated"), "{refused}");

    let mut finalized = patched.clone();
    finalized["spec"]["finalizers"] = serde_json::json!([]);
    finalized["status"] = serde_json::json!({"phase": "Active"});
    let file = write_file(dir.path(), "finalize.json", &finalized.to_string());
    let answer = json(&kcp.kubectl_ok(&[
        "replace",
        "--raw",
        &format!("/clusters/{ws}/api/v1/namespaces/parts/finalize"),
        "-f",
        &file,
    ]));
    assert_eq!(answer["spec"], serde_json::json!({}));
    assert_eq!(answer["status"]["phase"], "Terminating");

    // Unknown subresources are 404, verbs a subresource does not take 405.
    let missing = stderr(&kcp.kubectl(&[
        "get",
        "--raw",
        &format!("/clusters/{ws}/api/v1/namespaces/parts/nope"),
    ]));
    assert!(missing.contains("NotFound"), "{missing}");
    let not_allowed = stderr(&kcp.kubectl(&[
        "get",
        "--raw",
        &format!("/clusters/{ws}/api/v1/namespaces/parts/finalize"),
    ]));
    assert!(not_allowed.contains("MethodNotAllowed"), "{not_allowed}");

    // With no finalizer left, a delete removes the namespace at once.
    kcp.kubectl_ok(&["delete", "ns", "parts", "--timeout=30s"]);
    assert!(stderr(&kcp.kubectl(&["get", "ns", "parts"])).contains("NotFound"));
}

#[test]
fn collections_are_deleted_by_selector_all_and_the_raw_verb() {
    let kcp = Kcp::shared("ns-collections");
    let ws = kcp.home().to_string();
    kcp.kubectl_ok(&["create", "namespace", "coll"]);
    let names = |kcp: &Kcp| {
        kcp.kubectl_ok(&["get", "cm", "-n", "coll", "-o", "name"])
            .lines()
            .map(|l| l.trim_start_matches("configmap/").to_string())
            .filter(|name| !is_namespace_default(name))
            .collect::<Vec<_>>()
    };
    for (name, label) in [
        ("a", "a=b"),
        ("b", "a=b"),
        ("c", "a=c"),
        ("d", "x=y"),
        ("e", "x=y"),
    ] {
        kcp.kubectl_ok(&["create", "configmap", name, "-n", "coll"]);
        kcp.kubectl_ok(&["label", "configmap", name, "-n", "coll", label]);
    }

    // kubectl lists and deletes one by one.
    let deleted = kcp.kubectl_ok(&["delete", "cm", "-l", "a=b", "-n", "coll"]);
    assert_eq!(
        deleted.lines().collect::<Vec<_>>(),
        [r#"configmap "a" deleted"#, r#"configmap "b" deleted"#]
    );
    assert_eq!(names(&kcp), ["c", "d", "e"]);

    // The deletecollection verb itself: a dry run changes nothing, then the real one.
    let dry = json(&kcp.kubectl_ok(&[
        "delete",
        "--raw",
        &format!("/clusters/{ws}/api/v1/namespaces/coll/configmaps?labelSelector=x%3Dy&dryRun=All"),
    ]));
    assert_eq!(dry["kind"], "ConfigMapList");
    assert_eq!(dry["items"].as_array().unwrap().len(), 2);
    assert_eq!(names(&kcp), ["c", "d", "e"]);
    let list = json(&kcp.kubectl_ok(&[
        "delete",
        "--raw",
        &format!("/clusters/{ws}/api/v1/namespaces/coll/configmaps?labelSelector=x%3Dy"),
    ]));
    let listed: Vec<_> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(listed, ["d", "e"]);
    assert_eq!(names(&kcp), ["c"]);
    let bad = stderr(&kcp.kubectl(&[
        "delete",
        "--raw",
        &format!("/clusters/{ws}/api/v1/namespaces/coll/configmaps?fieldSelector=data.x%3Dy"),
    ]));
    assert!(bad.contains("field label not supported"), "{bad}");
    let not_allowed = stderr(&kcp.kubectl(&[
        "delete",
        "--raw",
        &format!("/clusters/{ws}/api/v1/namespaces"),
    ]));
    assert!(not_allowed.contains("MethodNotAllowed"), "{not_allowed}");

    kcp.kubectl_ok(&["create", "configmap", "f", "-n", "coll"]);
    kcp.kubectl_ok(&["delete", "configmap", "--all", "-n", "coll"]);
    assert!(names(&kcp).is_empty());
}
