//! Initialization: the `root:universal` initializer's work (namespaces `default` and
//! `kube-system`), the `system:apibindings` initializer's (the APIBindings the workspace's
//! types bind by default, kcp's apibinder: its initializer goes once all are Bound), and phase
//! Ready once no initializer is left. A workspace's scheduling does that work itself before it
//! creates the LogicalCluster (see [`universal_bootstrap`], [`bind_default_apis`]); this step
//! serves the LogicalClusters created otherwise (home workspaces) and any created still holding
//! the initializers (an export not ready yet).

use kcp_apimachinery::object;
use kcp_apis::system;
use kcp_registry::tenancy::types::{self, APIBINDINGS_INITIALIZER, WorkspaceType};
use kcp_registry::tenancy::{LOGICAL_CLUSTER, TYPE_ANNOTATION, UNIVERSAL_INITIALIZER};
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
    // At once: each waits for its durable write, and a workspace waits for them all.
    futures::future::try_join_all(
        NAMESPACES
            .iter()
            .map(|namespace| registry.ensure_namespace(cluster, namespace)),
    )
    .await?;
    initializers.retain(|i| i != UNIVERSAL_INITIALIZER);
    Ok(true)
}

/// Binds the APIs the workspace type set `set` binds by default in `cluster` if `initializers`
/// holds [`APIBINDINGS_INITIALIZER`], and takes it out of them once every binding is Bound;
/// whether it did.
pub(crate) async fn bind_default_apis(
    registry: &Registry,
    cluster: &str,
    set: &[WorkspaceType],
    initializers: &mut Vec<String>,
) -> Result<bool, RegistryError> {
    if !initializers.iter().any(|i| i == APIBINDINGS_INITIALIZER) {
        return Ok(false);
    }
    let wanted = types::default_api_bindings(set);
    let bound = futures::future::try_join_all(
        wanted
            .iter()
            .map(|(path, export)| crate::apis::bind_default(registry, cluster, path, export)),
    )
    .await?;
    let all_bound = bound.into_iter().all(|b| b);
    if all_bound {
        initializers.retain(|i| i != APIBINDINGS_INITIALIZER);
    }
    Ok(all_bound)
}

/// The type set of the workspace whose LogicalCluster is `logical_cluster` (its type
/// annotation, `<path>:<name>`).
async fn type_set(
    registry: &Registry,
    logical_cluster: &Value,
) -> Result<Vec<WorkspaceType>, RegistryError> {
    let qualified = object::str_at(
        logical_cluster,
        &["metadata", "annotations", TYPE_ANNOTATION],
    );
    let Some((path, name)) = qualified.rsplit_once(':') else {
        return Ok(Vec::new());
    };
    let ty = registry
        .resolve_workspace_type(kcp_registry::tenancy::ROOT, path, name)
        .await?;
    registry.workspace_type_set(ty).await
}

pub(super) async fn reconcile(
    registry: &Registry,
    cluster: &str,
    logical_cluster: &Value,
) -> Result<Outcome, RegistryError> {
    let mut remaining = initializers(logical_cluster);
    let universal = universal_bootstrap(registry, cluster, &mut remaining).await?;
    let mut bindings = false;
    if remaining.iter().any(|i| i == APIBINDINGS_INITIALIZER) {
        let set = type_set(registry, logical_cluster).await?;
        bindings = bind_default_apis(registry, cluster, &set, &mut remaining).await?;
        if !bindings {
            // A binding's events bring it back; this, if none comes (its export not ready).
            return Ok(Outcome::Again(std::time::Duration::from_secs(1)));
        }
    }
    if !universal && !bindings && !remaining.is_empty() {
        // Someone else's initializer: its owner removes it.
        return Ok(Outcome::Finished);
    }
    let mut removed = Vec::new();
    if universal {
        removed.push(UNIVERSAL_INITIALIZER);
    }
    if bindings {
        removed.push(APIBINDINGS_INITIALIZER);
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
            // Others may have removed theirs meanwhile: only ours go.
            let left: Vec<String> = initializers(current)
                .into_iter()
                .filter(|i| !removed.contains(&i.as_str()))
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
