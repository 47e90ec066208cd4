//! Deletion: a deleting workspace deletes its LogicalCluster (whose own finalizer keeps it until
//! the logical cluster is empty, see `crate::logicalcluster`) and drops its finalizer once the
//! LogicalCluster is gone; the LogicalCluster's deletion event brings it back here.

use kcp_apis::system;
use kcp_registry::tenancy::{CLUSTER_ANNOTATION, LOGICAL_CLUSTER, WORKSPACE_FINALIZER};
use kcp_registry::{Registry, RegistryError, Target};
use serde_json::{Value, json};

use super::workspaces;
use crate::driver::{Key, Outcome};

pub(super) async fn reconcile(
    registry: &Registry,
    key: &Key,
    workspace: &Value,
) -> Result<Outcome, RegistryError> {
    let cluster = workspace["spec"]["cluster"]
        .as_str()
        .or_else(|| workspace["metadata"]["annotations"][CLUSTER_ANNOTATION].as_str());
    if let Some(cluster) = cluster {
        let target = Target {
            cluster,
            resource: system::logical_clusters(),
            namespace: None,
        };
        match registry.get(target, LOGICAL_CLUSTER).await {
            Ok(logical_cluster)
                if logical_cluster["spec"]["owner"]["uid"] == workspace["metadata"]["uid"] =>
            {
                if !logical_cluster["metadata"]["deletionTimestamp"].is_string() {
                    registry
                        .privileged()
                        .delete(target, LOGICAL_CLUSTER)
                        .await?;
                }
                // Its deletion event brings the workspace back here.
                return Ok(Outcome::Finished);
            }
            Ok(_) | Err(RegistryError::NotFound { .. }) => {}
            Err(other) => return Err(other),
        }
    }
    let result = registry
        .privileged()
        .patch(workspaces(&key.cluster), &key.name, &|current: &Value| {
            let mut next = current.clone();
            if let Some(list) = next["metadata"]["finalizers"].as_array_mut() {
                list.retain(|f| f != WORKSPACE_FINALIZER);
            }
            if next["metadata"]["finalizers"] == json!([])
                && let Some(metadata) = next["metadata"].as_object_mut()
            {
                metadata.remove("finalizers");
            }
            Ok(next)
        })
        .await;
    match result {
        Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(Outcome::Finished),
        Err(other) => Err(other),
    }
}
