//! kcp's tenancy: workspaces, their types and the logical clusters behind them.
//!
//! - [`names`]: logical cluster names (random for workspaces, derived from the user for homes);
//! - [`paths`]: kcp's grammar of paths and cluster names, and `/clusters/root:org:team`
//!   resolved to an existing logical cluster through Workspaces;
//! - [`types`]: WorkspaceType references, `extend`, allowed parents and children, initializers;
//! - `admission`: what writing a Workspace, LogicalCluster or WorkspaceType checks and sets
//!   (the fields that name or own a logical cluster are the server's alone);
//! - `bootstrap`: the root logical cluster and the built-in WorkspaceTypes;
//! - `home`: users' home workspaces (`~`).
//!
//! The lifecycle (Scheduling → Initializing → Ready, deletion) is driven by controllers in
//! `kcp-controllers`; this module holds what they and the request path share.

mod admission;
mod bootstrap;
mod home;
pub mod names;
pub mod paths;
pub mod types;

pub use home::HomeWorkspace;

/// The root logical cluster.
pub const ROOT: &str = "root";
/// The name of the one LogicalCluster of every logical cluster.
pub const LOGICAL_CLUSTER: &str = "cluster";
/// The canonical path of a logical cluster, on its LogicalCluster.
pub const PATH_ANNOTATION: &str = "kcp.io/path";
/// `<type path>:<type name>` of a logical cluster, on its LogicalCluster.
pub const TYPE_ANNOTATION: &str = "internal.tenancy.kcp.io/type";
/// The logical cluster name chosen for a Workspace, on the Workspace.
pub const CLUSTER_ANNOTATION: &str = "internal.tenancy.kcp.io/cluster";
/// Who created a workspace (`authentication.k8s.io/v1` UserInfo as JSON), on the Workspace and
/// its LogicalCluster; that user is the workspace's first admin (`workspace-admin`).
pub const OWNER_ANNOTATION: &str = "experimental.tenancy.kcp.io/owner";

/// The ClusterRoleBinding `workspace-admin` kcp writes in a new logical cluster: its owner
/// `username` gets `cluster-admin` there.
pub fn workspace_admin_binding(username: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "workspace-admin"},
        "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": username}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
    })
}

impl crate::store::Registry {
    /// Makes `username` the admin of `cluster` ([`workspace_admin_binding`]; kept if it exists).
    pub async fn make_workspace_admin(
        &self,
        cluster: &str,
        username: &str,
    ) -> Result<(), crate::error::RegistryError> {
        let resource = kcp_apis::builtin::rbac("clusterrolebindings");
        let target = crate::store::Target {
            cluster,
            resource,
            namespace: None,
        };
        match self
            .privileged()
            .create(target, workspace_admin_binding(username))
            .await
        {
            Ok(_) | Err(crate::error::RegistryError::AlreadyExists { .. }) => Ok(()),
            Err(other) => Err(other),
        }
    }
}
/// Keeps a Workspace until its logical cluster is gone.
pub const WORKSPACE_FINALIZER: &str = "core.kcp.io/logicalcluster";
/// Keeps a LogicalCluster until everything in its cluster is gone.
pub const LOGICAL_CLUSTER_FINALIZER: &str = "core.kcp.io/logicalcluster-deletion";
/// The initializer of the `universal` type, which the bootstrap controller serves.
pub const UNIVERSAL_INITIALIZER: &str = "root:universal";

/// The parent path of `path` (`root:a` for `root:a:b`), if it has one.
pub fn parent_path(path: &str) -> Option<&str> {
    path.rsplit_once(':').map(|(parent, _)| parent)
}
