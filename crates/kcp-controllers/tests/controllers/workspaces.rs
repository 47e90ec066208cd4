//! Workspaces on the in-memory store with the controllers running: a tree of workspaces walks
//! to Ready, each path resolves to its own logical cluster with its LogicalCluster and
//! namespaces, and deleting the top deletes the whole tree and everything in it; a Workspace
//! stored past the nesting limit by an older server holds up no one.

use std::sync::Arc;

use kcp_apis::system;
use kcp_controllers::Controllers;
use kcp_registry::{ListOptions, Registry, RegistryError, Target};
use kcp_storage::MemoryStorage;
use serde_json::{Value, json};

use kcp_testing::wait::until_async;

fn workspaces(cluster: &str) -> Target<'_> {
    Target {
        cluster,
        resource: system::workspaces(),
        namespace: None,
    }
}

/// Creates `name` in the workspace at `parent` and waits until it is Ready; returns it.
async fn ready(registry: &Registry, parent: &str, name: &str) -> Value {
    let cluster = registry.resolve_path(parent).await.unwrap();
    registry
        .create(
            workspaces(&cluster),
            json!({"apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace", "metadata": {"name": name}}),
        )
        .await
        .unwrap();
    until_async(&format!("{parent}:{name} Ready"), async || {
        let ws = registry.get(workspaces(&cluster), name).await.ok()?;
        (ws["status"]["phase"] == "Ready").then_some(ws)
    })
    .await
}

fn namespaces_of(cluster: &str) -> Target<'_> {
    Target {
        cluster,
        resource: kcp_apis::builtin::core("namespaces"),
        namespace: None,
    }
}

/// The names of the namespaces of `cluster`, in order.
async fn namespace_names(registry: &Registry, cluster: &str) -> Vec<String> {
    registry
        .list(namespaces_of(cluster), ListOptions::default())
        .await
        .unwrap()
        .items
        .iter()
        .map(|n| {
            n["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

#[tokio::test]
async fn a_tree_becomes_ready_and_goes_away_with_its_top() {
    let registry = Registry::new(Arc::new(MemoryStorage::new()));
    registry
        .bootstrap_root("https://kcp.example:6443/clusters/root")
        .await
        .unwrap();
    let controllers = Controllers::start(registry.clone());

    let org = ready(&registry, "root", "org").await;
    assert_eq!(
        org["spec"]["type"],
        json!({"name": "organization", "path": "root"})
    );
    assert_eq!(
        org["spec"]["URL"],
        "https://kcp.example:6443/clusters/root:org"
    );
    let team = ready(&registry, "root:org", "team").await;
    assert_eq!(
        team["spec"]["type"],
        json!({"name": "universal", "path": "root"})
    );
    let leaf = ready(&registry, "root:org:team", "leaf").await;
    assert_eq!(
        leaf["spec"]["URL"],
        "https://kcp.example:6443/clusters/root:org:team:leaf"
    );

    let leaf_cluster = registry.resolve_path("root:org:team:leaf").await.unwrap();
    assert_eq!(leaf_cluster, leaf["spec"]["cluster"]);
    let logical_cluster = registry.logical_cluster(&leaf_cluster).await.unwrap();
    assert_eq!(
        logical_cluster["metadata"]["annotations"]["kcp.io/path"],
        "root:org:team:leaf"
    );
    assert_eq!(
        logical_cluster["spec"]["owner"]["uid"],
        leaf["metadata"]["uid"]
    );
    let namespaces = namespaces_of(&leaf_cluster);
    assert_eq!(
        namespace_names(&registry, &leaf_cluster).await,
        ["default", "kube-system"]
    );

    registry.delete(workspaces("root"), "org").await.unwrap();
    until_async("the org to go", async || {
        matches!(
            registry.get(workspaces("root"), "org").await,
            Err(RegistryError::NotFound { .. })
        )
        .then_some(())
    })
    .await;
    for path in ["root:org", "root:org:team", "root:org:team:leaf"] {
        assert!(matches!(
            registry.resolve_path(path).await,
            Err(RegistryError::NotFound { .. })
        ));
    }
    assert!(
        !registry
            .logical_cluster_exists(&leaf_cluster)
            .await
            .unwrap()
    );
    assert!(
        registry
            .list(namespaces, ListOptions::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    controllers.shutdown().await;
}

/// A Workspace that an older server let grow past the nesting limit (200 levels) sits in
/// storage: it still lists and reads, and the workspace controller serves everyone else.
#[tokio::test]
async fn a_poisoned_workspace_stalls_no_one() {
    let storage = Arc::new(MemoryStorage::new());
    let registry = Registry::new(storage.clone());
    registry
        .bootstrap_root("https://kcp.example:6443/clusters/root")
        .await
        .unwrap();
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    let poisoned = format!(
        r#"{{"apiVersion":"tenancy.kcp.io/v1alpha1","kind":"Workspace","metadata":{{"name":"poisoned","uid":"u","creationTimestamp":"2026-01-01T00:00:00Z"}},"spec":{{"deep":{deep}}},"status":{{"phase":"Scheduling"}}}}"#
    );
    let key = kcp_storage::keys::ResourceKeys::new("tenancy.kcp.io", "workspaces")
        .object("root", None, "poisoned");
    kcp_storage::Storage::create(&*storage, &key, poisoned.into_bytes().into())
        .await
        .unwrap();
    let controllers = Controllers::start(registry.clone());

    ready(&registry, "root", "healthy").await;
    let listed = registry
        .list(workspaces("root"), ListOptions::default())
        .await
        .unwrap();
    assert_eq!(listed.items.len(), 2);
    registry.get(workspaces("root"), "poisoned").await.unwrap();
    controllers.shutdown().await;
}

/// A workspace whose type's initializers are `root:universal` and `system:apibindings` goes
/// from Scheduling straight to Ready: scheduling does their work (the namespaces, the default
/// APIBindings, bound at once) before it creates the LogicalCluster, which starts Ready with
/// those initializers run, so the workspace is written once by the controller and never shows
/// Initializing.
#[tokio::test]
async fn a_universal_workspace_is_ready_in_one_pass() {
    use futures::StreamExt;
    use kcp_storage::Storage;

    let storage = Arc::new(MemoryStorage::new());
    let registry = Registry::new(storage.clone());
    registry
        .bootstrap_root("https://kcp.example:6443/clusters/root")
        .await
        .unwrap();
    let controllers = Controllers::start(registry.clone());
    let start = storage.current_revision().await.unwrap();
    let mut events = registry
        .watch(workspaces("root"), start, None)
        .await
        .unwrap();
    let solo = ready(&registry, "root", "solo").await;

    let mut phases = Vec::new();
    while phases.last().map(String::as_str) != Some("Ready") {
        let object = events.next().await.unwrap().unwrap().object().unwrap();
        if object["metadata"]["name"] == "solo" {
            phases.push(object["status"]["phase"].as_str().unwrap_or("").to_string());
        }
    }
    assert!(!phases.iter().any(|p| p == "Initializing"), "{phases:?}");
    assert_eq!(
        phases.len(),
        2,
        "the create and one write by the controller: {phases:?}"
    );

    let cluster = solo["spec"]["cluster"].as_str().unwrap();
    let logical_cluster = registry.logical_cluster(cluster).await.unwrap();
    assert_eq!(
        logical_cluster["spec"]["initializers"],
        json!(["root:universal", "system:apibindings"])
    );
    assert_eq!(logical_cluster["status"]["initializers"], json!([]));
    assert_eq!(logical_cluster["status"]["phase"], "Ready");
    assert_eq!(solo["status"]["initializers"], json!([]));
    assert_eq!(
        namespace_names(&registry, cluster).await,
        ["default", "kube-system"]
    );
    controllers.shutdown().await;
}
