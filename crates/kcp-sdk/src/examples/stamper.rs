//! The stamper: every ConfigMap labelled `sdk.kcp.io/stamp=true`, in every workspace, gets
//! `data.stamped-in` (the logical cluster it is in) and `data.stamped-by` (the replica that
//! stamped it). One wildcard watch serves all workspaces; the writes go to each object's own
//! logical cluster. With several replicas, the one holding the Lease `kcp-sdk-stamper` in
//! `root`'s `default` namespace stamps; the others wait to take over.
//!
//! Run it against `kcp start`: `cargo run -p kcp-sdk --example stamper -- <replica-name>` with
//! `KUBECONFIG=.kcp/admin.kubeconfig`.

use std::sync::Arc;

use futures::FutureExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{Patch, PatchParams};
use kube::runtime::watcher;
use serde_json::json;

use crate::{Action, ClusterConfig, ClusterKey, Controller, LeaderElector};

/// The label that asks for a stamp.
pub const LABEL: &str = "sdk.kcp.io/stamp";
/// The Lease replicas compete for, in `root`'s `default` namespace.
pub const LEASE: &str = "kcp-sdk-stamper";

/// Stamps one ConfigMap, unless it already carries its stamp.
async fn stamp(
    config: &ClusterConfig,
    replica: &str,
    object: Arc<ConfigMap>,
    key: ClusterKey,
) -> Result<Action, kube::Error> {
    let data = object.data.clone().unwrap_or_default();
    if data.get("stamped-in") == Some(&key.cluster) {
        return Ok(Action::AwaitChange);
    }
    let client = config
        .client(&key.cluster)
        .map_err(|e| kube::Error::Service(e.to_string().into()))?;
    let configmaps: Api<ConfigMap> = Api::namespaced(client, &key.namespace);
    let patch = json!({"data": {"stamped-in": key.cluster, "stamped-by": replica}});
    configmaps
        .patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(Action::AwaitChange)
}

/// Runs the stamper as replica `replica` until `stop` completes. It reconciles while it holds
/// the lease (renewed every third of `lease_duration`); when it loses it (the server
/// unreachable that long, or another replica took it), it stops reconciling and competes for
/// it again.
pub async fn run(
    config: ClusterConfig,
    replica: &str,
    lease_duration: std::time::Duration,
    stop: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let stop = stop.shared();
    let elector = LeaderElector::new(config.client("root")?, "default", LEASE, replica)
        .with_lease_duration(lease_duration);
    loop {
        let wildcard: Api<ConfigMap> = Api::all(config.wildcard()?);
        let controller = Controller::new(wildcard)
            .with_config(watcher::Config::default().labels(&format!("{LABEL}=true")));
        let reconciling = controller.run(
            |object, key| {
                let config = config.clone();
                async move { stamp(&config, replica, object, key).await }
            },
            stop.clone(),
        );
        tokio::select! {
            led = elector.run(reconciling) => match led {
                Some(()) => return Ok(()),
                None => tracing::warn!(replica, "lost the lease; competing for it again"),
            },
            () = stop.clone() => return Ok(()),
        }
    }
}
