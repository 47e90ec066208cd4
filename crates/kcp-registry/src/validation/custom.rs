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
    validate_schema(custom, object, &mut errs);
    errs
}

/// The problems of `new` replacing `old`.
pub(crate) fn validate_update(custom: &CustomResource, new: &Value, old: &Value) -> Errors {
    let mut errs = Errors::new();
    metadata::validate_update(new, old, &mut errs);
    metadata::validate(new, NameRule::Subdomain, &mut errs);
    validate_schema(custom, new, &mut errs);
    errs
}

fn validate_schema(custom: &CustomResource, object: &Value, errs: &mut Errors) {
    let Some(schema) = &custom.schema else {
        return;
    };
    errs.extend(
        kcp_apimachinery::schema::validate(schema, object, "")
            .into_iter()
            .map(|e| Cause {
                reason: e.reason,
                field: e.field,
                message: e.message,
            }),
    );
}
