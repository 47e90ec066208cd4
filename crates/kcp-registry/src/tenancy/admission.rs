//! What creating kcp's own kinds checks and sets, as kcp's admission plugins do.
//!
//! A Workspace gets its type (the parent type's `defaultChildWorkspaceType` when it names none;
//! a type without a path is looked up from the parent upwards and gets its path filled in), which
//! must exist and be allowed under the parent's type and vice versa; the type's
//! `additionalWorkspaceLabels`; the finalizer that keeps it until its logical cluster is gone; and
//! the random name of its future logical cluster. A LogicalCluster is always named `cluster`,
//! made only by the server, and deleted by users only when `spec.directlyDeletable`;
//! WorkspaceTypes cannot be named `any` or `system`.

use kcp_apis::system;
use serde_json::{Value, json};

use super::types::{check_parent_and_child, split_type_annotation, workspace_type_reference};
use super::{CLUSTER_ANNOTATION, LOGICAL_CLUSTER, PATH_ANNOTATION, TYPE_ANNOTATION, names, text};
use crate::error::{Cause, RegistryError};
use crate::meta;
use crate::store::{Registry, Target};

/// WorkspaceType names kcp reserves.
const RESERVED_TYPE_NAMES: &[&str] = &["any", "system"];

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
            return Err(forbidden(
                target,
                &name,
                "LogicalCluster cannot be created".into(),
            ));
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
            return Err(forbidden(target, &name, "name is reserved".into()));
        }
        if std::ptr::eq(resource, system::workspaces()) {
            self.admit_workspace(target, &name, object).await?;
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
        if logical_cluster["spec"]["directlyDeletable"].as_bool() != Some(true) {
            return Err(forbidden(
                target,
                name,
                "LogicalCluster cannot be deleted".into(),
            ));
        }
        Ok(())
    }

    async fn admit_workspace(
        &self,
        target: &Target<'_>,
        name: &str,
        workspace: &mut Value,
    ) -> Result<(), RegistryError> {
        if !super::paths::valid_segment(name) {
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
        let refuse = |message: String| forbidden(target, name, message);
        let parent = self
            .logical_cluster(target.cluster)
            .await
            .map_err(|e| refuse(format!("workspace type cannot be resolved: {e}")))?;
        let parent_path = text(&parent, &["metadata", "annotations", PATH_ANNOTATION])
            .unwrap_or(target.cluster)
            .to_string();
        let parent_type = text(&parent, &["metadata", "annotations", TYPE_ANNOTATION])
            .and_then(split_type_annotation)
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
        workspace["spec"]["type"] = json!({"name": child_type.name, "path": child_type.path});
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
        let metadata = meta::metadata_mut(workspace);
        if let Some(Value::Object(extra)) = child_type
            .object
            .pointer("/spec/additionalWorkspaceLabels")
            .cloned()
        {
            let labels = metadata.entry("labels").or_insert_with(|| json!({}));
            for (key, value) in extra {
                labels[key] = value;
            }
        }
        let finalizers = metadata.entry("finalizers").or_insert_with(|| json!([]));
        if let Some(list) = finalizers.as_array_mut()
            && !list.iter().any(|f| f == super::WORKSPACE_FINALIZER)
        {
            list.push(json!(super::WORKSPACE_FINALIZER));
        }
        let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
        if annotations[CLUSTER_ANNOTATION].as_str().is_none() {
            annotations[CLUSTER_ANNOTATION] = json!(names::random_cluster_name());
        }
        Ok(())
    }
}

/// The message of a refusal from type resolution.
fn forbidden_message(error: RegistryError) -> String {
    match error {
        RegistryError::Forbidden { message, .. } => message,
        other => other.to_string(),
    }
}

fn forbidden(target: &Target<'_>, name: &str, message: String) -> RegistryError {
    RegistryError::Forbidden {
        qualified_resource: target.qualified_resource(),
        name: name.to_string(),
        message,
        causes: Vec::new(),
    }
}
