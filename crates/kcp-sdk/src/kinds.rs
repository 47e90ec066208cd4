//! kcp's tenancy kinds as typed kube-rs resources: `Workspace` and `WorkspaceType`
//! (tenancy.kcp.io/v1alpha1) and `LogicalCluster` (core.kcp.io/v1alpha1), with the fields kcp
//! documents; anything else an object carries is kept in `extra` and written back unchanged.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::ObjectMeta;
use kube::core::ClusterResourceScope;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

macro_rules! cluster_scoped_kind {
    ($kind:ident, $spec:ty, $status:ty, $group:literal, $version:literal, $plural:literal) => {
        #[derive(Clone, Debug, Default, Serialize, Deserialize)]
        pub struct $kind {
            #[serde(rename = "apiVersion", default)]
            pub api_version: String,
            #[serde(default)]
            pub kind: String,
            #[serde(default)]
            pub metadata: ObjectMeta,
            #[serde(default)]
            pub spec: $spec,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub status: Option<$status>,
        }

        impl kube::Resource for $kind {
            type DynamicType = ();
            type Scope = ClusterResourceScope;

            fn kind(_: &()) -> Cow<'_, str> {
                Cow::Borrowed(stringify!($kind))
            }
            fn group(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($group)
            }
            fn version(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($version)
            }
            fn plural(_: &()) -> Cow<'_, str> {
                Cow::Borrowed($plural)
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }

        impl $kind {
            /// A new object named `name` with `spec`.
            pub fn new(name: &str, spec: $spec) -> Self {
                $kind {
                    api_version: api_version::<$kind>(),
                    kind: kind::<$kind>(),
                    metadata: ObjectMeta {
                        name: Some(name.to_string()),
                        ..ObjectMeta::default()
                    },
                    spec,
                    status: None,
                }
            }
        }
    };
}

fn api_version<K: kube::Resource<DynamicType = ()>>() -> String {
    K::api_version(&()).into_owned()
}

fn kind<K: kube::Resource<DynamicType = ()>>() -> String {
    K::kind(&()).into_owned()
}

/// A workspace's type, as `spec.type` names it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkspaceTypeReference {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WorkspaceSpec {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub type_: Option<WorkspaceTypeReference>,
    /// The logical cluster the workspace is (set by the server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    /// Where the workspace is served (set by the server).
    #[serde(rename = "URL", default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WorkspaceStatus {
    /// `Scheduling`, `Initializing`, `Ready` or `Terminating`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

cluster_scoped_kind!(
    Workspace,
    WorkspaceSpec,
    WorkspaceStatus,
    "tenancy.kcp.io",
    "v1alpha1",
    "workspaces"
);

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WorkspaceTypeSpec {
    #[serde(
        rename = "defaultChildWorkspaceType",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub default_child_workspace_type: Option<WorkspaceTypeReference>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WorkspaceTypeStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Value>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

cluster_scoped_kind!(
    WorkspaceType,
    WorkspaceTypeSpec,
    WorkspaceTypeStatus,
    "tenancy.kcp.io",
    "v1alpha1",
    "workspacetypes"
);

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LogicalClusterSpec {
    #[serde(rename = "directlyDeletable", default)]
    pub directly_deletable: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub initializers: Vec<String>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct LogicalClusterStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(rename = "URL", default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub initializers: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

cluster_scoped_kind!(
    LogicalCluster,
    LogicalClusterSpec,
    LogicalClusterStatus,
    "core.kcp.io",
    "v1alpha1",
    "logicalclusters"
);

#[cfg(test)]
mod tests {
    use kube::Resource;
    use serde_json::json;

    use super::*;

    #[test]
    fn kinds_read_and_write_kcps_json() {
        let workspace: Workspace = serde_json::from_value(json!({
            "apiVersion": "tenancy.kcp.io/v1alpha1", "kind": "Workspace",
            "metadata": {"name": "team"},
            "spec": {"type": {"name": "universal", "path": "root"}, "cluster": "2abc", "URL": "https://x/clusters/root:team", "mount": {"x": 1}},
            "status": {"phase": "Ready"},
        }))
        .unwrap();
        assert_eq!(workspace.spec.cluster.as_deref(), Some("2abc"));
        assert_eq!(
            workspace.status.as_ref().unwrap().phase.as_deref(),
            Some("Ready")
        );
        let back = serde_json::to_value(&workspace).unwrap();
        assert_eq!(
            back["spec"]["mount"],
            json!({"x": 1}),
            "unknown fields are kept"
        );
        assert_eq!(back["spec"]["URL"], "https://x/clusters/root:team");
        assert_eq!(Workspace::plural(&()), "workspaces");
        assert_eq!(LogicalCluster::api_version(&()), "core.kcp.io/v1alpha1");
        let new = serde_json::to_value(Workspace::new("a", WorkspaceSpec::default())).unwrap();
        assert_eq!(new["apiVersion"], "tenancy.kcp.io/v1alpha1");
        assert_eq!(new["kind"], "Workspace");
    }
}
