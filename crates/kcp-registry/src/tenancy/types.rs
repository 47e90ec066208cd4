//! WorkspaceTypes as kcp resolves them. A reference `{name, path}` names a type in the workspace
//! at `path`; without a path the type is looked up in the workspace at hand, then in each
//! parent, and last in `root`. A type `extend`s others (transitively, additively: a type that
//! extends A satisfies constraints that allow A); `limitAllowedParents` / `limitAllowedChildren`
//! must both hold between a parent and a child; the initializers of a workspace are
//! `<path>:<name>` of every type in its set that has `initializer: true`.

use kcp_apimachinery::object::{self, str_at};
use kcp_apis::system;
use serde_json::Value;

use super::{ROOT, parent_path};
use crate::error::RegistryError;
use crate::store::{Registry, Target};

/// A WorkspaceType with the canonical path of the workspace that holds it.
#[derive(Debug, Clone)]
pub struct WorkspaceType {
    pub path: String,
    pub name: String,
    pub object: std::sync::Arc<Value>,
}

impl WorkspaceType {
    /// `<path>:<name>`.
    pub fn qualified(&self) -> String {
        format!("{}:{}", self.path, self.name)
    }

    fn spec(&self) -> &Value {
        &self.object["spec"]
    }

    /// The `{name, path}` references at `spec.<field>` (a list).
    fn references(&self, list: &Value) -> Vec<(String, String)> {
        list.as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| {
                Some((
                    object::text(r, "path").to_string(),
                    r["name"].as_str()?.to_string(),
                ))
            })
            .collect()
    }

    /// `spec.defaultChildWorkspaceType` as `(path, name)`.
    pub fn default_child(&self) -> Option<(String, String)> {
        let child = &self.spec()["defaultChildWorkspaceType"];
        Some((
            object::text(child, "path").to_string(),
            child["name"].as_str()?.to_string(),
        ))
    }
}

/// A type that cannot be resolved, as kcp's admission words it.
fn unresolvable(message: String) -> RegistryError {
    RegistryError::Forbidden {
        qualified_resource: String::new(),
        name: String::new(),
        message,
        causes: Vec::new(),
    }
}

impl Registry {
    /// The WorkspaceType `name` in the workspace at `path`, if it is there.
    pub async fn workspace_type_at(
        &self,
        path: &str,
        name: &str,
    ) -> Result<Option<WorkspaceType>, RegistryError> {
        let cluster = match self.resolve_path(path).await {
            Ok(cluster) => cluster,
            Err(RegistryError::NotFound { .. }) => return Ok(None),
            Err(other) => return Err(other),
        };
        let target = Target {
            cluster: &cluster,
            resource: system::workspace_types(),
            namespace: None,
        };
        match self.get_shared(target, name).await {
            Ok(object) => Ok(Some(WorkspaceType {
                path: path.to_string(),
                name: name.to_string(),
                object,
            })),
            Err(RegistryError::NotFound { .. }) => Ok(None),
            Err(other) => Err(other),
        }
    }

    /// The type a reference names, seen from the workspace at `from` (see the module docs).
    pub async fn resolve_workspace_type(
        &self,
        from: &str,
        path: &str,
        name: &str,
    ) -> Result<WorkspaceType, RegistryError> {
        let reference = if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}:{name}")
        };
        if !path.is_empty() {
            return self
                .workspace_type_at(path, name)
                .await?
                .ok_or_else(|| unresolvable(format!("workspace type {reference} does not exist")));
        }
        let mut current = Some(from.to_string());
        let mut tried_root = false;
        while let Some(at) = current {
            if let Some(found) = self.workspace_type_at(&at, name).await? {
                return Ok(found);
            }
            tried_root |= at == ROOT;
            current = match parent_path(&at) {
                Some(parent) => Some(parent.to_string()),
                None if !tried_root => Some(ROOT.to_string()),
                None => None,
            };
        }
        Err(unresolvable(format!(
            "workspace type \"{reference}\" cannot be resolved"
        )))
    }

    /// `ty` and every type it extends, transitively (bases first, `ty` last); an error for a
    /// missing base or a cycle.
    pub async fn workspace_type_set(
        &self,
        ty: WorkspaceType,
    ) -> Result<Vec<WorkspaceType>, RegistryError> {
        let mut set: Vec<WorkspaceType> = Vec::new();
        // Depth-first over `extend.with`, with the chain to detect cycles.
        let mut chain: Vec<String> = vec![ty.qualified()];
        let mut stack: Vec<(WorkspaceType, usize)> = vec![(ty, 0)];
        while let Some((current, next)) = stack.pop() {
            let bases = current.references(&current.spec()["extend"]["with"]);
            if next >= bases.len() {
                chain.pop();
                if !set.iter().any(|t| t.qualified() == current.qualified()) {
                    set.push(current);
                }
                continue;
            }
            let (path, name) = &bases[next];
            let base = self
                .resolve_workspace_type(&current.path, path, name)
                .await
                .map_err(|_| {
                    unresolvable(format!("unable to find inherited workspace type {name}"))
                })?;
            stack.push((current, next + 1));
            let qualified = base.qualified();
            if let Some(start) = chain.iter().position(|q| *q == qualified) {
                let mut cycle = chain[start..].to_vec();
                cycle.push(qualified.clone());
                return Err(unresolvable(format!(
                    "circular dependency detected in workspace type {qualified}: {}",
                    cycle.join(" -> ")
                )));
            }
            if set.iter().any(|t| t.qualified() == qualified) {
                continue;
            }
            chain.push(qualified);
            stack.push((base, 0));
        }
        Ok(set)
    }
}

/// The initializer of the workspaces whose types have `defaultAPIBindings`: it binds them.
pub const APIBINDINGS_INITIALIZER: &str = "system:apibindings";

/// The initializers of a workspace whose type set is `set`: the types' own, then
/// [`APIBINDINGS_INITIALIZER`] if some type binds APIs by default.
pub fn initializers(set: &[WorkspaceType]) -> Vec<String> {
    let mut all: Vec<String> = set
        .iter()
        .filter(|t| t.spec()["initializer"].as_bool() == Some(true))
        .map(WorkspaceType::qualified)
        .collect();
    if !default_api_bindings(set).is_empty() {
        all.push(APIBINDINGS_INITIALIZER.to_string());
    }
    all
}

/// The terminators of a workspace whose type set is `set`: its types with `terminator: true`.
pub fn terminators(set: &[WorkspaceType]) -> Vec<String> {
    set.iter()
        .filter(|t| t.spec()["terminator"].as_bool() == Some(true))
        .map(WorkspaceType::qualified)
        .collect()
}

/// The exports (`(path, name)`) the types of `set` bind by default, each once.
pub fn default_api_bindings(set: &[WorkspaceType]) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = Vec::new();
    for ty in set {
        for binding in ty.spec()["defaultAPIBindings"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let entry = (
                object::text(binding, "path").to_string(),
                object::text(binding, "export").to_string(),
            );
            if !entry.1.is_empty() && !all.contains(&entry) {
                all.push(entry);
            }
        }
    }
    all
}

/// Whether any type of `implemented` is one of `allowed` (`(path, name)` references).
fn any_allowed(implemented: &[WorkspaceType], allowed: &[(String, String)]) -> bool {
    implemented
        .iter()
        .any(|t| allowed.iter().any(|(p, n)| *p == t.path && *n == t.name))
}

fn sorted_set(items: impl Iterator<Item = String>) -> String {
    let mut items: Vec<String> = items.collect();
    items.sort();
    items.dedup();
    format!("[{}]", items.join(" "))
}

/// kcp's checks that a child of type set `children` (named `child`) may live in a parent of
/// type set `parents` (named `parent`): every message of a refusal, joined as Go aggregates.
pub fn check_parent_and_child(
    parents: &[WorkspaceType],
    children: &[WorkspaceType],
    parent: &str,
    child: &str,
) -> Result<(), String> {
    let mut errors = Vec::new();
    for alias in children {
        let limit = &alias.spec()["limitAllowedParents"];
        if limit.is_null() {
            continue;
        }
        if limit["none"].as_bool() == Some(true) {
            errors.push(format!("workspace type {child} cannot have any parent"));
            continue;
        }
        let allowed = alias.references(&limit["types"]);
        if allowed.is_empty() || any_allowed(parents, &allowed) {
            continue;
        }
        let extending = if alias.qualified() != child {
            format!(" extends {}, which", alias.qualified())
        } else {
            String::new()
        };
        errors.push(format!(
            "workspace type {child}{extending} only allows {} parent workspaces, but parent type {parent} only implements {}",
            sorted_set(allowed.iter().map(|(p, n)| format!("{p}:{n}"))),
            sorted_set(parents.iter().map(WorkspaceType::qualified)),
        ));
    }
    for alias in parents {
        let limit = &alias.spec()["limitAllowedChildren"];
        if limit.is_null() {
            continue;
        }
        if limit["none"].as_bool() == Some(true) {
            errors.push(format!("workspace type {parent} cannot have any child"));
            continue;
        }
        let allowed = alias.references(&limit["types"]);
        if allowed.is_empty() || any_allowed(children, &allowed) {
            continue;
        }
        let extending = if alias.qualified() != parent {
            format!(" extends {}, which", alias.qualified())
        } else {
            String::new()
        };
        errors.push(format!(
            "workspace type {parent}{extending} only allows {} child workspaces, but child type {child} only implements {}",
            sorted_set(allowed.iter().map(|(p, n)| format!("{p}:{n}"))),
            sorted_set(children.iter().map(WorkspaceType::qualified)),
        ));
    }
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.remove(0)),
        _ => Err(format!("[{}]", errors.join(", "))),
    }
}

/// The `(path, name)` of the type annotation `root:organization`.
pub fn split_type_annotation(annotation: &str) -> Option<(&str, &str)> {
    annotation
        .rsplit_once(':')
        .filter(|(path, name)| !path.is_empty() && !name.is_empty())
}

/// The `(path, name)` of a Workspace's `spec.type`.
pub fn workspace_type_reference(workspace: &Value) -> (String, String) {
    (
        str_at(workspace, &["spec", "type", "path"]).to_string(),
        str_at(workspace, &["spec", "type", "name"]).to_string(),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ty(name: &str, spec: Value) -> WorkspaceType {
        WorkspaceType {
            path: "root".into(),
            name: name.into(),
            object: json!({"spec": spec}).into(),
        }
    }

    #[test]
    fn limits_hold_both_ways_with_kcps_messages() {
        let universal = ty("universal", json!({"initializer": true}));
        let root = ty("root", json!({"limitAllowedParents": {"none": true}}));
        let org = ty(
            "organization",
            json!({"limitAllowedParents": {"types": [{"path": "root", "name": "root"}]},
                   "limitAllowedChildren": {"types": [{"path": "root", "name": "universal"}]}}),
        );
        let team = ty(
            "team",
            json!({"limitAllowedParents": {"types": [{"path": "root", "name": "organization"}]}}),
        );
        let roots = [universal.clone(), root.clone()];
        let orgs = [universal.clone(), org.clone()];
        let teams = [universal.clone(), team.clone()];
        assert!(check_parent_and_child(&roots, &orgs, "root:root", "root:organization").is_ok());
        assert!(
            check_parent_and_child(
                &orgs,
                std::slice::from_ref(&universal),
                "root:organization",
                "root:universal"
            )
            .is_ok()
        );
        assert_eq!(
            check_parent_and_child(&roots, &teams, "root:root", "root:team").unwrap_err(),
            "workspace type root:team only allows [root:organization] parent workspaces, but parent type root:root only implements [root:root root:universal]"
        );
        // A team extends universal, which organizations allow as children.
        assert!(check_parent_and_child(&orgs, &teams, "root:organization", "root:team").is_ok());
        let custom = ty("custom", json!({}));
        assert_eq!(
            check_parent_and_child(&orgs, &[custom], "root:organization", "root:custom")
                .unwrap_err(),
            "workspace type root:organization only allows [root:universal] child workspaces, but child type root:custom only implements [root:custom]"
        );
        assert_eq!(
            check_parent_and_child(&orgs, &roots, "root:organization", "root:root").unwrap_err(),
            "workspace type root:root cannot have any parent"
        );
        assert_eq!(initializers(&teams), ["root:universal"]);
    }

    #[test]
    fn type_annotations_split_at_the_last_colon() {
        assert_eq!(
            split_type_annotation("root:org:custom"),
            Some(("root:org", "custom"))
        );
        assert_eq!(split_type_annotation("root"), None);
    }
}
