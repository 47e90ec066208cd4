//! Scheduling: creates the workspace's LogicalCluster in the logical cluster admission named
//! (annotation `internal.tenancy.kcp.io/cluster`), owned by the workspace, with the initializers
//! of the workspace's type set, its path and URL, phase Initializing (Ready at once when there
//! is nothing to initialize); then writes `spec.cluster`, `spec.URL` and the phase to the
//! workspace in one write. The `root:universal` initializer's work (the namespaces `default`
//! and `kube-system`) is done first, in the new logical cluster, so the LogicalCluster starts
//! without it: a workspace of a type with no other initializer is Ready after this one pass,
//! two writes and two reconciles fewer than initializing it afterwards. A name another owner
//! already holds is replaced by a new random one. A workspace created by a user (annotation `experimental.tenancy.kcp.io/owner`) passes the
//! annotation to its LogicalCluster, and that user becomes the new logical cluster's admin: the
//! ClusterRoleBinding `workspace-admin` to `cluster-admin`, as kcp writes it.

use kcp_apimachinery::object;
use kcp_apis::system;
use kcp_registry::tenancy::paths::valid_cluster_name;
use kcp_registry::tenancy::{
    CLUSTER_ANNOTATION, LOGICAL_CLUSTER, LOGICAL_CLUSTER_FINALIZER, OWNER_ANNOTATION,
    PATH_ANNOTATION, TYPE_ANNOTATION, names, types,
};
use kcp_registry::{Registry, RegistryError, Target};
use serde_json::{Value, json};

use super::{change, mark_initialized, status_of};
use crate::conditions::{self, Condition};
use crate::driver::{Key, Outcome};

pub(super) async fn reconcile(
    registry: &Registry,
    key: &Key,
    workspace: &Value,
) -> Result<Outcome, RegistryError> {
    let Some(cluster) = workspace["metadata"]["annotations"][CLUSTER_ANNOTATION]
        .as_str()
        .filter(|name| valid_cluster_name(name))
    else {
        return rename(registry, key).await;
    };
    let parent = registry.logical_cluster_shared(&key.cluster).await?;
    let parent_path = parent["metadata"]["annotations"][PATH_ANNOTATION]
        .as_str()
        .unwrap_or(&key.cluster);
    let path = format!("{parent_path}:{}", key.name);
    let url = format!(
        "{}:{}",
        object::str_at(&parent, &["status", "URL"]),
        key.name
    );
    let (type_path, type_name) = types::workspace_type_reference(workspace);
    let ty = registry
        .resolve_workspace_type(parent_path, &type_path, &type_name)
        .await?;
    let type_annotation = ty.qualified();
    let set = registry.workspace_type_set(ty).await?;
    let initializers = types::initializers(&set);
    let terminators = types::terminators(&set);
    let mut remaining = initializers.clone();
    // The initializers' work, side by side: each waits for durable writes.
    let mut bound = remaining.clone();
    let (_, _) = futures::try_join!(
        crate::logicalcluster::universal_bootstrap(registry, cluster, &mut remaining),
        crate::logicalcluster::bind_default_apis(registry, cluster, &set, &mut bound),
    )?;
    remaining.retain(|i| bound.contains(i));
    let phase = if remaining.is_empty() {
        "Ready"
    } else {
        "Initializing"
    };
    let uid = workspace["metadata"]["uid"].clone();
    let owner = workspace["metadata"]["annotations"][OWNER_ANNOTATION]
        .as_str()
        .map(str::to_string);
    let mut logical_cluster = json!({
        "apiVersion": "core.kcp.io/v1alpha1",
        "kind": "LogicalCluster",
        "metadata": {
            "name": LOGICAL_CLUSTER,
            "finalizers": [LOGICAL_CLUSTER_FINALIZER],
            "annotations": {PATH_ANNOTATION: path, TYPE_ANNOTATION: type_annotation},
        },
        "spec": {
            "owner": {
                "apiVersion": "tenancy.kcp.io/v1alpha1",
                "resource": "workspaces",
                "name": key.name,
                "cluster": key.cluster,
                "uid": uid,
            },
            "initializers": initializers,
        },
        "status": {"phase": phase, "URL": url, "initializers": remaining},
    });
    if !terminators.is_empty() {
        logical_cluster["spec"]["terminators"] = json!(terminators);
        logical_cluster["status"]["terminators"] = json!(terminators);
    }
    if let Some(owner) = &owner {
        logical_cluster["metadata"]["annotations"][OWNER_ANNOTATION] = json!(owner);
    }
    let target = Target {
        cluster,
        resource: system::logical_clusters(),
        namespace: None,
    };
    match registry.privileged().create(target, logical_cluster).await {
        Ok(_) => {}
        Err(RegistryError::AlreadyExists { .. }) => {
            let existing = registry.get(target, LOGICAL_CLUSTER).await?;
            if existing["spec"]["owner"]["uid"] != uid {
                // Taken by someone else: choose another name.
                return rename(registry, key).await;
            }
        }
        Err(other) => return Err(other),
    }
    if let Some(owner) = &owner {
        make_admin(registry, cluster, owner).await?;
    }
    let cluster = cluster.to_string();
    change(registry, key, move |next| {
        let spec = object::object_mut(next, &["spec"])?;
        spec.insert("cluster".into(), json!(cluster));
        spec.insert("URL".into(), json!(url));
        let status = status_of(next)?;
        status.insert("phase".into(), json!(phase));
        status.insert("initializers".into(), json!(remaining));
        conditions::set(
            status,
            Condition {
                kind: "WorkspaceScheduled",
                status: true,
                reason: "",
                message: String::new(),
            },
        );
        if phase == "Ready" {
            mark_initialized(status);
        }
        Ok(())
    })
    .await?;
    Ok(Outcome::Finished)
}

/// Makes the user the owner annotation names the admin of `cluster` (kcp's `workspace-admin`).
async fn make_admin(registry: &Registry, cluster: &str, owner: &str) -> Result<(), RegistryError> {
    match serde_json::from_str::<Value>(owner)
        .ok()
        .and_then(|owner| owner["username"].as_str().map(str::to_string))
        .filter(|name| !name.is_empty())
    {
        Some(username) => registry.make_workspace_admin(cluster, &username).await,
        None => Ok(()),
    }
}

/// Gives the workspace a new logical cluster name; the next pass schedules it there.
async fn rename(registry: &Registry, key: &Key) -> Result<Outcome, RegistryError> {
    let name = names::new_cluster_name();
    change(registry, key, move |next| {
        object::set(
            next,
            &["metadata", "annotations", CLUSTER_ANNOTATION],
            json!(name),
        )
    })
    .await?;
    Ok(Outcome::Finished)
}
