//! Helpers the controller tests share: finding built-in resources and saying where a request
//! goes. (What the controllers do in the background is awaited with `kcp_testing::wait`.)

use kcp_apis::builtin::{RESOURCES, Resource};
use kcp_registry::Target;

/// The built-in resource `name` of API group `group` (`""` for the core group).
pub fn builtin(group: &str, name: &str) -> &'static Resource {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.name == name)
        .unwrap_or_else(|| panic!("no built-in resource {name} in group {group:?}"))
}

/// Namespaces of `cluster`.
pub fn namespaces(cluster: &str) -> Target<'_> {
    Target {
        cluster,
        resource: builtin("", "namespaces"),
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
