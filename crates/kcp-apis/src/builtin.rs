//! The built-in resources of every logical cluster, as kcp serves them: upstream's generic
//! control plane minus flowcontrol and autoscaling (no pods, nodes, deployments or services).

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

/// One resource: built in, or served for a CustomResourceDefinition (see [`crate::custom`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    pub group: &'static str,
    pub version: &'static str,
    /// The plural, lower-case name used in URLs.
    pub name: &'static str,
    pub singular: &'static str,
    pub kind: &'static str,
    pub namespaced: bool,
    pub verbs: &'static [&'static str],
    pub short_names: &'static [&'static str],
    pub categories: &'static [&'static str],
    /// `(name, verbs)` of each subresource.
    pub subresources: &'static [(&'static str, &'static [&'static str])],
    /// What a custom resource needs besides these names; `None` for built-in resources.
    pub custom: Option<&'static crate::custom::CustomResource>,
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
}

const fn resource(
    group: &'static str,
    version: &'static str,
    name: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> Resource {
    Resource {
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
        custom: None,
    }
}

const RBAC: &str = "rbac.authorization.k8s.io";
const ADMISSION: &str = "admissionregistration.k8s.io";
const API_EXTENSIONS: &[&str] = &["api-extensions"];

/// Every built-in resource, grouped by API group in discovery order.
pub static RESOURCES: &[Resource] = &[
    Resource {
        verbs: CRUD_NO_COLLECTION,
        short_names: &["ns"],
        subresources: &[("status", STATUS_VERBS), ("finalize", &["update"])],
        ..resource("", "v1", "namespaces", "namespace", "Namespace", false)
    },
    Resource {
        short_names: &["cm"],
        ..resource("", "v1", "configmaps", "configmap", "ConfigMap", true)
    },
    resource("", "v1", "secrets", "secret", "Secret", true),
    Resource {
        short_names: &["sa"],
        subresources: &[("token", CREATE_ONLY)],
        ..resource(
            "",
            "v1",
            "serviceaccounts",
            "serviceaccount",
            "ServiceAccount",
            true,
        )
    },
    Resource {
        short_names: &["ev"],
        ..resource("", "v1", "events", "event", "Event", true)
    },
    Resource {
        short_names: &["quota"],
        subresources: &[("status", STATUS_VERBS)],
        ..resource(
            "",
            "v1",
            "resourcequotas",
            "resourcequota",
            "ResourceQuota",
            true,
        )
    },
    Resource {
        verbs: CREATE_ONLY,
        ..resource(
            "authentication.k8s.io",
            "v1",
            "tokenreviews",
            "tokenreview",
            "TokenReview",
            false,
        )
    },
    Resource {
        verbs: CREATE_ONLY,
        ..resource(
            "authentication.k8s.io",
            "v1",
            "selfsubjectreviews",
            "selfsubjectreview",
            "SelfSubjectReview",
            false,
        )
    },
    Resource {
        verbs: CREATE_ONLY,
        ..resource(
            "authorization.k8s.io",
            "v1",
            "localsubjectaccessreviews",
            "localsubjectaccessreview",
            "LocalSubjectAccessReview",
            true,
        )
    },
    Resource {
        verbs: CREATE_ONLY,
        ..resource(
            "authorization.k8s.io",
            "v1",
            "selfsubjectaccessreviews",
            "selfsubjectaccessreview",
            "SelfSubjectAccessReview",
            false,
        )
    },
    Resource {
        verbs: CREATE_ONLY,
        ..resource(
            "authorization.k8s.io",
            "v1",
            "selfsubjectrulesreviews",
            "selfsubjectrulesreview",
            "SelfSubjectRulesReview",
            false,
        )
    },
    Resource {
        verbs: CREATE_ONLY,
        ..resource(
            "authorization.k8s.io",
            "v1",
            "subjectaccessreviews",
            "subjectaccessreview",
            "SubjectAccessReview",
            false,
        )
    },
    Resource {
        short_names: &["csr"],
        subresources: &[("approval", STATUS_VERBS), ("status", STATUS_VERBS)],
        ..resource(
            "certificates.k8s.io",
            "v1",
            "certificatesigningrequests",
            "certificatesigningrequest",
            "CertificateSigningRequest",
            false,
        )
    },
    resource(
        "coordination.k8s.io",
        "v1",
        "leases",
        "lease",
        "Lease",
        true,
    ),
    resource(
        RBAC,
        "v1",
        "clusterrolebindings",
        "clusterrolebinding",
        "ClusterRoleBinding",
        false,
    ),
    resource(
        RBAC,
        "v1",
        "clusterroles",
        "clusterrole",
        "ClusterRole",
        false,
    ),
    resource(
        RBAC,
        "v1",
        "rolebindings",
        "rolebinding",
        "RoleBinding",
        true,
    ),
    resource(RBAC, "v1", "roles", "role", "Role", true),
    Resource {
        categories: API_EXTENSIONS,
        ..resource(
            ADMISSION,
            "v1",
            "mutatingwebhookconfigurations",
            "mutatingwebhookconfiguration",
            "MutatingWebhookConfiguration",
            false,
        )
    },
    Resource {
        categories: API_EXTENSIONS,
        subresources: &[("status", STATUS_VERBS)],
        ..resource(
            ADMISSION,
            "v1",
            "validatingadmissionpolicies",
            "validatingadmissionpolicy",
            "ValidatingAdmissionPolicy",
            false,
        )
    },
    Resource {
        categories: API_EXTENSIONS,
        ..resource(
            ADMISSION,
            "v1",
            "validatingadmissionpolicybindings",
            "validatingadmissionpolicybinding",
            "ValidatingAdmissionPolicyBinding",
            false,
        )
    },
    Resource {
        categories: API_EXTENSIONS,
        ..resource(
            ADMISSION,
            "v1",
            "validatingwebhookconfigurations",
            "validatingwebhookconfiguration",
            "ValidatingWebhookConfiguration",
            false,
        )
    },
    Resource {
        short_names: &["ev"],
        ..resource("events.k8s.io", "v1", "events", "event", "Event", true)
    },
    Resource {
        short_names: &["crd", "crds"],
        categories: API_EXTENSIONS,
        subresources: &[("status", STATUS_VERBS)],
        ..resource(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "customresourcedefinition",
            "CustomResourceDefinition",
            false,
        )
    },
];

/// How a list field of a built-in kind merges in a strategic merge patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListMerge {
    /// Elements are objects merged by this key.
    ByKey(&'static str),
    /// Elements are strings merged as a set.
    Primitives,
}

/// The list fields that merge rather than replace, as the Kubernetes types declare them
/// (`patchStrategy: merge`): `(kind or "*" for every kind, field path, rule)`.
static MERGE_LISTS: &[(&str, &[&str], ListMerge)] = &[
    ("*", &["metadata", "finalizers"], ListMerge::Primitives),
    (
        "*",
        &["metadata", "ownerReferences"],
        ListMerge::ByKey("uid"),
    ),
    ("ServiceAccount", &["secrets"], ListMerge::ByKey("name")),
    (
        "ServiceAccount",
        &["imagePullSecrets"],
        ListMerge::ByKey("name"),
    ),
    (
        "MutatingWebhookConfiguration",
        &["webhooks"],
        ListMerge::ByKey("name"),
    ),
    (
        "ValidatingWebhookConfiguration",
        &["webhooks"],
        ListMerge::ByKey("name"),
    ),
    (
        "Namespace",
        &["status", "conditions"],
        ListMerge::ByKey("type"),
    ),
    (
        "CertificateSigningRequest",
        &["status", "conditions"],
        ListMerge::ByKey("type"),
    ),
    (
        "CustomResourceDefinition",
        &["status", "conditions"],
        ListMerge::ByKey("type"),
    ),
];

/// How the list at `path` of a `kind` object merges; `None`: it is replaced.
pub fn list_merge(kind: &str, path: &[&str]) -> Option<ListMerge> {
    MERGE_LISTS
        .iter()
        .find(|(k, p, _)| (*k == "*" || *k == kind) && *p == path)
        .map(|(_, _, rule)| *rule)
}

/// The top-level fields whose change bumps `metadata.generation`, for the kinds whose
/// Kubernetes strategies track a generation (they start at 1); empty for every other kind.
pub fn generation_fields(group: &str, kind: &str) -> &'static [&'static str] {
    match (group, kind) {
        ("apiextensions.k8s.io", "CustomResourceDefinition")
        | ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy")
        | ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => &["spec"],
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration")
        | ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => &["webhooks"],
        _ => &[],
    }
}

/// The built-in API groups (excluding the core group) in discovery order, each with its versions.
pub fn groups() -> Vec<(&'static str, Vec<&'static str>)> {
    let mut groups: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for r in RESOURCES.iter().filter(|r| !r.group.is_empty()) {
        match groups.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, versions)) if !versions.contains(&r.version) => versions.push(r.version),
            Some(_) => {}
            None => groups.push((r.group, vec![r.version])),
        }
    }
    groups
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
                seen.insert((r.group, r.name)),
                "{} twice in {}",
                r.name,
                r.group
            );
            assert_eq!(r.name, r.name.to_lowercase());
            assert_eq!(r.singular, r.kind.to_lowercase(), "{}", r.name);
        }
    }

    #[test]
    fn metadata_lists_merge_for_every_kind() {
        assert_eq!(
            list_merge("ConfigMap", &["metadata", "finalizers"]),
            Some(ListMerge::Primitives)
        );
        assert_eq!(
            list_merge("ServiceAccount", &["secrets"]),
            Some(ListMerge::ByKey("name"))
        );
        assert_eq!(list_merge("Role", &["rules"]), None);
    }

    #[test]
    fn groups_are_listed_once_in_order() {
        let groups = groups();
        assert_eq!(groups.first().unwrap().0, "authentication.k8s.io");
        assert_eq!(groups.last().unwrap().0, "apiextensions.k8s.io");
        assert!(groups.iter().all(|(_, versions)| versions == &vec!["v1"]));
        assert_eq!(in_group_version("", "v1").count(), 6);
        assert_eq!(in_group_version(RBAC, "v1").count(), 4);
    }
}
