//! Custom resources: validated by their CRD version's schema (with Kubernetes' paths and
//! messages, every problem at once) after the metadata rules every object follows, and
//! defaulted by it before that; the fields the `scale` subresource reads must be readable;
//! then the version's CEL rules ([`check_rules`], async: they run on tokio's blocking pool,
//! so a slow rule never holds up other requests). Unknown fields are pruned earlier, while
//! decoding (`crate::validation::prepare`; the API server has reported them as
//! `fieldValidation` asks).

use kcp_apimachinery::schema::{CelValidator, FieldError};
use kcp_apimachinery::unstructured::{nested_int64, nested_string};
use kcp_apis::builtin::Resource;
use kcp_apis::custom::CustomResource;
use serde_json::Value;

use crate::error::{Cause, RegistryError};
use crate::kinds::{Generation, Kind};
use crate::validation::field::{self, Bad, Errors};
use crate::validation::metadata;

/// The rule set every custom resource shares; what differs between them comes from their CRD
/// (`Resource::custom`). Their Table columns are the CRD's printer columns, which the API
/// server renders itself (this set's [`Kind::columns`] are not asked).
pub(crate) struct Custom;
pub(crate) static CUSTOM: Custom = Custom;

impl Kind for Custom {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "")
    }

    /// Fills in the schema's defaults.
    fn decode(&self, resource: &Resource, object: &mut Value) -> Result<(), RegistryError> {
        if let Some(defaults) = resource
            .custom()
            .and_then(|custom| custom.defaults.as_ref())
        {
            defaults.apply(object);
        }
        Ok(())
    }

    fn validate_create(&self, resource: &Resource, object: &Value, errs: &mut Errors) {
        metadata::validate(object, self.name_rule(), errs);
        if let Some(custom) = resource.custom() {
            validate_schema(custom, object, errs);
            validate_scale(custom, object, errs);
        }
    }

    fn validate_update(&self, resource: &Resource, new: &Value, old: &Value, errs: &mut Errors) {
        metadata::validate_update(new, old, errs);
        metadata::validate(new, self.name_rule(), errs);
        if let Some(custom) = resource.custom() {
            validate_schema(custom, new, errs);
            validate_scale(custom, new, errs);
        }
    }

    fn generation(&self, resource: &Resource) -> Generation {
        Generation::AllButMetadata {
            status: resource.custom().is_some_and(|custom| custom.status),
        }
    }

    fn selects(&self, resource: &Resource, field: &str) -> bool {
        resource
            .custom()
            .is_some_and(|custom| custom.selectable_fields.iter().any(|f| f == field))
    }
}

/// The schema's problems with `object`.
fn validate_schema(custom: &CustomResource, object: &Value, errs: &mut Errors) {
    if let Some(schema) = custom.schema() {
        let found = kcp_apimachinery::schema::validate(&schema, object, "");
        errs.extend(found.into_iter().map(cause));
    }
}

/// Whether `causes` hold a value of the wrong type or outside its enum, which makes CEL rules
/// meaningless (Kubernetes' `hasBlockingErr`).
fn blocking(causes: &[Cause]) -> bool {
    causes.iter().any(|c| {
        c.reason == "FieldValueNotSupported" || c.message.contains(" in body must be of type ")
    })
}

/// Adds the failures of the CEL rules of `resource` (a custom resource) on `object` (`old`:
/// the stored object on update) to `causes`, the object's other problems: as in Kubernetes,
/// when those include a blocking one the rules are not run and one cause says so.
pub(crate) async fn check_rules(
    resource: &Resource,
    object: &Value,
    old: Option<&Value>,
    causes: &mut Vec<Cause>,
) {
    let Some(validator) = resource.custom.as_ref().and_then(|c| c.cel.as_ref()) else {
        return;
    };
    if blocking(causes) {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            field: "<nil>".into(),
            message: "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".into(),
        });
        return;
    }
    let failures = run_rules(validator.clone(), object.clone(), old.cloned()).await;
    causes.extend(failures.into_iter().map(cause));
}

/// Runs `validator` on tokio's blocking pool: rules may take up to their cost budget (about a
/// second), which must not stall the async workers. A panic there (which the validator
/// already guards against per rule) becomes an internal error, not a lost request.
async fn run_rules(validator: CelValidator, object: Value, old: Option<Value>) -> Vec<FieldError> {
    let evaluation =
        tokio::task::spawn_blocking(move || validator.validate(&object, old.as_ref())).await;
    evaluation.unwrap_or_else(|_| {
        vec![FieldError {
            reason: "InternalError",
            field: "<nil>".into(),
            message: "Internal error: the validation rules could not be evaluated".into(),
        }]
    })
}

fn cause(error: kcp_apimachinery::schema::FieldError) -> Cause {
    Cause {
        reason: error.reason,
        field: error.field,
        message: error.message,
    }
}

/// The fields the `scale` subresource reads must be readable as it reads them: replica counts
/// integers in 0..=2147483647, the label selector a string. Paths are named as the CRD writes
/// them (`.spec.replicas`).
fn validate_scale(custom: &CustomResource, object: &Value, errs: &mut Errors) {
    let Some(scale) = &custom.scale else {
        return;
    };
    for path in [&scale.spec_replicas_path, &scale.status_replicas_path] {
        match nested_int64(object, path) {
            Err(message) => errs.push(field::invalid(path.as_str(), Bad::Int(0), &message)),
            Ok(Some(replicas)) if replicas < 0 => errs.push(field::invalid(
                path.as_str(),
                Bad::Int(replicas),
                "should be a non-negative integer",
            )),
            Ok(Some(replicas)) if replicas > i64::from(i32::MAX) => errs.push(field::invalid(
                path.as_str(),
                Bad::Int(replicas),
                &format!("should be less than or equal to {}", i32::MAX),
            )),
            Ok(_) => {}
        }
    }
    if let Some(path) = &scale.label_selector_path
        && let Err(message) = nested_string(object, path)
    {
        errs.push(field::invalid(path.as_str(), Bad::Str(""), &message));
    }
}

#[cfg(test)]
mod tests {
    use kcp_apis::custom::Interner;
    use serde_json::json;

    use super::*;

    fn scaled() -> std::sync::Arc<CustomResource> {
        Interner::default().resources(&json!({
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "subresources": {"scale": {
                              "specReplicasPath": ".spec.replicas",
                              "statusReplicasPath": ".status.replicas",
                              "labelSelectorPath": ".status.selector"}}}]
        }))[0]
            .custom
            .clone()
            .unwrap()
    }

    fn problems(object: Value) -> Vec<String> {
        let mut errs = Errors::new();
        validate_scale(&scaled(), &object, &mut errs);
        errs.into_iter()
            .map(|c| format!("{}: {}", c.field, c.message))
            .collect()
    }

    #[test]
    fn scale_fields_must_be_readable_counts_and_a_selector() {
        assert!(problems(json!({"spec": {"replicas": 3}})).is_empty());
        assert!(problems(json!({})).is_empty());
        assert_eq!(
            problems(json!({"spec": {"replicas": -1}, "status": {"replicas": 2147483648i64}})),
            [
                ".spec.replicas: Invalid value: -1: should be a non-negative integer",
                ".status.replicas: Invalid value: 2147483648: should be less than or equal to 2147483647",
            ]
        );
        assert_eq!(
            problems(json!({"spec": {"replicas": "two"}, "status": {"selector": 1}})),
            [
                ".spec.replicas: Invalid value: 0: .spec.replicas accessor error: two is of the type string, expected int64",
                ".status.selector: Invalid value: \"\": .status.selector accessor error: 1 is of the type int64, expected string",
            ]
        );
    }

    /// The resource of a CRD whose `spec.items` must all be positive.
    fn ruled() -> Resource {
        Resource::clone(&Interner::default().resources(&json!({
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {
                "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                    "type": "object",
                    "x-kubernetes-validations": [{"rule": "self.items.all(x, x > 0)", "message": "positive"}],
                    "properties": {"items": {"type": "array", "items": {"type": "integer"}}},
                }}},
            }}],
        }))[0])
    }

    #[tokio::test]
    async fn rules_yield_to_the_runtime_while_they_run() {
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let finished = done.clone();
        let object = json!({"metadata": {"name": "w"}, "spec": {"items": [1, 0, 3]}});
        let validation = tokio::spawn(async move {
            let mut causes = Vec::new();
            check_rules(&ruled(), &object, None, &mut causes).await;
            finished.store(true, std::sync::atomic::Ordering::SeqCst);
            causes
        });
        // On this single-threaded runtime the validation task runs until it waits for the
        // blocking pool; evaluating the rules in place would have finished it.
        tokio::task::yield_now().await;
        assert!(!done.load(std::sync::atomic::Ordering::SeqCst));
        let causes = validation.await.unwrap();
        assert_eq!(
            causes
                .iter()
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect::<Vec<_>>(),
            ["spec: Invalid value: \"object\": positive"]
        );
    }

    #[tokio::test]
    async fn rules_are_not_run_on_values_of_the_wrong_type() {
        let mut causes = vec![Cause {
            reason: "FieldValueInvalid",
            field: "spec.items[0]".into(),
            message: "Invalid value: \"string\": spec.items[0] in body must be of type integer: \"string\"".into(),
        }];
        let object = json!({"spec": {"items": ["a"]}});
        check_rules(&ruled(), &object, None, &mut causes).await;
        assert_eq!(causes.len(), 2);
        assert!(
            causes[1]
                .message
                .contains("some validation rules were not checked")
        );
    }
}
