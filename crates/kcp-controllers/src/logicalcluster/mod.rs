//! The logical cluster controller: initializes new logical clusters and empties deleted ones.
//!
//! - [`initialization`]: an Initializing LogicalCluster whose initializers include
//!   `root:universal` gets the namespaces `default` and `kube-system` (what kcp's universal
//!   bootstrap creates) and loses that initializer; with `system:apibindings`, it gets its
//!   types' default APIBindings and loses it once they are Bound; one with none left becomes Ready
//!   (other initializers are removed by their owners, through the LogicalCluster's status);
//! - [`deletion`]: a deleting LogicalCluster has everything in its logical cluster deleted
//!   (nested workspaces included, honouring finalizers), then loses its finalizer.
//!
//! One task for every logical cluster, keyed by the cluster (the object is always `cluster`).
//! Besides LogicalClusters it follows the deletes of namespaces and workspaces (only those;
//! their other events are not even decoded): each counts towards what the deletion of the
//! logical cluster that held the object waits for (it looks again once half of what was left
//! went, see [`deletion`]).

mod deletion;
mod initialization;

pub(crate) use initialization::{bind_default_apis, universal_bootstrap};

use kcp_apis::system;
use kcp_registry::tenancy::LOGICAL_CLUSTER;
use kcp_registry::{Registry, RegistryError, Summary};
use serde_json::Value;

use crate::Context;
use crate::driver::{Also, Controller, Key, Listing, Outcome, Source};

/// Whether a LogicalCluster needs the controller.
fn needs_work(logical_cluster: &Summary) -> bool {
    logical_cluster.deleting || logical_cluster.phase.as_deref() == Some("Initializing")
}

/// The LogicalCluster whose content a deleted namespace or nested workspace was: its deletion
/// may have been waiting for it (the work queue counts these towards the events it awaits).
fn content_gone(cluster: &str, _object: &Value) -> Option<Key> {
    Some(Key {
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
pub async fn run(registry: Registry, context: Context) {
    Controller {
        name: "logicalcluster",
        resource: system::logical_clusters(),
        wants: |logical_cluster| needs_work(&Summary::of_value(logical_cluster)),
        listed: Listing::Summaries(needs_work),
        deletions: false,
        reconcile: |registry, key: Key| Box::pin(async move { reconcile(&registry, &key).await }),
        // A deletion pass holds every object left of each resource it reads (an organization's
        // 1,000 workspaces, say): fewer at once than other controllers bounds what a hundred
        // deleting organizations hold.
        workers: 32,
        also: vec![
            Also {
                source: Source::Resource(kcp_apis::builtin::core("namespaces")),
                key: content_gone,
                watched: kcp_registry::Watched::Deletions,
            },
            Also {
                source: Source::Resource(system::workspaces()),
                key: content_gone,
                watched: kcp_registry::Watched::Deletions,
            },
            // A binding Bound may be what an Initializing cluster waits for.
            Also {
                source: Source::Resource(system::api_bindings()),
                key: |cluster, binding| {
                    (binding["status"]["phase"] == "Bound")
                        .then(|| content_gone(cluster, binding))
                        .flatten()
                },
                watched: kcp_registry::Watched::All,
            },
        ],
    }
    .run(registry, context)
    .await
}
