//! Deleting a CustomResourceDefinition, as apiextensions-apiserver's CRD storage does.
//!
//! The first delete does not remove the CRD: it sets `deletionTimestamp`, adds the
//! [`CLEANUP_FINALIZER`] and the condition `Terminating=True` (`InstanceDeletionPending`), and
//! answers the CRD. While it terminates its custom resources can be read and deleted but not
//! created (405). The CRD controller's cleanup then deletes every custom resource of the CRD in
//! its logical cluster and removes the finalizer, which removes the CRD. A delete of a CRD
//! that is already terminating is the generic delete (it waits for the finalizers).
//!
//! Controllers delete custom resources as they are stored
//! ([`Registry::delete_custom_resources_as_stored`]), as kube-apiserver's CRD finalizer deletes
//! them at the storage version: nothing is converted, so a CRD whose conversion webhook cannot
//! be reached can still be emptied and deleted (and so can its namespaces and its workspace).

use bytes::Bytes;
use kcp_storage::keys::ResourceKeys;
use kcp_storage::{RangeRequest, StorageError};
use serde_json::{Value, json};

use crate::collection::Held;
use crate::delete_options::DeleteOptions;
use crate::error::RegistryError;
use crate::meta;
use crate::store::{DeleteOutcome, Registry, Target, decode};

/// How many stored objects one read of [`Registry::delete_custom_resources_as_stored`] takes.
const DELETE_PAGE: usize = 256;

/// The finalizer a deleted CRD carries until its custom resources are gone.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// How many times the start of termination retries after losing a race.
const CONFLICT_RETRIES: usize = 5;

impl Registry {
    pub(crate) async fn delete_crd(
        &self,
        target: Target<'_>,
        name: &str,
    ) -> Result<DeleteOutcome, RegistryError> {
        for _ in 0..CONFLICT_RETRIES {
            let current = self.read(&target, name).await?;
            let mut crd = decode(&current)?;
            if meta::string(&crd, "deletionTimestamp").is_some() {
                return self
                    .delete_object(target, name, &DeleteOptions::default())
                    .await;
            }
            mark_terminating(&mut crd);
            meta::take_resource_version(&mut crd);
            match self
                .write_back(&target, name, crd, current.mod_revision)
                .await
            {
                Ok(crd) => return Ok(DeleteOutcome::Pending(crd)),
                Err(RegistryError::Conflict { .. }) => continue,
                Err(other) => return Err(other),
            }
        }
        Err(target.conflict(name))
    }
}

impl Registry {
    /// Deletes every custom resource `plural.group` of `cluster` stored under `identity` (an
    /// APIExport's identity hash for a bound resource, else empty; only those in `namespace`,
    /// if given) as stored, without converting or defaulting them: an object without
    /// finalizers goes, one with finalizers gets its deletionTimestamp (as a delete does).
    /// Answers how many are left (finalizers hold them, or a write raced this one).
    pub async fn delete_custom_resources_as_stored(
        &self,
        cluster: &str,
        group: &str,
        plural: &str,
        identity: &str,
        namespace: Option<&str>,
    ) -> Result<Held, RegistryError> {
        let keys =
            ResourceKeys::with_identity(group, plural, Some(identity).filter(|i| !i.is_empty()));
        let prefix = match namespace {
            Some(namespace) => keys.namespace(cluster, namespace),
            None => keys.cluster(cluster),
        };
        let mut held = Held::default();
        let mut request = Some(
            RangeRequest::prefix(prefix)
                .with_limit(DELETE_PAGE)
                .without_count(),
        );
        while let Some(page_request) = request {
            let page = self.storage().range(page_request.clone()).await?;
            for kv in &page.kvs {
                if let Some(object) = self
                    .delete_stored(&kv.key, &kv.value, kv.mod_revision)
                    .await?
                {
                    held.count(&object);
                }
            }
            request = page_request.next_page(&page);
        }
        Ok(held)
    }

    /// Deletes one stored object as it is, or marks it deleted while finalizers hold it; the
    /// object if it is still there.
    async fn delete_stored(
        &self,
        key: &[u8],
        value: &[u8],
        revision: u64,
    ) -> Result<Option<Value>, RegistryError> {
        let mut object: Value = serde_json::from_slice(value)
            .map_err(|e| RegistryError::Internal(format!("stored object is not JSON: {e}")))?;
        let outcome = if meta::has_finalizers(&object) {
            if meta::string(&object, "deletionTimestamp").is_some() {
                return Ok(Some(object));
            }
            let metadata = meta::metadata_mut(&mut object);
            metadata.insert("deletionTimestamp".into(), json!(meta::now()));
            metadata.insert("deletionGracePeriodSeconds".into(), json!(0));
            let bytes =
                serde_json::to_vec(&object).map_err(|e| RegistryError::Internal(e.to_string()))?;
            self.storage()
                .update(key, Bytes::from(bytes), revision)
                .await
                .map(|_| false)
        } else {
            self.storage()
                .delete(key, Some(revision))
                .await
                .map(|_| true)
        };
        match outcome {
            Ok(true) => Ok(None),
            Ok(false) => Ok(Some(object)),
            // Changed meanwhile: the next pass looks again.
            Err(StorageError::Conflict { .. }) => Ok(Some(object)),
            Err(StorageError::NotFound { .. }) => Ok(None),
            Err(other) => Err(other.into()),
        }
    }
}

/// Starts the termination of `crd`: deletionTimestamp, the cleanup finalizer, and the
/// `Terminating` condition.
fn mark_terminating(crd: &mut Value) {
    let metadata = meta::metadata_mut(crd);
    metadata.insert("deletionTimestamp".into(), json!(meta::now()));
    metadata.insert("deletionGracePeriodSeconds".into(), json!(0));
    let finalizers = metadata.entry("finalizers").or_insert_with(|| json!([]));
    if !finalizers.is_array() {
        *finalizers = json!([]);
    }
    if let Some(list) = finalizers.as_array_mut()
        && !list.iter().any(|f| f == CLEANUP_FINALIZER)
    {
        list.push(json!(CLEANUP_FINALIZER));
    }
    let Some(fields) = crd.as_object_mut() else {
        return;
    };
    let status = fields.entry("status").or_insert_with(|| json!({}));
    if !status.is_object() {
        *status = json!({});
    }
    let Some(status) = status.as_object_mut() else {
        return;
    };
    let conditions = status.entry("conditions").or_insert_with(|| json!([]));
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let terminating = json!({
        "type": "Terminating",
        "status": "True",
        "lastTransitionTime": meta::now(),
        "reason": "InstanceDeletionPending",
        "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
    });
    if let Some(conditions) = conditions.as_array_mut() {
        match conditions.iter_mut().find(|c| c["type"] == "Terminating") {
            Some(old) => *old = terminating,
            None => conditions.push(terminating),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn termination_adds_the_finalizer_once_and_the_condition() {
        let mut crd = json!({
            "metadata": {"name": "widgets.example.com", "finalizers": ["example.com/keep"]},
            "status": {"conditions": [{"type": "Established", "status": "True"}]},
        });
        mark_terminating(&mut crd);
        mark_terminating(&mut crd);
        assert_eq!(
            crd["metadata"]["finalizers"],
            json!(["example.com/keep", CLEANUP_FINALIZER])
        );
        assert!(crd["metadata"]["deletionTimestamp"].is_string());
        let conditions = crd["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions.len(), 2);
        assert_eq!(conditions[1]["type"], "Terminating");
        assert_eq!(conditions[1]["status"], "True");
        assert_eq!(conditions[1]["reason"], "InstanceDeletionPending");
    }
}
