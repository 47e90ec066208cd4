//! What writing kcp's own kinds checks and sets, as kcp's admission plugins do.
//!
//! A Workspace gets its type (the parent type's `defaultChildWorkspaceType` when it names none;
//! a type without a path is looked up from the parent upwards and gets its path filled in), which
//! must exist and be allowed under the parent's type and vice versa; the type's
//! `additionalWorkspaceLabels`; the finalizer that keeps it until its logical cluster is gone; and
//! the random name of its future logical cluster. A LogicalCluster is always named `cluster`,
//! made only by the server, and deleted by users only when `spec.directlyDeletable`;
//! WorkspaceTypes cannot be named `any` or `system`.
//!
//! What names or owns a logical cluster is the server's alone (kcp's `tenancy.kcp.io/Workspace`,
//! `core.kcp.io/LogicalCluster`, finalizer and reserved-metadata plugins): users may not set a
//! Workspace's `spec.cluster`, `spec.URL` or `internal.tenancy.kcp.io/cluster`, nor change them
//! or its `spec.type`, nor make it Ready without them, nor change a LogicalCluster's
//! `spec.directlyDeletable`, `spec.owner`, `spec.createdBy`, `spec.initializers`, `kcp.io/path`
//! and type annotations; a LogicalCluster's phase only moves forward and its initializers only
//! shrink, as kcp allows. Removing the
//! finalizer of a Workspace or LogicalCluster that is being deleted is forbidden; one dropped
//! otherwise is put back. The server's own controllers write through
//! [`Registry::privileged`], which none of this restricts.
//!
//! Objects whose fields have the wrong JSON type (`"spec": "x"`) answer the 422 of their schema
//! before anything here reads or writes them.

use std::collections::BTreeSet;

use kcp_apimachinery::dns::is_dns1123_label;
use kcp_apimachinery::labels::validation::go_quote;
use kcp_apimachinery::object::{self, WrongType, str_at};
use kcp_apis::builtin::Resource;
use kcp_apis::system;
use serde_json::{Value, json};

use super::paths::{CLUSTER_NAME_MESSAGE, valid_cluster_name};
use super::types::{check_parent_and_child, split_type_annotation, workspace_type_reference};
use super::{
    CLUSTER_ANNOTATION, LOGICAL_CLUSTER, LOGICAL_CLUSTER_FINALIZER, OWNER_ANNOTATION,
    PATH_ANNOTATION, TYPE_ANNOTATION, WORKSPACE_FINALIZER, names,
};
use crate::error::{Cause, RegistryError};
use crate::meta;
use crate::store::{Registry, Target};

/// `requester` as kcp writes the owner annotation: `{"username":..,"uid":..,"groups":[..]}`,
/// empty fields left out.
fn owner_annotation(requester: &crate::store::Requester) -> String {
    // Built in Go's field order (a JSON map here would sort the keys).
    let quote = |text: &str| Value::String(text.to_string()).to_string();
    let mut fields = vec![format!("\"username\":{}", quote(&requester.name))];
    if !requester.uid.is_empty() {
        fields.push(format!("\"uid\":{}", quote(&requester.uid)));
    }
    if !requester.groups.is_empty() {
        fields.push(format!("\"groups\":{}", json!(requester.groups)));
    }
    format!("{{{}}}", fields.join(","))
}

/// WorkspaceType names kcp reserves.
const RESERVED_TYPE_NAMES: &[&str] = &["any", "system"];

/// LogicalCluster annotations only the server sets.
const RESERVED_LOGICAL_CLUSTER_ANNOTATIONS: &[&str] = &[PATH_ANNOTATION, TYPE_ANNOTATION];

impl Registry {
    /// Checks and completes a new object of one of kcp's own kinds (others pass unchanged).
    pub(crate) async fn admit_tenancy_create(
        &self,
        target: &Target<'_>,
        object: &mut Value,
    ) -> Result<(), RegistryError> {
        let resource = target.resource;
        let name = meta::string(object, "name").unwrap_or_default().to_string();
        if std::ptr::eq(resource, system::logical_clusters()) && !self.is_privileged() {
            return Err(target.forbidden(&name, "LogicalCluster cannot be created".into()));
        }
        if std::ptr::eq(resource, system::logical_clusters()) && name != LOGICAL_CLUSTER {
            return Err(target.invalid(
                &name,
                vec![Cause {
                    reason: "FieldValueInvalid",
                    field: "metadata.name".into(),
                    message: format!("Invalid value: \"{name}\": must be \"{LOGICAL_CLUSTER}\""),
                }],
            ));
        }
        if std::ptr::eq(resource, system::workspace_types())
            && RESERVED_TYPE_NAMES.contains(&name.as_str())
        {
            return Err(target.forbidden(&name, "name is reserved".into()));
        }
        if std::ptr::eq(resource, system::workspaces()) {
            self.admit_workspace(target, &name, object).await?;
        }
        Ok(())
    }

    /// Checks an update (or patch) of one of kcp's own kinds by a user: `next` replaces
    /// `stored` (see the module docs); a dropped finalizer is put back into `next`.
    pub(crate) fn admit_tenancy_update(
        &self,
        target: &Target<'_>,
        name: &str,
        stored: &Value,
        next: &mut Value,
    ) -> Result<(), RegistryError> {
        if self.is_privileged() {
            return Ok(());
        }
        let refuse = |message: String| target.forbidden(name, message);
        if std::ptr::eq(target.resource, system::workspaces()) {
            check_workspace_update(stored, next).map_err(refuse)?;
            keep_finalizer(stored, next, WORKSPACE_FINALIZER).map_err(refuse)?;
        } else if std::ptr::eq(target.resource, system::logical_clusters()) {
            check_logical_cluster_update(stored, next).map_err(refuse)?;
            keep_finalizer(stored, next, LOGICAL_CLUSTER_FINALIZER).map_err(refuse)?;
        }
        Ok(())
    }

    /// Refuses deleting a LogicalCluster unless its `spec.directlyDeletable` allows it (its
    /// Workspace's deletion deletes it otherwise).
    pub(crate) async fn admit_tenancy_delete(
        &self,
        target: &Target<'_>,
        name: &str,
    ) -> Result<(), RegistryError> {
        if !std::ptr::eq(target.resource, system::logical_clusters()) || self.is_privileged() {
            return Ok(());
        }
        let logical_cluster = self.get(*target, name).await?;
        if logical_cluster.pointer("/spec/directlyDeletable") != Some(&Value::Bool(true)) {
            return Err(target.forbidden(name, "LogicalCluster cannot be deleted".into()));
        }
        Ok(())
    }

    async fn admit_workspace(
        &self,
        target: &Target<'_>,
        name: &str,
        workspace: &mut Value,
    ) -> Result<(), RegistryError> {
        if !is_dns1123_label(name) {
            return Err(target.invalid(
                name,
                vec![Cause {
                    reason: "FieldValueInvalid",
                    field: "metadata.name".into(),
                    message: format!(
                        "Invalid value: \"{name}\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
                    ),
                }],
            ));
        }
        let shape = type_errors(target.resource, workspace);
        if !shape.is_empty() {
            return Err(target.invalid(name, shape));
        }
        let refuse = |message: String| target.forbidden(name, message);
        if !self.is_privileged() {
            // kcp's messages spell the first one `spec.Cluster`.
            if !str_at(workspace, &["spec", "cluster"]).is_empty() {
                return Err(refuse(
                    "spec.Cluster can only be set by system privileged users".into(),
                ));
            }
            if !str_at(workspace, &["spec", "URL"]).is_empty() {
                return Err(refuse(
                    "spec.URL can only be set by system privileged users".into(),
                ));
            }
            if annotation(workspace, CLUSTER_ANNOTATION).is_some() {
                return Err(refuse(reserved_annotation(CLUSTER_ANNOTATION)));
            }
        }
        check_cluster_names(target, name, workspace)?;
        if let Some(requester) = self.requester()
            && !requester.groups.iter().any(|g| g == "system:masters")
        {
            // Who created it, as kcp records it; the workspace's LogicalCluster makes them its
            // admin. Whatever the client sent there is replaced.
            let owner = owner_annotation(requester);
            object::set(
                workspace,
                &["metadata", "annotations", OWNER_ANNOTATION],
                Value::String(owner),
            )
            .map_err(|e| refuse(e.to_string()))?;
        }
        let parent = self
            .logical_cluster_shared(target.cluster)
            .await
            .map_err(|e| refuse(format!("workspace type cannot be resolved: {e}")))?;
        let parent_path = match str_at(&parent, &["metadata", "annotations", PATH_ANNOTATION]) {
            "" => target.cluster,
            path => path,
        }
        .to_string();
        let parent_type = split_type_annotation(str_at(
            &parent,
            &["metadata", "annotations", TYPE_ANNOTATION],
        ))
        .ok_or_else(|| {
            refuse(format!(
                "annotation {TYPE_ANNOTATION} on LogicalCluster must be in the form of cluster:name"
            ))
        })?;
        let parent_type = self
            .workspace_type_at(parent_type.0, parent_type.1)
            .await?
            .ok_or_else(|| {
                refuse(format!(
                    "parent type cannot be resolved: workspace type {}:{} does not exist",
                    parent_type.0, parent_type.1
                ))
            })?;
        let (mut path, mut type_name) = workspace_type_reference(workspace);
        if type_name.is_empty() {
            (path, type_name) = parent_type.default_child().ok_or_else(|| {
                refuse(format!(
                    "spec.defaultChildWorkspaceType of workspace type {} must be set",
                    parent_type.qualified()
                ))
            })?;
        }
        let child_type = self
            .resolve_workspace_type(&parent_path, &path, &type_name)
            .await
            .map_err(|e| refuse(forbidden_message(e)))?;
        let wrong_type = |error: WrongType| target.invalid(name, vec![wrong_type_cause(&error)]);
        object::set(
            workspace,
            &["spec", "type"],
            json!({"name": child_type.name, "path": child_type.path}),
        )
        .map_err(wrong_type)?;
        let parent_set = self
            .workspace_type_set(parent_type.clone())
            .await
            .map_err(|e| refuse(forbidden_message(e)))?;
        let child_set = self
            .workspace_type_set(child_type.clone())
            .await
            .map_err(|e| refuse(forbidden_message(e)))?;
        check_parent_and_child(
            &parent_set,
            &child_set,
            &parent_type.qualified(),
            &child_type.qualified(),
        )
        .map_err(refuse)?;
        if let Some(requester) = self.requester()
            && !requester.groups.iter().any(|g| g == "system:masters")
        {
            // Users need verb `use` on the type, where it lives (kcp's root policy grants it to
            // every authenticated user for universal, organization and team).
            let type_cluster = self.resolve_path(&child_type.path).await?;
            let allowed = requester
                .access
                .allowed(
                    crate::store::Place {
                        cluster: &type_cluster,
                        namespace: "",
                    },
                    "use",
                    "tenancy.kcp.io",
                    "workspacetypes",
                    &child_type.name,
                )
                .await?;
            if !allowed {
                return Err(refuse(format!(
                    "unable to use workspace type {}: missing verb='use' permission on workspacetype",
                    child_type.qualified()
                )));
            }
        }
        if let Some(Value::Object(extra)) = child_type
            .object
            .pointer("/spec/additionalWorkspaceLabels")
            .cloned()
        {
            object::object_mut(workspace, &["metadata", "labels"])
                .map_err(wrong_type)?
                .extend(extra);
        }
        add_finalizer(workspace, WORKSPACE_FINALIZER);
        let annotations =
            object::object_mut(workspace, &["metadata", "annotations"]).map_err(wrong_type)?;
        if !annotations
            .get(CLUSTER_ANNOTATION)
            .is_some_and(Value::is_string)
        {
            annotations.insert(CLUSTER_ANNOTATION.into(), json!(names::new_cluster_name()));
        }
        Ok(())
    }
}

/// The causes of fields whose JSON type the kind's schema does not allow (`"spec": "x"`), with
/// the schema's messages (`spec: Invalid value: "string": spec in body must be of type object:
/// "string"`).
fn type_errors(resource: &Resource, object: &Value) -> Vec<Cause> {
    let Some(schema) = resource.custom().and_then(|custom| custom.schema()) else {
        return Vec::new();
    };
    kcp_apimachinery::schema::validate(&schema, object, "")
        .into_iter()
        .filter(|error| error.message.contains(" in body must be of type "))
        .map(|error| Cause {
            reason: error.reason,
            field: error.field,
            message: error.message,
        })
        .collect()
}

/// The schema's cause for a value that is not the object a write needed.
fn wrong_type_cause(error: &WrongType) -> Cause {
    Cause {
        reason: "FieldValueTypeInvalid",
        field: error.field.clone(),
        message: format!(
            "Invalid value: \"{found}\": {field} in body must be of type object: \"{found}\"",
            found = error.found,
            field = error.field,
        ),
    }
}

/// The 422 of a Workspace whose `spec.cluster` or cluster annotation (set by the server) is not
/// a logical cluster name.
fn check_cluster_names(
    target: &Target<'_>,
    name: &str,
    workspace: &Value,
) -> Result<(), RegistryError> {
    let named = [
        (
            "spec.cluster".to_string(),
            Some(str_at(workspace, &["spec", "cluster"])).filter(|c| !c.is_empty()),
        ),
        (
            format!("metadata.annotations[{CLUSTER_ANNOTATION}]"),
            annotation(workspace, CLUSTER_ANNOTATION),
        ),
    ];
    let causes: Vec<Cause> = named
        .into_iter()
        .filter_map(|(field, value)| {
            let value = value.filter(|v| !valid_cluster_name(v))?;
            Some(Cause {
                reason: "FieldValueInvalid",
                field,
                message: format!("Invalid value: {}: {CLUSTER_NAME_MESSAGE}", go_quote(value)),
            })
        })
        .collect();
    if causes.is_empty() {
        Ok(())
    } else {
        Err(target.invalid(name, causes))
    }
}

/// An annotation's value, if it is a string.
fn annotation<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object::at(object, &["metadata", "annotations", key]).and_then(Value::as_str)
}

/// kcp's reserved-metadata refusal.
fn reserved_annotation(key: &str) -> String {
    format!("modification of reserved annotation: {}", go_quote(key))
}

/// A Workspace's system fields a user's update must leave as they are (kcp's workspace
/// admission, and its reserved metadata for the cluster annotation).
fn check_workspace_update(stored: &Value, next: &Value) -> Result<(), String> {
    let old_cluster = str_at(stored, &["spec", "cluster"]);
    let new_cluster = str_at(next, &["spec", "cluster"]);
    if !old_cluster.is_empty() && new_cluster.is_empty() {
        return Err("spec.cluster cannot be unset".into());
    }
    if old_cluster != new_cluster {
        return Err("spec.cluster can only be changed by system privileged users".into());
    }
    if str_at(stored, &["spec", "URL"]) != str_at(next, &["spec", "URL"]) {
        return Err("spec.URL can only be changed by system privileged users".into());
    }
    if workspace_type_reference(stored) != workspace_type_reference(next) {
        return Err("spec.type is immutable".into());
    }
    if annotation(stored, CLUSTER_ANNOTATION) != annotation(next, CLUSTER_ANNOTATION) {
        return Err(reserved_annotation(CLUSTER_ANNOTATION));
    }
    let phase = |object| str_at(object, &["status", "phase"]);
    if phase(stored) != "Ready" && phase(next) == "Ready" {
        if new_cluster.is_empty() {
            return Err("spec.cluster must be set for phase Ready".into());
        }
        if str_at(next, &["spec", "URL"]).is_empty() {
            return Err("spec.URL must be set for phase Ready".into());
        }
    }
    Ok(())
}

/// The strings of a list field, as a set.
fn string_set(object: &Value, path: &[&str]) -> BTreeSet<String> {
    object::at(object, path)
        .map(object::strings)
        .unwrap_or_default()
        .into_iter()
        .collect()
}

/// The order of the phases a LogicalCluster goes through (others: 0), as kcp ranks them.
fn phase_ordinal(phase: &str) -> u8 {
    match phase {
        "" => 1,
        "Scheduling" => 2,
        "Initializing" => 3,
        "Ready" => 4,
        _ => 0,
    }
}

/// What a user's update of a LogicalCluster may not do (kcp's LogicalCluster admission; who
/// owns it and whether it may be deleted directly are the server's to say).
fn check_logical_cluster_update(stored: &Value, next: &mut Value) -> Result<(), String> {
    let deletable =
        |object: &Value| object.pointer("/spec/directlyDeletable") == Some(&json!(true));
    if deletable(stored) != deletable(next) {
        return Err("spec.directlyDeletable can only be changed by system privileged users".into());
    }
    if stored.pointer("/spec/owner") != next.pointer("/spec/owner") {
        return Err("spec.owner can only be changed by system privileged users".into());
    }
    if stored.pointer("/spec/createdBy") != next.pointer("/spec/createdBy") {
        return Err("spec.createdBy: field is immutable".into());
    }
    let new_spec = string_set(next, &["spec", "initializers"]);
    if string_set(stored, &["spec", "initializers"]) != new_spec {
        return Err("spec.initializers is immutable".into());
    }
    let old_phase = str_at(stored, &["status", "phase"]);
    let new_phase = str_at(next, &["status", "phase"]).to_string();
    let initializing = new_phase == "Initializing";
    let to_initializing = old_phase != "Initializing" && initializing;
    if to_initializing {
        // kcp's mutating half: the initializers to run are the spec's.
        let initializers: Vec<&String> = new_spec.iter().collect();
        object::set(next, &["status", "initializers"], json!(initializers))
            .map_err(|e| e.to_string())?;
    }
    let old_status = string_set(stored, &["status", "initializers"]);
    let new_status = string_set(next, &["status", "initializers"]);
    if !to_initializing && initializing && !old_status.is_superset(&new_status) {
        return Err("status.initializers must not grow".into());
    }
    if !initializing && old_status != new_status {
        return Err("status.initializers is immutable after initialization".into());
    }
    if old_phase == "Initializing" && !initializing && !new_status.is_empty() {
        return Err("status.initializers is not empty".into());
    }
    if phase_ordinal(old_phase) > phase_ordinal(&new_phase) {
        return Err(format!(
            "cannot transition from {} to {}",
            go_quote(old_phase),
            go_quote(&new_phase)
        ));
    }
    for key in RESERVED_LOGICAL_CLUSTER_ANNOTATIONS {
        if annotation(stored, key) != annotation(next, key) {
            return Err(reserved_annotation(key));
        }
    }
    Ok(())
}

/// Whether `object` lists `finalizer` in `metadata.finalizers`.
fn has_finalizer(object: &Value, finalizer: &str) -> bool {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|list| list.iter().any(|f| f == finalizer))
}

/// Adds `finalizer` to `metadata.finalizers` unless it is there (or the list is not a list,
/// which validation answers).
fn add_finalizer(object: &mut Value, finalizer: &str) {
    let Ok(metadata) = object::object_mut(object, &["metadata"]) else {
        return;
    };
    let list = metadata.entry("finalizers").or_insert_with(|| json!([]));
    if list.is_null() {
        *list = json!([]);
    }
    if let Some(list) = list.as_array_mut()
        && !list.iter().any(|f| f == finalizer)
    {
        list.push(json!(finalizer));
    }
}

/// kcp's finalizer admission for a user's update: the server's `finalizer` cannot be removed
/// from an object being deleted, and is put back on one that is not.
fn keep_finalizer(stored: &Value, next: &mut Value, finalizer: &str) -> Result<(), String> {
    if !has_finalizer(stored, finalizer) || has_finalizer(next, finalizer) {
        return Ok(());
    }
    if meta::string(next, "deletionTimestamp").is_some() {
        return Err(format!("removing the finalizer {finalizer} is forbidden"));
    }
    add_finalizer(next, finalizer);
    Ok(())
}

/// The message of a refusal from type resolution.
fn forbidden_message(error: RegistryError) -> String {
    match error {
        RegistryError::Forbidden { message, .. } => message,
        other => other.to_string(),
    }
}
