//! Custom resources: validated by their CRD version's schema (with Kubernetes' paths and
//! messages, every problem at once) after the metadata rules every object follows, and
//! defaulted by it before that. Unknown fields are pruned earlier, where `fieldValidation` is
//! read (the API server).

use kcp_apis::custom::CustomResource;
use serde_json::Value;

use super::field::Errors;
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
    errs
}

/// The problems of `new` replacing `old`.
pub(crate) fn validate_update(custom: &CustomResource, new: &Value, old: &Value) -> Errors {
    let mut errs = Errors::new();
    metadata::validate_update(new, old, &mut errs);
    metadata::validate(new, NameRule::Subdomain, &mut errs);
    validate_schema(custom, new, Some(old), &mut errs);
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
