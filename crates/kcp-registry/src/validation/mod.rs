//! Validation of the built-in kinds, with Kubernetes' field paths and messages.
//!
//! Three steps, called by the registry on create, update and patch:
//! - [`prepare`]: what Kubernetes does while decoding a body. Fields the kind does not declare
//!   are dropped (for every writer, the server's controllers too). Values of the wrong type (exact
//!   messages for the fields users hit, then every field by the kind's schema in `kcp-apis`),
//!   bytes that are not base64 and quantities that do not parse fail with a 400
//!   (`<Kind> in version "v1" cannot be handled as a <Kind>: ...`); defaults are filled in
//!   (RBAC API groups, webhook policies, CRD names) and a Secret's `stringData` is folded into
//!   `data`.
//! - [`validate_create`] and [`validate_update`]: the kind's rules, as `Cause`s for one 422
//!   `Invalid` error (metadata rules for every kind, then the kind's own).
//!
//! The machinery the kinds' rule sets share lives here too: field errors worded as Kubernetes
//! words them ([`field`]), name and key formats ([`formats`]), the metadata rules every kind
//! follows ([`metadata`]) and quantities ([`quantity`]). Each kind's own rules live in its rule
//! set ([`crate::kinds`]).
//!
//! Must not know: HTTP, storage, any kind by name.

pub(crate) mod field;
pub(crate) mod formats;
pub(crate) mod metadata;
pub(crate) mod quantity;

pub(crate) use kcp_apimachinery::json::json_type;
use kcp_apis::builtin::Resource;
use serde_json::Value;

use crate::error::{Cause, RegistryError};
use crate::kinds;
pub(crate) use crate::kinds::custom::check_rules;
use field::Errors;

/// The 400 of a body that does not decode into the kind.
pub(crate) fn decode_error(kind: &str, version: &str, detail: &str) -> RegistryError {
    RegistryError::BadRequest(format!(
        "{kind} in version \"{version}\" cannot be handled as a {kind}: {detail}"
    ))
}

/// Checks a string map of `metadata` as the decoder would.
fn prepare_metadata(resource: &Resource, object: &Value) -> Result<(), RegistryError> {
    for field in ["labels", "annotations"] {
        let value = &object["metadata"][field];
        let bad = match value {
            Value::Null => None,
            Value::Object(map) => map
                .values()
                .find(|v| !v.is_string() && !v.is_null())
                .map(|v| (json_type(v), "string")),
            other => Some((json_type(other), "map[string]string")),
        };
        if let Some((found, wanted)) = bad {
            return Err(decode_error(
                &resource.kind,
                &resource.version,
                &format!(
                    "json: cannot unmarshal {found} into Go struct field ObjectMeta.metadata.{field} of type {wanted}"
                ),
            ));
        }
    }
    Ok(())
}

/// Decoding checks and defaults; see the module docs.
pub(crate) fn prepare(resource: &Resource, object: &mut Value) -> Result<(), RegistryError> {
    // Fields the kind does not declare go, as decoding drops them, whoever writes (the API
    // server has already dropped and reported them as `fieldValidation` asks).
    kcp_apis::schema::catalogue().prune_unknown(resource, object);
    prepare_metadata(resource, object)?;
    kinds::rules(resource).decode(resource, object)?;
    // Every other field of the wrong JSON type, by the kind's schema.
    match kcp_apis::schema::catalogue()
        .type_errors(resource, object)
        .into_iter()
        .next()
    {
        Some(error) => Err(decode_error(&resource.kind, &resource.version, &error)),
        None => Ok(()),
    }
}

/// The problems of a new object (its name already generated).
pub(crate) fn validate_create(resource: &Resource, object: &Value) -> Vec<Cause> {
    let mut errs = Errors::new();
    kinds::rules(resource).validate_create(resource, object, &mut errs);
    errs
}

/// The problems of `new` replacing `old`.
pub(crate) fn validate_update(
    resource: &Resource,
    part: crate::strategy::Part,
    new: &Value,
    old: &Value,
) -> Vec<Cause> {
    let mut errs = Errors::new();
    let rules = kinds::rules(resource);
    rules.validate_update(resource, new, old, &mut errs);
    rules.validate_update_of_part(part, new, old, &mut errs);
    errs
}

#[cfg(test)]
mod tests;
