//! The root logical cluster as kcp bootstraps it: its LogicalCluster (`kcp.io/path: root`, type
//! `root:root`, Ready, with the server's URL), namespaces `default` and `kube-system`, and the
//! WorkspaceTypes `root`, `universal`, `organization`, `team` and `home`, and the root policy
//! letting every authenticated user enter root, have a home workspace made, and use the types
//! `universal`, `organization` and `team`, and the APIs root exports (`crate::apis::root`),
//! which the universal type binds in every workspace. Objects that exist are kept (create
//! only), but the root's URL follows the address of this start.

use kcp_apimachinery::object;
use kcp_apis::system;
use serde_json::{Value, json};

use super::{LOGICAL_CLUSTER, PATH_ANNOTATION, ROOT, TYPE_ANNOTATION};
use crate::error::RegistryError;
use crate::store::{Registry, Target};

/// A ClusterRoleBinding `name` of the ClusterRole `role` to every authenticated user. kcp's
/// root policy has four: entering root (`system:kcp:workspace:access`), reading workspaces
/// (`system:kcp:tenancy:reader`), having a home made, and using the universal workspace types.
fn bind_authenticated(name: &str, role: &str) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": role,
        },
        "subjects": [{
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Group",
            "name": "system:authenticated",
        }],
    })
}

/// kcp's root policy: verb `use` on the WorkspaceTypes `universal`, `organization` and
/// `team`, which creating a workspace of that type needs (granted to every authenticated user).
fn workspace_type_use() -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "system:kcp:universal-workspacetype-use"},
        "rules": [{
            "apiGroups": ["tenancy.kcp.io"],
            "resources": ["workspacetypes"],
            "resourceNames": ["universal", "organization", "team"],
            "verbs": ["use"],
        }],
    })
}

/// kcp's `system:kcp:home-clusterworkspace-create`: getting and creating the workspace `~`,
/// which having a home workspace made on first use needs (bound in root to every
/// authenticated user, kcp's default `--home-workspaces-home-creator-groups`).
fn home_create() -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "system:kcp:home-clusterworkspace-create"},
        "rules": [{
            "apiGroups": ["tenancy.kcp.io"],
            "resources": ["workspaces"],
            "resourceNames": ["~"],
            "verbs": ["get", "create"],
        }],
    })
}

/// A `{name, path: root}` type reference.
fn root_type(name: &str) -> Value {
    json!({"name": name, "path": ROOT})
}

/// The built-in WorkspaceTypes, as kcp's root bootstrap (with the `workspace-types` battery).
fn workspace_types() -> Vec<Value> {
    let ty = |name: &str, spec: Value| {
        json!({
            "apiVersion": "tenancy.kcp.io/v1alpha1",
            "kind": "WorkspaceType",
            "metadata": {"name": name},
            "spec": spec,
        })
    };
    vec![
        ty(
            "universal",
            json!({
                "initializer": true,
                "defaultAPIBindings": crate::apis::root::EXPORTS
                    .iter()
                    .map(|export| json!({"path": ROOT, "export": export}))
                    .collect::<Vec<_>>(),
            }),
        ),
        ty(
            "root",
            json!({
                "extend": {"with": [root_type("universal")]},
                "defaultChildWorkspaceType": root_type("organization"),
                "limitAllowedParents": {"none": true},
            }),
        ),
        ty(
            "organization",
            json!({
                "extend": {"with": [root_type("universal")]},
                "defaultChildWorkspaceType": root_type("universal"),
                "limitAllowedChildren": {"types": [root_type("universal")]},
                "limitAllowedParents": {"types": [root_type("root")]},
            }),
        ),
        ty(
            "team",
            json!({
                "extend": {"with": [root_type("universal")]},
                "defaultChildWorkspaceType": root_type("universal"),
                "limitAllowedParents": {"types": [root_type("organization"), root_type("team")]},
            }),
        ),
        ty(
            "home",
            json!({
                "extend": {"with": [root_type("universal")]},
                "defaultChildWorkspaceType": root_type("universal"),
                "limitAllowedParents": {"none": true},
            }),
        ),
    ]
}

impl Registry {
    /// Creates what the root logical cluster starts with (see the module docs); `url` is how
    /// clients reach it (`https://<host>:<port>/clusters/root`).
    pub async fn bootstrap_root(&self, url: &str) -> Result<(), RegistryError> {
        let privileged = self.privileged();
        let logical_clusters = Target {
            cluster: ROOT,
            resource: system::logical_clusters(),
            namespace: None,
        };
        let root = json!({
            "apiVersion": "core.kcp.io/v1alpha1",
            "kind": "LogicalCluster",
            "metadata": {
                "name": LOGICAL_CLUSTER,
                "annotations": {
                    PATH_ANNOTATION: ROOT,
                    TYPE_ANNOTATION: "root:root",
                    "experimental.tenancy.kcp.io/owner": "{\"username\":\"system:kcp-bootstrapper\"}",
                },
            },
            "spec": {},
            "status": {"phase": "Ready", "URL": url},
        });
        match privileged.create(logical_clusters, root).await {
            Ok(_) => {}
            Err(RegistryError::AlreadyExists { .. }) => {
                let url = url.to_string();
                privileged
                    .patch(
                        logical_clusters,
                        LOGICAL_CLUSTER,
                        &move |current: &Value| {
                            let mut next = current.clone();
                            object::set(&mut next, &["status", "URL"], json!(url)).map_err(
                                |e| RegistryError::Internal(format!("root LogicalCluster: {e}")),
                            )?;
                            Ok(next)
                        },
                    )
                    .await?;
            }
            Err(other) => return Err(other),
        }
        for namespace in ["default", "kube-system"] {
            self.ensure_namespace(ROOT, namespace).await?;
        }
        let types = Target {
            cluster: ROOT,
            resource: system::workspace_types(),
            namespace: None,
        };
        for ty in workspace_types() {
            match self.create(types, ty).await {
                Ok(_) | Err(RegistryError::AlreadyExists { .. }) => {}
                Err(other) => return Err(other),
            }
        }
        let bindings = Target {
            cluster: ROOT,
            resource: kcp_apis::builtin::rbac("clusterrolebindings"),
            namespace: None,
        };
        let roles = Target {
            resource: kcp_apis::builtin::rbac("clusterroles"),
            ..bindings
        };
        self.bootstrap_root_apis().await?;
        for (target, object) in [
            (
                bindings,
                bind_authenticated(
                    "system:kcp:tenancy:authenticated:access",
                    "system:kcp:workspace:access",
                ),
            ),
            (
                bindings,
                bind_authenticated(
                    "system:kcp:authenticated:tenancy:reader",
                    "system:kcp:tenancy:reader",
                ),
            ),
            (roles, home_create()),
            (
                bindings,
                bind_authenticated(
                    "system:kcp:configured-group:home-clusterworkspace-create",
                    "system:kcp:home-clusterworkspace-create",
                ),
            ),
            (roles, workspace_type_use()),
            (
                bindings,
                bind_authenticated(
                    "system:kcp:authenticated:universal-workspacetype-use",
                    "system:kcp:universal-workspacetype-use",
                ),
            ),
        ] {
            match self.create(target, object).await {
                Ok(_) | Err(RegistryError::AlreadyExists { .. }) => {}
                Err(other) => return Err(other),
            }
        }
        Ok(())
    }
}
