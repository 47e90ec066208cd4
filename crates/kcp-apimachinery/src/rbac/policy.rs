//! The RBAC objects of one logical cluster and the rules they grant a user.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::{Attributes, Rule, UserInfo};
use crate::labels::Selector;
use crate::object::{str_at, text};

/// One subject of a binding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    User(String),
    Group(String),
    /// A service account; its namespace, when the subject leaves it empty, is the binding's.
    ServiceAccount {
        namespace: String,
        name: String,
    },
}

impl Subject {
    fn from_json(subject: &Value, binding_namespace: &str) -> Option<Subject> {
        let name = text(subject, "name").to_string();
        match text(subject, "kind") {
            "User" => Some(Subject::User(name)),
            "Group" => Some(Subject::Group(name)),
            "ServiceAccount" => {
                let namespace = match text(subject, "namespace") {
                    "" => binding_namespace,
                    namespace => namespace,
                };
                Some(Subject::ServiceAccount {
                    namespace: namespace.to_string(),
                    name,
                })
            }
            _ => None,
        }
    }
}

/// What a binding grants: a Role of its own namespace or a ClusterRole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoleRef {
    Role(String),
    ClusterRole(String),
}

/// A RoleBinding (with its namespace) or a ClusterRoleBinding (namespace empty).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    pub namespace: String,
    pub role_ref: RoleRef,
    pub subjects: Vec<Subject>,
}

impl Binding {
    /// The binding an object states; `None` when its `roleRef` names neither kind.
    pub fn from_json(binding: &Value) -> Option<Binding> {
        let namespace = str_at(binding, &["metadata", "namespace"]).to_string();
        let name = str_at(binding, &["roleRef", "name"]).to_string();
        let role_ref = match str_at(binding, &["roleRef", "kind"]) {
            "Role" => RoleRef::Role(name),
            "ClusterRole" => RoleRef::ClusterRole(name),
            _ => return None,
        };
        let subjects = binding["subjects"]
            .as_array()
            .map(|subjects| {
                subjects
                    .iter()
                    .filter_map(|s| Subject::from_json(s, &namespace))
                    .collect()
            })
            .unwrap_or_default();
        Some(Binding {
            namespace,
            role_ref,
            subjects,
        })
    }
}

/// Bindings in their order, indexed by the subjects they name, so a user's are found without
/// visiting every binding (and without allocating a key per lookup).
#[derive(Debug, Clone, Default)]
struct Bindings {
    all: Vec<Binding>,
    by_user: HashMap<String, Vec<usize>>,
    by_group: HashMap<String, Vec<usize>>,
    /// Service accounts by `<namespace>:<name>`, as their user names end.
    by_service_account: HashMap<String, Vec<usize>>,
}

impl Bindings {
    fn push(&mut self, binding: Binding) {
        let at = self.all.len();
        for subject in &binding.subjects {
            let (index, key) = match subject {
                Subject::User(name) => (&mut self.by_user, name.clone()),
                Subject::Group(name) => (&mut self.by_group, name.clone()),
                Subject::ServiceAccount { namespace, name } => {
                    (&mut self.by_service_account, format!("{namespace}:{name}"))
                }
            };
            let held = index.entry(key).or_default();
            if held.last() != Some(&at) {
                held.push(at);
            }
        }
        self.all.push(binding);
    }

    /// The bindings that name `user` (by name, a group, or as a service account), in order.
    fn of<'a>(&'a self, user: &UserInfo) -> impl Iterator<Item = &'a Binding> + 'a {
        let mut found: Vec<usize> = Vec::new();
        found.extend(self.by_user.get(&user.name).into_iter().flatten());
        for group in &user.groups {
            found.extend(self.by_group.get(group).into_iter().flatten());
        }
        if let Some(account) = user.name.strip_prefix("system:serviceaccount:") {
            found.extend(self.by_service_account.get(account).into_iter().flatten());
        }
        found.sort_unstable();
        found.dedup();
        found.into_iter().map(move |at| &self.all[at])
    }
}

/// The Roles, ClusterRoles and bindings of one logical cluster, ClusterRoles aggregated.
#[derive(Debug, Clone, Default)]
pub struct Policy {
    cluster_roles: HashMap<String, Vec<Rule>>,
    roles: HashMap<(String, String), Vec<Rule>>,
    cluster_role_bindings: Bindings,
    role_bindings: HashMap<String, Bindings>,
}

impl Policy {
    /// The policy these objects state. ClusterRoles with an `aggregationRule` hold the rules of
    /// every other ClusterRole among these whose labels one of its selectors matches (aggregated
    /// ones included), as Kubernetes' aggregation controller writes them.
    pub fn new(
        cluster_roles: &[Value],
        roles: &[Value],
        cluster_role_bindings: &[Value],
        role_bindings: &[Value],
    ) -> Policy {
        Policy::over_shared(
            &[],
            cluster_roles,
            roles,
            cluster_role_bindings,
            role_bindings,
        )
    }

    /// The policy of a logical cluster whose bindings may also name `shared` ClusterRoles (the
    /// bootstrap roles every cluster may reference). Where one of its own ClusterRoles carries
    /// labels an aggregated shared role selects, that role is aggregated here with it, over
    /// the shared roles and these (as if the shared roles were copies held here); otherwise
    /// nothing shared is held.
    pub fn over_shared(
        shared: &[Value],
        cluster_roles: &[Value],
        roles: &[Value],
        cluster_role_bindings: &[Value],
        role_bindings: &[Value],
    ) -> Policy {
        let cluster_roles = match joins_shared(shared, cluster_roles) {
            false => aggregate(cluster_roles),
            true => {
                let own = |name: &str| {
                    cluster_roles
                        .iter()
                        .any(|role| str_at(role, &["metadata", "name"]) == name)
                };
                let mut all: Vec<Value> = cluster_roles.to_vec();
                all.extend(
                    shared
                        .iter()
                        .filter(|role| !own(str_at(role, &["metadata", "name"])))
                        .cloned(),
                );
                aggregate(&all)
            }
        };
        let mut policy = Policy {
            cluster_roles,
            ..Policy::default()
        };
        for role in roles {
            let key = (
                str_at(role, &["metadata", "namespace"]).to_string(),
                str_at(role, &["metadata", "name"]).to_string(),
            );
            policy.roles.insert(key, Rule::all_of(role));
        }
        for binding in cluster_role_bindings.iter().filter_map(Binding::from_json) {
            policy.cluster_role_bindings.push(binding);
        }
        for binding in role_bindings.iter().filter_map(Binding::from_json) {
            policy
                .role_bindings
                .entry(binding.namespace.clone())
                .or_default()
                .push(binding);
        }
        policy
    }

    /// The rules of the Role `name` in `namespace`, if there is one.
    pub fn role(&self, namespace: &str, name: &str) -> Option<&[Rule]> {
        self.roles
            .get(&(namespace.to_string(), name.to_string()))
            .map(Vec::as_slice)
    }

    /// The rules of the ClusterRole `name` after aggregation, if there is one.
    pub fn cluster_role(&self, name: &str) -> Option<&[Rule]> {
        self.cluster_roles.get(name).map(Vec::as_slice)
    }

    /// Whether a rule granted to the request's user allows the request: through a
    /// ClusterRoleBinding, or a RoleBinding of the request's namespace. ClusterRoles this
    /// policy lacks are looked up in `shared` (roles every logical cluster may reference).
    pub fn allows(&self, attributes: &Attributes<'_>, shared: Option<&Policy>) -> bool {
        self.rules_for(attributes.user, attributes.target.namespace(), shared)
            .any(|rule| rule.allows(attributes))
    }

    /// Every rule `user` holds in `namespace` (cluster-wide ones only when it is empty), in
    /// the order Kubernetes visits them.
    pub fn rules_for<'p>(
        &'p self,
        user: &'p UserInfo,
        namespace: &'p str,
        shared: Option<&'p Policy>,
    ) -> impl Iterator<Item = &'p Rule> + 'p {
        let cluster_wide = self.cluster_role_bindings.of(user);
        let namespaced = (!namespace.is_empty())
            .then(|| self.role_bindings.get(namespace))
            .flatten()
            .into_iter()
            .flat_map(move |bindings| bindings.of(user));
        cluster_wide
            .chain(namespaced)
            .flat_map(move |binding| self.granted_by(binding, shared))
    }

    fn granted_by<'p>(&'p self, binding: &Binding, shared: Option<&'p Policy>) -> &'p [Rule] {
        match &binding.role_ref {
            RoleRef::ClusterRole(name) => self
                .cluster_role(name)
                .or_else(|| shared.and_then(|shared| shared.cluster_role(name)))
                .unwrap_or_default(),
            // A ClusterRoleBinding cannot name a Role: it grants nothing.
            RoleRef::Role(_) if binding.namespace.is_empty() => &[],
            RoleRef::Role(name) => self
                .roles
                .get(&(binding.namespace.clone(), name.clone()))
                .map(Vec::as_slice)
                .unwrap_or_default(),
        }
    }
}

/// Whether one of `own` ClusterRoles carries labels an aggregated role of `shared` selects.
fn joins_shared(shared: &[Value], own: &[Value]) -> bool {
    let selectors: Vec<Selector> = shared
        .iter()
        .filter_map(|role| role["aggregationRule"]["clusterRoleSelectors"].as_array())
        .flatten()
        .filter_map(|s| Selector::from_label_selector(s).ok())
        .collect();
    own.iter().any(|role| {
        role["metadata"]["labels"]
            .as_object()
            .is_some_and(|labels| selectors.iter().any(|s| s.matches(labels)))
    })
}

/// Each ClusterRole's rules, aggregated ones gathered to a fixed point from the ClusterRoles of
/// the same logical cluster.
fn aggregate(cluster_roles: &[Value]) -> HashMap<String, Vec<Rule>> {
    let name_of = |role: &Value| str_at(role, &["metadata", "name"]).to_string();
    let mut rules: HashMap<String, Vec<Rule>> = cluster_roles
        .iter()
        .map(|role| (name_of(role), Rule::all_of(role)))
        .collect();
    let aggregated: Vec<(String, Vec<Selector>)> = cluster_roles
        .iter()
        .filter_map(|role| {
            let selectors = role["aggregationRule"]["clusterRoleSelectors"].as_array()?;
            // An empty selector selects every ClusterRole, as in Kubernetes' controller; one
            // that does not parse selects none.
            let selectors = selectors
                .iter()
                .filter_map(|s| Selector::from_label_selector(s).ok())
                .collect();
            Some((name_of(role), selectors))
        })
        .collect();
    if aggregated.is_empty() {
        return rules;
    }
    let no_labels = serde_json::Map::new();
    let labelled: Vec<(String, &serde_json::Map<String, Value>)> = cluster_roles
        .iter()
        .map(|role| {
            let labels = role["metadata"]["labels"].as_object();
            (name_of(role), labels.unwrap_or(&no_labels))
        })
        .collect();
    // Each pass gathers what the previous one produced; chains of aggregated roles settle in
    // as many passes as they are long.
    for _ in 0..=aggregated.len() {
        let mut changed = false;
        for (name, selectors) in &aggregated {
            let mut gathered: Vec<Rule> = Vec::new();
            let mut seen = HashSet::new();
            for (source, labels) in &labelled {
                if source == name || !selectors.iter().any(|s| s.matches(*labels)) {
                    continue;
                }
                for rule in rules.get(source).into_iter().flatten() {
                    if seen.insert(rule.clone()) {
                        gathered.push(rule.clone());
                    }
                }
            }
            if rules.get(name) != Some(&gathered) {
                rules.insert(name.clone(), gathered);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    rules
}
