//! What one logical cluster serves: the built-in resources every cluster has, then kcp's own
//! kinds (workspaces, logical clusters), then the custom resources of its Established CRDs. Discovery and OpenAPI documents are built from this view.

use kcp_apis::builtin::{self, Resource, ResourceRef};
use kcp_registry::Registry;

/// The resources a cluster serves.
pub struct Served {
    /// Handles on kcp's own kinds and the cluster's custom resources, held while the view is.
    custom: Vec<ResourceRef>,
}

impl Served {
    /// The view of `cluster` (built-in resources only outside `/clusters/<name>`).
    pub fn of(registry: &Registry, cluster: Option<&str>) -> Served {
        Served {
            custom: cluster
                .map(|cluster| registry.non_builtin_resources(cluster))
                .unwrap_or_default(),
        }
    }

    /// The view of built-in resources alone.
    pub fn builtin() -> Served {
        Served { custom: Vec::new() }
    }

    /// Every served resource: built-in ones first.
    pub fn all(&self) -> impl Iterator<Item = &Resource> + '_ {
        builtin::RESOURCES
            .iter()
            .chain(self.custom.iter().map(|r| &**r))
    }

    /// The resources of one group version.
    pub fn in_group_version<'a>(
        &'a self,
        group: &'a str,
        version: &'a str,
    ) -> impl Iterator<Item = &'a Resource> + 'a {
        self.all()
            .filter(move |r| r.group == group && r.version == version)
    }

    /// The resources of one group version that are not built in (kcp's own kinds and custom
    /// resources), as the handles this view holds.
    pub fn non_builtin_in_group_version<'a>(
        &'a self,
        group: &'a str,
        version: &'a str,
    ) -> impl Iterator<Item = &'a ResourceRef> + 'a {
        self.custom
            .iter()
            .filter(move |r| r.group == group && r.version == version)
    }

    /// A view of the built-in resources and these others.
    #[cfg(test)]
    pub fn with(custom: Vec<ResourceRef>) -> Served {
        Served { custom }
    }

    /// The API groups other than the core group, in discovery order (built-in groups first,
    /// then custom groups by name), each with its versions, the preferred one first.
    pub fn groups(&self) -> Vec<(&str, Vec<&str>)> {
        let mut groups = builtin::groups();
        let mut custom: Vec<(&str, Vec<&str>)> = Vec::new();
        for r in &self.custom {
            let (group, version) = (&*r.group, &*r.version);
            if groups.iter().any(|(g, _)| *g == group) {
                continue;
            }
            match custom.iter_mut().find(|(g, _)| *g == group) {
                Some((_, versions)) if !versions.contains(&version) => versions.push(version),
                Some(_) => {}
                None => custom.push((group, vec![version])),
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

pub use kcp_apis::custom::compare_versions;
