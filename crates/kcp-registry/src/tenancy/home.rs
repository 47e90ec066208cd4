//! Home workspaces (`~`), as kcp's home-workspace handler: the first request for a user's home
//! creates a parent-less logical cluster named after the user ([`super::names::home_cluster_name`]),
//! of type `root:home`, with path `user:<name>`; once it is Ready, `~` answers a Workspace named
//! `~` that points at it. Its user administers it (`workspace-admin`).

use kcp_apimachinery::object::str_at;
use kcp_apis::system;
use serde_json::{Value, json};

use super::{LOGICAL_CLUSTER, PATH_ANNOTATION, ROOT, TYPE_ANNOTATION, names, types};
use crate::error::RegistryError;
use crate::store::{Registry, Target};

/// The state of a user's home.
#[derive(Debug)]
pub enum HomeWorkspace {
    /// Ready: the Workspace `~` to answer.
    Ready(Value),
    /// Created or still initializing: ask again shortly.
    Initializing,
}

impl Registry {
    /// The home workspace of `user`, created on first use.
    pub async fn home_workspace(&self, user: &str) -> Result<HomeWorkspace, RegistryError> {
        let cluster = names::home_cluster_name(user);
        let path = format!("user:{user}");
        let root = self.logical_cluster_shared(ROOT).await?;
        let base = str_at(&root, &["status", "URL"])
            .strip_suffix("/clusters/root")
            .unwrap_or_default()
            .to_string();
        let url = format!("{base}/clusters/{path}");
        let logical_cluster = match self.logical_cluster(&cluster).await {
            Ok(found) => found,
            Err(RegistryError::NotFound { .. }) => {
                self.create_home(&cluster, &path, &url).await?;
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
        Ok(HomeWorkspace::Ready(json!({
            "apiVersion": "tenancy.kcp.io/v1alpha1",
            "kind": "Workspace",
            "metadata": {
                "name": "~",
                "creationTimestamp": logical_cluster["metadata"]["creationTimestamp"],
                "annotations": {PATH_ANNOTATION: path},
            },
            "spec": {
                "type": {"name": "home", "path": ROOT},
                "cluster": cluster,
                "URL": url,
            },
            "status": {"phase": "Ready"},
        })))
    }

    async fn create_home(&self, cluster: &str, path: &str, url: &str) -> Result<(), RegistryError> {
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
                "annotations": {PATH_ANNOTATION: path, TYPE_ANNOTATION: "root:home"},
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
