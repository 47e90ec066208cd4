//! RBAC: roles' rules need verbs (and resources or non-resource URLs), bindings need a role
//! reference that never changes and subjects of a known kind. Names are path segments.
//! Defaults as in `rbac/v1`: the role reference's and User/Group subjects' `apiGroup`.

use jiff::Timestamp;
use kcp_apimachinery::dns::dns1123_subdomain_errors;
use kcp_apimachinery::labels::validation::go_quote;
use kcp_apimachinery::object::{self, strings, text};
use kcp_apis::builtin::Resource;
use serde_json::{Value, json};

use crate::error::RegistryError;
use crate::kinds::Kind;
use crate::kinds::printing::{self, Column, col, wide};
use crate::names::NameRule;
use crate::validation::field::{Bad, Errors, go_strings, index, invalid, not_supported, required};
use crate::validation::metadata;

const GROUP: &str = "rbac.authorization.k8s.io";

/// Roles and ClusterRoles.
pub(crate) struct RoleKind {
    kind: &'static str,
    namespaced: bool,
}
pub(crate) static ROLE: RoleKind = RoleKind {
    kind: "Role",
    namespaced: true,
};
pub(crate) static CLUSTER_ROLE: RoleKind = RoleKind {
    kind: "ClusterRole",
    namespaced: false,
};

/// RoleBindings and ClusterRoleBindings.
pub(crate) struct BindingKind {
    kind: &'static str,
    namespaced: bool,
    columns: &'static [Column],
}
pub(crate) static ROLE_BINDING: BindingKind = BindingKind {
    kind: "RoleBinding",
    namespaced: true,
    columns: ROLE_BINDING_COLUMNS,
};
pub(crate) static CLUSTER_ROLE_BINDING: BindingKind = BindingKind {
    kind: "ClusterRoleBinding",
    namespaced: false,
    columns: CLUSTER_ROLE_BINDING_COLUMNS,
};

const ROLE_BINDING_COLUMNS: &[Column] = &[
    printing::NAME,
    col(
        "Role",
        "string",
        "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace.",
    ),
    printing::AGE,
    wide("Users", "string", "Users in the roleBinding"),
    wide("Groups", "string", "Groups in the roleBinding"),
    wide(
        "ServiceAccounts",
        "string",
        "ServiceAccounts in the roleBinding",
    ),
];
const CLUSTER_ROLE_BINDING_COLUMNS: &[Column] = &[
    printing::NAME,
    col(
        "Role",
        "string",
        "RoleRef can only reference a ClusterRole in the global namespace.",
    ),
    printing::AGE,
    wide("Users", "string", "Users in the clusterRoleBinding"),
    wide("Groups", "string", "Groups in the clusterRoleBinding"),
    wide(
        "ServiceAccounts",
        "string",
        "ServiceAccounts in the clusterRoleBinding",
    ),
];

impl Kind for RoleKind {
    fn group_kind(&self) -> (&'static str, &'static str) {
        (GROUP, self.kind)
    }

    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn validate(&self, object: &Value, _old: Option<&Value>, errs: &mut Errors) {
        validate_role(object, self.namespaced, errs);
    }

    fn columns(&self) -> &'static [Column] {
        printing::NAME_CREATED_AT
    }

    fn cells(&self, object: &Value, _now: Timestamp) -> Vec<Value> {
        printing::name_created_at(object)
    }
}

impl Kind for BindingKind {
    fn group_kind(&self) -> (&'static str, &'static str) {
        (GROUP, self.kind)
    }

    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn decode(&self, _: &Resource, object: &mut Value) -> Result<(), RegistryError> {
        default_binding(object);
        Ok(())
    }

    fn validate_update(&self, _: &Resource, new: &Value, old: &Value, errs: &mut Errors) {
        metadata::validate_update(new, old, errs);
        metadata::validate(new, self.name_rule(), errs);
        validate_binding(new, self.namespaced, errs);
        validate_binding_update(new, old, errs);
    }

    fn validate(&self, object: &Value, _old: Option<&Value>, errs: &mut Errors) {
        validate_binding(object, self.namespaced, errs);
    }

    fn columns(&self) -> &'static [Column] {
        self.columns
    }

    fn cells(&self, object: &Value, now: Timestamp) -> Vec<Value> {
        let role = format!(
            "{}/{}",
            object::str_at(object, &["roleRef", "kind"]),
            object::str_at(object, &["roleRef", "name"])
        );
        let (users, groups, service_accounts) = subjects(object);
        vec![
            printing::name(object),
            json!(role),
            printing::age(object, now),
            json!(users),
            json!(groups),
            json!(service_accounts),
        ]
    }
}

/// Fills in `roleRef.apiGroup` and the `apiGroup` of User and Group subjects.
fn default_binding(object: &mut Value) {
    if object["roleRef"].is_null() {
        // `roleRef` is a struct in Go: it is always there to default.
        object["roleRef"] = json!({});
    }
    if object["roleRef"].is_object() && text(&object["roleRef"], "apiGroup").is_empty() {
        object["roleRef"]["apiGroup"] = json!(GROUP);
    }
    if let Some(subjects) = object["subjects"].as_array_mut() {
        for subject in subjects {
            let kind = text(subject, "kind");
            if subject.is_object()
                && text(subject, "apiGroup").is_empty()
                && (kind == "User" || kind == "Group")
            {
                subject["apiGroup"] = json!(GROUP);
            }
        }
    }
}

/// The rules of a Role (`namespaced`) or ClusterRole.
fn validate_role(object: &Value, namespaced: bool, errs: &mut Errors) {
    let rules = object["rules"].as_array().cloned().unwrap_or_default();
    for (i, rule) in rules.iter().enumerate() {
        let path = index("rules", i);
        if strings(&rule["verbs"]).is_empty() {
            errs.push(required(
                format!("{path}.verbs"),
                "verbs must contain at least one value",
            ));
        }
        let urls = strings(&rule["nonResourceURLs"]);
        let groups = strings(&rule["apiGroups"]);
        let resources = strings(&rule["resources"]);
        let resource_names = strings(&rule["resourceNames"]);
        if !urls.is_empty() {
            let url_path = format!("{path}.nonResourceURLs");
            if namespaced {
                errs.push(invalid(
                    &url_path,
                    Bad::Go(go_strings(&urls)),
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            if !groups.is_empty() || !resources.is_empty() || !resource_names.is_empty() {
                errs.push(invalid(
                    &url_path,
                    Bad::Go(go_strings(&urls)),
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        if groups.is_empty() {
            errs.push(required(
                format!("{path}.apiGroups"),
                "resource rules must supply at least one api group",
            ));
        }
        if resources.is_empty() {
            errs.push(required(
                format!("{path}.resources"),
                "resource rules must supply at least one resource",
            ));
        }
        if !resource_names.is_empty() && resources.len() > 1 {
            errs.push(required(
                format!("{path}.resourceNames"),
                "resource names cannot apply to multiple resources",
            ));
        }
    }
}

/// The role reference and subjects of a RoleBinding (`namespaced`) or ClusterRoleBinding.
fn validate_binding(object: &Value, namespaced: bool, errs: &mut Errors) {
    let role_ref = &object["roleRef"];
    let api_group = text(role_ref, "apiGroup");
    if api_group != GROUP {
        errs.push(not_supported(
            "roleRef.apiGroup",
            Bad::Str(api_group),
            &[GROUP],
        ));
    }
    let kind = text(role_ref, "kind");
    let kinds: &[&str] = if namespaced {
        &["Role", "ClusterRole"]
    } else {
        &["ClusterRole"]
    };
    if !kinds.contains(&kind) {
        errs.push(not_supported("roleRef.kind", Bad::Str(kind), kinds));
    }
    let name = text(role_ref, "name");
    if name.is_empty() {
        errs.push(required("roleRef.name", ""));
    } else {
        for message in NameRule::PathSegment.errors(name, false) {
            errs.push(invalid("roleRef.name", Bad::Str(name), &message));
        }
    }
    let subjects = object["subjects"].as_array().cloned().unwrap_or_default();
    for (i, subject) in subjects.iter().enumerate() {
        validate_subject(subject, namespaced, &index("subjects", i), errs);
    }
}

fn validate_subject(subject: &Value, namespaced: bool, path: &str, errs: &mut Errors) {
    let name = text(subject, "name");
    let api_group = text(subject, "apiGroup");
    if name.is_empty() {
        errs.push(required(format!("{path}.name"), ""));
    }
    match text(subject, "kind") {
        "ServiceAccount" => {
            if !name.is_empty() {
                for message in dns1123_subdomain_errors(name) {
                    errs.push(invalid(format!("{path}.name"), Bad::Str(name), &message));
                }
            }
            if !api_group.is_empty() {
                errs.push(not_supported(
                    format!("{path}.apiGroup"),
                    Bad::Str(api_group),
                    &[""],
                ));
            }
            if !namespaced && text(subject, "namespace").is_empty() {
                errs.push(required(format!("{path}.namespace"), ""));
            }
        }
        kind @ ("User" | "Group") => {
            if name.is_empty() {
                let detail = if kind == "User" {
                    "user name cannot be empty"
                } else {
                    "group name cannot be empty"
                };
                errs.push(invalid(format!("{path}.name"), Bad::Str(name), detail));
            }
            if api_group != GROUP {
                errs.push(not_supported(
                    format!("{path}.apiGroup"),
                    Bad::Str(api_group),
                    &[GROUP],
                ));
            }
        }
        other => errs.push(not_supported(
            format!("{path}.kind"),
            Bad::Str(other),
            &["ServiceAccount", "User", "Group"],
        )),
    }
}

/// A binding's role reference may never change.
fn validate_binding_update(new: &Value, old: &Value, errs: &mut Errors) {
    // Bindings stored before `apiGroup` was defaulted count as defaulted.
    let mut old = old.clone();
    default_binding(&mut old);
    let fields = ["apiGroup", "kind", "name"];
    let changed = fields
        .iter()
        .any(|f| text(&new["roleRef"], f) != text(&old["roleRef"], f));
    if changed {
        let role_ref = &new["roleRef"];
        let shown = format!(
            "rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}",
            go_quote(text(role_ref, "apiGroup")),
            go_quote(text(role_ref, "kind")),
            go_quote(text(role_ref, "name")),
        );
        errs.push(invalid("roleRef", Bad::Go(shown), "cannot change roleRef"));
    }
}

/// Users, groups and service accounts (`namespace/name`) of a (cluster) role binding.
fn subjects(binding: &Value) -> (String, String, String) {
    let (mut users, mut groups, mut service_accounts) = (Vec::new(), Vec::new(), Vec::new());
    for subject in binding["subjects"].as_array().into_iter().flatten() {
        let name = object::str_at(subject, &["name"]);
        match object::str_at(subject, &["kind"]) {
            "User" => users.push(name.to_string()),
            "Group" => groups.push(name.to_string()),
            "ServiceAccount" => service_accounts.push(format!(
                "{}/{name}",
                object::str_at(subject, &["namespace"])
            )),
            _ => {}
        }
    }
    (
        users.join(", "),
        groups.join(", "),
        service_accounts.join(", "),
    )
}
