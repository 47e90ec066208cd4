//! The APIs root exports, as kcp's root bootstrap makes them: `tenancy.kcp.io` (workspaces and
//! workspace types; served here by kcp's system kinds, which take precedence, as kcp's system
//! CRDs do) and `topology.kcp.io` (partitions and partition sets, served by the bindings),
//! their APIResourceSchemas, and root's own bindings, named as the exports. The universal
//! WorkspaceType binds both in every workspace it initializes (`defaultAPIBindings`).

use serde_json::{Value, json};

use crate::error::RegistryError;
use crate::store::{Registry, Target};
use crate::tenancy::ROOT;

/// The exports root makes, each with its schemas' names.
pub const EXPORTS: &[&str] = &["tenancy.kcp.io", "topology.kcp.io"];

/// kcp's names of the tenancy schemas.
const TENANCY_SCHEMAS: &[(&str, &str)] = &[
    ("workspaces", "v260522-2bf05df66.workspaces.tenancy.kcp.io"),
    (
        "workspacetypes",
        "v260428-f702a24c5.workspacetypes.tenancy.kcp.io",
    ),
];

/// kcp's topology schemas (its config/root-phase0 files, as JSON).
const TOPOLOGY_SCHEMAS: &[&str] = &[
    include_str!("root/partitions.json"),
    include_str!("root/partitionsets.json"),
];

/// A CRD spec as an APIResourceSchema's spec (each version's schema unwrapped).
fn schema_spec(crd_spec: &Value) -> Value {
    let mut spec = crd_spec.clone();
    if let Some(versions) = spec["versions"].as_array_mut() {
        for version in versions {
            let schema = version["schema"]["openAPIV3Schema"].take();
            version["schema"] = schema;
        }
    }
    spec
}

/// Root's APIResourceSchemas: `(name, spec)`.
fn schemas() -> Vec<(String, Value)> {
    let mut all = Vec::new();
    for (plural, name) in TENANCY_SCHEMAS {
        let spec = kcp_apis::system::crd_spec("tenancy.kcp.io", plural)
            .expect("the tenancy kinds are system kinds");
        all.push((name.to_string(), schema_spec(&spec)));
    }
    for text in TOPOLOGY_SCHEMAS {
        let parsed: Value =
            serde_json::from_str(text).expect("root's topology schemas are valid JSON");
        let name = parsed["name"].as_str().unwrap_or_default().to_string();
        all.push((name, parsed["spec"].clone()));
    }
    all
}

fn export(name: &str, schemas: &[(String, Value)]) -> Value {
    let resources: Vec<Value> = schemas
        .iter()
        .filter(|(_, spec)| spec["group"] == name)
        .map(|(schema, spec)| {
            json!({"group": spec["group"], "name": spec["names"]["plural"],
                   "schema": schema, "storage": {"crd": {}}})
        })
        .collect();
    json!({
        "apiVersion": "apis.kcp.io/v1alpha2",
        "kind": "APIExport",
        "metadata": {"name": name},
        "spec": {"resources": resources},
    })
}

impl Registry {
    /// Creates root's schemas, exports and own bindings where missing.
    pub(crate) async fn bootstrap_root_apis(&self) -> Result<(), RegistryError> {
        let privileged = self.privileged();
        let in_root = |resource| Target {
            cluster: ROOT,
            resource,
            namespace: None,
        };
        let schemas = schemas();
        for (name, spec) in &schemas {
            let object = json!({
                "apiVersion": "apis.kcp.io/v1alpha1",
                "kind": "APIResourceSchema",
                "metadata": {"name": name},
                "spec": spec,
            });
            let target = in_root(kcp_apis::system::api_resource_schemas());
            match privileged.create(target, object).await {
                Ok(_) | Err(RegistryError::AlreadyExists { .. }) => {}
                Err(other) => return Err(other),
            }
        }
        for name in EXPORTS {
            let target = in_root(kcp_apis::system::api_exports());
            // With its identity at once: workspaces bind it from the start.
            let mut object = export(name, &schemas);
            let identity = self.export_identity(ROOT, &object).await?;
            object["status"] = json!({"identityHash": identity});
            match privileged.create(target, object).await {
                Ok(_) | Err(RegistryError::AlreadyExists { .. }) => {}
                Err(other) => return Err(other),
            }
            let binding = json!({
                "apiVersion": "apis.kcp.io/v1alpha2",
                "kind": "APIBinding",
                "metadata": {"name": name},
                "spec": {"reference": {"export": {"path": ROOT, "name": name}}},
            });
            let target = in_root(kcp_apis::system::api_bindings());
            match privileged.create(target, binding).await {
                Ok(_) | Err(RegistryError::AlreadyExists { .. }) => {}
                Err(other) => return Err(other),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_exports_tenancy_and_topology() {
        let schemas = schemas();
        let names: Vec<&str> = schemas.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "v260522-2bf05df66.workspaces.tenancy.kcp.io",
                "v260428-f702a24c5.workspacetypes.tenancy.kcp.io",
                "v240903-d6797056a.partitions.topology.kcp.io",
                "v240903-d6797056a.partitionsets.topology.kcp.io",
            ]
        );
        let (_, workspaces) = &schemas[0];
        assert!(workspaces["versions"][0]["schema"]["properties"]["spec"].is_object());
        let topology = export("topology.kcp.io", &schemas);
        assert_eq!(topology["spec"]["resources"][1]["name"], "partitionsets");
    }
}
