//! An API provider's controller: it serves every workspace bound to its APIExport through the
//! export's virtual workspace (the URL of the export's APIExportEndpointSlice), with one
//! wildcard watch of the exported resource, and writes into each consumer's object, through
//! the view, `status.seen: true` — the status the provider owns, as any provider's controller
//! reports what it did with the objects its consumers made.
//!
//! Run it against `kcp start`, with `KUBECONFIG=.kcp/admin.kubeconfig`:
//! `cargo run -p kcp-sdk --example provider -- <export's workspace> <slice> <group>/<version>/<plural>`.

use std::sync::Arc;

use kube::Api;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};

use crate::{Action, ClusterConfig, ClusterKey, Controller};

/// Marks one consumer's object seen, unless it already is.
async fn mark_seen(
    view: &ClusterConfig,
    resource: &ApiResource,
    object: Arc<DynamicObject>,
    key: ClusterKey,
) -> Result<Action, kube::Error> {
    if object.data["status"]["seen"] == true {
        return Ok(Action::AwaitChange);
    }
    let client = view
        .client(&key.cluster)
        .map_err(|e| kube::Error::Service(e.to_string().into()))?;
    let objects: Api<DynamicObject> = match key.namespace.is_empty() {
        true => Api::all_with(client, resource),
        false => Api::namespaced_with(client, &key.namespace, resource),
    };
    let patch = serde_json::json!({"status": {"seen": true}});
    objects
        .patch_status(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(Action::AwaitChange)
}

/// Serves every consumer of the export behind `view` (a [`ClusterConfig::at`] an endpoint
/// URL) until `stop` completes: each object of `resource` in any of them is marked seen.
pub async fn run(
    view: ClusterConfig,
    resource: ApiResource,
    stop: impl std::future::Future<Output = ()>,
) -> anyhow::Result<()> {
    let wildcard: Api<DynamicObject> = Api::all_with(view.wildcard()?, &resource);
    let controller = Controller::new(wildcard);
    controller
        .run(
            |object, key| {
                let (view, resource) = (view.clone(), resource.clone());
                async move { mark_seen(&view, &resource, object, key).await }
            },
            stop,
        )
        .await;
    Ok(())
}
