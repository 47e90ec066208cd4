//! What a logical cluster serves, answered in one place: the built-in resources every cluster
//! has, then kcp's own kinds (workspaces, logical clusters, API sharing), then the resources its
//! APIBindings bind (`crate::apis::bound`), then the custom resources of its Established CRDs. Requests resolve their resource here ([`Registry::serves`]), discovery
//! and OpenAPI documents list it ([`ServedResources`]), controllers walk it, and the wildcard
//! cluster `*` asks what some cluster serves ([`Registry::serves_anywhere`]). A new source of
//! resources joins here, in [`Layers`], and nowhere else.

use kcp_apis::builtin::{self, Resource, ResourceRef};
use kcp_apis::custom::compare_versions;

use crate::store::Registry;

/// The sources a cluster's resources come from, in the order they take precedence: a name
/// served by an earlier layer is never served by a later one.
struct Layers<'r> {
    registry: &'r Registry,
    cluster: &'r str,
}

impl Layers<'_> {
    /// The first resource (by layer) that `matches`: the one lookup every resolution uses.
    fn find(&self, matches: impl Fn(&Resource) -> bool) -> Option<ResourceRef> {
        if let Some(builtin) = builtin::RESOURCES.iter().find(|r| matches(r)) {
            return Some(builtin.into());
        }
        if let Some(system) = kcp_apis::system::resources().iter().find(|r| matches(r)) {
            return Some(system.into());
        }
        if let Some(bound) = self.registry.bound_matching(self.cluster, &matches) {
            return Some(bound);
        }
        self.registry
            .custom_index()
            .served(self.cluster)
            .into_iter()
            .find(|r| matches(r))
    }

    /// `plural` of `group/version`: the same answer as [`Layers::find`], by the CRD index's
    /// name lookup for custom resources (a request's path, on every request).
    fn find_plural(&self, group: &str, version: &str, plural: &str) -> Option<ResourceRef> {
        let named = |r: &Resource| r.group == group && r.version == version && r.name == plural;
        if let Some(builtin) = builtin::in_group_version(group, version).find(|r| named(r)) {
            return Some(builtin.into());
        }
        if let Some(system) = kcp_apis::system::find(group, version, plural) {
            return Some(system.into());
        }
        if let Some(bound) = self
            .registry
            .bound_resource(self.cluster, group, version, plural)
        {
            return Some(bound);
        }
        self.registry
            .custom_index()
            .find_resource(self.cluster, group, version, plural)
    }

    /// Every resource not built in, layer by layer; a name an earlier layer serves is not
    /// served again (root's tenancy export binds kcp's own kinds; a local CRD for a bound
    /// resource is never Established, but one may have been before the binding).
    fn non_builtin(&self) -> Vec<ResourceRef> {
        let mut served: Vec<ResourceRef> = kcp_apis::system::resources()
            .iter()
            .map(ResourceRef::from)
            .collect();
        let bound = self.registry.bound_resources(self.cluster);
        let custom = self.registry.custom_index().served(self.cluster);
        for resource in bound.into_iter().chain(custom) {
            let taken = served.iter().any(|r| {
                r.group == resource.group
                    && r.version == resource.version
                    && r.name == resource.name
            });
            if !taken {
                served.push(resource);
            }
        }
        served
    }
}

impl Registry {
    fn layers<'r>(&'r self, cluster: &'r str) -> Layers<'r> {
        Layers {
            registry: self,
            cluster,
        }
    }

    /// The resource `plural` of `group/version` that `cluster` serves now (as the server
    /// knows it: [`Registry::resolve`] also reads a CRD it has not seen yet).
    pub fn serves(
        &self,
        cluster: &str,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<ResourceRef> {
        self.layers(cluster).find_plural(group, version, plural)
    }

    /// The first resource of `group` that `cluster` serves, in any version, that `matches`
    /// (the store keeps one object for all versions: owner references and stored keys name
    /// no version).
    pub fn serves_in_group(
        &self,
        cluster: &str,
        group: &str,
        matches: impl Fn(&Resource) -> bool,
    ) -> Option<ResourceRef> {
        self.layers(cluster)
            .find(|r| r.group == group && matches(r))
    }

    /// The resource `plural` of `group/version` as some cluster serves it: what a wildcard
    /// request (`/clusters/*`) reads. Built-in and kcp's kinds first; a bound resource named
    /// with its identity (`<resource>:<identityHash>`); a custom resource as whichever
    /// cluster's CRD (or binding) serves it (kcp allows metadata across clusters whose CRDs
    /// differ; full objects need one definition).
    pub fn serves_anywhere(&self, group: &str, version: &str, plural: &str) -> Option<ResourceRef> {
        let named = |r: &Resource| r.group == group && r.version == version && r.name == plural;
        if let Some(builtin) = builtin::in_group_version(group, version).find(|r| named(r)) {
            return Some(builtin.into());
        }
        if let Some(system) = kcp_apis::system::find(group, version, plural) {
            return Some(system.into());
        }
        if plural.contains(':') {
            return self.bound_resource(crate::ALL_CLUSTERS, group, version, plural);
        }
        self.custom_index()
            .find_anywhere(group, version, plural)
            .or_else(|| self.bound_anywhere(group, version, plural))
    }

    /// Everything `cluster` serves, held while the view is.
    pub fn served(&self, cluster: &str) -> ServedResources {
        ServedResources {
            others: self.layers(cluster).non_builtin(),
            builtin: true,
        }
    }

    /// The custom resources `cluster` serves: those its APIBindings bind, then every served
    /// version of each Established CRD.
    pub fn custom_resources(&self, cluster: &str) -> Vec<ResourceRef> {
        let mut served = self.bound_resources(cluster);
        served.extend(self.custom_index().served(cluster));
        served
    }
}

/// The resources one logical cluster serves, as a view held while it is used: built-in ones
/// (static), then handles on the others.
pub struct ServedResources {
    /// kcp's own kinds, then the cluster's custom resources.
    others: Vec<ResourceRef>,
    /// Whether the built-in resources are served too (all but views of chosen resources).
    builtin: bool,
}

impl ServedResources {
    /// What `cluster` serves, or only the built-in resources outside `/clusters/<name>`.
    pub fn of(registry: &Registry, cluster: Option<&str>) -> ServedResources {
        match cluster {
            Some(cluster) => registry.served(cluster),
            None => ServedResources::builtin(),
        }
    }

    /// The built-in resources alone.
    pub fn builtin() -> ServedResources {
        ServedResources {
            others: Vec::new(),
            builtin: true,
        }
    }

    /// The built-in resources and these others (tests, and views made from known handles).
    pub fn with(others: Vec<ResourceRef>) -> ServedResources {
        ServedResources {
            others,
            builtin: true,
        }
    }

    /// These resources alone, built-in ones among them or not: a view that serves chosen
    /// resources (a virtual workspace).
    pub fn only(resources: Vec<ResourceRef>) -> ServedResources {
        ServedResources {
            others: resources,
            builtin: false,
        }
    }

    /// Every served resource: built-in ones first.
    pub fn all(&self) -> impl Iterator<Item = &Resource> + '_ {
        let builtin: &[Resource] = if self.builtin {
            builtin::RESOURCES
        } else {
            &[]
        };
        builtin.iter().chain(self.others.iter().map(|r| &**r))
    }

    /// The resources that are not built in (kcp's own kinds, then custom resources), as the
    /// handles this view holds.
    pub fn non_builtin(&self) -> &[ResourceRef] {
        &self.others
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

    /// The resources of one group version that are not built in, as the handles this view
    /// holds.
    pub fn non_builtin_in_group_version<'a>(
        &'a self,
        group: &'a str,
        version: &'a str,
    ) -> impl Iterator<Item = &'a ResourceRef> + 'a {
        self.others
            .iter()
            .filter(move |r| r.group == group && r.version == version)
    }

    /// The API groups other than the core group, in discovery order (built-in groups first,
    /// then the others by name), each with its versions, the preferred one first.
    pub fn groups(&self) -> Vec<(&str, Vec<&str>)> {
        let mut groups = builtin::groups();
        if !self.builtin {
            groups.retain(|(group, _)| self.others.iter().any(|r| r.group == *group));
        }
        let mut others: Vec<(&str, Vec<&str>)> = Vec::new();
        for r in &self.others {
            let (group, version) = (&*r.group, &*r.version);
            // The core group is `/api`'s (a view may serve some of its resources).
            if group.is_empty() || groups.iter().any(|(g, _)| *g == group) {
                continue;
            }
            match others.iter_mut().find(|(g, _)| *g == group) {
                Some((_, versions)) if !versions.contains(&version) => versions.push(version),
                Some(_) => {}
                None => others.push((group, vec![version])),
            }
        }
        others.sort_by(|a, b| a.0.cmp(b.0));
        for (_, versions) in &mut others {
            versions.sort_by(|a, b| compare_versions(a, b));
        }
        groups.extend(others);
        groups
    }
}
