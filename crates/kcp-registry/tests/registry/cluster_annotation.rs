//! Every object the registry answers carries `kcp.io/cluster` with the logical cluster its key
//! names; the annotation is never stored, so a client sending it (or a wrong one) changes
//! nothing.

use std::sync::Arc;

use kcp_registry::{DeleteOutcome, ListOptions, Registry};
use kcp_storage::{MemoryStorage, Storage};
use serde_json::json;

use crate::support::{configmaps, core};

#[tokio::test]
async fn every_answer_names_the_cluster_and_storage_never_keeps_it() {
    let storage = Arc::new(MemoryStorage::new());
    let registry = Registry::new(storage.clone());
    for cluster in ["a", "b"] {
        registry.ensure_namespace(cluster, "default").await.unwrap();
    }
    let created = registry
        .create(
            configmaps("a", "default"),
            json!({"metadata": {"name": "cm", "annotations": {"kcp.io/cluster": "b"}}}),
        )
        .await
        .unwrap();
    assert_eq!(created["metadata"]["annotations"]["kcp.io/cluster"], "a");
    let stored = storage
        .get(b"/registry/core/configmaps/a/default/cm", 0)
        .await
        .unwrap()
        .kv
        .unwrap();
    let stored: serde_json::Value = serde_json::from_slice(&stored.value).unwrap();
    assert!(stored["metadata"].get("annotations").is_none(), "{stored}");

    let got = registry
        .get(configmaps("a", "default"), "cm")
        .await
        .unwrap();
    assert_eq!(got["metadata"]["annotations"]["kcp.io/cluster"], "a");
    let updated = registry
        .update(configmaps("a", "default"), "cm", got)
        .await
        .unwrap();
    assert_eq!(updated["metadata"]["annotations"]["kcp.io/cluster"], "a");
    let listed = registry
        .list(configmaps("a", "default"), ListOptions::default())
        .await
        .unwrap();
    assert_eq!(
        listed.items[0]["metadata"]["annotations"]["kcp.io/cluster"],
        "a"
    );
    let all = registry
        .list_all_clusters(
            core("configmaps"),
            &(Box::new(|_: &serde_json::Value| true) as kcp_registry::Filter),
        )
        .await
        .unwrap()
        .0;
    assert_eq!(all.len(), 1);
    assert_eq!(
        all[0].object["metadata"]["annotations"]["kcp.io/cluster"],
        "a"
    );
    match registry
        .delete(configmaps("a", "default"), "cm")
        .await
        .unwrap()
    {
        DeleteOutcome::Deleted(last) => {
            assert_eq!(last["metadata"]["annotations"]["kcp.io/cluster"], "a")
        }
        other => panic!("{other:?}"),
    }
}
