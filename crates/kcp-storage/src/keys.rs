//! The storage key layout. Every key names its logical cluster, so one store holds thousands of
//! clusters and a prefix read or watch never crosses from one into another:
//!
//! ```text
//! /registry/<group>/<resource>[:<identity>]/<cluster>/<namespace>/<name>   (namespaced)
//! /registry/<group>/<resource>[:<identity>]/<cluster>/<name>               (cluster-scoped)
//! ```
//!
//! `<group>` is `core` for the legacy group. `<identity>` is the APIExport identity hash of a
//! bound resource, so two exports of the same group and resource never share keys. Every prefix
//! produced here ends with `/`, which keeps `root:a` from matching `root:ab`.

use std::fmt::Write;

/// The key space of one resource (group, resource, optional export identity).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceKeys {
    base: String,
}

impl ResourceKeys {
    /// Keys of `resource` in `group` ("" for the legacy core group).
    pub fn new(group: &str, resource: &str) -> Self {
        Self::with_identity(group, resource, None)
    }

    /// Keys of a resource bound from an APIExport with identity hash `identity`.
    pub fn with_identity(group: &str, resource: &str, identity: Option<&str>) -> Self {
        let group = if group.is_empty() { "core" } else { group };
        let mut base = format!("/registry/{group}/{resource}");
        if let Some(identity) = identity {
            let _ = write!(base, ":{identity}");
        }
        base.push('/');
        ResourceKeys { base }
    }

    /// Every object of the resource in every logical cluster (wildcard list and watch).
    pub fn all_clusters(&self) -> Vec<u8> {
        self.base.as_bytes().to_vec()
    }

    /// Every object of the resource in one logical cluster.
    pub fn cluster(&self, cluster: &str) -> Vec<u8> {
        format!("{}{cluster}/", self.base).into_bytes()
    }

    /// Every object of the resource in one namespace of one logical cluster.
    pub fn namespace(&self, cluster: &str, namespace: &str) -> Vec<u8> {
        format!("{}{cluster}/{namespace}/", self.base).into_bytes()
    }

    /// One object; `namespace` is `None` for cluster-scoped resources.
    pub fn object(&self, cluster: &str, namespace: Option<&str>, name: &str) -> Vec<u8> {
        match namespace {
            Some(namespace) => format!("{}{cluster}/{namespace}/{name}", self.base),
            None => format!("{}{cluster}/{name}", self.base),
        }
        .into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_carry_group_resource_cluster_namespace_and_name() {
        let cms = ResourceKeys::new("", "configmaps");
        assert_eq!(
            cms.object("root", Some("default"), "a"),
            b"/registry/core/configmaps/root/default/a"
        );
        let bound = ResourceKeys::with_identity("example.io", "widgets", Some("abc123"));
        assert_eq!(
            bound.object("root:org", None, "w"),
            b"/registry/example.io/widgets:abc123/root:org/w"
        );
    }

    #[test]
    fn cluster_prefixes_do_not_overlap() {
        let cms = ResourceKeys::new("", "configmaps");
        let a = cms.cluster("root:a");
        let ab_key = cms.object("root:ab", Some("ns"), "x");
        assert!(!ab_key.starts_with(&a));
        assert!(ab_key.starts_with(&cms.all_clusters()));
    }
}
