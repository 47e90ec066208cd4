//! Helpers the registry tests share: finding built-in resources in the catalogue, saying where a
//! request goes (a `Target`), and marking a CRD Established as its controller would.

use kcp_apis::builtin::{RESOURCES, Resource};
use kcp_registry::{Registry, Target};
use serde_json::{Value, json};

/// The built-in resource `name` of API group `group` (`""` for the core group).
pub fn builtin(group: &str, name: &str) -> &'static Resource {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.name == name)
        .unwrap_or_else(|| panic!("no built-in resource {name} in group {group:?}"))
}

/// The built-in resource `name` of the core group (`configmaps`, `namespaces`, ...).
pub fn core(name: &str) -> &'static Resource {
    builtin("", name)
}

/// The `customresourcedefinitions` resource.
pub fn crds() -> &'static Resource {
    builtin("apiextensions.k8s.io", "customresourcedefinitions")
}

/// `resource` in `cluster`, outside any namespace (cluster-scoped kinds, or all namespaces).
pub fn cluster_wide<'a>(cluster: &'a str, resource: &'a Resource) -> Target<'a> {
    Target {
        cluster,
        resource,
        namespace: None,
    }
}

/// `resource` in `namespace` of `cluster`.
pub fn namespaced<'a>(cluster: &'a str, resource: &'a Resource, namespace: &'a str) -> Target<'a> {
    Target {
        cluster,
        resource,
        namespace: Some(namespace),
    }
}

/// Configmaps in `namespace` of `cluster`.
pub fn configmaps<'a>(cluster: &'a str, namespace: &'a str) -> Target<'a> {
    namespaced(cluster, core("configmaps"), namespace)
}

/// Sets the `Established` condition of the CRD `name` in `cluster` through the status
/// subresource, as the CRD controller would once it accepted the names.
pub async fn establish_crd(registry: &Registry, cluster: &str, name: &str) {
    registry
        .subresource("status")
        .unwrap()
        .patch(cluster_wide(cluster, crds()), name, &|stored: &Value| {
            let mut next = stored.clone();
            next["status"]["conditions"] = json!([{"type": "Established", "status": "True"}]);
            Ok(next)
        })
        .await
        .unwrap();
}
