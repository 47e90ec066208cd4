//! The write rules every kind shares: which part of an object a write addresses ([`Part`]),
//! what a subresource write may change, and when a deletion is finished. Kinds add their own
//! in their rule set ([`crate::kinds::Kind`]), mostly by calling these first.
//!
//! For a subresource only its part of the request body counts: `status` keeps everything but
//! `.status` from the stored object (and `namespaces/<name>/finalize` everything but
//! `.spec.finalizers`, in the namespace's rule set). Kinds with a `status` subresource
//! (built-in or custom) drop `status` on create and keep the stored one on updates of the
//! whole object.

use kcp_apis::builtin::Resource;
use serde_json::Value;

use crate::meta;

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Part {
    /// The object itself.
    #[default]
    Whole,
    /// The `status` subresource: only `.status` changes.
    Status,
    /// The `finalize` subresource of namespaces: only `.spec.finalizers` changes.
    Finalize,
    /// The `approval` subresource of CertificateSigningRequests: only `.status.conditions`
    /// changes.
    Approval,
    /// Everything, status included, on create and update: for the server's own controllers,
    /// which also may delete the namespaces no user may (see [`crate::Registry::privileged`]).
    Everything,
}

impl Part {
    /// The subresource this part is written through ("" for the object itself).
    pub fn subresource_name(self) -> &'static str {
        match self {
            Part::Status => "status",
            Part::Finalize => "finalize",
            Part::Approval => "approval",
            Part::Whole | Part::Everything => "",
        }
    }

    /// The part a subresource name addresses, if the registry serves writes to it.
    pub fn of_subresource(name: &str) -> Option<Part> {
        match name {
            "status" => Some(Part::Status),
            "finalize" => Some(Part::Finalize),
            "approval" => Some(Part::Approval),
            _ => None,
        }
    }
}

/// Whether `resource` has a `status` subresource, whose part the main endpoint leaves alone.
fn has_status(resource: &Resource) -> bool {
    resource
        .subresources
        .iter()
        .any(|(name, _)| *name == "status")
}

/// Drops `status` from a new object whose kind writes it through its subresource (unless the
/// server's own controllers write everything).
pub(crate) fn drop_status_on_create(resource: &Resource, part: Part, object: &mut Value) {
    if has_status(resource)
        && part != Part::Everything
        && let Some(fields) = object.as_object_mut()
    {
        fields.remove("status");
    }
}

/// The object an update of `part` stores, for kinds without rules of their own: the whole
/// object keeps the stored `status` when that is a subresource; a `status` write changes only
/// `status`; subresources a kind does not serve change nothing.
pub(crate) fn update_of_part(
    resource: &Resource,
    part: Part,
    stored: &Value,
    requested: Value,
) -> Value {
    match part {
        Part::Whole | Part::Everything => {
            let mut next = requested;
            if has_status(resource) && part == Part::Whole {
                copy_field(stored, &mut next, "status");
            }
            next
        }
        Part::Status => {
            let mut next = stored.clone();
            copy_field(&requested, &mut next, "status");
            next
        }
        Part::Finalize | Part::Approval => stored.clone(),
    }
}

/// Whether `object` is being deleted and no finalizer holds it.
pub(crate) fn nothing_holds(object: &Value) -> bool {
    meta::string(object, "deletionTimestamp").is_some() && !meta::has_finalizers(object)
}

/// Copies the top-level `field` of `from` into `to`, removing it from `to` if `from` lacks it.
fn copy_field(from: &Value, to: &mut Value, field: &str) {
    let Some(target) = to.as_object_mut() else {
        return;
    };
    match from.get(field) {
        Some(value) => target.insert(field.into(), value.clone()),
        None => target.remove(field),
    };
}
