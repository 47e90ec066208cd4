//! Per-kind write rules: which parts of an object a write may change, what the server sets on
//! create, and when an update finishes a deletion.
//!
//! A write goes to the whole object or to a subresource ([`Part`]). For a subresource only its
//! part of the request body counts: `status` keeps everything but `.status` from the stored
//! object, and `namespaces/<name>/finalize` everything but `.spec.finalizers`. Namespaces have
//! their own lifecycle: creation adds the `kubernetes` finalizer to `spec.finalizers` and sets
//! `status.phase: Active`; updates of the whole object keep `spec.finalizers` and `status`; a
//! deleting namespace is removed only once both `metadata.finalizers` and `spec.finalizers`
//! are empty. Kinds with a `status` subresource (built-in or custom) drop `status` on create
//! and keep the stored one on updates of the whole object; CRDs record their storage version
//! in `status.storedVersions`.

use kcp_apis::builtin::Resource;
use serde_json::{Value, json};

use crate::meta;

/// The finalizer the namespace controller owns in `spec.finalizers`.
pub const NAMESPACE_FINALIZER: &str = "kubernetes";

/// Namespaces that can never be deleted, as kube-apiserver's NamespaceLifecycle admission keeps.
pub const IMMORTAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

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
    /// Everything, status included, on create and update: for the server's own controllers,
    /// which also may delete the namespaces no user may (see [`crate::Registry::privileged`]).
    Everything,
}

impl Part {
    /// The part a subresource name addresses, if the registry serves writes to it.
    pub fn of_subresource(name: &str) -> Option<Part> {
        match name {
            "status" => Some(Part::Status),
            "finalize" => Some(Part::Finalize),
            _ => None,
        }
    }
}

pub(crate) fn is_namespace(resource: &Resource) -> bool {
    resource.group.is_empty() && resource.name == "namespaces"
}

pub(crate) fn is_crd(resource: &Resource) -> bool {
    resource.group == "apiextensions.k8s.io" && resource.name == "customresourcedefinitions"
}

/// Adds a CRD's storage version to `status.storedVersions` (the versions objects may be
/// stored at, which only a status write may shorten).
fn record_stored_version(crd: &mut Value) {
    let storage = crd["spec"]["versions"].as_array().and_then(|versions| {
        versions
            .iter()
            .find(|v| v["storage"].as_bool() == Some(true))
            .and_then(|v| v["name"].as_str())
            .map(str::to_string)
    });
    let (Some(storage), Some(fields)) = (storage, crd.as_object_mut()) else {
        return;
    };
    let status = fields.entry("status").or_insert_with(|| json!({}));
    if !status.is_object() {
        *status = json!({});
    }
    let stored = status
        .as_object_mut()
        .map(|s| s.entry("storedVersions").or_insert_with(|| json!([])));
    if let Some(Value::Array(versions)) = stored
        && !versions.iter().any(|v| v == storage.as_str())
    {
        versions.push(json!(storage));
    }
}

/// Whether `resource` has a `status` subresource, whose part the main endpoint leaves alone.
fn has_status(resource: &Resource) -> bool {
    resource
        .subresources
        .iter()
        .any(|(name, _)| *name == "status")
}

/// Server-set fields of a new object.
pub(crate) fn prepare_create(resource: &Resource, part: Part, object: &mut Value) {
    if has_status(resource)
        && part != Part::Everything
        && let Some(fields) = object.as_object_mut()
    {
        // Status is written through its subresource, not set by whoever creates the object.
        fields.remove("status");
    }
    if is_crd(resource) {
        record_stored_version(object);
    }
    if !is_namespace(resource) {
        return;
    }
    let mut finalizers = spec_finalizers(object);
    if !finalizers.iter().any(|f| f == NAMESPACE_FINALIZER) {
        finalizers.push(NAMESPACE_FINALIZER.to_string());
    }
    set_spec_finalizers(object, &finalizers);
    if let Some(fields) = object.as_object_mut() {
        fields.insert("status".into(), json!({"phase": "Active"}));
    }
}

/// The object an update of `part` stores, from the stored object and the requested one (whose
/// server fields are already carried over).
pub(crate) fn prepare_update(
    resource: &Resource,
    part: Part,
    stored: &Value,
    requested: Value,
) -> Value {
    match part {
        Part::Whole | Part::Everything => {
            let mut next = requested;
            if is_namespace(resource) {
                set_spec_finalizers(&mut next, &spec_finalizers(stored));
            }
            if has_status(resource) && part == Part::Whole {
                copy_field(stored, &mut next, "status");
            }
            if is_crd(resource) {
                record_stored_version(&mut next);
            }
            next
        }
        Part::Status => {
            let mut next = stored.clone();
            copy_field(&requested, &mut next, "status");
            if is_crd(resource) {
                // A status written from an older read must not drop the storage version.
                record_stored_version(&mut next);
            }
            next
        }
        Part::Finalize => {
            let mut next = stored.clone();
            set_spec_finalizers(&mut next, &spec_finalizers(&requested));
            next
        }
    }
}

/// Whether storing `object` finishes its deletion: it is being deleted and nothing holds it.
pub(crate) fn deletion_finished(resource: &Resource, object: &Value) -> bool {
    meta::string(object, "deletionTimestamp").is_some()
        && !meta::has_finalizers(object)
        && (!is_namespace(resource) || spec_finalizers(object).is_empty())
}

/// `spec.finalizers` of a namespace (empty when absent).
pub fn spec_finalizers(object: &Value) -> Vec<String> {
    object["spec"]["finalizers"]
        .as_array()
        .map(|f| {
            f.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn set_spec_finalizers(object: &mut Value, finalizers: &[String]) {
    // A `spec` of the wrong type is left for validation to answer.
    let Ok(spec) = crate::fields::object_mut(object, &["spec"]) else {
        return;
    };
    if finalizers.is_empty() {
        spec.remove("finalizers");
    } else {
        spec.insert("finalizers".into(), json!(finalizers));
    }
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

/// Whether a namespace object is terminating (being deleted, or in phase Terminating).
pub fn namespace_terminating(namespace: &Value) -> bool {
    meta::string(namespace, "deletionTimestamp").is_some()
        || namespace["status"]["phase"] == "Terminating"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn namespaces() -> &'static Resource {
        kcp_apis::builtin::RESOURCES
            .iter()
            .find(|r| r.name == "namespaces")
            .unwrap()
    }

    #[test]
    fn namespaces_get_the_kubernetes_finalizer_and_phase_active_on_create() {
        let mut ns = json!({"metadata": {"name": "a"}, "spec": {"finalizers": ["x"]}, "status": {"phase": "Terminating"}});
        prepare_create(namespaces(), Part::Whole, &mut ns);
        assert_eq!(ns["spec"]["finalizers"], json!(["x", "kubernetes"]));
        assert_eq!(ns["status"], json!({"phase": "Active"}));
    }

    #[test]
    fn each_part_changes_only_its_fields() {
        let stored = json!({"metadata": {"name": "a", "labels": {"l": "1"}}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
        let requested = json!({"metadata": {"name": "a", "labels": {"l": "2"}}, "spec": {}, "status": {"phase": "Terminating"}});
        let whole = prepare_update(namespaces(), Part::Whole, &stored, requested.clone());
        assert_eq!(whole["metadata"]["labels"]["l"], "2");
        assert_eq!(whole["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(whole["status"]["phase"], "Active");

        let status = prepare_update(namespaces(), Part::Status, &stored, requested.clone());
        assert_eq!(status["metadata"]["labels"]["l"], "1");
        assert_eq!(status["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(status["status"]["phase"], "Terminating");

        let finalize = prepare_update(namespaces(), Part::Finalize, &stored, requested);
        assert_eq!(finalize["metadata"]["labels"]["l"], "1");
        assert_eq!(finalize["spec"], json!({}));
        assert_eq!(finalize["status"]["phase"], "Active");
    }

    #[test]
    fn a_deleting_namespace_waits_for_both_finalizer_lists() {
        let mut ns = json!({"metadata": {"name": "a", "deletionTimestamp": "t"}, "spec": {"finalizers": ["kubernetes"]}});
        assert!(!deletion_finished(namespaces(), &ns));
        ns["spec"] = json!({});
        ns["metadata"]["finalizers"] = json!(["f"]);
        assert!(!deletion_finished(namespaces(), &ns));
        ns["metadata"]["finalizers"] = json!([]);
        assert!(deletion_finished(namespaces(), &ns));
    }
}
