//! The namespace deletion controller on the in-memory store, across logical clusters.

use std::sync::Arc;

use kcp_controllers::Controllers;
use kcp_registry::{Registry, RegistryError, Target};
use kcp_storage::MemoryStorage;
use serde_json::{Value, json};

use kcp_testing::wait::until_async;

use crate::support::{builtin, namespaced, namespaces};

/// Objects of the built-in `group`/`name` in `namespace` of `cluster`.
fn inside<'a>(cluster: &'a str, group: &str, name: &str, namespace: &'a str) -> Target<'a> {
    namespaced(cluster, builtin(group, name), namespace)
}

async fn exists(registry: &Registry, target: Target<'_>, name: &str) -> bool {
    match registry.get(target, name).await {
        Ok(_) => true,
        Err(RegistryError::NotFound { .. }) => false,
        Err(other) => panic!("{other}"),
    }
}

#[tokio::test]
async fn terminating_namespaces_are_emptied_and_removed_in_every_cluster() {
    let registry = Registry::new(Arc::new(MemoryStorage::new()));
    for cluster in ["root", "root:org"] {
        registry
            .create(namespaces(cluster), json!({"metadata": {"name": "doomed"}}))
            .await
            .unwrap();
        registry
            .create(namespaces(cluster), json!({"metadata": {"name": "kept"}}))
            .await
            .unwrap();
        for ns in ["doomed", "kept"] {
            registry
                .create(
                    inside(cluster, "", "configmaps", ns),
                    json!({"metadata": {"name": "cm"}}),
                )
                .await
                .unwrap();
            registry
                .create(
                    inside(cluster, "rbac.authorization.k8s.io", "roles", ns),
                    json!({"metadata": {"name": "r"}}),
                )
                .await
                .unwrap();
        }
    }
    // Held by a finalizer in root:org.
    registry
        .create(
            inside("root:org", "", "secrets", "doomed"),
            json!({"metadata": {"name": "held", "finalizers": ["example.com/hold"]}}),
        )
        .await
        .unwrap();
    // root's namespace is deleted before the controller starts (found by the list), root:org's
    // after (found by the watch).
    registry.delete(namespaces("root"), "doomed").await.unwrap();
    let controllers = Controllers::start(registry.clone());
    registry
        .delete(namespaces("root:org"), "doomed")
        .await
        .unwrap();

    until_async("root's namespace is gone", async || {
        !exists(&registry, namespaces("root"), "doomed").await
    })
    .await;
    until_async("root:org's content is deleted", async || {
        !exists(
            &registry,
            inside("root:org", "", "configmaps", "doomed"),
            "cm",
        )
        .await
    })
    .await;
    assert!(
        !exists(
            &registry,
            inside("root", "rbac.authorization.k8s.io", "roles", "doomed"),
            "r"
        )
        .await
    );
    let held = registry
        .get(inside("root:org", "", "secrets", "doomed"), "held")
        .await
        .unwrap();
    assert!(held["metadata"]["deletionTimestamp"].is_string());
    let namespace = registry
        .get(namespaces("root:org"), "doomed")
        .await
        .unwrap();
    assert_eq!(namespace["status"]["phase"], "Terminating");

    registry
        .patch(
            inside("root:org", "", "secrets", "doomed"),
            "held",
            &|current: &Value| {
                let mut next = current.clone();
                next["metadata"]["finalizers"] = json!([]);
                Ok(next)
            },
        )
        .await
        .unwrap();
    until_async("root:org's namespace is gone", async || {
        !exists(&registry, namespaces("root:org"), "doomed").await
    })
    .await;
    for cluster in ["root", "root:org"] {
        assert!(exists(&registry, namespaces(cluster), "kept").await);
        assert!(exists(&registry, inside(cluster, "", "configmaps", "kept"), "cm").await);
    }
    controllers.shutdown().await;
}
