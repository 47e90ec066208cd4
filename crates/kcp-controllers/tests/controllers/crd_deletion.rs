//! Deleting CRDs on the in-memory store: the first delete starts termination, the CRD
//! controller deletes the CRD's custom resources in its logical cluster only, waits for their
//! finalizers, then removes the CRD; terminating namespaces lose their custom resources too.
//! None of it needs the CRD's conversion webhook: custom resources are deleted as stored.

use std::sync::Arc;

use futures::future::BoxFuture;
use kcp_apis::builtin::{Resource, ResourceRef};
use kcp_apis::custom::Webhook;
use kcp_controllers::Controllers;
use kcp_registry::custom::{CLEANUP_FINALIZER, WebhookConverter};
use kcp_registry::{DeleteOutcome, ListOptions, Registry, RegistryError, Target};
use kcp_storage::MemoryStorage;
use serde_json::{Value, json};

use kcp_testing::wait::until_async;

use crate::support::{builtin, namespaced, namespaces};

fn crds(cluster: &str) -> Target<'_> {
    Target {
        cluster,
        resource: builtin("apiextensions.k8s.io", "customresourcedefinitions"),
        namespace: None,
    }
}

fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            }],
        },
    })
}

fn widget(name: &str, finalizers: &[&str]) -> Value {
    json!({
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "finalizers": finalizers},
    })
}

/// The widgets resource of `cluster`, once its CRD is Established.
async fn widgets(registry: &Registry, cluster: &str) -> ResourceRef {
    until_async("widgets are served", async || {
        registry
            .resolve(cluster, "example.com", "v1", "widgets")
            .await
    })
    .await
}

async fn widget_names(registry: &Registry, cluster: &str, resource: &Resource) -> Vec<String> {
    let everywhere = Target {
        cluster,
        resource,
        namespace: None,
    };
    let listed = registry
        .list(everywhere, ListOptions::default())
        .await
        .unwrap();
    listed
        .items
        .iter()
        .map(|w| {
            format!(
                "{}/{}",
                w["metadata"]["namespace"].as_str().unwrap(),
                w["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect()
}

fn terminating(crd: &Value) -> (String, String) {
    let condition = crd["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Terminating"))
        .cloned()
        .unwrap_or_default();
    (
        condition["status"].as_str().unwrap_or_default().to_string(),
        condition["reason"].as_str().unwrap_or_default().to_string(),
    )
}

async fn setup(registry: &Registry, cluster: &str, spaces: &[&str]) -> ResourceRef {
    registry.create(crds(cluster), widget_crd()).await.unwrap();
    for space in spaces {
        registry
            .create(namespaces(cluster), json!({"metadata": {"name": space}}))
            .await
            .unwrap();
    }
    widgets(registry, cluster).await
}

#[tokio::test]
async fn deleting_a_crd_deletes_its_resources_in_its_cluster_only() {
    let registry = Registry::new(Arc::new(MemoryStorage::new()));
    let controllers = Controllers::start(registry.clone());
    let (doomed, kept) = ("root:doomed", "root:kept");
    let resource = setup(&registry, doomed, &["a", "b"]).await;
    let kept_resource = setup(&registry, kept, &["a"]).await;
    for (space, name, finalizers) in [
        ("a", "one", &[][..]),
        ("a", "two", &[][..]),
        ("b", "held", &["example.com/hold"][..]),
    ] {
        registry
            .create(
                namespaced(doomed, &resource, space),
                widget(name, finalizers),
            )
            .await
            .unwrap();
    }
    registry
        .create(namespaced(kept, &kept_resource, "a"), widget("one", &[]))
        .await
        .unwrap();

    let DeleteOutcome::Pending(crd) = registry
        .delete(crds(doomed), "widgets.example.com")
        .await
        .unwrap()
    else {
        panic!("the first delete of a CRD only starts its termination");
    };
    assert!(crd["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(crd["metadata"]["finalizers"], json!([CLEANUP_FINALIZER]));
    assert_eq!(
        terminating(&crd),
        ("True".into(), "InstanceDeletionPending".into())
    );
    let refused = registry
        .create(namespaced(doomed, &resource, "a"), widget("late", &[]))
        .await;
    assert!(
        matches!(&refused, Err(RegistryError::MethodNotAllowed(message)) if message == "create not allowed while custom resource definition is terminating"),
        "{refused:?}"
    );

    until_async("only the held widget is left", async || {
        widget_names(&registry, doomed, &resource).await == ["b/held"]
    })
    .await;
    let crd = registry
        .get(crds(doomed), "widgets.example.com")
        .await
        .unwrap();
    assert_eq!(
        terminating(&crd),
        ("True".into(), "InstanceDeletionInProgress".into())
    );
    let held = registry
        .get(namespaced(doomed, &resource, "b"), "held")
        .await
        .unwrap();
    assert!(held["metadata"]["deletionTimestamp"].is_string());

    registry
        .patch(
            namespaced(doomed, &resource, "b"),
            "held",
            &|current: &Value| {
                let mut next = current.clone();
                next["metadata"]["finalizers"] = json!([]);
                Ok(next)
            },
        )
        .await
        .unwrap();
    until_async("the CRD is gone", async || {
        matches!(
            registry.get(crds(doomed), "widgets.example.com").await,
            Err(RegistryError::NotFound { .. })
        )
    })
    .await;
    assert!(
        registry
            .resolve(doomed, "example.com", "v1", "widgets")
            .await
            .is_none()
    );
    assert!(registry.custom_resources(doomed).is_empty());

    // The same CRD in another cluster keeps its resources.
    assert_eq!(
        widget_names(&registry, kept, &kept_resource).await,
        ["a/one"]
    );
    let other = registry
        .get(crds(kept), "widgets.example.com")
        .await
        .unwrap();
    assert!(other["metadata"].get("deletionTimestamp").is_none());

    // Created again, the CRD starts empty.
    let resource = setup(&registry, doomed, &[]).await;
    assert!(widget_names(&registry, doomed, &resource).await.is_empty());
    controllers.shutdown().await;
}

#[tokio::test]
async fn terminating_namespaces_lose_their_custom_resources() {
    let registry = Registry::new(Arc::new(MemoryStorage::new()));
    let controllers = Controllers::start(registry.clone());
    let cluster = "root:ns";
    let resource = setup(&registry, cluster, &["doomed", "kept"]).await;
    for space in ["doomed", "kept"] {
        registry
            .create(namespaced(cluster, &resource, space), widget("w", &[]))
            .await
            .unwrap();
    }
    registry
        .delete(namespaces(cluster), "doomed")
        .await
        .unwrap();
    until_async("the namespace is gone", async || {
        matches!(
            registry.get(namespaces(cluster), "doomed").await,
            Err(RegistryError::NotFound { .. })
        )
    })
    .await;
    assert_eq!(
        widget_names(&registry, cluster, &resource).await,
        ["kept/w"]
    );
    controllers.shutdown().await;
}

/// A conversion webhook nobody can reach.
struct Unreachable;

impl WebhookConverter for Unreachable {
    fn convert<'a>(
        &'a self,
        _webhook: &'a Webhook,
        _objects: Vec<Value>,
        _desired: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Value>, String>> {
        Box::pin(async { Err("dial tcp 127.0.0.1:1: connect: connection refused".to_string()) })
    }
}

/// Widgets served at v2 and v1 (listed first and so found first), stored at v1, converted by a
/// webhook.
fn converted_widget_crd() -> Value {
    let mut crd = widget_crd();
    let v1 = crd["spec"]["versions"][0].clone();
    let mut v2 = v1.clone();
    v2["name"] = json!("v2");
    v2["storage"] = json!(false);
    crd["spec"]["versions"] = json!([v2, v1]);
    crd["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
        "clientConfig": {"url": "https://127.0.0.1:1/convert"},
        "conversionReviewVersions": ["v1"]}});
    crd
}

#[tokio::test]
async fn a_crd_whose_conversion_webhook_is_unreachable_goes_with_its_resources() {
    let registry =
        Registry::new(Arc::new(MemoryStorage::new())).with_webhook_converter(Arc::new(Unreachable));
    let controllers = Controllers::start(registry.clone());
    let cluster = "root:unreachable";
    registry
        .create(crds(cluster), converted_widget_crd())
        .await
        .unwrap();
    for space in ["a", "b"] {
        registry
            .create(namespaces(cluster), json!({"metadata": {"name": space}}))
            .await
            .unwrap();
    }
    let stored = widgets(&registry, cluster).await;
    for (space, name) in [("a", "one"), ("b", "two")] {
        registry
            .create(namespaced(cluster, &stored, space), widget(name, &[]))
            .await
            .unwrap();
    }
    let mut served = None;
    until_async("v2 is served", async || {
        served = registry
            .resolve(cluster, "example.com", "v2", "widgets")
            .await;
        served.is_some()
    })
    .await;
    let served = served.unwrap();
    let unreadable = registry.get(namespaced(cluster, &served, "a"), "one").await;
    assert!(
        matches!(&unreadable, Err(RegistryError::Internal(m)) if m.contains("connection refused")),
        "{unreadable:?}"
    );

    registry.delete(namespaces(cluster), "b").await.unwrap();
    until_async("namespace b is gone", async || {
        matches!(
            registry.get(namespaces(cluster), "b").await,
            Err(RegistryError::NotFound { .. })
        )
    })
    .await;
    assert_eq!(registry.count_all(&stored).await.unwrap(), 1);

    registry
        .delete(crds(cluster), "widgets.example.com")
        .await
        .unwrap();
    until_async("the CRD is gone", async || {
        matches!(
            registry.get(crds(cluster), "widgets.example.com").await,
            Err(RegistryError::NotFound { .. })
        )
    })
    .await;
    assert_eq!(registry.count_all(&stored).await.unwrap(), 0);
    controllers.shutdown().await;
}
