//! The built-in resources of every logical cluster: upstream's generic control plane as kcp
//! serves it (no pods, nodes, deployments or services), plus API Priority and Fairness
//! (`flowcontrol.apiserver.k8s.io`), which kcp leaves out for now and kube-apiserver serves.
//! Each kind's rules (validation, defaults, printing, ...) are in `kcp_registry::kinds`.
//! Also [`Resource`] itself and [`ResourceRef`], the handle on one that requests hold.

use std::borrow::Cow;
use std::sync::Arc;

/// The verbs of a resource with full CRUD, list and watch.
pub const CRUD: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];
/// Namespaces cannot be deleted as a collection.
const CRUD_NO_COLLECTION: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];
/// Review resources only take a create and answer in the response.
const CREATE_ONLY: &[&str] = &["create"];
/// Status-like subresources.
const STATUS_VERBS: &[&str] = &["get", "patch", "update"];

/// A name of a resource (group, version, plural, kind, ...): borrowed from the static catalogue,
/// or owned by a custom resource and freed with it.
pub type Name = Cow<'static, str>;
/// A list of names (short names, categories), static or owned like [`Name`].
pub type Names = Cow<'static, [Name]>;

/// A static list of names.
macro_rules! names {
    ($($name:literal),* $(,)?) => {
        &[$(Cow::Borrowed($name)),*]
    };
}

/// One resource: built in, or served for a CustomResourceDefinition (see [`crate::custom`]).
///
/// Built-in resources are `static` values ([`RESOURCES`]); those of custom resources are built
/// per distinct CRD spec, shared through an `Arc` and freed when the last logical cluster (or
/// request) using them lets go (see [`crate::custom::Interner`] and [`ResourceRef`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    pub group: Name,
    pub version: Name,
    /// The plural, lower-case name used in URLs.
    pub name: Name,
    pub singular: Name,
    pub kind: Name,
    pub namespaced: bool,
    pub verbs: &'static [&'static str],
    pub short_names: Names,
    pub categories: Names,
    /// `(name, verbs)` of each subresource.
    pub subresources: &'static [(&'static str, &'static [&'static str])],
    /// What a custom resource needs besides these names; `None` for built-in resources.
    pub custom: Option<Arc<crate::custom::CustomResource>>,
}

impl Resource {
    /// `group/version`, or `version` for the core group.
    pub fn group_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// What a custom resource needs besides its names; `None` for built-in resources.
    pub fn custom(&self) -> Option<&crate::custom::CustomResource> {
        self.custom.as_deref()
    }

    /// The identity hash of the APIExport a bound resource comes from: its objects are stored
    /// under `<resource>:<identity>`. Empty for built-in resources and local CRDs.
    pub fn identity(&self) -> &str {
        self.custom().map_or("", |custom| &custom.identity)
    }
}

/// An owned handle on a served resource, what requests, watches and controllers hold while they
/// use it: built-in and system resources are static; custom ones are shared with the logical
/// clusters that serve them and freed with their last holder. Derefs to [`Resource`].
#[derive(Debug, Clone)]
pub enum ResourceRef {
    Static(&'static Resource),
    Shared(Arc<Resource>),
}

impl std::ops::Deref for ResourceRef {
    type Target = Resource;
    fn deref(&self) -> &Resource {
        match self {
            ResourceRef::Static(resource) => resource,
            ResourceRef::Shared(resource) => resource,
        }
    }
}

impl AsRef<Resource> for ResourceRef {
    fn as_ref(&self) -> &Resource {
        self
    }
}

impl From<&'static Resource> for ResourceRef {
    fn from(resource: &'static Resource) -> ResourceRef {
        ResourceRef::Static(resource)
    }
}

impl From<Arc<Resource>> for ResourceRef {
    fn from(resource: Arc<Resource>) -> ResourceRef {
        ResourceRef::Shared(resource)
    }
}

impl PartialEq for ResourceRef {
    fn eq(&self, other: &ResourceRef) -> bool {
        **self == **other
    }
}

impl Eq for ResourceRef {}

/// A catalogue entry: a [`Resource`] in `Copy` parts, so entries can be written with struct
/// update syntax in a `static` (a `Resource` has owned variants, which a constant cannot drop).
#[derive(Clone, Copy)]
struct Entry {
    group: &'static str,
    version: &'static str,
    name: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    verbs: &'static [&'static str],
    short_names: &'static [Name],
    categories: &'static [Name],
    subresources: &'static [(&'static str, &'static [&'static str])],
}

impl Entry {
    const fn resource(self) -> Resource {
        Resource {
            group: Cow::Borrowed(self.group),
            version: Cow::Borrowed(self.version),
            name: Cow::Borrowed(self.name),
            singular: Cow::Borrowed(self.singular),
            kind: Cow::Borrowed(self.kind),
            namespaced: self.namespaced,
            verbs: self.verbs,
            short_names: Cow::Borrowed(self.short_names),
            categories: Cow::Borrowed(self.categories),
            subresources: self.subresources,
            custom: None,
        }
    }
}

const fn entry(
    group: &'static str,
    version: &'static str,
    name: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> Entry {
    Entry {
        group,
        version,
        name,
        singular,
        kind,
        namespaced,
        verbs: CRUD,
        short_names: &[],
        categories: &[],
        subresources: &[],
    }
}

const RBAC: &str = "rbac.authorization.k8s.io";
const ADMISSION: &str = "admissionregistration.k8s.io";
const FLOWCONTROL: &str = "flowcontrol.apiserver.k8s.io";
const API_EXTENSIONS: &[Name] = names!["api-extensions"];

/// Every built-in resource, grouped by API group in discovery order.
pub static RESOURCES: &[Resource] = &[
    Entry {
        verbs: CRUD_NO_COLLECTION,
        short_names: names!["ns"],
        subresources: &[("status", STATUS_VERBS), ("finalize", &["update"])],
        ..entry("", "v1", "namespaces", "namespace", "Namespace", false)
    }
    .resource(),
    Entry {
        short_names: names!["cm"],
        ..entry("", "v1", "configmaps", "configmap", "ConfigMap", true)
    }
    .resource(),
    entry("", "v1", "secrets", "secret", "Secret", true).resource(),
    Entry {
        short_names: names!["sa"],
        subresources: &[("token", CREATE_ONLY)],
        ..entry(
            "",
            "v1",
            "serviceaccounts",
            "serviceaccount",
            "ServiceAccount",
            true,
        )
    }
    .resource(),
    Entry {
        short_names: names!["ev"],
        ..entry("", "v1", "events", "event", "Event", true)
    }
    .resource(),
    Entry {
        short_names: names!["quota"],
        subresources: &[("status", STATUS_VERBS)],
        ..entry(
            "",
            "v1",
            "resourcequotas",
            "resourcequota",
            "ResourceQuota",
            true,
        )
    }
    .resource(),
    Entry {
        verbs: CREATE_ONLY,
        ..entry(
            "authentication.k8s.io",
            "v1",
            "tokenreviews",
            "tokenreview",
            "TokenReview",
            false,
        )
    }
    .resource(),
    Entry {
        verbs: CREATE_ONLY,
        ..entry(
            "authentication.k8s.io",
            "v1",
            "selfsubjectreviews",
            "selfsubjectreview",
            "SelfSubjectReview",
            false,
        )
    }
    .resource(),
    Entry {
        verbs: CREATE_ONLY,
        ..entry(
            "authorization.k8s.io",
            "v1",
            "localsubjectaccessreviews",
            "localsubjectaccessreview",
            "LocalSubjectAccessReview",
            true,
        )
    }
    .resource(),
    Entry {
        verbs: CREATE_ONLY,
        ..entry(
            "authorization.k8s.io",
            "v1",
            "selfsubjectaccessreviews",
            "selfsubjectaccessreview",
            "SelfSubjectAccessReview",
            false,
        )
    }
    .resource(),
    Entry {
        verbs: CREATE_ONLY,
        ..entry(
            "authorization.k8s.io",
            "v1",
            "selfsubjectrulesreviews",
            "selfsubjectrulesreview",
            "SelfSubjectRulesReview",
            false,
        )
    }
    .resource(),
    Entry {
        verbs: CREATE_ONLY,
        ..entry(
            "authorization.k8s.io",
            "v1",
            "subjectaccessreviews",
            "subjectaccessreview",
            "SubjectAccessReview",
            false,
        )
    }
    .resource(),
    Entry {
        short_names: names!["csr"],
        subresources: &[("approval", STATUS_VERBS), ("status", STATUS_VERBS)],
        ..entry(
            "certificates.k8s.io",
            "v1",
            "certificatesigningrequests",
            "certificatesigningrequest",
            "CertificateSigningRequest",
            false,
        )
    }
    .resource(),
    entry(
        "coordination.k8s.io",
        "v1",
        "leases",
        "lease",
        "Lease",
        true,
    )
    .resource(),
    entry(
        RBAC,
        "v1",
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
        false,
    )
    .resource(),
    entry(
        RBAC,
        "v1",
        "clusterroles",
        "clusterrole",
        "ClusterRole",
        false,
    )
    .resource(),
    entry(
        RBAC,
        "v1",
        "rolebindings",
        "rolebinding",
        "RoleBinding",
        true,
    )
    .resource(),
    entry(RBAC, "v1", "roles", "role", "Role", true).resource(),
    Entry {
        categories: API_EXTENSIONS,
        ..entry(
            ADMISSION,
            "v1",
            "mutatingwebhookconfigurations",
            "mutatingwebhookconfiguration",
            "MutatingWebhookConfiguration",
            false,
        )
    }
    .resource(),
    Entry {
        categories: API_EXTENSIONS,
        subresources: &[("status", STATUS_VERBS)],
        ..entry(
            ADMISSION,
            "v1",
            "validatingadmissionpolicies",
            "validatingadmissionpolicy",
            "ValidatingAdmissionPolicy",
            false,
        )
    }
    .resource(),
    Entry {
        categories: API_EXTENSIONS,
        ..entry(
            ADMISSION,
            "v1",
            "validatingadmissionpolicybindings",
            "validatingadmissionpolicybinding",
            "ValidatingAdmissionPolicyBinding",
            false,
        )
    }
    .resource(),
    Entry {
        categories: API_EXTENSIONS,
        ..entry(
            ADMISSION,
            "v1",
            "validatingwebhookconfigurations",
            "validatingwebhookconfiguration",
            "ValidatingWebhookConfiguration",
            false,
        )
    }
    .resource(),
    Entry {
        short_names: names!["ev"],
        ..entry("events.k8s.io", "v1", "events", "event", "Event", true)
    }
    .resource(),
    Entry {
        subresources: &[("status", STATUS_VERBS)],
        ..entry(
            FLOWCONTROL,
            "v1",
            "flowschemas",
            "flowschema",
            "FlowSchema",
            false,
        )
    }
    .resource(),
    Entry {
        subresources: &[("status", STATUS_VERBS)],
        ..entry(
            FLOWCONTROL,
            "v1",
            "prioritylevelconfigurations",
            "prioritylevelconfiguration",
            "PriorityLevelConfiguration",
            false,
        )
    }
    .resource(),
    Entry {
        short_names: names!["crd", "crds"],
        categories: API_EXTENSIONS,
        subresources: &[("status", STATUS_VERBS)],
        ..entry(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "customresourcedefinition",
            "CustomResourceDefinition",
            false,
        )
    }
    .resource(),
];

/// The built-in API groups (excluding the core group) in discovery order, each with its versions.
pub fn groups() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut groups: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for r in RESOURCES.iter().filter(|r| !r.group.is_empty()) {
        let (group, version): (&'static str, &'static str) = (&r.group, &r.version);
        match groups.iter_mut().find(|(g, _)| *g == group) {
            Some((_, versions)) if !versions.contains(&version) => versions.push(version),
            Some(_) => {}
            None => groups.push((group, vec![version])),
        }
    }
    groups.sort_by_key(|(group, _)| {
        GROUP_ORDER
            .iter()
            .position(|g| g == group)
            .unwrap_or(GROUP_ORDER.len())
    });
    groups
}

/// The order kube-apiserver lists its API groups in (by their APIServices' priorities, seen
/// on kube-apiserver 1.37); groups it does not name come after, as custom ones do.
const GROUP_ORDER: &[&str] = &[
    "apiregistration.k8s.io",
    "apps",
    "events.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
    "autoscaling",
    "batch",
    "certificates.k8s.io",
    "networking.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "scheduling.k8s.io",
    "coordination.k8s.io",
    "node.k8s.io",
    "discovery.k8s.io",
    "resource.k8s.io",
    "flowcontrol.apiserver.k8s.io",
    "storagemigration.k8s.io",
];

/// The core (`""`, `v1`) resource `plural` (`namespaces`, `secrets`, `serviceaccounts`, ...).
///
/// # Panics
///
/// If the core group has no such resource (callers name them literally).
pub fn core(plural: &str) -> &'static Resource {
    in_group_version("", "v1")
        .find(|r| r.name == plural)
        .unwrap_or_else(|| panic!("the catalogue has no core resource {plural:?}"))
}

/// The RBAC resource `plural` (`roles`, `clusterroles`, `rolebindings`, `clusterrolebindings`).
///
/// # Panics
///
/// If `plural` is none of them (callers name them literally).
pub fn rbac(plural: &str) -> &'static Resource {
    in_group_version("rbac.authorization.k8s.io", "v1")
        .find(|r| r.name == plural)
        .unwrap_or_else(|| panic!("the catalogue has no RBAC resource {plural:?}"))
}

/// The built-in resources of one group version.
pub fn in_group_version<'a>(
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'static Resource> + 'a {
    RESOURCES
        .iter()
        .filter(move |r| r.group == group && r.version == version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_per_group_and_lower_case() {
        let mut seen = std::collections::HashSet::new();
        for r in RESOURCES {
            assert!(
                seen.insert((&r.group, &r.name)),
                "{} twice in {}",
                r.name,
                r.group
            );
            assert_eq!(r.name, r.name.to_lowercase());
            assert_eq!(r.singular, r.kind.to_lowercase(), "{}", r.name);
        }
    }

    #[test]
    fn groups_are_listed_once_in_order() {
        // In kube-apiserver's order.
        let names: Vec<&str> = groups().iter().map(|(g, _)| *g).collect();
        assert_eq!(
            names,
            [
                "events.k8s.io",
                "authentication.k8s.io",
                "authorization.k8s.io",
                "certificates.k8s.io",
                "rbac.authorization.k8s.io",
                "admissionregistration.k8s.io",
                "apiextensions.k8s.io",
                "coordination.k8s.io",
                "flowcontrol.apiserver.k8s.io",
            ]
        );
        let groups = groups();
        assert!(groups.iter().all(|(_, versions)| versions == &vec!["v1"]));
        assert_eq!(in_group_version("", "v1").count(), 6);
        assert_eq!(in_group_version(RBAC, "v1").count(), 4);
    }
}
