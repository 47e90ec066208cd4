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

/// A JSON GET served from the stored bytes is the object a decoding GET answers, in
/// Kubernetes' key order, byte for byte.
#[tokio::test]
async fn json_gets_from_stored_bytes_match_the_decoded_object_in_kubernetes_order() {
    let storage = Arc::new(MemoryStorage::new());
    let registry = Registry::new(storage.clone());
    registry.ensure_namespace("a", "default").await.unwrap();
    registry
        .create(
            configmaps("a", "default"),
            json!({"metadata": {"name": "cm", "labels": {"b": "1", "a": "2"},
                                "annotations": {"note": "x"}, "finalizers": ["f/x"]},
                   "data": {"z": "1", "y": "2"}, "immutable": false}),
        )
        .await
        .unwrap();
    let Ok(served) = registry
        .get_json(configmaps("a", "default"), "cm")
        .await
        .unwrap()
    else {
        panic!("a configmap is served from its stored bytes");
    };
    let decoded = registry
        .get(configmaps("a", "default"), "cm")
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8(served).unwrap(),
        String::from_utf8(kcp_apis::messages::to_json(&decoded)).unwrap()
    );
    let text = String::from_utf8(kcp_apis::messages::to_json(&decoded)).unwrap();
    assert!(
        text.starts_with(r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm","namespace":"default","uid":"#),
        "{text}"
    );
    assert!(
        text.ends_with(r#""immutable":false,"data":{"y":"2","z":"1"}}"#),
        "{text}"
    );
}

/// Lists as JSON answers: each item the bytes its GET answers, pages and continue tokens as
/// `list`'s; collections read as objects (a filter) are not listed this way.
#[tokio::test]
async fn json_lists_are_the_objects_gets_answer_page_by_page() {
    let storage = Arc::new(MemoryStorage::new());
    let registry = Registry::new(storage.clone());
    registry.ensure_namespace("a", "default").await.unwrap();
    for i in 0..5 {
        registry
            .create(
                configmaps("a", "default"),
                json!({"metadata": {"name": format!("cm{i}"), "annotations": {"z": "1"}},
                       "data": {"n": i.to_string()}}),
            )
            .await
            .unwrap();
    }
    let options = |continue_token: Option<String>| kcp_registry::ListOptions {
        limit: 2,
        continue_token,
        skip_count: true,
        ..Default::default()
    };
    let (mut token, mut pages) = (None, 0);
    let mut names = Vec::new();
    loop {
        let listed = registry
            .list(configmaps("a", "default"), options(token.clone()))
            .await
            .unwrap();
        let answers = registry
            .list_json(configmaps("a", "default"), options(token.clone()))
            .await
            .unwrap()
            .expect("configmaps list as JSON answers");
        assert_eq!(answers.continue_token, listed.continue_token);
        assert_eq!(answers.resource_version, listed.resource_version);
        assert_eq!(answers.remaining_item_count, None);
        assert_eq!(answers.items.len(), listed.items.len());
        for (answer, object) in answers.items.iter().zip(&listed.items) {
            assert_eq!(*answer, kcp_apis::messages::to_json(object));
            names.push(object["metadata"]["name"].as_str().unwrap().to_string());
        }
        pages += 1;
        token = listed.continue_token;
        if token.is_none() {
            break;
        }
    }
    assert_eq!((pages, names.len()), (3, 5));
    let filtered = kcp_registry::ListOptions {
        filter: Some(Box::new(|_: &serde_json::Value| true)),
        ..Default::default()
    };
    assert!(
        registry
            .list_json(configmaps("a", "default"), filtered)
            .await
            .unwrap()
            .is_none()
    );
}
