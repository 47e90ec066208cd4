//! The logical cluster controller: initializes new logical clusters and empties deleted ones.
//!
//! - [`initialization`]: an Initializing LogicalCluster whose initializers include
//!   `root:universal` gets the namespaces `default` and `kube-system` (what kcp's universal
//!   bootstrap creates) and loses that initializer; one with no initializers left becomes Ready
//!   (other initializers are removed by their owners, through the LogicalCluster's status);
//! - [`deletion`]: a deleting LogicalCluster has everything in its logical cluster deleted
//!   (nested workspaces included, honouring finalizers), then loses its finalizer.
//!
//! One task for every logical cluster, keyed by the cluster (the object is always `cluster`).
//! Besides LogicalClusters it follows namespaces and workspaces that are going: each such
//! change brings back the deletion of the logical cluster that holds them.

mod deletion;
mod initialization;

use kcp_apis::system;
use kcp_registry::tenancy::LOGICAL_CLUSTER;
use kcp_registry::{Registry, RegistryError};
use serde_json::Value;
use tokio::sync::watch;

use crate::driver::{Also, Controller, Key, Outcome};

/// Whether a LogicalCluster needs the controller.
fn needs_work(logical_cluster: &Value) -> bool {
    logical_cluster["metadata"]["deletionTimestamp"].is_string()
        || logical_cluster["status"]["phase"] == "Initializing"
}

/// The LogicalCluster whose content an object is, when the object is going (a terminating
/// namespace, a deleting nested workspace): its deletion may be waiting for it, and looks
/// again when it changes or goes rather than only on its timer.
fn content_going(cluster: &str, object: &Value) -> Option<Key> {
    object["metadata"]["deletionTimestamp"]
        .is_string()
        .then(|| Key {
            cluster: cluster.to_string(),
            namespace: String::new(),
            name: LOGICAL_CLUSTER.to_string(),
        })
}

/// Reconciles the LogicalCluster of one logical cluster.
pub async fn reconcile(registry: &Registry, key: &Key) -> Result<Outcome, RegistryError> {
    if key.name != LOGICAL_CLUSTER {
        return Ok(Outcome::Finished);
    }
    let logical_cluster = match registry.logical_cluster(&key.cluster).await {
        Ok(found) => found,
        Err(RegistryError::NotFound { .. }) => return Ok(Outcome::Finished),
        Err(other) => return Err(other),
    };
    if logical_cluster["metadata"]["deletionTimestamp"].is_string() {
        return deletion::reconcile(registry, &key.cluster, &logical_cluster).await;
    }
    if logical_cluster["status"]["phase"] == "Initializing" {
        return initialization::reconcile(registry, &key.cluster, &logical_cluster).await;
    }
    Ok(Outcome::Finished)
}

/// Runs the controller until `stop` turns true.
pub async fn run(registry: Registry, stop: watch::Receiver<bool>) {
    Controller {
        name: "logicalcluster",
        resource: system::logical_clusters(),
        wants: needs_work,
        deletions: false,
        reconcile: |registry, key: Key| Box::pin(async move { reconcile(&registry, &key).await }),
        also: vec![
            Also {
                resource: kcp_apis::builtin::core("namespaces"),
                key: content_going,
            },
            Also {
                resource: system::workspaces(),
                key: content_going,
            },
        ],
    }
    .run(registry, stop)
    .await
}
