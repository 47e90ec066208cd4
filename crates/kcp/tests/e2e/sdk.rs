//! The Rust SDK's example controller (`kcp_sdk::examples::stamper`) against the real server:
//! it reconciles ConfigMaps created in three workspaces through one wildcard watch, goes on
//! after the server restarts, and of two replicas one leads, the other taking over when the
//! leader stops.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kcp_sdk::ClusterConfig;
use kcp_sdk::examples::stamper;
use kcp_sdk::kinds::{LogicalCluster, Workspace};
use kcp_testing::wait;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use tokio::sync::oneshot;

use super::support::Kcp;

const LEASE_DURATION: Duration = Duration::from_secs(3);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn create(kcp: &Kcp, cluster: &str, name: &str, labelled: bool) {
    let api: Api<ConfigMap> = Api::namespaced(kcp.kube_client_in(cluster).await, "default");
    let labels =
        labelled.then(|| BTreeMap::from([(stamper::LABEL.to_string(), "true".to_string())]));
    let configmap = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels,
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    api.create(&PostParams::default(), &configmap)
        .await
        .unwrap();
}

/// `(stamped-in, stamped-by)` of a ConfigMap, once it has them.
async fn stamped(kcp: &Kcp, cluster: &str, name: &str) -> (String, String) {
    let api: Api<ConfigMap> = Api::namespaced(kcp.kube_client_in(cluster).await, "default");
    wait::until_async(&format!("{name} in {cluster} stamped"), async || {
        let data = api
            .get(name)
            .await
            .map_err(|e| e.to_string())?
            .data
            .unwrap_or_default();
        match (data.get("stamped-in"), data.get("stamped-by")) {
            (Some(into), Some(by)) => Ok((into.clone(), by.clone())),
            _ => Err(format!("not yet: {data:?}")),
        }
    })
    .await
}

/// The kube-rs configuration of the kubeconfig's `system:admin` context.
async fn system_admin(kcp: &Kcp) -> kube::Config {
    use kube::config::{KubeConfigOptions, Kubeconfig};
    let kubeconfig = Kubeconfig::read_from(kcp.kubeconfig()).unwrap();
    let options = KubeConfigOptions {
        context: Some("system:admin".to_string()),
        ..KubeConfigOptions::default()
    };
    kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .unwrap()
}

/// A replica of the stamper, stopped by sending on (or dropping) its sender.
fn replica(
    config: &ClusterConfig,
    name: &'static str,
) -> (
    oneshot::Sender<()>,
    tokio::task::JoinHandle<anyhow::Result<()>>,
) {
    let (stop, stopped) = oneshot::channel::<()>();
    let config = config.clone();
    let task = tokio::spawn(async move {
        stamper::run(config, name, LEASE_DURATION, async {
            let _ = stopped.await;
        })
        .await
    });
    (stop, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_controller_reconciles_every_workspace_survives_a_restart_and_elects_one_leader()
 {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let port = free_port().to_string();
    let args = ["--secure-port", port.as_str()];
    let kcp = Kcp::start(&root, &args);
    let workspaces: Vec<String> = ["a", "b", "c"].iter().map(|w| kcp.workspace(w)).collect();
    let clusters: Vec<String> = workspaces.iter().map(|w| kcp.logical_cluster(w)).collect();
    // As kcp's `shard-admin` (context `system:admin`), whose token outlives a restart.
    let config = ClusterConfig::new(system_admin(&kcp).await);

    // kcp's kinds, typed.
    let listed = Api::<Workspace>::all(config.client("root").unwrap())
        .list(&Default::default())
        .await
        .unwrap();
    for (workspace, cluster) in ["a", "b", "c"].iter().zip(&clusters) {
        let found = listed
            .items
            .iter()
            .find(|w| w.metadata.name.as_deref() == Some(workspace))
            .unwrap();
        assert_eq!(found.spec.cluster.as_ref(), Some(cluster));
        assert_eq!(
            found.status.as_ref().unwrap().phase.as_deref(),
            Some("Ready")
        );
    }
    let logical = Api::<LogicalCluster>::all(config.client(&clusters[0]).unwrap())
        .get("cluster")
        .await
        .unwrap();
    assert_eq!(logical.status.unwrap().phase.as_deref(), Some("Ready"));

    let (stop_one, one) = replica(&config, "one");
    let (stop_two, two) = replica(&config, "two");
    for workspace in &workspaces {
        create(&kcp, workspace, "stamp-me", true).await;
        create(&kcp, workspace, "leave-me", false).await;
    }
    // One wildcard watch, three workspaces, each stamped with its own logical cluster by the
    // same replica: the leader.
    let mut leaders = Vec::new();
    for (workspace, cluster) in workspaces.iter().zip(&clusters) {
        let (into, by) = stamped(&kcp, workspace, "stamp-me").await;
        assert_eq!(&into, cluster, "{workspace}");
        leaders.push(by);
    }
    leaders.dedup();
    assert_eq!(leaders.len(), 1, "stamped by {leaders:?}");
    let leader = leaders.pop().unwrap();
    let leases: Api<Lease> = Api::namespaced(kcp.kube_client_in("root").await, "default");
    let holder = leases
        .get(stamper::LEASE)
        .await
        .unwrap()
        .spec
        .unwrap()
        .holder_identity;
    assert_eq!(holder.as_deref(), Some(leader.as_str()));
    let untouched: Api<ConfigMap> =
        Api::namespaced(kcp.kube_client_in(&workspaces[0]).await, "default");
    assert!(untouched.get("leave-me").await.unwrap().data.is_none());

    // The server restarts on the same port; the watch lists again and goes on.
    kcp.stop();
    let kcp = Kcp::start(&root, &args);
    create(&kcp, &workspaces[1], "after-restart", true).await;
    let (into, _) = stamped(&kcp, &workspaces[1], "after-restart").await;
    assert_eq!(into, clusters[1]);

    // The leader stops; the other replica takes the lease and stamps from then on.
    let (stop_leader, leader_task, other) = if leader == "one" {
        (stop_one, one, "two")
    } else {
        (stop_two, two, "one")
    };
    drop(stop_leader);
    let _ = leader_task.await;
    create(&kcp, &workspaces[2], "after-failover", true).await;
    let (_, by) = stamped(&kcp, &workspaces[2], "after-failover").await;
    assert_eq!(by, other);
}

/// A controller over dynamic objects (`kube::api::DynamicObject`, a kind known only at run time,
/// as a provider's controller of an exported API sees it) reconciles every workspace's objects
/// through one wildcard watch, with their logical clusters in its keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_of_dynamic_objects_sees_every_workspace() {
    use kube::api::{ApiResource, DynamicObject};
    use kube::runtime::watcher;

    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::start(&dir.path().join("root"), &[]);
    let workspaces: Vec<String> = ["d1", "d2"].iter().map(|w| kcp.workspace(w)).collect();
    let clusters: Vec<String> = workspaces.iter().map(|w| kcp.logical_cluster(w)).collect();
    for workspace in &workspaces {
        create(&kcp, workspace, "dynamic", true).await;
    }
    let config = ClusterConfig::new(system_admin(&kcp).await);
    let resource = ApiResource::erase::<ConfigMap>(&());
    let wildcard: Api<DynamicObject> = Api::all_with(config.wildcard().unwrap(), &resource);
    let controller = kcp_sdk::Controller::new(wildcard)
        .with_config(watcher::Config::default().labels(&format!("{}=true", stamper::LABEL)));
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(controller.run(
        move |object: std::sync::Arc<DynamicObject>, key| {
            let seen_tx = seen_tx.clone();
            async move {
                let _ = seen_tx.send((key.cluster.clone(), object.metadata.name.clone()));
                Ok::<_, String>(kcp_sdk::Action::AwaitChange)
            }
        },
        async {
            let _ = stopped.await;
        },
    ));
    let mut seen = Vec::new();
    while seen.len() < clusters.len() {
        let next = tokio::time::timeout(Duration::from_secs(30), seen_rx.recv())
            .await
            .expect("the controller reconciles every workspace's object")
            .unwrap();
        seen.push(next);
    }
    seen.sort();
    let mut expected: Vec<(String, Option<String>)> = clusters
        .iter()
        .map(|cluster| (cluster.clone(), Some("dynamic".to_string())))
        .collect();
    expected.sort();
    assert_eq!(seen, expected);
    let _ = stop.send(());
    task.await.unwrap();
}
