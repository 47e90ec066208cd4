//! Phase: an Initializing workspace shows its LogicalCluster's remaining initializers and
//! becomes Ready (with `WorkspaceInitialized`) once the LogicalCluster is Ready. A
//! LogicalCluster not (yet) there is looked at again shortly; one that another workspace owns
//! is not this workspace's (its `spec.cluster` was not set by the server) and is never mirrored.

use std::time::Duration;

use kcp_registry::{Registry, RegistryError};
use serde_json::{Value, json};

use super::{change, mark_initialized, status_of};
use crate::driver::{Key, Outcome};

/// The wait before looking again for a LogicalCluster that is not there.
const MISSING_DELAY: Duration = Duration::from_secs(1);

pub(super) async fn reconcile(
    registry: &Registry,
    key: &Key,
    workspace: &Value,
) -> Result<Outcome, RegistryError> {
    let Some(cluster) = workspace["spec"]["cluster"].as_str() else {
        return Ok(Outcome::Finished);
    };
    let logical_cluster = match registry.logical_cluster(cluster).await {
        Ok(found) => found,
        Err(RegistryError::NotFound { .. }) => return Ok(Outcome::Again(MISSING_DELAY)),
        Err(other) => return Err(other),
    };
    if logical_cluster["spec"]["owner"]["uid"] != workspace["metadata"]["uid"] {
        tracing::warn!(
            cluster = %key.cluster,
            workspace = %key.name,
            logical_cluster = cluster,
            "the workspace's logical cluster belongs to another workspace; not following it"
        );
        return Ok(Outcome::Finished);
    }
    let ready = logical_cluster["status"]["phase"] == "Ready";
    let initializers = logical_cluster["status"]["initializers"].clone();
    let initializers = if initializers.is_array() {
        initializers
    } else {
        json!([])
    };
    let phase = if ready { "Ready" } else { "Initializing" };
    if workspace["status"]["phase"] == phase && workspace["status"]["initializers"] == initializers
    {
        return Ok(Outcome::Finished);
    }
    change(registry, key, move |next| {
        let status = status_of(next)?;
        status.insert("phase".into(), json!(phase));
        status.insert("initializers".into(), initializers.clone());
        if ready {
            mark_initialized(status);
        }
        Ok(())
    })
    .await?;
    Ok(Outcome::Finished)
}
