//! kcp's own kinds on the in-memory store, written by a user (the registry as requests use it)
//! and by the server (`privileged`): what names or owns a logical cluster is the server's alone,
//! and no shape of a request body makes the registry panic or answer a 500.

use std::sync::Arc;

use kcp_apis::builtin::Resource;
use kcp_apis::system;
use kcp_registry::tenancy::{CLUSTER_ANNOTATION, LOGICAL_CLUSTER};
use kcp_registry::{ListOptions, Registry, RegistryError};
use kcp_storage::MemoryStorage;
use serde_json::{Value, json};

use crate::support::{builtin, cluster_wide};

const URL: &str = "https://kcp.example:6443/clusters/root";

async fn registry() -> Registry {
    let registry = Registry::new(Arc::new(MemoryStorage::new()));
    registry.bootstrap_root(URL).await.unwrap();
    registry
}

fn workspace(name: &str) -> Value {
    json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": name}})
}

/// The message of a 403, or a panic naming what came instead.
fn forbidden(result: Result<Value, RegistryError>) -> String {
    match result {
        Err(RegistryError::Forbidden { message, .. }) => message,
        other => panic!("expected 403 Forbidden, got {other:?}"),
    }
}

/// A logical cluster another workspace owns, as the workspace controller would have made it.
async fn victim(registry: &Registry) -> String {
    let cluster = "victim0000000001".to_string();
    registry
        .privileged()
        .create(
            cluster_wide(&cluster, system::logical_clusters()),
            json!({"metadata": {"name": LOGICAL_CLUSTER}, "spec": {"owner": {
                "apiVersion": "tenancy.kcp.io/v1alpha1", "resource": "workspaces",
                "name": "victim", "cluster": "root", "uid": "u"}},
                "status": {"phase": "Ready"}}),
        )
        .await
        .unwrap();
    cluster
}

#[tokio::test]
async fn users_cannot_point_a_workspace_at_another_logical_cluster() {
    let registry = registry().await;
    let victim = victim(&registry).await;
    let workspaces = cluster_wide("root", system::workspaces());

    let mut by_spec = workspace("by-spec");
    by_spec["spec"] = json!({"cluster": victim});
    assert_eq!(
        forbidden(registry.create(workspaces, by_spec.clone()).await),
        "spec.Cluster can only be set by system privileged users"
    );
    let mut by_url = workspace("by-url");
    by_url["spec"] = json!({"URL": "https://elsewhere/clusters/x"});
    assert_eq!(
        forbidden(registry.create(workspaces, by_url).await),
        "spec.URL can only be set by system privileged users"
    );
    let mut by_annotation = workspace("by-annotation");
    by_annotation["metadata"]["annotations"] = json!({CLUSTER_ANNOTATION: victim});
    assert_eq!(
        forbidden(registry.create(workspaces, by_annotation).await),
        format!("modification of reserved annotation: \"{CLUSTER_ANNOTATION}\"")
    );

    let created = registry
        .create(workspaces, workspace("mine"))
        .await
        .unwrap();
    let own = created["metadata"]["annotations"][CLUSTER_ANNOTATION]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(own, victim);
    let set = |pointer: &'static str, value: Value| {
        move |current: &Value| {
            let mut next = current.clone();
            let (parent, field) = pointer.rsplit_once('/').unwrap();
            next.pointer_mut(parent)
                .and_then(Value::as_object_mut)
                .unwrap()
                .insert(field.replace("~1", "/"), value.clone());
            Ok::<Value, RegistryError>(next)
        }
    };
    let annotation = format!(
        "/metadata/annotations/{}",
        CLUSTER_ANNOTATION.replace('/', "~1")
    );
    let annotation: &'static str = Box::leak(annotation.into_boxed_str());
    for (pointer, message) in [
        (
            "/spec/cluster",
            "spec.cluster can only be changed by system privileged users",
        ),
        (
            "/spec/URL",
            "spec.URL can only be changed by system privileged users",
        ),
        (
            annotation,
            "modification of reserved annotation: \"internal.tenancy.kcp.io/cluster\"",
        ),
    ] {
        let patch = set(pointer, json!(victim));
        assert_eq!(
            forbidden(registry.patch(workspaces, "mine", &patch).await),
            message,
            "{pointer}"
        );
    }
    let mut replaced = registry.get(workspaces, "mine").await.unwrap();
    replaced["spec"]["cluster"] = json!(victim);
    assert_eq!(
        forbidden(registry.update(workspaces, "mine", replaced).await),
        "spec.cluster can only be changed by system privileged users"
    );
    let ready = |current: &Value| {
        let mut next = current.clone();
        next["status"] = json!({"phase": "Ready"});
        Ok::<Value, RegistryError>(next)
    };
    assert_eq!(
        forbidden(
            registry
                .subresource("status")
                .unwrap()
                .patch(workspaces, "mine", &ready)
                .await
        ),
        "spec.cluster must be set for phase Ready"
    );
    let retyped = set("/spec/type", json!({"name": "team", "path": "root"}));
    assert_eq!(
        forbidden(registry.patch(workspaces, "mine", &retyped).await),
        "spec.type is immutable"
    );

    // The server schedules it (and only to its own cluster).
    let scheduled = registry
        .privileged()
        .patch(workspaces, "mine", &set("/spec/cluster", json!(own)))
        .await
        .unwrap();
    assert_eq!(scheduled["spec"]["cluster"], json!(own));
    assert_eq!(
        forbidden(
            registry
                .patch(workspaces, "mine", &set("/spec/cluster", json!(victim)))
                .await
        ),
        "spec.cluster can only be changed by system privileged users"
    );
    let unset = |current: &Value| {
        let mut next = current.clone();
        next["spec"].as_object_mut().unwrap().remove("cluster");
        Ok::<Value, RegistryError>(next)
    };
    assert_eq!(
        forbidden(registry.patch(workspaces, "mine", &unset).await),
        "spec.cluster cannot be unset"
    );
}

#[tokio::test]
async fn the_server_names_clusters_only_with_valid_names() {
    let registry = registry().await;
    let mut bad = workspace("bad-name");
    bad["metadata"]["annotations"] = json!({CLUSTER_ANNOTATION: "root:org"});
    let refused = registry
        .privileged()
        .create(cluster_wide("root", system::workspaces()), bad)
        .await;
    assert!(
        matches!(&refused, Err(RegistryError::Invalid { causes, .. })
            if causes[0].field == format!("metadata.annotations[{CLUSTER_ANNOTATION}]")),
        "{refused:?}"
    );
    // A stored spec.cluster that is no cluster name does not resolve.
    let mut pointing = workspace("pointing");
    pointing["spec"] = json!({"cluster": "a/b"});
    assert!(
        registry
            .privileged()
            .create(cluster_wide("root", system::workspaces()), pointing)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn only_existing_logical_clusters_resolve() {
    let registry = registry().await;
    let victim = victim(&registry).await;
    assert_eq!(registry.resolve_path("root").await.unwrap(), "root");
    assert_eq!(registry.resolve_path(&victim).await.unwrap(), victim);
    assert_eq!(
        registry.resolve_path("system:admin").await.unwrap(),
        "system:admin"
    );
    for unknown in [
        "phantom",
        "system:phantom",
        "root:nope",
        "",
        "..",
        "\0",
        "Root",
        &"a".repeat(5000),
    ] {
        let resolved = registry.resolve_path(unknown).await;
        assert!(
            matches!(&resolved, Err(RegistryError::NotFound { qualified_resource, .. })
                if qualified_resource == "workspaces.tenancy.kcp.io"),
            "{unknown:?}: {resolved:?}"
        );
    }
}

#[tokio::test]
async fn users_cannot_make_a_logical_cluster_deletable_or_move_it_back() {
    let registry = registry().await;
    let logical_clusters = cluster_wide("root", system::logical_clusters());
    let status = registry.subresource("status").unwrap();
    let edit = |change: fn(&mut Value)| {
        move |current: &Value| {
            let mut next = current.clone();
            change(&mut next);
            Ok::<Value, RegistryError>(next)
        }
    };
    let deletable = edit(|lc| lc["spec"]["directlyDeletable"] = json!(true));
    assert_eq!(
        forbidden(
            registry
                .patch(logical_clusters, LOGICAL_CLUSTER, &deletable)
                .await
        ),
        "spec.directlyDeletable can only be changed by system privileged users"
    );
    let mut replaced = registry
        .get(logical_clusters, LOGICAL_CLUSTER)
        .await
        .unwrap();
    replaced["spec"]["directlyDeletable"] = json!(true);
    assert_eq!(
        forbidden(
            registry
                .update(logical_clusters, LOGICAL_CLUSTER, replaced)
                .await
        ),
        "spec.directlyDeletable can only be changed by system privileged users"
    );
    let owned = edit(|lc| {
        lc["spec"]["owner"] = json!({"apiVersion": "v1", "resource": "workspaces",
            "name": "x", "cluster": "y", "uid": "z"})
    });
    assert_eq!(
        forbidden(
            registry
                .patch(logical_clusters, LOGICAL_CLUSTER, &owned)
                .await
        ),
        "spec.owner can only be changed by system privileged users"
    );
    let back = edit(|lc| lc["status"]["phase"] = json!("Initializing"));
    assert_eq!(
        forbidden(status.patch(logical_clusters, LOGICAL_CLUSTER, &back).await),
        "cannot transition from \"Ready\" to \"Initializing\""
    );
    let moved = edit(|lc| lc["metadata"]["annotations"]["kcp.io/path"] = json!("root:other"));
    assert_eq!(
        forbidden(
            registry
                .patch(logical_clusters, LOGICAL_CLUSTER, &moved)
                .await
        ),
        "modification of reserved annotation: \"kcp.io/path\""
    );
    assert_eq!(
        forbidden(
            registry
                .delete(logical_clusters, LOGICAL_CLUSTER)
                .await
                .map(|_| Value::Null)
        ),
        "LogicalCluster cannot be deleted"
    );
    // The server may.
    registry
        .privileged()
        .patch(logical_clusters, LOGICAL_CLUSTER, &deletable)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_workspace_whose_spec_is_not_an_object_is_invalid() {
    let registry = registry().await;
    let mut body = workspace("stringy");
    body["spec"] = json!("x");
    match registry
        .create(cluster_wide("root", system::workspaces()), body)
        .await
    {
        Err(RegistryError::Invalid { causes, .. }) => {
            assert_eq!(causes[0].field, "spec");
            assert_eq!(
                causes[0].message,
                "Invalid value: \"string\": spec in body must be of type object: \"string\""
            );
        }
        other => panic!("expected 422 Invalid, got {other:?}"),
    }
}

/// Which answers are the client's fault (4xx) or success: anything but a server error.
fn client_answer(result: &Result<Value, RegistryError>) -> bool {
    !matches!(
        result,
        Err(RegistryError::Internal(_)
            | RegistryError::Unavailable(_)
            | RegistryError::TooLargeResourceVersion { .. })
    )
}

/// `object` with the field at `path` set to `value` (parents are objects in these bodies).
fn with(mut object: Value, path: &[&str], value: &Value) -> Value {
    kcp_apimachinery::object::set(&mut object, path, value.clone()).unwrap();
    object
}

#[tokio::test]
async fn no_shape_of_a_body_panics_or_fails_the_server() {
    let registry = registry().await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object"}}}]},
    });
    let kinds: [(&'static Resource, Value); 5] = [
        (system::workspaces(), workspace("shape")),
        (
            system::workspace_types(),
            json!({"metadata": {"name": "shape"}, "spec": {}}),
        ),
        (
            system::logical_clusters(),
            json!({"metadata": {"name": LOGICAL_CLUSTER}, "spec": {}}),
        ),
        (
            builtin("", "namespaces"),
            json!({"metadata": {"name": "shape"}}),
        ),
        (
            builtin("apiextensions.k8s.io", "customresourcedefinitions"),
            crd,
        ),
    ];
    let fields: &[&[&str]] = &[
        &["spec"],
        &["status"],
        &["metadata"],
        &["metadata", "annotations"],
        &["metadata", "labels"],
        &["metadata", "finalizers"],
        &["metadata", "ownerReferences"],
        &["spec", "type"],
        &["spec", "cluster"],
        &["spec", "names"],
        &["spec", "versions"],
        &["spec", "finalizers"],
        &["status", "conditions"],
        &["status", "phase"],
        &["status", "initializers"],
    ];
    let values = [
        json!("x"),
        json!(7),
        json!(-1.5),
        json!([1, "a"]),
        json!(null),
        json!(true),
        json!({"a": {"b": []}}),
    ];
    let mut case = 0;
    for (resource, base) in kinds {
        let at = cluster_wide("root", resource);
        let name = base["metadata"]["name"].as_str().unwrap().to_string();
        // The object updates and patches start from (the root's LogicalCluster exists).
        if resource.name != "logicalclusters" {
            registry.create(at, base.clone()).await.unwrap();
        }
        for path in fields {
            for value in &values {
                let what = format!("{} {} = {value}", resource.name, path.join("."));
                case += 1;
                let mut fresh = with(base.clone(), path, value);
                if path != &["metadata"] {
                    fresh["metadata"]["name"] = json!(format!("{name}-{case}"));
                }
                let created = registry.create(at, fresh).await;
                assert!(client_answer(&created), "create {what}: {created:?}");
                let Ok(current) = registry.get(at, &name).await else {
                    panic!("{name} is gone after {what}");
                };
                let body = with(current.clone(), path, value);
                let updated = registry.update(at, &name, body).await;
                assert!(client_answer(&updated), "update {what}: {updated:?}");
                for part in [None, Some("status")] {
                    let writer = match part {
                        None => registry.clone(),
                        Some(part) => registry.subresource(part).unwrap(),
                    };
                    let patch = |current: &Value| {
                        Ok::<Value, RegistryError>(with(current.clone(), path, value))
                    };
                    let patched = writer.patch(at, &name, &patch).await;
                    assert!(
                        client_answer(&patched),
                        "patch {part:?} {what}: {patched:?}"
                    );
                }
                // Put it back for the next case.
                let mut original = current.clone();
                original["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .remove("resourceVersion");
                let restore = |_: &Value| Ok::<Value, RegistryError>(original.clone());
                registry
                    .privileged()
                    .patch(at, &name, &restore)
                    .await
                    .unwrap();
            }
        }
    }
}

/// Reads of kcp's kinds skip pruning (`kcp_apis::system::is_system`) because their writes
/// prune by the same compiled-in schema: pruning what a list reads removes nothing. Defaults
/// are still applied as objects are read: a new workspace's phase is stored by no one until
/// its controller writes the status.
#[tokio::test]
async fn system_kinds_are_pruned_as_written_and_defaulted_as_read() {
    let registry = registry().await;
    let workspaces = cluster_wide("root", system::workspaces());
    for name in ["a", "b", "c"] {
        let mut body = workspace(name);
        body["spec"] = json!({"undeclared": true, "type": {"name": "universal", "extra": 1}});
        registry.create(workspaces, body).await.unwrap();
    }
    let listed = registry
        .list(workspaces, ListOptions::default())
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 3);
    let schema = system::workspaces().custom().unwrap().schema().unwrap();
    for object in &listed.items {
        let mut pruned_again = object.clone();
        assert_eq!(
            kcp_apimachinery::schema::prune(&schema, &mut pruned_again),
            Vec::<String>::new(),
            "{object}"
        );
        assert_eq!(&pruned_again, object);
        assert_eq!(object["status"]["phase"], "Scheduling", "{object}");
    }
}
