//! Deletion of a logical cluster's content: every object of every resource the cluster serves
//! is deleted (custom resources, as stored, then built-in and kcp kinds, CRDs, and namespaces
//! last, which the namespace controller then finalizes). Finalizers are honoured: while
//! anything is left the LogicalCluster shows phase Deleting and `WorkspaceContentDeleted=False`
//! (how many objects wait) and the pass comes back once half of it went, or after a while; once
//! nothing is left its finalizer goes, which removes it (and lets its Workspace go). A pass reads
//! whole only what it deletes ([`Registry::delete_content`]).

use std::time::Duration;

use kcp_apimachinery::object;
use kcp_apis::builtin::{RESOURCES, Resource, ResourceRef};
use kcp_apis::system;
use kcp_registry::tenancy::{LOGICAL_CLUSTER, LOGICAL_CLUSTER_FINALIZER};
use kcp_registry::{DeleteOptions, Propagation, Registry, RegistryError, Target};
use serde_json::{Value, json};

use crate::conditions::{self, Condition};
use crate::driver::Outcome;

/// When to look again at content that finalizers (or nested workspaces) still hold: once half
/// of it went, as the deletes of namespaces and nested workspaces tell (see the controller's
/// module), or after a wait of at least [`CONTENT_REMAINING_DELAY`], longer the more objects
/// wait ([`DELAY_PER_PENDING`] each), at most [`LONGEST_CONTENT_DELAY`], for what no such
/// event announces (objects that other finalizers hold). Each pass reads all that is left:
/// brought back by every nested workspace that went, or by a short timer, the passes of a
/// thousand organizations of 1,000 deleting workspaces took most of the server, and their
/// workspaces went only once all of them were marked deleted.
const CONTENT_REMAINING_DELAY: Duration = Duration::from_millis(500);
const DELAY_PER_PENDING: Duration = Duration::from_millis(30);
const LONGEST_CONTENT_DELAY: Duration = Duration::from_secs(60);
/// How long deletion runs before the LogicalCluster reports what is left.
const REPORT_AFTER_SECONDS: i64 = 2;

/// Every resource whose objects a cluster may hold, each storage once, in deletion order.
fn resources(registry: &Registry, cluster: &str) -> Vec<ResourceRef> {
    let served = registry.served(cluster);
    let custom = served.non_builtin().iter().cloned();
    let deletable = |r: &ResourceRef| r.verbs.contains(&"delete") && r.verbs.contains(&"list");
    let is = |r: &Resource, group: &str, name: &str| r.group == group && r.name == name;
    let mut ordered: Vec<ResourceRef> = Vec::new();
    let custom_first = custom.filter(|r| r.custom.is_some());
    let builtin = RESOURCES.iter().map(ResourceRef::from);
    let all = custom_first.chain(builtin).filter(deletable).filter(|r| {
        !is(r, "", "namespaces")
            && !is(r, "apiextensions.k8s.io", "customresourcedefinitions")
            && !std::ptr::eq(&**r, system::logical_clusters())
    });
    for r in all.chain(
        RESOURCES
            .iter()
            .filter(|r| is(r, "apiextensions.k8s.io", "customresourcedefinitions"))
            .map(ResourceRef::from),
    ) {
        if !ordered
            .iter()
            .any(|o| o.group == r.group && o.name == r.name)
        {
            ordered.push(r);
        }
    }
    ordered.extend(
        RESOURCES
            .iter()
            .filter(|r| is(r, "", "namespaces"))
            .map(ResourceRef::from),
    );
    ordered
}

/// When to look again at `pending` objects still there.
fn remaining_delay(pending: usize) -> Duration {
    DELAY_PER_PENDING
        .saturating_mul(u32::try_from(pending).unwrap_or(u32::MAX))
        .clamp(CONTENT_REMAINING_DELAY, LONGEST_CONTENT_DELAY)
}

pub(super) async fn reconcile(
    registry: &Registry,
    cluster: &str,
    logical_cluster: &Value,
) -> Result<Outcome, RegistryError> {
    let privileged = registry.privileged();
    let mut remaining = 0;
    for resource in resources(registry, cluster) {
        let system_kind =
            system::find(&resource.group, &resource.version, &resource.name).is_some();
        if resource.custom.is_some() && !system_kind {
            // As stored: no conversion webhook stands in the way.
            remaining += privileged
                .delete_custom_resources_as_stored(
                    cluster,
                    &resource.group,
                    &resource.name,
                    resource.identity(),
                    None,
                )
                .await?
                .objects;
            continue;
        }
        let target = Target {
            cluster,
            resource: &resource,
            namespace: None,
        };
        remaining += privileged
            .delete_content(target, &DeleteOptions::propagating(Propagation::Background))
            .await?
            .objects;
    }
    let target = Target {
        cluster,
        resource: system::logical_clusters(),
        namespace: None,
    };
    if remaining > 0 {
        let condition = Condition {
            kind: "WorkspaceContentDeleted",
            status: false,
            reason: "SomeResourcesRemain",
            message: format!("{remaining} objects are waiting for their finalizers"),
        };
        // Namespaces and nested workspaces usually go within a pass or two: report only what
        // is still there after a moment.
        let settled = logical_cluster["metadata"]["deletionTimestamp"]
            .as_str()
            .and_then(kcp_registry::seconds_since)
            .is_some_and(|seconds| seconds >= REPORT_AFTER_SECONDS);
        if settled
            && (logical_cluster["status"]["phase"] != "Deleting"
                || !conditions::holds(&logical_cluster["status"], &condition))
        {
            privileged
                .patch(target, LOGICAL_CLUSTER, &move |current: &Value| {
                    let mut next = current.clone();
                    let status = object::object_mut(&mut next, &["status"]).map_err(|e| {
                        RegistryError::Internal(format!("LogicalCluster of {cluster}: {e}"))
                    })?;
                    status.insert("phase".into(), json!("Deleting"));
                    conditions::set(status, condition.clone());
                    Ok(next)
                })
                .await?;
        }
        return Ok(Outcome::AfterEvents {
            events: remaining.div_ceil(2),
            at_most: remaining_delay(remaining),
        });
    }
    // Its terminators (through their virtual workspace) remove themselves; the LogicalCluster
    // stays until they have, as in kcp. Their removal is an event of it.
    if logical_cluster["status"]["terminators"]
        .as_array()
        .is_some_and(|left| !left.is_empty())
    {
        return Ok(Outcome::Finished);
    }
    let result = privileged
        .patch(target, LOGICAL_CLUSTER, &|current: &Value| {
            let mut next = current.clone();
            if let Some(list) = next
                .pointer_mut("/metadata/finalizers")
                .and_then(Value::as_array_mut)
            {
                list.retain(|f| f != LOGICAL_CLUSTER_FINALIZER);
            }
            Ok(next)
        })
        .await;
    match result {
        Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(Outcome::Finished),
        Err(other) => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_looked_at_less_often_when_much_waits() {
        assert_eq!(remaining_delay(0), CONTENT_REMAINING_DELAY);
        assert_eq!(remaining_delay(2), CONTENT_REMAINING_DELAY);
        assert_eq!(remaining_delay(100), Duration::from_secs(3));
        assert_eq!(remaining_delay(usize::MAX), LONGEST_CONTENT_DELAY);
    }
}
