//! One dependent, looked at again: are its owners still there? As Kubernetes' collector decides
//! (`attemptToDeleteItem`), each owner reference is
//! - *dangling*: no object of that kind and name in the dependent's logical cluster (and
//!   namespace, for a namespaced owner), or one with another uid;
//! - *waiting*: the owner is being deleted in the foreground, waiting for its dependents;
//! - *solid*: otherwise, including a reference to a kind nobody serves, which keeps the
//!   dependent;
//! - *invalid*: a namespaced owner of a cluster-scoped dependent, which keeps the dependent for
//!   good and is reported as a Warning event `OwnerRefInvalidNamespace` on it.
//!
//! With a solid owner, the dependent stays and loses its dangling and waiting references. With
//! none, it is deleted: in the foreground when an owner waits for it and it has dependents of
//! its own (so that the owner waits for those too), else as its own finalizers say, in the
//! background by default. Deletes carry the dependent's uid as a precondition, so an object
//! deleted and created again under the same name meanwhile is never hit.

use kcp_registry::delete_options::{FOREGROUND_FINALIZER, ORPHAN_FINALIZER};
use kcp_registry::ownership::Location;
use kcp_registry::{DeleteOptions, Propagation, Registry, RegistryError, Target};
use serde_json::Value;

use super::graph::OwnerRef;
use super::{has_finalizer, read, without_references};

/// What an owner reference finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    Dangling,
    Waiting,
    Solid,
    /// A namespaced owner of a cluster-scoped dependent: never resolved, so never collected.
    Invalid,
}

/// What the graph knows of a dependent's own dependents.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Dependents {
    /// It owns others.
    pub any: bool,
    /// One of them is being deleted in the foreground itself.
    pub one_waits: bool,
}

/// Looks at the dependent at `location`.
pub(crate) async fn reconcile(
    registry: &Registry,
    location: &Location,
    dependents: Dependents,
) -> Result<(), RegistryError> {
    let Some(resource) = registry.resolve_location(location) else {
        // Its kind is no longer served (a CRD deleted with its objects): nothing to collect.
        return Ok(());
    };
    let target = target_of(location, &resource);
    let Some(dependent) = read(registry, target, &location.name).await? else {
        return Ok(());
    };
    let deleting = dependent["metadata"]["deletionTimestamp"].is_string();
    let owners = OwnerRef::all_of(&dependent);
    if owners.is_empty() || deleting {
        return Ok(());
    }
    let mut found = Vec::with_capacity(owners.len());
    for owner in &owners {
        let result = look_up(registry, location, owner).await?;
        if result == Found::Invalid {
            report_invalid(registry, location, &dependent, owner).await;
        }
        found.push(result);
    }
    let uid = dependent["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if found.contains(&Found::Invalid) {
        return Ok(());
    }
    if found.contains(&Found::Solid) {
        let gone: Vec<String> = owners
            .iter()
            .zip(&found)
            .filter(|(_, found)| **found != Found::Solid)
            .map(|(owner, _)| owner.uid.clone())
            .collect();
        if gone.is_empty() {
            return Ok(());
        }
        return without_references(registry, target, &location.name, &uid, &gone).await;
    }
    let propagation = if found.contains(&Found::Waiting) && dependents.any {
        if dependents.one_waits {
            // Owner and dependent may wait on each other (a cycle): as Kubernetes does, this
            // object stops blocking its owners before it goes in the foreground.
            unblock_owners(registry, target, &location.name, &uid).await?;
        }
        Propagation::Foreground
    } else if has_finalizer(&dependent, ORPHAN_FINALIZER) {
        Propagation::Orphan
    } else if has_finalizer(&dependent, FOREGROUND_FINALIZER) {
        Propagation::Foreground
    } else {
        Propagation::Background
    };
    let options = DeleteOptions {
        uid: Some(uid),
        ..DeleteOptions::propagating(propagation)
    };
    // Not privileged: what admission protects from users (namespace `default`, a workspace's
    // LogicalCluster) is protected from ownership too; such a delete is refused and retried,
    // as Kubernetes' collector retries a 403.
    match registry.delete_with(target, &location.name, &options).await {
        Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
        // Another object by that name now: the watch brought its own key.
        Err(RegistryError::Conflict { reason, .. })
            if reason.starts_with("Precondition failed") =>
        {
            Ok(())
        }
        // Other conflicts (a busy object) are retried.
        Err(other) => Err(other),
    }
}

/// Where the object at `location` is read and written.
pub(crate) fn target_of<'a>(
    location: &'a Location,
    resource: &'a kcp_apis::builtin::Resource,
) -> Target<'a> {
    Target {
        cluster: &location.cluster,
        resource,
        namespace: (!location.namespace.is_empty()).then_some(location.namespace.as_str()),
    }
}

/// What `owner`, named by the dependent at `dependent`, finds.
async fn look_up(
    registry: &Registry,
    dependent: &Location,
    owner: &OwnerRef,
) -> Result<Found, RegistryError> {
    let Some(resource) = registry.resolve_kind(&dependent.cluster, &owner.api_version, &owner.kind)
    else {
        return Ok(Found::Solid);
    };
    let namespace = if resource.namespaced {
        if dependent.namespace.is_empty() {
            return Ok(Found::Invalid);
        }
        Some(dependent.namespace.as_str())
    } else {
        None
    };
    let target = Target {
        cluster: &dependent.cluster,
        resource: &resource,
        namespace,
    };
    let Some(object) = read(registry, target, &owner.name).await? else {
        return Ok(Found::Dangling);
    };
    if object["metadata"]["uid"].as_str() != Some(owner.uid.as_str()) {
        return Ok(Found::Dangling);
    }
    let waiting = object["metadata"]["deletionTimestamp"].is_string()
        && has_finalizer(&object, FOREGROUND_FINALIZER);
    Ok(if waiting {
        Found::Waiting
    } else {
        Found::Solid
    })
}

/// Records the Warning Kubernetes' collector records for an owner reference that cannot hold
/// in the dependent's namespace.
async fn report_invalid(
    registry: &Registry,
    location: &Location,
    dependent: &Value,
    owner: &OwnerRef,
) {
    let message = format!(
        "ownerRef [{}/{}, namespace: {}, name: {}, uid: {}] does not exist in namespace {:?}",
        owner.api_version,
        owner.kind,
        location.namespace,
        owner.name,
        owner.uid,
        location.namespace
    );
    crate::events::record(
        registry,
        &location.cluster,
        dependent,
        true,
        "OwnerRefInvalidNamespace",
        &message,
        "garbage-collector-controller",
    )
    .await;
}

/// Sets `blockOwnerDeletion` to false in every owner reference of the object `name` of
/// `target`, if it still has uid `uid`.
async fn unblock_owners(
    registry: &Registry,
    target: Target<'_>,
    name: &str,
    uid: &str,
) -> Result<(), RegistryError> {
    let result = registry
        .privileged()
        .patch(target, name, &|current: &Value| {
            let mut next = current.clone();
            if next["metadata"]["uid"].as_str() != Some(uid) {
                return Ok(next);
            }
            if let Some(references) = next["metadata"]["ownerReferences"].as_array_mut() {
                for reference in references.iter_mut() {
                    if reference["blockOwnerDeletion"] == Value::Bool(true) {
                        reference["blockOwnerDeletion"] = Value::Bool(false);
                    }
                }
            }
            Ok(next)
        })
        .await;
    match result {
        Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
        Err(other) => Err(other),
    }
}
