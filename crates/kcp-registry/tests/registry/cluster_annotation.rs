//! Every object the registry answers carries `kcp.io/cluster` with the logical cluster its key
//! names; the annotation is never stored, so a client sending it (or a wrong one) changes
//! nothing.

use std::sync::Arc;

use futures::StreamExt;

use kcp_registry::{DeleteOutcome, JsonAnswer, ListOptions, Registry};
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
            .list_json(
                configmaps("a", "default"),
                options(token.clone()),
                JsonAnswer::Object,
            )
            .await
            .unwrap()
            .expect("configmaps list as JSON answers");
        // As a list's items: a built-in kind's without their kind.
        let items = registry
            .list_json(
                configmaps("a", "default"),
                options(token.clone()),
                JsonAnswer::ListItem,
            )
            .await
            .unwrap()
            .expect("configmaps list as JSON items");
        for (item, object) in items.items.iter().zip(&listed.items) {
            let mut object = object.clone();
            kcp_registry::as_list_item(configmaps("a", "default").resource, &mut object);
            assert!(object.get("kind").is_none());
            assert_eq!(
                *item,
                kcp_apis::messages::to_json_as(&object, "v1", "ConfigMap")
            );
        }
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
            .list_json(configmaps("a", "default"), filtered, JsonAnswer::ListItem)
            .await
            .unwrap()
            .is_none()
    );
}

/// kcp's own kinds are custom resources defaulted as they are read: their GETs and lists are
/// served from the stored bytes while the defaults fill nothing in (they were filled in as the
/// object was written), and decoded and defaulted where they would (an object stored without
/// them), byte for byte what the decoding read answers either way.
#[tokio::test]
async fn system_kinds_are_served_from_stored_bytes_unless_a_default_is_missing() {
    let storage = Arc::new(MemoryStorage::new());
    let registry = Registry::new(storage.clone());
    registry
        .bootstrap_root("https://kcp.example:6443/clusters/root")
        .await
        .unwrap();
    let workspaces = || crate::support::cluster_wide("root", kcp_apis::system::workspaces());
    for name in ["defaulted", "stored-bare"] {
        registry
            .create(workspaces(), json!({"metadata": {"name": name}}))
            .await
            .unwrap();
    }
    // Created without a status (a create drops it), which reads default; the controller's
    // status write stores one.
    let ready = |current: &serde_json::Value| {
        let mut next = current.clone();
        next["status"]["phase"] = json!("Initializing");
        Ok::<_, kcp_registry::RegistryError>(next)
    };
    registry
        .subresource("status")
        .unwrap()
        .patch(workspaces(), "defaulted", &ready)
        .await
        .unwrap();
    let key = |name| {
        kcp_storage::keys::ResourceKeys::new("tenancy.kcp.io", "workspaces")
            .object("root", None, name)
    };
    let stored = storage.get(&key("defaulted"), 0).await.unwrap().kv.unwrap();
    let text = String::from_utf8(stored.value.to_vec()).unwrap();
    assert!(!text.contains("resourceVersion"), "stored: {text}");
    // As an older server (or one before a default was added) might have stored it.
    let key = key("stored-bare");
    let stored = storage.get(&key, 0).await.unwrap().kv.unwrap();
    let mut bare: serde_json::Value = serde_json::from_slice(&stored.value).unwrap();
    bare.as_object_mut().unwrap().remove("status");
    let from = registry.current_revision().await.unwrap();
    let mut events = registry.watch(workspaces(), from, None).await.unwrap();
    storage
        .update(
            &key,
            serde_json::to_vec(&bare).unwrap().into(),
            stored.mod_revision,
        )
        .await
        .unwrap();

    // Watch events too: the bare one decoded and defaulted, the other as stored.
    let event = events.next().await.unwrap().unwrap();
    let event: serde_json::Value = serde_json::from_slice(&event.encoded).unwrap();
    assert_eq!(event["status"]["phase"], "Scheduling");
    let labelled = |current: &serde_json::Value| {
        let mut next = current.clone();
        next["metadata"]["labels"] = json!({"a": "b"});
        Ok::<_, kcp_registry::RegistryError>(next)
    };
    registry
        .patch(workspaces(), "defaulted", &labelled)
        .await
        .unwrap();
    let event = events.next().await.unwrap().unwrap();
    let Ok(got) = registry.get_json(workspaces(), "defaulted").await.unwrap() else {
        panic!("a defaulted workspace is served from its stored bytes");
    };
    assert_eq!(
        String::from_utf8_lossy(&event.encoded),
        String::from_utf8_lossy(&got)
    );

    let served = registry.get_json(workspaces(), "defaulted").await.unwrap();
    let decoded = registry.get(workspaces(), "defaulted").await.unwrap();
    assert_eq!(
        served.map(String::from_utf8),
        Ok(Ok(
            String::from_utf8(kcp_apis::messages::to_json(&decoded)).unwrap()
        )),
        "a defaulted workspace is served from its stored bytes"
    );
    match registry
        .get_json(workspaces(), "stored-bare")
        .await
        .unwrap()
    {
        Err(decoded) => assert_eq!(decoded["status"]["phase"], "Scheduling"),
        Ok(bytes) => panic!(
            "served without its defaults: {}",
            String::from_utf8_lossy(&bytes)
        ),
    }

    let listed = registry
        .list(workspaces(), ListOptions::default())
        .await
        .unwrap();
    let answers = registry
        .list_json(workspaces(), ListOptions::default(), JsonAnswer::ListItem)
        .await
        .unwrap()
        .expect("workspaces list as JSON answers");
    assert_eq!(answers.items.len(), 2);
    assert_eq!(listed.items[0]["status"]["phase"], "Initializing");
    assert_eq!(listed.items[1]["status"]["phase"], "Scheduling");
    for (answer, object) in answers.items.iter().zip(&listed.items) {
        assert_eq!(
            String::from_utf8_lossy(answer),
            String::from_utf8_lossy(&kcp_apis::messages::to_json(object))
        );
    }
}
