//! An object being deleted with one of the collector's finalizers:
//! - `orphan`: each dependent loses its reference to the object, then the finalizer goes (and
//!   with it, if it was the last, the object);
//! - `foregroundDeletion`: every dependent is looked at again (they find their owner waiting,
//!   and go unless another owner keeps them); once no dependent with `blockOwnerDeletion` is
//!   left, the finalizer goes.

use kcp_registry::delete_options::{FOREGROUND_FINALIZER, ORPHAN_FINALIZER};
use kcp_registry::ownership::Location;
use kcp_registry::{Registry, RegistryError};
use serde_json::Value;

use super::graph::Dependent;
use super::{drop_references, edit_at, has_finalizer, read_at};

/// What serving a finalizer leaves to do.
#[derive(Debug, Default)]
pub(crate) struct Served {
    /// Dependents to look at again (those of an owner deleted in the foreground).
    pub check: Vec<Location>,
}

/// Serves the finalizer of the object at `location`, which the graph knows as the owner
/// `uid` of `dependents` (nothing to do if the object there has another uid now: the graph
/// learns of it from the watch).
pub(crate) async fn reconcile(
    registry: &Registry,
    location: &Location,
    uid: &str,
    dependents: Vec<Dependent>,
) -> Result<Served, RegistryError> {
    let Some((_, owner)) = read_at(registry, location).await? else {
        return Ok(Served::default());
    };
    if !owner["metadata"]["deletionTimestamp"].is_string()
        || owner["metadata"]["uid"].as_str() != Some(uid)
    {
        return Ok(Served::default());
    }
    if has_finalizer(&owner, ORPHAN_FINALIZER) {
        for dependent in &dependents {
            orphan(registry, &dependent.location, uid).await?;
        }
        remove_finalizer(registry, location, uid, ORPHAN_FINALIZER).await?;
        return Ok(Served::default());
    }
    if has_finalizer(&owner, FOREGROUND_FINALIZER) {
        if !dependents.iter().any(|d| d.blocking) {
            remove_finalizer(registry, location, uid, FOREGROUND_FINALIZER).await?;
        }
        return Ok(Served {
            check: dependents.into_iter().map(|d| d.location).collect(),
        });
    }
    Ok(Served::default())
}

/// Removes the references to the owner `owner_uid` from the dependent at `location` (whatever
/// object is there now: a reference to that uid names nothing else).
async fn orphan(
    registry: &Registry,
    location: &Location,
    owner_uid: &str,
) -> Result<(), RegistryError> {
    let gone = [owner_uid.to_string()];
    edit_at(registry, location, None, &|object| {
        drop_references(object, &gone)
    })
    .await
}

/// Removes `finalizer` from the object at `location` if it still has uid `uid`.
async fn remove_finalizer(
    registry: &Registry,
    location: &Location,
    uid: &str,
    finalizer: &str,
) -> Result<(), RegistryError> {
    let without = |object: &mut Value| {
        if let Some(finalizers) = object["metadata"]["finalizers"].as_array_mut() {
            finalizers.retain(|f| f != finalizer);
        }
    };
    edit_at(registry, location, Some(uid), &without).await
}
