//! Deleting a CustomResourceDefinition, as apiextensions-apiserver's CRD storage does.
//!
//! The first delete does not remove the CRD: it sets `deletionTimestamp`, adds the
//! [`CLEANUP_FINALIZER`] and the condition `Terminating=True` (`InstanceDeletionPending`), and
//! answers the CRD. While it terminates its custom resources can be read and deleted but not
//! created (405). The CRD controller's cleanup then deletes every custom resource of the CRD in
//! its logical cluster and removes the finalizer, which removes the CRD. A delete of a CRD
//! that is already terminating is the generic delete (it waits for the finalizers).

use serde_json::{Value, json};

use crate::error::RegistryError;
use crate::meta;
use crate::store::{DeleteOutcome, Registry, Target, decode};

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
                return self.delete_object(target, name).await;
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
    if !crd["status"].is_object() {
        crd["status"] = json!({});
    }
    if !crd["status"]["conditions"].is_array() {
        crd["status"]["conditions"] = json!([]);
    }
    let terminating = json!({
        "type": "Terminating",
        "status": "True",
        "lastTransitionTime": meta::now(),
        "reason": "InstanceDeletionPending",
        "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
    });
    if let Some(conditions) = crd["status"]["conditions"].as_array_mut() {
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
