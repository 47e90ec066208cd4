//! Validation of the built-in kinds, with Kubernetes' field paths and messages.
//!
//! Three steps, called by the registry on create, update and patch:
//! - [`prepare`]: what Kubernetes does while decoding a body. Values of the wrong type (exact
//!   messages for the fields users hit, then every field by the kind's schema in `kcp-apis`),
//!   bytes that are not base64 and quantities that do not parse fail with a 400
//!   (`<Kind> in version "v1" cannot be handled as a <Kind>: ...`); defaults are filled in
//!   (RBAC API groups, webhook policies, CRD names) and a Secret's `stringData` is folded into
//!   `data`.
//! - [`validate_create`] and [`validate_update`]: the kind's rules, as `Cause`s for one 422
//!   `Invalid` error (metadata rules for every kind, then the kind's own).
//!
//! Must not know: HTTP, storage. Each kind's rules live in their own module.

mod admission;
mod apiextensions;
mod certificates;
mod coordination;
mod core;
mod custom;
mod events;
mod field;
mod formats;
mod metadata;
mod quantity;
mod rbac;

pub(crate) use kcp_apimachinery::json::json_type;
use kcp_apis::builtin::Resource;
use serde_json::Value;

use crate::error::{Cause, RegistryError};
use crate::names::NameRule;
pub(crate) use custom::check_rules;
use field::Errors;

const RBAC: &str = "rbac.authorization.k8s.io";
const ADMISSION: &str = "admissionregistration.k8s.io";

/// The 400 of a body that does not decode into the kind.
pub(crate) fn decode_error(kind: &str, version: &str, detail: &str) -> RegistryError {
    RegistryError::BadRequest(format!(
        "{kind} in version \"{version}\" cannot be handled as a {kind}: {detail}"
    ))
}

/// The rule the names of `resource` follow.
pub(crate) fn name_rule(resource: &Resource) -> NameRule {
    match (&*resource.group, &*resource.kind) {
        ("", "Namespace") => NameRule::Label,
        // Legacy events are not validated; their names only have to fit in a URL.
        ("", "Event") | ("certificates.k8s.io", _) | (RBAC, _) => NameRule::PathSegment,
        _ => NameRule::Subdomain,
    }
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
    prepare_metadata(resource, object)?;
    if let Some(custom) = resource.custom() {
        custom::prepare(custom, object);
    }
    prepare_kind(resource, object)?;
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

/// The kind's own decoding checks (exact Go messages for the fields users hit) and defaults.
fn prepare_kind(resource: &Resource, object: &mut Value) -> Result<(), RegistryError> {
    match (&*resource.group, &*resource.kind) {
        ("", "ConfigMap") => core::prepare_config_map(object),
        ("", "Secret") => core::prepare_secret(object),
        ("", "ResourceQuota") => core::prepare_resource_quota(object),
        ("certificates.k8s.io", "CertificateSigningRequest") => certificates::prepare(object),
        (RBAC, "RoleBinding" | "ClusterRoleBinding") => {
            rbac::default_binding(object);
            Ok(())
        }
        (ADMISSION, kind @ ("MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration")) => {
            admission::default_webhooks(object, kind.starts_with("Mutating"));
            Ok(())
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            apiextensions::default(object);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The problems of a new object (its name already generated).
pub(crate) fn validate_create(resource: &Resource, object: &Value) -> Vec<Cause> {
    if let Some(custom) = resource.custom() {
        return custom::validate_create(custom, object);
    }
    let mut errs = Errors::new();
    let rule = name_rule(resource);
    match (&*resource.group, &*resource.kind) {
        ("", "Event") => {
            only_name(object, rule, &mut errs);
            events::validate_core(object, &mut errs);
        }
        ("events.k8s.io", "Event") => events::validate_strict(object, &mut errs),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            let extra = apiextensions::name_error(object);
            metadata::validate_named(object, rule, extra, &mut errs);
            apiextensions::validate(object, &mut errs);
        }
        _ => {
            metadata::validate(object, rule, &mut errs);
            validate_kind(resource, object, None, &mut errs);
        }
    }
    errs
}

/// The problems of `new` replacing `old`.
pub(crate) fn validate_update(resource: &Resource, new: &Value, old: &Value) -> Vec<Cause> {
    if let Some(custom) = resource.custom() {
        return custom::validate_update(custom, new, old);
    }
    let mut errs = Errors::new();
    let rule = name_rule(resource);
    match (&*resource.group, &*resource.kind) {
        ("", "Event") => events::validate_core(new, &mut errs),
        ("events.k8s.io", "Event") => events::validate_strict_update(new, old, &mut errs),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            metadata::validate_update(new, old, &mut errs);
            let extra = apiextensions::name_error(new);
            metadata::validate_named(new, rule, extra, &mut errs);
            apiextensions::validate(new, &mut errs);
            apiextensions::validate_update(new, old, &mut errs);
        }
        _ => {
            metadata::validate_update(new, old, &mut errs);
            match (&*resource.group, &*resource.kind) {
                ("", "ConfigMap") => core::validate_config_map_update(new, old, &mut errs),
                ("", "Secret") => core::validate_secret_update(new, old, &mut errs),
                _ => {}
            }
            metadata::validate(new, rule, &mut errs);
            validate_kind(resource, new, Some(old), &mut errs);
            if resource.group == RBAC && resource.kind.ends_with("Binding") {
                rbac::validate_binding_update(new, old, &mut errs);
            }
        }
    }
    errs
}

/// Only what storage needs of a name: present and one path segment.
fn only_name(object: &Value, rule: NameRule, errs: &mut Errors) {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    if name.is_empty() {
        errs.push(field::required(
            "metadata.name",
            "name or generateName is required",
        ));
    }
    for message in rule.errors(name, false) {
        errs.push(field::invalid(
            "metadata.name",
            field::Bad::Str(name),
            &message,
        ));
    }
}

/// The kind's own rules for an object (on update, `old` is the stored one).
fn validate_kind(resource: &Resource, object: &Value, old: Option<&Value>, errs: &mut Errors) {
    match (&*resource.group, &*resource.kind) {
        ("", "Namespace") => core::validate_namespace(object, errs),
        ("", "ConfigMap") => core::validate_config_map(object, errs),
        ("", "Secret") => core::validate_secret(object, errs),
        ("", "ResourceQuota") => core::validate_resource_quota(object, errs),
        ("coordination.k8s.io", "Lease") => coordination::validate_lease(object, errs),
        ("certificates.k8s.io", "CertificateSigningRequest") => {
            certificates::validate(object, errs)
        }
        (RBAC, "Role") => rbac::validate_role(object, true, errs),
        (RBAC, "ClusterRole") => rbac::validate_role(object, false, errs),
        (RBAC, "RoleBinding") => rbac::validate_binding(object, true, errs),
        (RBAC, "ClusterRoleBinding") => rbac::validate_binding(object, false, errs),
        (ADMISSION, kind @ ("MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration")) => {
            admission::validate(object, old, kind.starts_with("Mutating"), errs)
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests;
