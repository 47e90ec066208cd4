//! The nesting limit: no write stores an object deeper than `MAX_DEPTH`, and objects an older
//! server stored deeper still read, list, watch, can be replaced and deleted.

use std::sync::Arc;

use futures::StreamExt;
use kcp_apimachinery::json::{MAX_DEPTH, MAX_READ_DEPTH, depth};
use kcp_registry::{DeleteOutcome, ListOptions, Registry, RegistryError, Target};
use kcp_storage::keys::ResourceKeys;
use kcp_storage::{MemoryStorage, Storage};
use serde_json::{Value, json};

use crate::support;

fn configmaps() -> Target<'static> {
    support::configmaps("root", "default")
}

async fn registry() -> (Registry, Arc<MemoryStorage>) {
    let storage = Arc::new(MemoryStorage::new());
    let registry = Registry::new(storage.clone());
    registry.ensure_namespace("root", "default").await.unwrap();
    (registry, storage)
}

/// A configmap whose whole depth is `levels`, the nesting in a managedFields entry's
/// `fieldsV1` (configmap, metadata, managedFields, the entry, fieldsV1: five levels).
fn configmap(name: &str, levels: usize) -> Value {
    let mut fields = json!({});
    for _ in 0..levels - 5 {
        fields = json!({ "f:x": fields });
    }
    json!({
        "metadata": {
            "name": name,
            "managedFields": [{"manager": "m", "operation": "Update", "apiVersion": "v1",
                               "fieldsType": "FieldsV1", "fieldsV1": fields}],
        },
        "data": {"k": "v"},
    })
}

fn too_deep(error: RegistryError) {
    match error {
        RegistryError::BadRequest(message) => assert_eq!(
            message,
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: exceeded max depth of 100"
        ),
        other => panic!("expected a 400, got {other:?}"),
    }
}

#[tokio::test]
async fn writes_deeper_than_the_limit_are_refused_and_the_limit_is_exact() {
    let (registry, _) = registry().await;
    let created = registry
        .create(configmaps(), configmap("at-limit", MAX_DEPTH))
        .await
        .unwrap();
    assert_eq!(depth(&created), MAX_DEPTH);
    too_deep(
        registry
            .create(configmaps(), configmap("over", MAX_DEPTH + 1))
            .await
            .unwrap_err(),
    );
    too_deep(
        registry
            .dry_run()
            .create(configmaps(), configmap("over", MAX_DEPTH + 1))
            .await
            .unwrap_err(),
    );
    too_deep(
        registry
            .update(
                configmaps(),
                "at-limit",
                configmap("at-limit", MAX_DEPTH + 1),
            )
            .await
            .unwrap_err(),
    );
    too_deep(
        registry
            .privileged()
            .update(
                configmaps(),
                "at-limit",
                configmap("at-limit", MAX_DEPTH + 1),
            )
            .await
            .unwrap_err(),
    );
    let deeper = configmap("at-limit", MAX_DEPTH + 1);
    too_deep(
        registry
            .patch(configmaps(), "at-limit", &|_| Ok(deeper.clone()))
            .await
            .unwrap_err(),
    );
    // Nothing of it was stored.
    let stored = registry.get(configmaps(), "at-limit").await.unwrap();
    assert_eq!(stored["metadata"]["uid"], created["metadata"]["uid"]);
    assert_eq!(depth(&stored), MAX_DEPTH);
    assert!(registry.get(configmaps(), "over").await.is_err());
}

/// The JSON text of a configmap whose managedFields entry's fieldsV1 nests `levels` objects (a
/// chain of `f:x` fields, which decodes as a field set), built as text: a `Value` that deep
/// could not even be dropped on a test thread.
fn legacy_text(name: &str, levels: usize) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}","namespace":"default","uid":"u-{name}","creationTimestamp":"2024-01-01T00:00:00Z","managedFields":[{{"manager":"m","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{open}{{}}{close}}}]}},"data":{{"k":"v"}}}}"#,
        open = r#"{"f:x":"#.repeat(levels),
        close = "}".repeat(levels),
    )
}

#[tokio::test]
async fn objects_stored_deeper_by_older_servers_read_list_watch_and_delete() {
    let (registry, storage) = registry().await;
    let keys = ResourceKeys::new("", "configmaps");
    let start = storage.current_revision().await.unwrap();
    let watch = registry.watch(configmaps(), start, None).await.unwrap();
    // 200 levels: read as stored. Several thousand: readable, the part below
    // MAX_READ_DEPTH as its JSON text.
    for (name, levels) in [("deep", 200), ("deeper", 5_000), ("deepest", 60_000)] {
        storage
            .create(
                &keys.object("root", Some("default"), name),
                legacy_text(name, levels).into(),
            )
            .await
            .unwrap();
    }

    let deep = registry.get(configmaps(), "deep").await.unwrap();
    assert_eq!(depth(&deep), 5 + 200);
    assert_eq!(deep["data"]["k"], "v");
    for name in ["deeper", "deepest"] {
        let object = registry.get(configmaps(), name).await.unwrap();
        assert_eq!(depth(&object), MAX_READ_DEPTH, "{name}");
        assert_eq!(object["metadata"]["name"], name);
    }

    let listed = registry
        .list(configmaps(), ListOptions::default())
        .await
        .unwrap();
    let names: Vec<_> = listed
        .items
        .iter()
        .map(|item| item["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["deep", "deeper", "deepest"]);

    let events: Vec<_> = watch.take(3).map(Result::unwrap).collect().await;
    assert!(events.iter().all(|event| event.kind == "ADDED"));
    assert!(events.iter().all(|event| !event.encoded.is_empty()));

    // An update that keeps the deep part is refused; one that drops it fixes the object.
    let mut kept = registry.get(configmaps(), "deep").await.unwrap();
    kept["data"]["k"] = json!("w");
    too_deep(
        registry
            .update(configmaps(), "deep", kept.clone())
            .await
            .unwrap_err(),
    );
    // Without managedFields in the request the stored ones stay; `[]` clears them.
    kept["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("managedFields");
    too_deep(
        registry
            .update(configmaps(), "deep", kept.clone())
            .await
            .unwrap_err(),
    );
    kept["metadata"]["managedFields"] = json!([]);
    let replaced = registry.update(configmaps(), "deep", kept).await.unwrap();
    assert_eq!(replaced["data"]["k"], "w");
    let mut shallower = registry.get(configmaps(), "deeper").await.unwrap();
    shallower["metadata"]["managedFields"] = json!([]);
    registry
        .update(configmaps(), "deeper", shallower)
        .await
        .unwrap();

    for name in ["deep", "deeper", "deepest"] {
        let outcome = registry.delete(configmaps(), name).await.unwrap();
        assert!(matches!(outcome, DeleteOutcome::Deleted(_)), "{name}");
    }
    let listed = registry
        .list(configmaps(), ListOptions::default())
        .await
        .unwrap();
    assert!(listed.items.is_empty());
}

#[tokio::test]
async fn deep_objects_with_finalizers_of_older_servers_can_still_be_deleted() {
    let (registry, storage) = registry().await;
    let keys = ResourceKeys::new("", "configmaps");
    let text = legacy_text("held", 200).replace(
        r#""uid":"u-held""#,
        r#""uid":"u-held","finalizers":["example.com/a","example.com/b"]"#,
    );
    storage
        .create(&keys.object("root", Some("default"), "held"), text.into())
        .await
        .unwrap();
    // Deleting marks it, as for any object with finalizers.
    let DeleteOutcome::Pending(marked) = registry.delete(configmaps(), "held").await.unwrap()
    else {
        panic!("finalizers hold the object");
    };
    assert!(marked["metadata"]["deletionTimestamp"].is_string());
    // Finalizers go one by one through updates that keep the deep part.
    let mut next = registry.get(configmaps(), "held").await.unwrap();
    next["metadata"]["finalizers"] = json!(["example.com/b"]);
    let updated = registry.update(configmaps(), "held", next).await.unwrap();
    assert_eq!(updated["metadata"]["finalizers"], json!(["example.com/b"]));
    // Anything else still has to make it shallow: here a label.
    let mut relabelled = registry.get(configmaps(), "held").await.unwrap();
    relabelled["metadata"]["labels"] = json!({"a": "b"});
    too_deep(
        registry
            .update(configmaps(), "held", relabelled)
            .await
            .unwrap_err(),
    );
    // The last finalizer removed, the object is gone.
    let mut last = registry.get(configmaps(), "held").await.unwrap();
    last["metadata"]["finalizers"] = json!([]);
    registry.update(configmaps(), "held", last).await.unwrap();
    assert!(matches!(
        registry.get(configmaps(), "held").await,
        Err(RegistryError::NotFound { .. })
    ));
}
