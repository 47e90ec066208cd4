//! Deleting a namespace, as kube-apiserver's namespace storage does.
//!
//! The first delete only starts termination: it sets `deletionTimestamp` and
//! `status.phase: Terminating` and answers the namespace. The namespace controller then empties
//! it and removes `kubernetes` from `spec.finalizers` through the `finalize` subresource; that
//! update removes the namespace once no finalizer of either list is left. A delete of a
//! terminating namespace whose `spec.finalizers` are not empty answers it unchanged; once they
//! are empty it is the generic delete. (That `default`, `kube-system` and `kube-public` cannot
//! be deleted is admission's, [`crate::admission`].)

use kcp_apimachinery::object;
use serde_json::json;

use crate::delete_options::DeleteOptions;
use crate::error::RegistryError;
use crate::kinds::core::spec_finalizers;
use crate::meta;
use crate::store::{DeleteOutcome, Registry, Target, decode};

/// How many times the start of termination retries after losing a race.
const CONFLICT_RETRIES: usize = 5;

impl Registry {
    pub(crate) async fn delete_namespace(
        &self,
        target: Target<'_>,
        name: &str,
    ) -> Result<DeleteOutcome, RegistryError> {
        for _ in 0..CONFLICT_RETRIES {
            let current = self.read(&target, name).await?;
            let mut namespace = decode(&current)?;
            if meta::string(&namespace, "deletionTimestamp").is_some() {
                if !spec_finalizers(&namespace).is_empty() {
                    return Ok(DeleteOutcome::Pending(namespace));
                }
                return self
                    .delete_object(target, name, &DeleteOptions::default())
                    .await;
            }
            meta::metadata_mut(&mut namespace)
                .insert("deletionTimestamp".into(), json!(meta::now()));
            if !namespace["status"].is_object()
                && let Some(fields) = namespace.as_object_mut()
            {
                fields.insert("status".into(), json!({}));
            }
            object::set(&mut namespace, &["status", "phase"], json!("Terminating"))
                .map_err(|e| RegistryError::Internal(format!("stored namespace {name}: {e}")))?;
            meta::take_resource_version(&mut namespace);
            match self
                .write_back(&target, name, namespace, current.mod_revision)
                .await
            {
                Ok(namespace) => return Ok(DeleteOutcome::Pending(namespace)),
                Err(RegistryError::Conflict { .. }) => continue,
                Err(other) => return Err(other),
            }
        }
        Err(RegistryError::Conflict {
            qualified_resource: target.qualified_resource(),
            name: name.to_string(),
            reason: "the object has been modified; please apply your changes to the latest version and try again".into(),
        })
    }
}
