//! Garbage collection with kubectl, in two workspaces at once: `kubectl delete
//! --cascade=background|foreground|orphan` with dependents of several kinds (a custom resource
//! owning configmaps, a configmap owning a custom resource, a chain), owners absent or with
//! another uid, namespaced dependents of a cluster-scoped owner, and owners that exist only in
//! the other workspace. What happens in one workspace never touches the other.

use kcp_testing::crd::Crd;
use kcp_testing::wait;

use super::support::{Kcp, write_file};

fn widgets_crd() -> String {
    Crd::namespaced("widgets", "Widget")
        .singular("widget")
        .storage_version("v1", "type: object")
        .yaml()
}

/// An owner reference in YAML, indented for `metadata`.
struct Owner<'a> {
    api_version: &'a str,
    kind: &'a str,
    name: &'a str,
    uid: String,
    blocking: bool,
}

impl Owner<'_> {
    fn yaml(&self) -> String {
        format!(
            "  ownerReferences:\n  - apiVersion: {}\n    kind: {}\n    name: {}\n    uid: \"{}\"\n    blockOwnerDeletion: {}\n",
            self.api_version, self.kind, self.name, self.uid, self.blocking
        )
    }
}

fn configmap(name: &str, owner: Option<&Owner>, finalizers: &str) -> String {
    format!(
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: gc\n  finalizers: [{finalizers}]\n{}",
        owner.map(Owner::yaml).unwrap_or_default()
    )
}

fn widget(name: &str, owner: Option<&Owner>) -> String {
    format!(
        "---\napiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: {name}\n  namespace: gc\n{}",
        owner.map(Owner::yaml).unwrap_or_default()
    )
}

fn uid(kcp: &Kcp, cluster: &str, object: &str) -> String {
    let mut args = vec!["get", object, "-o", "jsonpath={.metadata.uid}"];
    if !object.starts_with("clusterrole") {
        args.extend(["-n", "gc"]);
    }
    kcp.kubectl_in_ok(cluster, &args).trim().to_string()
}

fn owned_by<'a>(
    kcp: &Kcp,
    cluster: &str,
    kind: &'a str,
    name: &'a str,
    blocking: bool,
) -> Owner<'a> {
    let (api_version, resource) = match kind {
        "Widget" => ("example.com/v1", "widget"),
        "ClusterRole" => ("rbac.authorization.k8s.io/v1", "clusterrole"),
        _ => ("v1", "configmap"),
    };
    Owner {
        api_version,
        kind,
        name,
        uid: uid(kcp, cluster, &format!("{resource}/{name}")),
        blocking,
    }
}

/// The names of `resource` in namespace `gc`, sorted.
fn names(kcp: &Kcp, cluster: &str, resource: &str) -> String {
    kcp.kubectl_in_ok(
        cluster,
        &[
            "get",
            resource,
            "-n",
            "gc",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name} {end}",
        ],
    )
    .trim()
    .to_string()
}

fn create(kcp: &Kcp, cluster: &str, dir: &std::path::Path, file: &str, yaml: &str) {
    let path = write_file(dir, file, yaml);
    kcp.kubectl_in_ok(cluster, &["create", "-f", &path]);
}

fn wait_gone(kcp: &Kcp, cluster: &str, resource: &str, gone: &[&str]) {
    wait::until(&format!("{gone:?} collected in {cluster}"), || {
        let present = names(kcp, cluster, resource);
        let left: Vec<&&str> = gone
            .iter()
            .filter(|name| present.split(' ').any(|p| p == **name))
            .collect();
        if left.is_empty() {
            Ok(())
        } else {
            Err(format!("still there: {left:?} (all: {present})"))
        }
    });
}

#[test]
fn owners_take_their_dependents_in_every_propagation_and_workspaces_stay_apart() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("garbage-collection");
    let (home, other) = (kcp.home().to_string(), kcp.workspace("other"));
    let crd = write_file(dir.path(), "crd.yaml", &widgets_crd());
    for cluster in [&home, &other] {
        kcp.kubectl_in_ok(cluster, &["create", "namespace", "gc"]);
        kcp.kubectl_in_ok(cluster, &["create", "-f", &crd]);
        kcp.wait_established(cluster, "widgets.example.com");
        // Owners, then dependents naming them by uid.
        create(
            &kcp,
            cluster,
            dir.path(),
            "owners.yaml",
            &[
                widget("w-bg", None),
                widget("w-fg", None),
                widget("w-orphan", None),
                configmap("cm-owner", None, ""),
                configmap("twin", None, ""),
            ]
            .concat(),
        );
        let w_bg = owned_by(&kcp, cluster, "Widget", "w-bg", false);
        let w_fg = owned_by(&kcp, cluster, "Widget", "w-fg", true);
        let w_orphan = owned_by(&kcp, cluster, "Widget", "w-orphan", false);
        let cm_owner = owned_by(&kcp, cluster, "ConfigMap", "cm-owner", false);
        create(
            &kcp,
            cluster,
            dir.path(),
            "dependents.yaml",
            &[
                configmap("bg-1", Some(&w_bg), ""),
                configmap("bg-2", Some(&w_bg), ""),
                widget("w-of-cm", Some(&cm_owner)),
                // fg-1 holds w-fg until its own finalizer goes; fg-2 depends on fg-1.
                configmap("fg-1", Some(&w_fg), "example.com/hold"),
                configmap("orphan-1", Some(&w_orphan), ""),
            ]
            .concat(),
        );
        let fg_1 = owned_by(&kcp, cluster, "ConfigMap", "fg-1", true);
        create(
            &kcp,
            cluster,
            dir.path(),
            "chain.yaml",
            &configmap("fg-2", Some(&fg_1), ""),
        );
    }

    // Background (kubectl's default): the custom resource goes at once, its configmaps after;
    // a configmap's custom resource goes with it. Only in `home`.
    kcp.kubectl_in_ok(&home, &["delete", "widget", "w-bg", "-n", "gc"]);
    kcp.kubectl_in_ok(&home, &["delete", "configmap", "cm-owner", "-n", "gc"]);
    wait_gone(&kcp, &home, "configmaps", &["bg-1", "bg-2"]);
    wait_gone(&kcp, &home, "widgets", &["w-of-cm"]);
    let untouched = names(&kcp, &other, "configmaps");
    for name in ["bg-1", "bg-2", "cm-owner"] {
        assert!(
            untouched.split(' ').any(|n| n == name),
            "{name} left {other}: {untouched}"
        );
    }
    assert!(names(&kcp, &other, "widgets").contains("w-of-cm"));

    // Foreground: the owner waits, deleting, while a blocking dependent is held by its own
    // finalizer; the dependent's dependent goes first.
    kcp.kubectl_in_ok(
        &home,
        &[
            "delete",
            "widget",
            "w-fg",
            "-n",
            "gc",
            "--cascade=foreground",
            "--wait=false",
        ],
    );
    wait_gone(&kcp, &home, "configmaps", &["fg-2"]);
    let held = kcp.kubectl_in_ok(
        &home,
        &[
            "get",
            "widget",
            "w-fg",
            "-n",
            "gc",
            "-o",
            "jsonpath={.metadata.finalizers} {.metadata.deletionTimestamp}",
        ],
    );
    assert!(held.contains("foregroundDeletion"), "w-fg: {held}");
    kcp.kubectl_in_ok(
        &home,
        &[
            "patch",
            "configmap",
            "fg-1",
            "-n",
            "gc",
            "--type=merge",
            "-p",
            r#"{"metadata":{"finalizers":null}}"#,
        ],
    );
    wait_gone(&kcp, &home, "widgets", &["w-fg"]);
    wait_gone(&kcp, &home, "configmaps", &["fg-1"]);

    // A cycle (each owns the other, blocking) deleted in the foreground does not wait forever.
    create(
        &kcp,
        &home,
        dir.path(),
        "cycle-a.yaml",
        &configmap("cycle-a", None, ""),
    );
    let cycle_a = owned_by(&kcp, &home, "ConfigMap", "cycle-a", true);
    create(
        &kcp,
        &home,
        dir.path(),
        "cycle-b.yaml",
        &configmap("cycle-b", Some(&cycle_a), ""),
    );
    let cycle_b = owned_by(&kcp, &home, "ConfigMap", "cycle-b", true);
    let patch = format!(
        r#"{{"metadata":{{"ownerReferences":[{{"apiVersion":"v1","kind":"ConfigMap","name":"cycle-b","uid":"{}","blockOwnerDeletion":true}}]}}}}"#,
        cycle_b.uid
    );
    kcp.kubectl_in_ok(
        &home,
        &[
            "patch",
            "configmap",
            "cycle-a",
            "-n",
            "gc",
            "--type=merge",
            "-p",
            &patch,
        ],
    );
    kcp.kubectl_in_ok(
        &home,
        &[
            "delete",
            "configmap",
            "cycle-a",
            "-n",
            "gc",
            "--cascade=foreground",
            "--wait=false",
        ],
    );
    wait_gone(&kcp, &home, "configmaps", &["cycle-a", "cycle-b"]);

    // Orphan: the owner goes, its dependent stays without the reference.
    kcp.kubectl_in_ok(
        &home,
        &[
            "delete",
            "widget",
            "w-orphan",
            "-n",
            "gc",
            "--cascade=orphan",
        ],
    );
    wait_gone(&kcp, &home, "widgets", &["w-orphan"]);
    let references = kcp.kubectl_in_ok(
        &home,
        &[
            "get",
            "configmap",
            "orphan-1",
            "-n",
            "gc",
            "-o",
            "jsonpath={.metadata.ownerReferences}",
        ],
    );
    assert_eq!(references.trim(), "", "orphan-1 kept its reference");

    // Owners absent, or present with another uid (here: the uid of the `twin` of the other
    // workspace, which never matches an owner in this one).
    let twin_elsewhere = owned_by(&kcp, &other, "ConfigMap", "twin", false);
    let absent = Owner {
        name: "nobody",
        ..owned_by(&kcp, &home, "ConfigMap", "twin", false)
    };
    create(
        &kcp,
        &home,
        dir.path(),
        "dangling.yaml",
        &[
            configmap("of-nobody", Some(&absent), ""),
            configmap("of-the-other-twin", Some(&twin_elsewhere), ""),
        ]
        .concat(),
    );
    wait_gone(
        &kcp,
        &home,
        "configmaps",
        &["of-nobody", "of-the-other-twin"],
    );

    // A namespaced dependent of a cluster-scoped owner.
    kcp.kubectl_in_ok(
        &home,
        &[
            "create",
            "clusterrole",
            "gc-owner",
            "--verb=get",
            "--resource=configmaps",
        ],
    );
    let role = owned_by(&kcp, &home, "ClusterRole", "gc-owner", false);
    let absent_role = Owner {
        name: "no-role",
        ..owned_by(&kcp, &home, "ClusterRole", "gc-owner", false)
    };
    create(
        &kcp,
        &home,
        dir.path(),
        "of-role.yaml",
        &[
            configmap("of-role", Some(&role), ""),
            configmap("of-no-role", Some(&absent_role), ""),
        ]
        .concat(),
    );
    // Once the collector has looked at both, the one whose owner exists is still there.
    wait_gone(&kcp, &home, "configmaps", &["of-no-role"]);
    assert!(names(&kcp, &home, "configmaps").contains("of-role"));
    kcp.kubectl_in_ok(&home, &["delete", "clusterrole", "gc-owner"]);
    wait_gone(&kcp, &home, "configmaps", &["of-role"]);

    // A cluster-scoped dependent of a namespaced kind is never collected, and a Warning says so.
    let twin = owned_by(&kcp, &home, "ConfigMap", "twin", false);
    let role = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: of-a-configmap\n{}rules: []\n",
        twin.yaml()
    );
    create(&kcp, &home, dir.path(), "invalid.yaml", &role);
    let event = wait::until("the OwnerRefInvalidNamespace event", || {
        let events = kcp.kubectl_in_ok(
            &home,
            &[
                "get",
                "events",
                "-n",
                "default",
                "--field-selector=reason=OwnerRefInvalidNamespace",
                "-o",
                "jsonpath={range .items[*]}{.type} {.involvedObject.kind}/{.involvedObject.name}: {.message}{end}",
            ],
        );
        (!events.is_empty()).then_some(events)
    });
    assert_eq!(
        event,
        format!(
            "Warning ClusterRole/of-a-configmap: ownerRef [v1/ConfigMap, namespace: , name: twin, \
             uid: {}] does not exist in namespace \"\"",
            twin.uid
        )
    );
    kcp.kubectl_in_ok(&home, &["get", "clusterrole", "of-a-configmap"]);

    // What users may not delete (namespace `default`), ownership may not delete either.
    kcp.kubectl_in_ok(
        &home,
        &[
            "create",
            "clusterrole",
            "guard",
            "--verb=get",
            "--resource=configmaps",
        ],
    );
    let guard = owned_by(&kcp, &home, "ClusterRole", "guard", false);
    let patch = format!(
        r#"{{"metadata":{{"ownerReferences":[{{"apiVersion":"{}","kind":"{}","name":"{}","uid":"{}"}}]}}}}"#,
        guard.api_version, guard.kind, guard.name, guard.uid
    );
    kcp.kubectl_in_ok(
        &home,
        &[
            "patch",
            "namespace",
            "default",
            "--type=merge",
            "-p",
            &patch,
        ],
    );
    kcp.kubectl_in_ok(&home, &["delete", "clusterrole", "guard"]);
    let sentinel = Owner {
        name: "gone-too",
        ..owned_by(&kcp, &home, "ConfigMap", "twin", false)
    };
    create(
        &kcp,
        &home,
        dir.path(),
        "sentinel.yaml",
        &configmap("sentinel", Some(&sentinel), ""),
    );
    wait_gone(&kcp, &home, "configmaps", &["sentinel"]);
    let default = kcp.kubectl_in_ok(
        &home,
        &[
            "get",
            "namespace",
            "default",
            "-o",
            "jsonpath={.status.phase}",
        ],
    );
    assert_eq!(default, "Active");

    // The other workspace kept everything; now its own owners go.
    let kept = names(&kcp, &other, "configmaps");
    for name in ["bg-1", "bg-2", "fg-1", "fg-2", "orphan-1", "twin"] {
        assert!(
            kept.split(' ').any(|n| n == name),
            "{name} left {other}: {kept}"
        );
    }
    kcp.kubectl_in_ok(
        &other,
        &[
            "delete",
            "widget",
            "w-bg",
            "-n",
            "gc",
            "--cascade=background",
        ],
    );
    wait_gone(&kcp, &other, "configmaps", &["bg-1", "bg-2"]);

    // The collector's queue reports under its name, one series for every workspace.
    let metrics = kcp.kubectl_in_ok(&home, &["get", "--raw", "/metrics"]);
    for series in [
        "workqueue_adds_total{name=\"garbagecollector\"}",
        "workqueue_depth{name=\"garbagecollector\"}",
        "workqueue_retries_total{name=\"garbagecollector\"}",
        "workqueue_work_duration_seconds_count{name=\"garbagecollector\"}",
        "workqueue_adds_total{name=\"namespace-defaults\"}",
    ] {
        assert!(metrics.contains(series), "{series} missing");
    }
    assert_eq!(
        metrics
            .matches("workqueue_adds_total{name=\"garbagecollector\"}")
            .count(),
        1
    );
}
