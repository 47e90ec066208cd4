//! kcp's own kinds, served in every logical cluster as kcp serves its "system CRDs": defined like
//! CustomResourceDefinitions (so they get schemas, printer columns and a status subresource from
//! the same machinery as custom resources), but there is no CRD object to list or delete.
//!
//! - `tenancy.kcp.io/v1alpha1` `workspaces` (short name `ws`) and `workspacetypes`;
//! - `core.kcp.io/v1alpha1` `logicalclusters` (the singleton `cluster` of every logical cluster);
//! - `apis.kcp.io`: `apiresourceschemas` and `apiexportendpointslices` (v1alpha1), `apiexports`
//!   and `apibindings` (v1alpha1 and v1alpha2, stored at v1alpha2 and converted by kcp's own
//!   rules: [`conversion`]);
//! - physical clusters, as kcp's 2021 prototype named them: `cluster.example.dev/v1alpha1`
//!   `clusters`, and `apiresource.kcp.io/v1alpha1` `apiresourceimports` (one resource's schema
//!   as one cluster serves it) and `negotiatedapiresources` (the schema all of them accept).

use std::sync::LazyLock;

use crate::builtin::Resource;

pub mod conversion;

/// The CRD specs of the system kinds, as YAML.
const SPECS: &[&str] = &[
    include_str!("system/logicalclusters.yaml"),
    include_str!("system/workspaces.yaml"),
    include_str!("system/workspacetypes.yaml"),
    include_str!("system/apiresourceschemas.yaml"),
    include_str!("system/apiexports.yaml"),
    include_str!("system/apibindings.yaml"),
    include_str!("system/apiexportendpointslices.yaml"),
    include_str!("system/clusters.yaml"),
    include_str!("system/apiresourceimports.yaml"),
    include_str!("system/negotiatedapiresources.yaml"),
];

/// Built once per process and kept (a fixed set, unlike custom resources).
static RESOURCES: LazyLock<Vec<Resource>> = LazyLock::new(|| {
    SPECS
        .iter()
        .flat_map(|yaml| {
            let spec: serde_json::Value =
                serde_saphyr::from_str(yaml).expect("the system CRD specs are valid YAML");
            crate::custom::build(&spec, None)
        })
        .collect()
});

/// The CRD spec of the system kind `plural` of `group` (what root's exports publish as its
/// APIResourceSchema).
pub fn crd_spec(group: &str, plural: &str) -> Option<serde_json::Value> {
    SPECS.iter().find_map(|yaml| {
        let spec: serde_json::Value = serde_saphyr::from_str(yaml).ok()?;
        (spec["group"] == group && spec["names"]["plural"] == plural).then_some(spec)
    })
}

/// Every system resource, in the order discovery lists them.
pub fn resources() -> &'static [Resource] {
    &RESOURCES
}

/// The system resource `plural` of `group/version`, if there is one.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
    resources()
        .iter()
        .find(|r| r.group == group && r.version == version && r.name == plural)
}

/// Whether `resource` is one of the system kinds. Reads of their objects skip what a custom
/// resource's get besides defaulting: there is one version (nothing to convert), and every
/// object was pruned on its way in by the same compiled-in schema that serves it (pruning
/// again removes nothing; it took an eighth of a list of 1,000 workspaces). Defaults are still
/// applied as objects are read, as Kubernetes does: a new workspace's `status.phase` is
/// stored by no one until its controller writes its status.
pub fn is_system(resource: &Resource) -> bool {
    find(&resource.group, &resource.version, &resource.name).is_some()
}

/// Whether `resource` is one of the system kinds with more than one version, whose objects are
/// converted between them by [`conversion::convert`].
pub fn converts(resource: &Resource) -> bool {
    is_system(resource) && resource.custom().is_some_and(|c| c.versions.len() > 1)
}

/// The group of kcp's API sharing kinds.
pub const APIS_GROUP: &str = "apis.kcp.io";

/// The system resource `plural` of `apis.kcp.io` at its storage version.
fn apis(plural: &str) -> &'static Resource {
    resources()
        .iter()
        .find(|r| {
            r.group == APIS_GROUP
                && r.name == plural
                && r.custom().is_some_and(|c| c.storage_version == *r.version)
        })
        .expect("the apis.kcp.io kinds are system resources")
}

/// The `APIResourceSchema` resource.
pub fn api_resource_schemas() -> &'static Resource {
    apis("apiresourceschemas")
}

/// The `APIExport` resource, at its storage version (v1alpha2).
pub fn api_exports() -> &'static Resource {
    apis("apiexports")
}

/// The `APIBinding` resource, at its storage version (v1alpha2).
pub fn api_bindings() -> &'static Resource {
    apis("apibindings")
}

/// The `APIExportEndpointSlice` resource.
pub fn api_export_endpoint_slices() -> &'static Resource {
    apis("apiexportendpointslices")
}

/// The `Workspace` resource.
pub fn workspaces() -> &'static Resource {
    find("tenancy.kcp.io", "v1alpha1", "workspaces").expect("workspaces are a system resource")
}

/// The `WorkspaceType` resource.
pub fn workspace_types() -> &'static Resource {
    find("tenancy.kcp.io", "v1alpha1", "workspacetypes")
        .expect("workspacetypes are a system resource")
}

/// The `LogicalCluster` resource.
pub fn logical_clusters() -> &'static Resource {
    find("core.kcp.io", "v1alpha1", "logicalclusters")
        .expect("logicalclusters are a system resource")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_system_kinds_are_served_with_their_names_and_subresources() {
        let ws = workspaces();
        assert_eq!(ws.kind, "Workspace");
        assert!(!ws.namespaced);
        assert_eq!(*ws.short_names, ["ws"]);
        assert_eq!(*ws.categories, ["kcp"]);
        assert!(ws.subresources.iter().any(|(name, _)| *name == "status"));
        let columns: Vec<&str> = ws
            .custom()
            .unwrap()
            .printer_columns
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(columns, ["Type", "Region", "Phase", "URL", "Age"]);
        assert_eq!(workspace_types().kind, "WorkspaceType");
        assert_eq!(logical_clusters().kind, "LogicalCluster");
        assert_eq!(resources().len(), 12);
        let clusters = find("cluster.example.dev", "v1alpha1", "clusters").unwrap();
        assert_eq!(clusters.kind, "Cluster");
        assert!(!clusters.namespaced);
        assert!(
            clusters
                .subresources
                .iter()
                .any(|(name, _)| *name == "status")
        );
        for plural in ["apiresourceimports", "negotiatedapiresources"] {
            assert!(find("apiresource.kcp.io", "v1alpha1", plural).is_some());
        }
        assert_eq!(api_exports().version, "v1alpha2");
        assert_eq!(api_bindings().version, "v1alpha2");
        assert!(converts(api_exports()) && !converts(api_resource_schemas()));
        assert!(!api_bindings().namespaced);
    }

    #[test]
    fn workspace_defaults_come_from_the_schema() {
        let defaults = workspaces().custom().unwrap().defaults.as_ref().unwrap();
        let mut ws = serde_json::json!({"metadata": {"name": "a"}});
        defaults.apply(&mut ws);
        assert_eq!(ws["status"]["phase"], "Scheduling");
    }
}
