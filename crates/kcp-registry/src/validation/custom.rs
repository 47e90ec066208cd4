//! Custom resources: validated by their CRD version's schema (with Kubernetes' paths and
//! messages, every problem at once) after the metadata rules every object follows, and
//! defaulted by it before that; the fields the `scale` subresource reads must be readable.
//! Unknown fields are pruned earlier, where `fieldValidation` is read (the API server).

use kcp_apimachinery::unstructured::{nested_int64, nested_string};
use kcp_apis::custom::CustomResource;
use serde_json::Value;

use super::field::{self, Bad, Errors};
use super::metadata;
use crate::error::Cause;
use crate::names::NameRule;

/// Fills in the schema's defaults.
pub(crate) fn prepare(custom: &CustomResource, object: &mut Value) {
    if custom.has_defaults
        && let Some(schema) = &custom.schema
    {
        kcp_apimachinery::schema::default(schema, object);
    }
}

/// The problems of a new custom resource.
pub(crate) fn validate_create(custom: &CustomResource, object: &Value) -> Errors {
    let mut errs = Errors::new();
    metadata::validate(object, NameRule::Subdomain, &mut errs);
    validate_schema(custom, object, None, &mut errs);
    validate_scale(custom, object, &mut errs);
    errs
}

/// The problems of `new` replacing `old`.
pub(crate) fn validate_update(custom: &CustomResource, new: &Value, old: &Value) -> Errors {
    let mut errs = Errors::new();
    metadata::validate_update(new, old, &mut errs);
    metadata::validate(new, NameRule::Subdomain, &mut errs);
    validate_schema(custom, new, Some(old), &mut errs);
    validate_scale(custom, new, &mut errs);
    errs
}

/// The schema's problems with `object`, then its CEL rules' (with `old` for transition
/// rules) unless a value of the wrong type or outside its enum makes them meaningless: then,
/// as in Kubernetes, one error says the rules were not checked.
fn validate_schema(
    custom: &CustomResource,
    object: &Value,
    old: Option<&Value>,
    errs: &mut Errors,
) {
    let Some(schema) = &custom.schema else {
        return;
    };
    let found = kcp_apimachinery::schema::validate(schema, object, "");
    let blocking = found.iter().any(|e| {
        e.reason == "FieldValueNotSupported" || e.message.contains(" in body must be of type ")
    });
    errs.extend(found.into_iter().map(cause));
    let Some(cel) = &custom.cel else {
        return;
    };
    if blocking {
        errs.push(Cause {
            reason: "FieldValueInvalid",
            field: "<nil>".into(),
            message: "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation".into(),
        });
        return;
    }
    errs.extend(cel.validate(object, old).into_iter().map(cause));
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
}
