//! kube-rs, a real Rust client, against the real binary: list, watch and a reflector.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};

use super::support::{Kcp, is_namespace_default};

fn configmap(name: &str) -> ConfigMap {
    serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "data": {"k": name}}))
        .unwrap()
}

#[tokio::test]
async fn kube_rs_lists_watches_and_reflects() {
    let kcp = tokio::task::spawn_blocking(|| Kcp::shared("kube-rs"))
        .await
        .unwrap();
    let client = kcp.kube_client().await;
    let api: Api<ConfigMap> = Api::namespaced(client, "default");

    api.create(&PostParams::default(), &configmap("first"))
        .await
        .unwrap();
    let listed = api.list(&ListParams::default().limit(1)).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].data.as_ref().unwrap()["k"], "first");

    let (reader, writer) = reflector::store();
    let mut events = reflector(writer, watcher(api.clone(), watcher::Config::default()))
        .applied_objects()
        .boxed();
    let first = tokio::time::timeout(Duration::from_secs(20), events.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first.metadata.name.as_deref(), Some("first"));
    for name in ["second", "third"] {
        api.create(&PostParams::default(), &configmap(name))
            .await
            .unwrap();
    }
    api.delete("first", &DeleteParams::default()).await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let names = loop {
        let _ = tokio::time::timeout(Duration::from_millis(200), events.next()).await;
        let mut names: Vec<String> = reader
            .state()
            .iter()
            .filter_map(|cm| cm.metadata.name.clone())
            .filter(|name| !is_namespace_default(name))
            .collect();
        names.sort();
        if names == ["second", "third"] || tokio::time::Instant::now() > deadline {
            break names;
        }
    };
    assert_eq!(
        names,
        ["second", "third"],
        "the reflector follows creates and deletes"
    );
}
