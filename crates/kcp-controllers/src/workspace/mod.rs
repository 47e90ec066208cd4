//! The workspace controller: gives each Workspace its logical cluster and follows it through
//! its lifecycle, as kcp's workspace reconciler does (one file per step):
//!
//! - [`scheduling`]: a Scheduling workspace gets its LogicalCluster (in the cluster named by the
//!   annotation admission chose), then `spec.cluster`, `spec.URL` and phase Initializing;
//! - [`phase`]: an Initializing workspace mirrors its LogicalCluster's initializers and becomes
//!   Ready when the LogicalCluster is;
//! - [`deletion`]: a deleting workspace deletes its LogicalCluster and lets go of its finalizer
//!   once the LogicalCluster (and so everything in it) is gone.
//!
//! One task for every logical cluster; it also follows LogicalClusters, whose `spec.owner`
//! names the Workspace an event concerns.

mod deletion;
mod phase;
mod scheduling;

use kcp_apimachinery::object::{self, WrongType};
use kcp_apis::system;
use kcp_registry::tenancy::WORKSPACE_FINALIZER;
use kcp_registry::{Registry, RegistryError, Summary, Target};
use serde_json::{Map, Value};

use crate::Context;
use crate::driver::{Also, Controller, Key, Listing, Outcome, Source};

/// Whether a workspace still needs the controller.
fn needs_work(workspace: &Summary) -> bool {
    workspace.deleting || workspace.phase.as_deref() != Some("Ready")
}

/// The Workspace a LogicalCluster belongs to, from its `spec.owner`.
fn owner(_cluster: &str, logical_cluster: &Value) -> Option<Key> {
    let owner = &logical_cluster["spec"]["owner"];
    if owner["resource"] != "workspaces" {
        return None;
    }
    Some(Key {
        cluster: owner["cluster"].as_str()?.to_string(),
        namespace: String::new(),
        name: owner["name"].as_str()?.to_string(),
    })
}

pub(crate) fn workspaces(cluster: &str) -> Target<'_> {
    Target {
        cluster,
        resource: system::workspaces(),
        namespace: None,
    }
}

/// Changes the workspace `key` by `edit` (the whole object, status included), retrying lost
/// races; a stored workspace whose fields have the wrong type fails the change (a 500: nothing
/// a controller can repair).
pub(crate) async fn change(
    registry: &Registry,
    key: &Key,
    edit: impl Fn(&mut Value) -> Result<(), WrongType> + Send + Sync,
) -> Result<Value, RegistryError> {
    registry
        .privileged()
        .patch(
            workspaces(&key.cluster),
            &key.name,
            &move |current: &Value| {
                let mut next = current.clone();
                edit(&mut next).map_err(|e| {
                    RegistryError::Internal(format!("workspace {}|{}: {e}", key.cluster, key.name))
                })?;
                Ok(next)
            },
        )
        .await
}

/// The `status` object of a workspace being changed.
pub(crate) fn status_of(workspace: &mut Value) -> Result<&mut Map<String, Value>, WrongType> {
    object::object_mut(workspace, &["status"])
}

/// Sets `WorkspaceInitialized=True` in a workspace's status.
pub(crate) fn mark_initialized(status: &mut Map<String, Value>) {
    crate::conditions::set(
        status,
        crate::conditions::Condition {
            kind: "WorkspaceInitialized",
            status: true,
            reason: "",
            message: String::new(),
        },
    );
}

/// Reconciles one workspace.
pub async fn reconcile(registry: &Registry, key: &Key) -> Result<Outcome, RegistryError> {
    let workspace = match registry.get(workspaces(&key.cluster), &key.name).await {
        Ok(workspace) => workspace,
        Err(RegistryError::NotFound { .. }) => return Ok(Outcome::Finished),
        Err(other) => return Err(other),
    };
    if workspace["metadata"]["deletionTimestamp"].is_string() {
        return deletion::reconcile(registry, key, &workspace).await;
    }
    let has_finalizer = workspace["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| f.iter().any(|f| f == WORKSPACE_FINALIZER));
    if !has_finalizer {
        // Admission adds it; a client may have removed it since.
        change(registry, key, |next| {
            let metadata = object::object_mut(next, &["metadata"])?;
            let finalizers = metadata
                .entry("finalizers")
                .or_insert_with(|| serde_json::json!([]));
            if !finalizers.is_array() {
                *finalizers = serde_json::json!([]);
            }
            if let Some(list) = finalizers.as_array_mut()
                && !list.iter().any(|f| f == WORKSPACE_FINALIZER)
            {
                list.push(serde_json::json!(WORKSPACE_FINALIZER));
            }
            Ok(())
        })
        .await?;
        return Ok(Outcome::Finished);
    }
    match workspace["status"]["phase"].as_str() {
        Some("Initializing") => phase::reconcile(registry, key, &workspace).await,
        Some("Ready") => Ok(Outcome::Finished),
        _ if workspace["spec"]["cluster"].is_string() => {
            phase::reconcile(registry, key, &workspace).await
        }
        _ => scheduling::reconcile(registry, key, &workspace).await,
    }
}

/// Runs the controller until `stop` turns true.
pub async fn run(registry: Registry, context: Context) {
    Controller {
        name: "workspace",
        resource: system::workspaces(),
        wants: |workspace| needs_work(&Summary::of_value(workspace)),
        listed: Listing::Summaries(needs_work),
        deletions: false,
        reconcile: |registry, key: Key| Box::pin(async move { reconcile(&registry, &key).await }),
        workers: crate::driver::WORKERS,
        also: vec![Also {
            source: Source::Resource(system::logical_clusters()),
            key: owner,
            watched: kcp_registry::Watched::All,
        }],
    }
    .run(registry, context)
    .await
}
