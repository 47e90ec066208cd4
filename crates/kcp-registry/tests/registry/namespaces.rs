//! Namespace lifecycle, subresources, collection deletes and cross-cluster reads on the
//! in-memory store.

use std::sync::Arc;

use futures::StreamExt;
use kcp_registry::{
    DeleteOptions, DeleteOutcome, Filter, Propagation, Registry, RegistryError, Target, Watched,
};
use kcp_storage::MemoryStorage;
use serde_json::{Value, json};

use crate::support::{cluster_wide, configmaps, core};

fn namespaces(cluster: &str) -> Target<'_> {
    cluster_wide(cluster, core("namespaces"))
}

fn registry() -> Registry {
    Registry::new(Arc::new(MemoryStorage::new()))
}

async fn create_namespace(registry: &Registry, cluster: &str, name: &str) -> Value {
    registry
        .create(namespaces(cluster), json!({"metadata": {"name": name}}))
        .await
        .unwrap()
}

async fn create_configmap(registry: &Registry, namespace: &str, body: Value) -> Value {
    registry
        .create(configmaps("root", namespace), body)
        .await
        .unwrap()
}

#[tokio::test]
async fn namespaces_start_active_and_terminate_on_delete() {
    let registry = registry();
    let created = create_namespace(&registry, "root", "ns").await;
    assert_eq!(created["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(created["status"]["phase"], "Active");

    let DeleteOutcome::Pending(deleting) = registry.delete(namespaces("root"), "ns").await.unwrap()
    else {
        panic!("a namespace with spec.finalizers is kept");
    };
    assert_eq!(deleting["status"]["phase"], "Terminating");
    assert!(deleting["metadata"]["deletionTimestamp"].is_string());
    // A second delete answers the namespace unchanged.
    let again = registry.delete(namespaces("root"), "ns").await.unwrap();
    assert_eq!(again, DeleteOutcome::Pending(deleting.clone()));

    let refused = registry
        .create(
            configmaps("root", "ns"),
            json!({"metadata": {"name": "late"}}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "configmaps \"late\" is forbidden: unable to create new content in namespace ns because it is being terminated"
    );
    let RegistryError::Forbidden { causes, .. } = refused else {
        panic!("403 Forbidden");
    };
    assert_eq!(causes[0].reason, "NamespaceTerminating");
    assert_eq!(causes[0].field, "metadata.namespace");

    // An update of the whole object keeps spec.finalizers and status.
    let mut edited = deleting.clone();
    edited["spec"] = json!({});
    edited["status"] = json!({"phase": "Active"});
    edited["metadata"]["labels"] = json!({"a": "b"});
    let updated = registry
        .update(namespaces("root"), "ns", edited.clone())
        .await
        .unwrap();
    assert_eq!(updated["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(updated["status"]["phase"], "Terminating");
    assert_eq!(updated["metadata"]["labels"]["a"], "b");

    // Finalizing in dry-run mode stores nothing; finalizing for real removes the namespace.
    let finalize = registry.subresource("finalize").unwrap();
    finalize
        .dry_run()
        .update(
            namespaces("root"),
            "ns",
            json!({"spec": {"finalizers": []}}),
        )
        .await
        .unwrap();
    registry.get(namespaces("root"), "ns").await.unwrap();
    finalize
        .update(
            namespaces("root"),
            "ns",
            json!({"spec": {"finalizers": []}}),
        )
        .await
        .unwrap();
    assert!(matches!(
        registry.get(namespaces("root"), "ns").await,
        Err(RegistryError::NotFound { .. })
    ));
}

#[tokio::test]
async fn metadata_finalizers_hold_a_finalized_namespace() {
    let registry = registry();
    registry
        .create(
            namespaces("root"),
            json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}),
        )
        .await
        .unwrap();
    registry.delete(namespaces("root"), "held").await.unwrap();
    let finalize = registry.subresource("finalize").unwrap();
    let finalized = finalize
        .update(namespaces("root"), "held", json!({"spec": {}}))
        .await
        .unwrap();
    assert_eq!(finalized["spec"], json!({}));
    let patched = registry
        .patch(namespaces("root"), "held", &|current: &Value| {
            let mut next = current.clone();
            next["metadata"]["finalizers"] = json!([]);
            Ok(next)
        })
        .await
        .unwrap();
    assert_eq!(patched["metadata"]["name"], "held");
    assert!(registry.get(namespaces("root"), "held").await.is_err());
}

/// Every namespace is labelled with its name, as Kubernetes does: its creator owns the label in
/// managedFields, a generated name gets it too, and updates and patches cannot change or drop it.
#[tokio::test]
async fn namespaces_carry_their_name_as_a_label() {
    const LABEL: &str = "kubernetes.io/metadata.name";
    let registry = registry().managed_by("kubectl-create");
    let created = registry
        .create(
            namespaces("root"),
            json!({"metadata": {"name": "named", "labels": {LABEL: "other", "team": "a"}}}),
        )
        .await
        .unwrap();
    assert_eq!(
        created["metadata"]["labels"],
        json!({LABEL: "named", "team": "a"})
    );
    let owners = &created["metadata"]["managedFields"];
    assert_eq!(owners[0]["manager"], "kubectl-create");
    assert!(
        owners[0]["fieldsV1"]["f:metadata"]["f:labels"]
            .get(format!("f:{LABEL}"))
            .is_some(),
        "the creator does not own the label: {owners}"
    );

    let generated = registry
        .create(
            namespaces("root"),
            json!({"metadata": {"generateName": "gen-"}}),
        )
        .await
        .unwrap();
    let name = generated["metadata"]["name"].as_str().unwrap();
    assert_eq!(generated["metadata"]["labels"][LABEL], name);

    let mut unlabelled = created.clone();
    unlabelled["metadata"]["labels"] = json!({"team": "b"});
    let updated = registry
        .update(namespaces("root"), "named", unlabelled)
        .await
        .unwrap();
    assert_eq!(
        updated["metadata"]["labels"],
        json!({LABEL: "named", "team": "b"})
    );

    let relabel = |current: &Value| {
        let mut next = current.clone();
        next["metadata"]["labels"][LABEL] = json!("changed");
        Ok(next)
    };
    let patched = registry
        .patch(namespaces("root"), "named", &relabel)
        .await
        .unwrap();
    assert_eq!(patched["metadata"]["labels"][LABEL], "named");
}

#[tokio::test]
async fn immortal_namespaces_cannot_be_deleted() {
    let registry = registry();
    registry.ensure_namespace("root", "default").await.unwrap();
    let error = registry
        .delete(namespaces("root"), "default")
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "namespaces \"default\" is forbidden: this namespace may not be deleted"
    );
}

#[tokio::test]
async fn the_status_subresource_changes_only_status() {
    let registry = registry();
    let created = create_namespace(&registry, "root", "st").await;
    let status = registry.subresource("status").unwrap();
    let mut body = created.clone();
    body["status"] = json!({"phase": "Active", "conditions": [{"type": "X", "status": "True"}]});
    body["metadata"]["labels"] = json!({"ignored": "yes"});
    body["spec"] = json!({});
    let updated = status.update(namespaces("root"), "st", body).await.unwrap();
    assert_eq!(updated["status"]["conditions"][0]["type"], "X");
    assert_eq!(updated["spec"]["finalizers"], json!(["kubernetes"]));
    assert_eq!(
        updated["metadata"]["labels"],
        json!({"kubernetes.io/metadata.name": "st"})
    );

    // A stale resourceVersion still conflicts.
    let mut stale = created;
    stale["status"] = json!({});
    assert!(matches!(
        status.update(namespaces("root"), "st", stale).await,
        Err(RegistryError::Conflict { .. })
    ));
    assert!(registry.subresource("scale").is_none());
}

fn label_filter(key: &'static str, value: &'static str) -> Filter {
    Box::new(move |object: &Value| object["metadata"]["labels"][key] == value)
}

#[tokio::test]
async fn delete_collection_honours_selectors_finalizers_and_dry_run() {
    let registry = registry();
    create_namespace(&registry, "root", "c").await;
    create_namespace(&registry, "root", "other").await;
    for (name, labels, finalizers) in [
        ("a", json!({"x": "1"}), json!([])),
        ("b", json!({"x": "1"}), json!(["example.com/hold"])),
        ("c", json!({"x": "2"}), json!([])),
    ] {
        create_configmap(
            &registry,
            "c",
            json!({"metadata": {"name": name, "labels": labels, "finalizers": finalizers}}),
        )
        .await;
    }
    create_configmap(
        &registry,
        "other",
        json!({"metadata": {"name": "a", "labels": {"x": "1"}}}),
    )
    .await;

    let dry = registry
        .dry_run()
        .delete_collection(
            configmaps("root", "c"),
            Some(label_filter("x", "1")),
            &Default::default(),
        )
        .await
        .unwrap();
    assert_eq!(dry.items.len(), 2);
    let names = |registry: &Registry, ns: &'static str| {
        let registry = registry.clone();
        async move {
            registry
                .list(configmaps("root", ns), Default::default())
                .await
                .unwrap()
                .items
                .iter()
                .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(names(&registry, "c").await, ["a", "b", "c"]);

    let deleted = registry
        .delete_collection(
            configmaps("root", "c"),
            Some(label_filter("x", "1")),
            &Default::default(),
        )
        .await
        .unwrap();
    let listed: Vec<_> = deleted
        .items
        .iter()
        .map(|i| &i["metadata"]["name"])
        .collect();
    assert_eq!(listed, [&json!("a"), &json!("b")]);
    assert_eq!(deleted.held.objects, 1);
    assert_eq!(names(&registry, "c").await, ["b", "c"]);
    assert_eq!(names(&registry, "other").await, ["a"]);
    let held = registry.get(configmaps("root", "c"), "b").await.unwrap();
    assert!(held["metadata"]["deletionTimestamp"].is_string());

    let everything = registry
        .delete_collection(configmaps("root", "c"), None, &Default::default())
        .await
        .unwrap();
    assert_eq!((everything.items.len(), everything.held.objects), (2, 1));
    assert_eq!(names(&registry, "c").await, ["b"]);
}

#[tokio::test]
async fn emptying_a_collection_pass_after_pass_writes_only_what_a_delete_changes() {
    let registry = registry();
    create_namespace(&registry, "root", "e").await;
    for (name, finalizers) in [
        ("plain", json!([])),
        ("held", json!(["example.com/hold"])),
        ("orphaning", json!(["orphan", "example.com/hold"])),
    ] {
        create_configmap(
            &registry,
            "e",
            json!({"metadata": {"name": name, "finalizers": finalizers}}),
        )
        .await;
    }
    // Already being deleted, its dependents to be orphaned first.
    registry
        .delete_with(
            configmaps("root", "e"),
            "orphaning",
            &DeleteOptions::propagating(Propagation::Orphan),
        )
        .await
        .unwrap();
    let background = DeleteOptions::propagating(Propagation::Background);
    let held = registry
        .delete_content(configmaps("root", "e"), &background)
        .await
        .unwrap();
    assert_eq!(held.objects, 2);
    assert_eq!(
        held.finalizers.into_iter().collect::<Vec<_>>(),
        [("example.com/hold".to_string(), 2)]
    );
    let read = |name: &'static str| {
        let registry = registry.clone();
        async move { registry.get(configmaps("root", "e"), name).await }
    };
    assert!(matches!(
        read("plain").await,
        Err(RegistryError::NotFound { .. })
    ));
    let marked = read("held").await.unwrap();
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    // In the background: the delete cleared the orphan finalizer of the one already deleting.
    let orphaning = read("orphaning").await.unwrap();
    assert_eq!(
        orphaning["metadata"]["finalizers"],
        json!(["example.com/hold"])
    );

    // The next pass finds both held, as a collection delete does, and writes nothing.
    let revision = registry.current_revision().await.unwrap();
    let again = registry
        .delete_content(configmaps("root", "e"), &background)
        .await
        .unwrap();
    let collection = registry
        .delete_collection(configmaps("root", "e"), None, &background)
        .await
        .unwrap();
    assert_eq!(again, collection.held);
    assert_eq!(again.objects, 2);
    assert_eq!(registry.current_revision().await.unwrap(), revision);
    assert_eq!(read("held").await.unwrap(), marked);

    // Without a policy the object's own finalizers decide; with Orphan the delete adds one.
    let orphan = DeleteOptions::propagating(Propagation::Orphan);
    registry
        .delete_content(configmaps("root", "e"), &orphan)
        .await
        .unwrap();
    let finalizers = |object: Value| object["metadata"]["finalizers"].clone();
    assert_eq!(
        finalizers(read("held").await.unwrap()),
        json!(["example.com/hold", "orphan"])
    );
}

#[tokio::test]
async fn cross_cluster_lists_and_watches_name_the_cluster() {
    let registry = registry();
    create_namespace(&registry, "root", "a").await;
    create_namespace(&registry, "root:org", "b").await;
    let all: Filter = Box::new(|_| true);
    let (objects, revision) = registry
        .list_all_clusters(core("namespaces"), &all)
        .await
        .unwrap();
    let seen: Vec<_> = objects
        .iter()
        .map(|o| {
            (
                o.cluster.as_str(),
                o.object["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(seen, [("root", "a"), ("root:org", "b")]);

    let mut events = Box::pin(
        registry
            .watch_all_clusters(core("namespaces"), revision)
            .await
            .unwrap(),
    );
    create_namespace(&registry, "root:org:team", "c").await;
    registry.delete(namespaces("root"), "a").await.unwrap();
    let first = events.next().await.unwrap().unwrap();
    assert_eq!(
        (first.cluster.as_str(), first.event.kind),
        ("root:org:team", "ADDED")
    );
    let second = events.next().await.unwrap().unwrap();
    assert_eq!(
        (second.cluster.as_str(), second.event.kind),
        ("root", "MODIFIED")
    );
    assert_eq!(second.event.object["status"]["phase"], "Terminating");

    // A watch of deletions only: the create and the terminating update above pass it by; the
    // namespace going (its finalizer removed) is the one event, with its last state.
    let mut deletions = Box::pin(
        registry
            .watch_all_clusters_of(core("namespaces"), revision, Watched::Deletions)
            .await
            .unwrap(),
    );
    registry.delete(namespaces("root:org"), "b").await.unwrap();
    let finalize = registry.subresource("finalize").unwrap();
    for (cluster, name) in [("root", "a"), ("root:org", "b")] {
        finalize
            .update(
                namespaces(cluster),
                name,
                json!({"spec": {"finalizers": []}}),
            )
            .await
            .unwrap();
    }
    let gone = deletions.next().await.unwrap().unwrap();
    assert_eq!(
        (gone.cluster.as_str(), gone.event.kind),
        ("root", "DELETED")
    );
    assert_eq!(gone.event.object["metadata"]["name"], "a");
    let gone = deletions.next().await.unwrap().unwrap();
    assert_eq!(
        (gone.cluster.as_str(), gone.event.kind),
        ("root:org", "DELETED")
    );
}
