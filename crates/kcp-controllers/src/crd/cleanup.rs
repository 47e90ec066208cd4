//! The cleanup of a deleted CRD, as Kubernetes' CRD finalizer does it: for a CRD with a
//! deletionTimestamp and the `customresourcecleanup.apiextensions.k8s.io` finalizer, set
//! `Terminating=True` (`InstanceDeletionInProgress`), delete every custom resource of the CRD
//! in its logical cluster as stored (no conversion, so an unreachable conversion webhook does
//! not hold the deletion up, as Kubernetes deletes at the storage version), look again while
//! finalizers hold some, then set `Terminating=False` (`InstanceDeletionCompleted`) and remove
//! the finalizer, which removes the CRD (and its resources from the cluster's discovery).
//!
//! A CRD that was never Established has no objects (`NeverEstablished`); one whose resource
//! overlaps a built-in resource's storage must not delete them (`OverlappingBuiltInResource`).

use std::time::Duration;

use kcp_apimachinery::object;
use kcp_registry::custom::{CLEANUP_FINALIZER, condition_true};
use kcp_registry::{Registry, RegistryError, Target};
use serde_json::Value;

use super::crds;
use crate::conditions::{self, Condition};
use crate::driver::Outcome;

/// The wait before looking again at a CRD whose custom resources finalizers still hold.
pub(crate) const INSTANCES_REMAINING_DELAY: Duration = Duration::from_secs(1);

/// Whether `crd` is being deleted and still waits for its cleanup.
pub(crate) fn awaits_cleanup(crd: &Value) -> bool {
    crd["metadata"]["deletionTimestamp"].is_string()
        && crd["metadata"]["finalizers"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f == CLEANUP_FINALIZER))
}

fn terminating(
    status: bool,
    reason: &'static str,
    message: impl Into<String>,
) -> Condition<'static> {
    Condition {
        kind: "Terminating",
        status,
        reason,
        message: message.into(),
    }
}

fn crd_target(cluster: &str) -> Target<'_> {
    Target {
        cluster,
        resource: crds(),
        namespace: None,
    }
}

/// Cleans up the CRD `name` of `cluster` if it is being deleted.
pub async fn reconcile(
    registry: &Registry,
    cluster: &str,
    name: &str,
) -> Result<Outcome, RegistryError> {
    let crd = match registry.get(crd_target(cluster), name).await {
        Ok(crd) => crd,
        Err(RegistryError::NotFound { .. }) => return Ok(Outcome::Finished),
        Err(other) => return Err(other),
    };
    if !awaits_cleanup(&crd) {
        return Ok(Outcome::Finished);
    }
    let Some(crd) = set_condition(
        registry,
        cluster,
        crd,
        terminating(
            true,
            "InstanceDeletionInProgress",
            "CustomResource deletion is in progress",
        ),
    )
    .await?
    else {
        return Ok(Outcome::Finished);
    };

    let group = object::str_at(&crd, &["spec", "group"]);
    let plural = object::str_at(&crd, &["spec", "names", "plural"]);
    let done = if overlaps_builtin(group, plural) {
        terminating(
            false,
            "OverlappingBuiltInResource",
            "instances overlap with built-in resources in storage",
        )
    } else if condition_true(&crd, "Established") {
        match registry
            .delete_custom_resources_as_stored(cluster, group, plural, "", None)
            .await
            .map(|held| held.objects)
        {
            Ok(0) => terminating(false, "InstanceDeletionCompleted", "removed all instances"),
            Ok(remaining) => {
                tracing::debug!(cluster, crd = name, remaining, "custom resources remaining");
                return Ok(Outcome::Again(INSTANCES_REMAINING_DELAY));
            }
            Err(error) => {
                let failed = terminating(
                    true,
                    "InstanceDeletionFailed",
                    format!("could not issue all deletes: {error}"),
                );
                set_condition(registry, cluster, crd.clone(), failed).await?;
                return Err(error);
            }
        }
    } else {
        terminating(false, "NeverEstablished", "resource was never established")
    };
    if set_condition(registry, cluster, crd.clone(), done)
        .await?
        .is_none()
    {
        return Ok(Outcome::Finished);
    }
    remove_finalizer(registry, cluster, name).await?;
    Ok(Outcome::Finished)
}

/// Whether `plural.group` names a built-in resource, whose objects share the CRD's storage.
fn overlaps_builtin(group: &str, plural: &str) -> bool {
    kcp_apis::builtin::RESOURCES
        .iter()
        .any(|r| r.group == group && r.name == plural)
}

/// Sets a `Terminating` condition through the status subresource unless `crd` already has it;
/// answers the CRD as it is now, or `None` once it is gone.
async fn set_condition(
    registry: &Registry,
    cluster: &str,
    crd: Value,
    condition: Condition<'static>,
) -> Result<Option<Value>, RegistryError> {
    if conditions::holds(&crd["status"], &condition) {
        return Ok(Some(crd));
    }
    let name = object::str_at(&crd, &["metadata", "name"]);
    let status = registry
        .subresource("status")
        .expect("the registry serves status subresources");
    let patched = status
        .patch(crd_target(cluster), name, &|current: &Value| {
            let mut next = current.clone();
            let status = object::object_mut(&mut next, &["status"])
                .map_err(|e| RegistryError::Internal(format!("CRD {name}: {e}")))?;
            conditions::set(status, condition.clone());
            Ok(next)
        })
        .await;
    match patched {
        Ok(crd) => Ok(Some(crd)),
        Err(RegistryError::NotFound { .. }) => Ok(None),
        Err(other) => Err(other),
    }
}

/// Removes the cleanup finalizer; without other finalizers the CRD is then gone.
async fn remove_finalizer(
    registry: &Registry,
    cluster: &str,
    name: &str,
) -> Result<(), RegistryError> {
    let removed = registry
        .patch(crd_target(cluster), name, &|current: &Value| {
            let mut next = current.clone();
            if let Some(finalizers) = next
                .pointer_mut("/metadata/finalizers")
                .and_then(Value::as_array_mut)
            {
                finalizers.retain(|f| f != CLEANUP_FINALIZER);
            }
            Ok(next)
        })
        .await;
    match removed {
        Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
        Err(other) => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_deleting_crds_with_the_finalizer_await_cleanup() {
        let mut crd = json!({"metadata": {"name": "widgets.example.com"}});
        assert!(!awaits_cleanup(&crd));
        crd["metadata"]["deletionTimestamp"] = json!("2024-01-01T00:00:00Z");
        assert!(!awaits_cleanup(&crd));
        crd["metadata"]["finalizers"] = json!(["other", CLEANUP_FINALIZER]);
        assert!(awaits_cleanup(&crd));
    }

    #[test]
    fn built_in_resources_overlap() {
        assert!(overlaps_builtin(
            "apiextensions.k8s.io",
            "customresourcedefinitions"
        ));
        assert!(!overlaps_builtin("example.com", "widgets"));
    }
}
