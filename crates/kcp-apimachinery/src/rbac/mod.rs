//! Role-based access control as Kubernetes evaluates it, over the RBAC objects of one logical
//! cluster read as JSON: which rules a user holds for a request (through ClusterRoleBindings,
//! and RoleBindings of the request's namespace), whether one of them allows it, how aggregated
//! ClusterRoles gather their rules, and the words of a denial.
//!
//! - [`Rule`]: one `PolicyRule` (verbs, API groups, resources with `resource/subresource`,
//!   `*` and `*/subresource`, resource names, non-resource URLs with a trailing `*`).
//! - [`Policy`]: the Roles, ClusterRoles and bindings of one logical cluster, with ClusterRoles
//!   every cluster may reference without holding a copy (kcp's bootstrap roles).
//! - [`Attributes`]: what a request asks (user, verb, resource or path); [`forbidden_message`]
//!   says why it is refused, as kube-apiserver does.
//!
//! Must not know: where the objects come from, logical cluster names or HTTP. Authorization
//! chains (privileged groups, kcp's workspace access) are built on it elsewhere.

mod policy;
mod rule;
#[cfg(test)]
mod tests;

pub use policy::{Binding, Policy, RoleRef, Subject};
pub use rule::{Rule, uncovered};

/// Who asks: the authenticated user's name, groups and extra values (RBAC reads the first
/// two; authorizers before it may read the extra, e.g. the logical cluster a service account
/// belongs to).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    pub name: String,
    pub groups: Vec<String>,
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

/// What a request asks, as Kubernetes' authorizer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes<'a> {
    pub user: &'a UserInfo,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`, or
    /// another verb (`use`, `bind`, `escalate`, `impersonate`, `access`).
    pub verb: &'a str,
    pub target: Target<'a>,
}

/// The object of a request: a resource (in a namespace or cluster-wide) or a non-resource path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    Resource {
        api_group: &'a str,
        resource: &'a str,
        /// Empty for the resource itself.
        subresource: &'a str,
        /// Empty for collections.
        name: &'a str,
        /// Empty for cluster-scoped resources and for requests across namespaces.
        namespace: &'a str,
    },
    NonResource {
        path: &'a str,
    },
}

impl Target<'_> {
    /// The namespace whose RoleBindings may grant the request (none for non-resource paths).
    pub fn namespace(&self) -> &str {
        match self {
            Target::Resource { namespace, .. } => namespace,
            Target::NonResource { .. } => "",
        }
    }
}

/// Why a request is refused, in kube-apiserver's words: `User "alice" cannot list resource
/// "configmaps" in API group "" in the namespace "team"`, `... at the cluster scope`, or
/// `User "alice" cannot get path "/metrics"`.
pub fn forbidden_message(attributes: &Attributes<'_>) -> String {
    let user = &attributes.user.name;
    let verb = attributes.verb;
    match attributes.target {
        Target::NonResource { path } => format!("User {user:?} cannot {verb} path {path:?}"),
        Target::Resource {
            api_group,
            resource,
            subresource,
            namespace,
            ..
        } => {
            let resource = if subresource.is_empty() {
                resource.to_string()
            } else {
                format!("{resource}/{subresource}")
            };
            if namespace.is_empty() {
                format!(
                    "User {user:?} cannot {verb} resource {resource:?} in API group {api_group:?} at the cluster scope"
                )
            } else {
                format!(
                    "User {user:?} cannot {verb} resource {resource:?} in API group {api_group:?} in the namespace {namespace:?}"
                )
            }
        }
    }
}
