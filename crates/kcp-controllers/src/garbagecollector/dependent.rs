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
use super::{drop_references, edit_at, has_finalizer, read, read_at, target_of};

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
    // Gone, or its kind no longer served (a CRD deleted with its objects): nothing to collect.
    let Some((resource, dependent)) = read_at(registry, location).await? else {
        return Ok(());
    };
    let target = target_of(location, &resource);
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
        let drop_gone = |object: &mut Value| drop_references(object, &gone);
        return edit_at(registry, location, Some(&uid), &drop_gone).await;
    }
    let propagation = if found.contains(&Found::Waiting) && dependents.any {
        if dependents.one_waits {
            // Owner and dependent may wait on each other (a cycle): as Kubernetes does, this
            // object stops blocking its owners before it goes in the foreground.
            edit_at(registry, location, Some(&uid), &unblock_owners).await?;
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

/// Sets `blockOwnerDeletion` to false in every owner reference of an object.
fn unblock_owners(object: &mut Value) {
    for reference in object["metadata"]["ownerReferences"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        if reference["blockOwnerDeletion"] == Value::Bool(true) {
            reference["blockOwnerDeletion"] = Value::Bool(false);
        }
    }
}
