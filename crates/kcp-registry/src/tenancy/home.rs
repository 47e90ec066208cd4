//! Home workspaces (`~`), as kcp's home-workspace handler: the first request for a user's home
//! creates a parent-less logical cluster named after the user ([`super::names::home_cluster_name`]),
//! of type `root:home`, with path `user:<name>`; once it is Ready, `~` answers a Workspace that
//! points at it by its logical cluster's name, as kcp's does. Its user administers it
//! (`workspace-admin`). Whether a user may have a home made is the API server's question (kcp
//! authorizes it as `create` of workspace `~` in root); the registry only makes it.

use kcp_apimachinery::object::str_at;
use kcp_apis::system;
use serde_json::{Value, json};

use super::{LOGICAL_CLUSTER, PATH_ANNOTATION, ROOT, TYPE_ANNOTATION, names, types};
use crate::error::RegistryError;
use crate::store::{Registry, Target};

/// The state of a user's home.
#[derive(Debug)]
pub enum HomeWorkspace {
    /// Ready: the Workspace to answer.
    Ready(Value),
    /// Created or still initializing: ask again shortly.
    Initializing,
    /// Not made yet, and not asked to make it.
    Missing,
}

impl Registry {
    /// The home workspace of `user`, made when missing if `create` says so.
    pub async fn home_workspace(
        &self,
        user: &str,
        create: bool,
    ) -> Result<HomeWorkspace, RegistryError> {
        let cluster = names::home_cluster_name(user);
        let logical_cluster = match self.logical_cluster(&cluster).await {
            Ok(found) => found,
            Err(RegistryError::NotFound { .. }) if !create => return Ok(HomeWorkspace::Missing),
            Err(RegistryError::NotFound { .. }) => {
                self.create_home(user, &cluster).await?;
                // The home belongs to its user.
                self.make_workspace_admin(&cluster, user).await?;
                return Ok(HomeWorkspace::Initializing);
            }
            Err(other) => return Err(other),
        };
        if str_at(&logical_cluster, &["status", "phase"]) != "Ready" {
            // Again while it initializes, in case a crash came between the two writes.
            self.make_workspace_admin(&cluster, user).await?;
            return Ok(HomeWorkspace::Initializing);
        }
        let status = &logical_cluster["status"];
        let mut workspace = json!({
            "apiVersion": "tenancy.kcp.io/v1alpha1",
            "kind": "Workspace",
            "metadata": {
                "name": LOGICAL_CLUSTER,
                "creationTimestamp": logical_cluster["metadata"]["creationTimestamp"],
            },
            "spec": {"cluster": cluster, "URL": status["URL"]},
            "status": {"phase": "Ready"},
        });
        for field in ["conditions", "initializers"] {
            let set =
                |value: &&Value| !value.is_null() && value.as_array().is_none_or(|a| !a.is_empty());
            if let Some(value) = status.get(field).filter(set) {
                workspace["status"][field] = value.clone();
            }
        }
        Ok(HomeWorkspace::Ready(workspace))
    }

    async fn create_home(&self, user: &str, cluster: &str) -> Result<(), RegistryError> {
        let root = self.logical_cluster_shared(ROOT).await?;
        // Reached by its logical cluster's name, as kcp's LogicalClusters' URLs are.
        let url = format!(
            "{}/clusters/{cluster}",
            str_at(&root, &["status", "URL"])
                .strip_suffix("/clusters/root")
                .unwrap_or_default()
        );
        let home_type = self
            .workspace_type_at(ROOT, "home")
            .await?
            .ok_or_else(|| RegistryError::Internal("the home workspace type is missing".into()))?;
        let initializers = types::initializers(&self.workspace_type_set(home_type).await?);
        let target = Target {
            cluster,
            resource: system::logical_clusters(),
            namespace: None,
        };
        let logical_cluster = json!({
            "apiVersion": "core.kcp.io/v1alpha1",
            "kind": "LogicalCluster",
            "metadata": {
                "name": LOGICAL_CLUSTER,
                "annotations": {PATH_ANNOTATION: format!("user:{user}"), TYPE_ANNOTATION: "root:home"},
            },
            "spec": {"initializers": initializers},
            "status": {"phase": "Initializing", "URL": url, "initializers": initializers},
        });
        match self.privileged().create(target, logical_cluster).await {
            Ok(_) | Err(RegistryError::AlreadyExists { .. }) => Ok(()),
            Err(other) => Err(other),
        }
    }
}
