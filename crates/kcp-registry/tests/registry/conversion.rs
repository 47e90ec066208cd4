//! Custom resources with webhook conversion on the in-memory store, with a converter written
//! here: objects are stored at the storage version and served at the requested one; a failing
//! webhook makes reads and writes at other versions fail with a 500 and stores nothing; answers
//! that are not the same object are refused.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use kcp_apis::builtin::{Resource, ResourceRef};
use kcp_apis::custom::Webhook;
use kcp_registry::custom::WebhookConverter;
use kcp_registry::{Registry, RegistryError, Target};
use kcp_storage::MemoryStorage;
use serde_json::{Value, json};

use crate::support::{cluster_wide, crds, establish_crd, namespaced};

/// Moves `spec.size` (v1) to and from `spec.dimensions.size` (v2); can be told to fail or to
/// rename what it converts.
#[derive(Default)]
struct SizeConverter {
    calls: AtomicUsize,
    down: AtomicBool,
    rename: AtomicBool,
    desired: Mutex<Vec<String>>,
}

impl WebhookConverter for SizeConverter {
    fn convert<'a>(
        &'a self,
        _webhook: &'a Webhook,
        objects: Vec<Value>,
        desired: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Value>, String>> {
        Box::pin(async move {
            self.calls.fetch_add(1, Ordering::SeqCst);
            self.desired.lock().unwrap().push(desired.to_string());
            if self.down.load(Ordering::SeqCst) {
                return Err("connection refused".into());
            }
            Ok(objects
                .into_iter()
                .map(|mut object| {
                    let spec = object["spec"].as_object_mut().unwrap();
                    if desired == "example.com/v2" {
                        let size = spec.remove("size").unwrap_or_default();
                        spec.insert("dimensions".into(), json!({"size": size}));
                    } else {
                        let dimensions = spec.remove("dimensions").unwrap_or_default();
                        spec.insert("size".into(), dimensions["size"].clone());
                    }
                    object["apiVersion"] = json!(desired);
                    object["metadata"]["generation"] = json!(99);
                    if self.rename.load(Ordering::SeqCst) {
                        object["metadata"]["name"] = json!("other");
                    }
                    object
                })
                .collect())
        })
    }
}

async fn setup() -> (Registry, Arc<SizeConverter>) {
    let converter = Arc::new(SizeConverter::default());
    let registry =
        Registry::new(Arc::new(MemoryStorage::new())).with_webhook_converter(converter.clone());
    registry.ensure_namespace("root", "default").await.unwrap();
    let schema =
        |spec: Value| json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}});
    registry
        .create(
            cluster_wide("root", crds()),
            json!({"metadata": {"name": "widgets.example.com"}, "spec": {
                "group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "conversion": {"strategy": "Webhook", "webhook": {
                    "clientConfig": {"url": "https://127.0.0.1:1/convert"},
                    "conversionReviewVersions": ["v1"]}},
                "versions": [
                    {"name": "v1", "served": true, "storage": true,
                     "schema": schema(json!({"type": "object", "properties": {"size": {"type": "integer"}}}))},
                    {"name": "v2", "served": true, "storage": false,
                     "schema": schema(json!({"type": "object", "properties": {"dimensions": {
                        "type": "object", "properties": {"size": {"type": "integer"}}}}}))}
                ]}}),
        )
        .await
        .unwrap();
    establish_crd(&registry, "root", "widgets.example.com").await;
    (registry, converter)
}

async fn widgets(registry: &Registry, version: &str) -> ResourceRef {
    registry
        .resolve("root", "example.com", version, "widgets")
        .await
        .unwrap()
}

fn at(resource: &Resource) -> Target<'_> {
    namespaced("root", resource, "default")
}

#[tokio::test]
async fn objects_are_stored_at_the_storage_version_and_served_at_any() {
    let (registry, converter) = setup().await;
    let (r1, r2) = (
        widgets(&registry, "v1").await,
        widgets(&registry, "v2").await,
    );
    let (v1, v2) = (at(&r1), at(&r2));
    registry
        .create(
            v2,
            json!({"metadata": {"name": "w"}, "spec": {"dimensions": {"size": 3}}}),
        )
        .await
        .unwrap();
    assert_eq!(
        converter.desired.lock().unwrap().as_slice(),
        ["example.com/v1"]
    );
    let stored = registry.get(v1, "w").await.unwrap();
    assert_eq!(stored["apiVersion"], "example.com/v1");
    assert_eq!(stored["spec"], json!({"size": 3}));
    assert_eq!(
        stored["metadata"]["generation"], 1,
        "the webhook cannot change metadata but labels and annotations"
    );
    let calls = converter.calls.load(Ordering::SeqCst);
    let served = registry.get(v2, "w").await.unwrap();
    assert_eq!(served["apiVersion"], "example.com/v2");
    assert_eq!(served["spec"], json!({"dimensions": {"size": 3}}));
    assert_eq!(converter.calls.load(Ordering::SeqCst), calls + 1);
}

#[tokio::test]
async fn a_failing_webhook_fails_reads_and_writes_and_stores_nothing() {
    let (registry, converter) = setup().await;
    let (r1, r2) = (
        widgets(&registry, "v1").await,
        widgets(&registry, "v2").await,
    );
    let (v1, v2) = (at(&r1), at(&r2));
    registry
        .create(v1, json!({"metadata": {"name": "w"}, "spec": {"size": 3}}))
        .await
        .unwrap();
    converter.down.store(true, Ordering::SeqCst);
    let message = |error: RegistryError| match error {
        RegistryError::Internal(message) => message,
        other => panic!("expected a 500, got {other:?}"),
    };
    assert_eq!(
        message(registry.get(v2, "w").await.unwrap_err()),
        "conversion webhook for example.com/v1, Kind=Widget failed: connection refused"
    );
    let created = registry
        .create(
            v2,
            json!({"metadata": {"name": "x"}, "spec": {"dimensions": {"size": 1}}}),
        )
        .await
        .unwrap_err();
    assert_eq!(
        message(created),
        "conversion webhook for example.com/v2, Kind=Widget failed: connection refused"
    );
    assert!(registry.get(v1, "x").await.is_err(), "nothing was stored");
    let patched = registry
        .patch(v2, "w", &|_: &Value| Ok(json!({})))
        .await
        .unwrap_err();
    assert!(message(patched).starts_with("conversion webhook for"));
    assert_eq!(
        registry.get(v1, "w").await.unwrap()["spec"],
        json!({"size": 3})
    );

    converter.down.store(false, Ordering::SeqCst);
    converter.rename.store(true, Ordering::SeqCst);
    assert_eq!(
        message(registry.get(v2, "w").await.unwrap_err()),
        "conversion webhook for example.com/v1, Kind=Widget returned invalid object: must have the same name: w != other"
    );
}
