//! Initialization: the `root:universal` initializer's work (namespaces `default` and
//! `kube-system`), and phase Ready once no initializer is left. A workspace's scheduling does
//! that work itself before it creates the LogicalCluster (see [`universal_bootstrap`]); this
//! step serves the LogicalClusters created otherwise (home workspaces) and any created still
//! holding the initializer.

use kcp_apimachinery::object;
use kcp_apis::system;
use kcp_registry::tenancy::{LOGICAL_CLUSTER, UNIVERSAL_INITIALIZER};
use kcp_registry::{Registry, RegistryError, Target};
use serde_json::{Value, json};

use crate::driver::Outcome;

/// The namespaces a universal workspace starts with.
const NAMESPACES: &[&str] = &["default", "kube-system"];

fn initializers(logical_cluster: &Value) -> Vec<String> {
    logical_cluster["status"]["initializers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|i| i.as_str().map(str::to_string))
        .collect()
}

/// Does the `root:universal` initializer's work in `cluster` (its namespaces, each created
/// unless there) if `initializers` holds it, and takes it out of them; whether it did.
pub(crate) async fn universal_bootstrap(
    registry: &Registry,
    cluster: &str,
    initializers: &mut Vec<String>,
) -> Result<bool, RegistryError> {
    if !initializers.iter().any(|i| i == UNIVERSAL_INITIALIZER) {
        return Ok(false);
    }
    for namespace in NAMESPACES {
        registry.ensure_namespace(cluster, namespace).await?;
    }
    initializers.retain(|i| i != UNIVERSAL_INITIALIZER);
    Ok(true)
}

pub(super) async fn reconcile(
    registry: &Registry,
    cluster: &str,
    logical_cluster: &Value,
) -> Result<Outcome, RegistryError> {
    let mut remaining = initializers(logical_cluster);
    let ours = universal_bootstrap(registry, cluster, &mut remaining).await?;
    if !ours && !remaining.is_empty() {
        // Someone else's initializer: its owner removes it.
        return Ok(Outcome::Finished);
    }
    let target = Target {
        cluster,
        resource: system::logical_clusters(),
        namespace: None,
    };
    registry
        .privileged()
        .patch(target, LOGICAL_CLUSTER, &move |current: &Value| {
            let mut next = current.clone();
            // Others may have removed theirs meanwhile: only ours goes.
            let left: Vec<String> = initializers(current)
                .into_iter()
                .filter(|i| i != UNIVERSAL_INITIALIZER)
                .collect();
            let status = object::object_mut(&mut next, &["status"]).map_err(|e| {
                RegistryError::Internal(format!("LogicalCluster of {cluster}: {e}"))
            })?;
            if left.is_empty() && status.get("phase") == Some(&json!("Initializing")) {
                status.insert("phase".into(), json!("Ready"));
            }
            status.insert("initializers".into(), json!(left));
            Ok(next)
        })
        .await?;
    Ok(Outcome::Finished)
}
