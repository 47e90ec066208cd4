//! What one logical cluster serves: the built-in resources every cluster has, then the custom
//! resources of its Established CRDs. Discovery and OpenAPI documents are built from this view.

use std::cmp::Ordering;

use kcp_apis::builtin::{self, Resource};
use kcp_registry::Registry;

/// The resources a cluster serves.
pub struct Served {
    custom: Vec<&'static Resource>,
}

impl Served {
    /// The view of `cluster` (built-in resources only outside `/clusters/<name>`).
    pub fn of(registry: &Registry, cluster: Option<&str>) -> Served {
        Served {
            custom: cluster
                .map(|cluster| registry.custom_resources(cluster))
                .unwrap_or_default(),
        }
    }

    /// The view of built-in resources alone.
    pub fn builtin() -> Served {
        Served { custom: Vec::new() }
    }

    /// Every served resource: built-in ones first.
    pub fn all(&self) -> impl Iterator<Item = &'static Resource> + '_ {
        builtin::RESOURCES.iter().chain(self.custom.iter().copied())
    }

    /// The resources of one group version.
    pub fn in_group_version<'a>(
        &'a self,
        group: &'a str,
        version: &'a str,
    ) -> impl Iterator<Item = &'static Resource> + 'a {
        self.all()
            .filter(move |r| r.group == group && r.version == version)
    }

    /// The API groups other than the core group, in discovery order (built-in groups first,
    /// then custom groups by name), each with its versions, the preferred one first.
    pub fn groups(&self) -> Vec<(&'static str, Vec<&'static str>)> {
        let mut groups = builtin::groups();
        let mut custom: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
        for r in &self.custom {
            if groups.iter().any(|(g, _)| *g == r.group) {
                continue;
            }
            match custom.iter_mut().find(|(g, _)| *g == r.group) {
                Some((_, versions)) if !versions.contains(&r.version) => versions.push(r.version),
                Some(_) => {}
                None => custom.push((r.group, vec![r.version])),
            }
        }
        custom.sort_by(|a, b| a.0.cmp(b.0));
        for (_, versions) in &mut custom {
            versions.sort_by(|a, b| compare_versions(a, b));
        }
        groups.extend(custom);
        groups
    }
}

/// Kubernetes' version priority: GA before beta before alpha, higher numbers first, then
/// anything else alphabetically.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    fn parse(version: &str) -> Option<(u8, u64, u64)> {
        let rest = version.strip_prefix('v')?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let major: u64 = rest[..digits].parse().ok()?;
        let tail = &rest[digits..];
        let (stability, minor) = if tail.is_empty() {
            (2, 0)
        } else if let Some(n) = tail.strip_prefix("beta") {
            (1, n.parse().ok()?)
        } else if let Some(n) = tail.strip_prefix("alpha") {
            (0, n.parse().ok()?)
        } else {
            return None;
        };
        Some((stability, major, minor))
    }
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => y.cmp(&x),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_as_kubernetes_prefers_them() {
        let mut versions = vec!["v1alpha1", "foo", "v1", "v2beta1", "v2", "v1beta2", "v10"];
        versions.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(
            versions,
            ["v10", "v2", "v1", "v2beta1", "v1beta2", "v1alpha1", "foo"]
        );
    }
}
