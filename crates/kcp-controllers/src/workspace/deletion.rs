//! Deletion: a deleting workspace deletes its LogicalCluster (whose own finalizer keeps it until
//! the logical cluster is empty, see `crate::logicalcluster`), shows phase Deleting and the
//! LogicalCluster's `WorkspaceContentDeleted` condition meanwhile, and drops its finalizer once
//! the LogicalCluster is gone; the LogicalCluster's events bring it back here.

use kcp_apis::system;
use kcp_registry::tenancy::{CLUSTER_ANNOTATION, LOGICAL_CLUSTER, WORKSPACE_FINALIZER};
use kcp_registry::{Registry, RegistryError, Target};
use serde_json::{Map, Value, json};

use super::{change, status_of};
use crate::driver::{Key, Outcome};

/// The condition that tells whether a deleting logical cluster's content is gone.
const CONTENT_DELETED: &str = "WorkspaceContentDeleted";

/// Whether `workspace` already shows `condition`.
fn condition_present(workspace: &Value, condition: &Value) -> bool {
    workspace["status"]["conditions"]
        .as_array()
        .is_some_and(|all| all.iter().any(|c| c == condition))
}

/// Puts the LogicalCluster's `condition` in the workspace's status.
fn mirror(status: &mut Map<String, Value>, condition: &Value) {
    let conditions = status.entry("conditions").or_insert_with(|| json!([]));
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    if let Some(all) = conditions.as_array_mut() {
        all.retain(|c| c["type"] != condition["type"]);
        all.push(condition.clone());
    }
}

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
                show_progress(registry, key, workspace, &logical_cluster).await?;
                // The LogicalCluster's events bring the workspace back here.
                return Ok(Outcome::Finished);
            }
            Ok(_) | Err(RegistryError::NotFound { .. }) => {}
            Err(other) => return Err(other),
        }
    }
    let result = change(registry, key, |next| {
        if let Some(list) = next
            .pointer_mut("/metadata/finalizers")
            .and_then(Value::as_array_mut)
        {
            list.retain(|f| f != WORKSPACE_FINALIZER);
        }
        if next["metadata"]["finalizers"] == json!([])
            && let Some(metadata) = next["metadata"].as_object_mut()
        {
            metadata.remove("finalizers");
        }
        Ok(())
    })
    .await;
    match result {
        Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(Outcome::Finished),
        Err(other) => Err(other),
    }
}

/// Phase Deleting, and what holds the content back as the LogicalCluster reports it.
async fn show_progress(
    registry: &Registry,
    key: &Key,
    workspace: &Value,
    logical_cluster: &Value,
) -> Result<(), RegistryError> {
    let content = logical_cluster["status"]["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == CONTENT_DELETED))
        .cloned();
    let shown = workspace["status"]["phase"] == "Deleting"
        && content
            .as_ref()
            .is_none_or(|c| condition_present(workspace, c));
    if !shown {
        change(registry, key, move |next| {
            let status = status_of(next)?;
            status.insert("phase".into(), json!("Deleting"));
            if let Some(condition) = &content {
                mirror(status, condition);
            }
            Ok(())
        })
        .await?;
    }
    Ok(())
}
