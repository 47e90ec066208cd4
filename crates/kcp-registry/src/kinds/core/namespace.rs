//! Namespace: names are RFC 1123 labels; the lifecycle Kubernetes gives it. Creation adds the
//! `kubernetes` finalizer to `spec.finalizers` and sets `status.phase: Active`; every write
//! carries the label `kubernetes.io/metadata.name` with the namespace's name (set when the body
//! is decoded, as Kubernetes' defaulting does, so its writer owns it in managedFields, and again
//! once a generated name is known); updates of the whole object keep `spec.finalizers` and
//! `status`, which only the `finalize` and `status` subresources change; a deleting namespace
//! goes once both `metadata.finalizers` and `spec.finalizers` are empty (the namespace
//! controller removes its content first). Field selector: `status.phase`.

use jiff::Timestamp;
use kcp_apimachinery::object;
use kcp_apimachinery::patch::strategic::ListStrategy;
use kcp_apis::builtin::Resource;
use serde_json::{Value, json};

use crate::error::RegistryError;
use crate::kinds::printing::{self, Column, col};
use crate::kinds::{Deletion, Kind, conditions_list_strategy};
use crate::meta;
use crate::names::NameRule;
use crate::strategy::{self, Part};
use crate::validation::field::{Bad, Errors, invalid};
use crate::validation::formats::qualified_name_errors;

/// The finalizer the namespace controller owns in `spec.finalizers`.
pub const NAMESPACE_FINALIZER: &str = "kubernetes";

/// The label every namespace carries with its own name (Kubernetes' `LabelMetadataName`), for
/// selectors such as NetworkPolicies' `namespaceSelector`.
pub const NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Namespaces that can never be deleted, as kube-apiserver's NamespaceLifecycle admission keeps.
pub const IMMORTAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public"];

pub(crate) struct Namespace;
pub(crate) static NAMESPACE: Namespace = Namespace;

const COLUMNS: &[Column] = &[
    printing::NAME,
    col("Status", "string", "The status of the namespace"),
    printing::AGE,
];

impl Kind for Namespace {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "Namespace")
    }

    fn name_rule(&self) -> NameRule {
        NameRule::Label
    }

    fn validate(&self, object: &Value, _old: Option<&Value>, errs: &mut Errors) {
        validate(object, errs);
    }

    fn decode(&self, _: &Resource, object: &mut Value) -> Result<(), RegistryError> {
        label_with_name(object);
        Ok(())
    }

    fn prepare_create(&self, resource: &Resource, part: Part, object: &mut Value) {
        label_with_name(object);
        strategy::drop_status_on_create(resource, part, object);
        let mut finalizers = spec_finalizers(object);
        if !finalizers.iter().any(|f| f == NAMESPACE_FINALIZER) {
            finalizers.push(NAMESPACE_FINALIZER.to_string());
        }
        set_spec_finalizers(object, &finalizers);
        if let Some(fields) = object.as_object_mut() {
            fields.insert("status".into(), json!({"phase": "Active"}));
        }
    }

    fn prepare_update(
        &self,
        resource: &Resource,
        part: Part,
        stored: &Value,
        requested: Value,
    ) -> Value {
        match part {
            Part::Whole | Part::Everything => {
                let mut next = strategy::update_of_part(resource, part, stored, requested);
                set_spec_finalizers(&mut next, &spec_finalizers(stored));
                label_with_name(&mut next);
                next
            }
            Part::Status | Part::Approval => {
                strategy::update_of_part(resource, part, stored, requested)
            }
            Part::Finalize => {
                let mut next = stored.clone();
                set_spec_finalizers(&mut next, &spec_finalizers(&requested));
                next
            }
        }
    }

    fn deletion_finished(&self, object: &Value) -> bool {
        strategy::nothing_holds(object) && spec_finalizers(object).is_empty()
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["status.phase"]
    }

    fn list_strategy(&self, path: &[&str]) -> ListStrategy {
        conditions_list_strategy(path)
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn cells(&self, object: &Value, now: Timestamp) -> Vec<Value> {
        // Stored namespaces may lack the phase the API sets (Active, Terminating once
        // deleting); print what it would be.
        let phase = match object::str_at(object, &["status", "phase"]) {
            "" if object["metadata"]["deletionTimestamp"].is_string() => "Terminating",
            "" => "Active",
            phase => phase,
        };
        vec![
            printing::name(object),
            json!(phase),
            printing::age(object, now),
        ]
    }

    fn deletion(&self) -> Deletion {
        Deletion::NamespaceLifecycle
    }
}

/// Sets [`NAME_LABEL`] to the namespace's name, whatever the labels said (no name yet: nothing).
fn label_with_name(object: &mut Value) {
    let Some(name) = meta::string(object, "name")
        .filter(|name| !name.is_empty())
        .map(str::to_string)
    else {
        return;
    };
    let metadata = meta::metadata_mut(object);
    if !metadata.get("labels").is_some_and(Value::is_object) {
        metadata.insert("labels".into(), json!({}));
    }
    if let Some(Value::Object(labels)) = metadata.get_mut("labels") {
        labels.insert(NAME_LABEL.into(), Value::String(name));
    }
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
    let Ok(spec) = object::object_mut(object, &["spec"]) else {
        return;
    };
    if finalizers.is_empty() {
        spec.remove("finalizers");
    } else {
        spec.insert("finalizers".into(), json!(finalizers));
    }
}

/// Whether a namespace object is terminating (being deleted, or in phase Terminating).
pub fn namespace_terminating(namespace: &Value) -> bool {
    meta::string(namespace, "deletionTimestamp").is_some()
        || namespace["status"]["phase"] == "Terminating"
}

fn validate(object: &Value, errs: &mut Errors) {
    let finalizers = object["spec"]["finalizers"].as_array().cloned();
    for finalizer in finalizers.unwrap_or_default() {
        let finalizer = finalizer.as_str().unwrap_or_default();
        for message in qualified_name_errors(finalizer) {
            errs.push(invalid("spec.finalizers", Bad::Str(finalizer), &message));
        }
        if !finalizer.contains('/') && finalizer != "kubernetes" {
            errs.push(invalid(
                "spec.finalizers",
                Bad::Str(finalizer),
                "name is neither a standard finalizer name nor is it fully qualified",
            ));
        }
    }
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
        NAMESPACE.prepare_create(namespaces(), Part::Whole, &mut ns);
        assert_eq!(ns["spec"]["finalizers"], json!(["x", "kubernetes"]));
        assert_eq!(ns["status"], json!({"phase": "Active"}));
    }

    #[test]
    fn each_part_changes_only_its_fields() {
        let stored = json!({"metadata": {"name": "a", "labels": {"l": "1"}}, "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}});
        let requested = json!({"metadata": {"name": "a", "labels": {"l": "2"}}, "spec": {}, "status": {"phase": "Terminating"}});
        let update =
            |part| NAMESPACE.prepare_update(namespaces(), part, &stored, requested.clone());
        let whole = update(Part::Whole);
        assert_eq!(whole["metadata"]["labels"]["l"], "2");
        assert_eq!(whole["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(whole["status"]["phase"], "Active");

        let status = update(Part::Status);
        assert_eq!(status["metadata"]["labels"]["l"], "1");
        assert_eq!(status["spec"]["finalizers"], json!(["kubernetes"]));
        assert_eq!(status["status"]["phase"], "Terminating");

        let finalize = update(Part::Finalize);
        assert_eq!(finalize["metadata"]["labels"]["l"], "1");
        assert_eq!(finalize["spec"], json!({}));
        assert_eq!(finalize["status"]["phase"], "Active");
    }

    #[test]
    fn a_deleting_namespace_waits_for_both_finalizer_lists() {
        let mut ns = json!({"metadata": {"name": "a", "deletionTimestamp": "t"}, "spec": {"finalizers": ["kubernetes"]}});
        assert!(!NAMESPACE.deletion_finished(&ns));
        ns["spec"] = json!({});
        ns["metadata"]["finalizers"] = json!(["f"]);
        assert!(!NAMESPACE.deletion_finished(&ns));
        ns["metadata"]["finalizers"] = json!([]);
        assert!(NAMESPACE.deletion_finished(&ns));
    }
}
