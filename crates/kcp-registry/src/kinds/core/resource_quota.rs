//! ResourceQuota: quantities that parse (a 400 otherwise, as the decoder answers), standard or
//! domain-qualified resource names, non-negative amounts, whole numbers for counted resources.

use jiff::Timestamp;
use kcp_apis::builtin::Resource;
use serde_json::{Value, json};

use super::entries;
use crate::error::RegistryError;
use crate::kinds::Kind;
use crate::kinds::printing::{self, Column, col};
use crate::validation::field::{Bad, Errors, invalid, key};
use crate::validation::formats::qualified_name_errors;
use crate::validation::{decode_error, quantity};

pub(crate) struct ResourceQuota;
pub(crate) static RESOURCE_QUOTA: ResourceQuota = ResourceQuota;

const COLUMNS: &[Column] = &[
    printing::NAME,
    col(
        "Request",
        "string",
        "Request represents a minimum amount of cpu/memory that a container may consume.",
    ),
    col(
        "Limit",
        "string",
        "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
    ),
    printing::AGE,
];

impl Kind for ResourceQuota {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "ResourceQuota")
    }

    fn decode(&self, _: &Resource, object: &mut Value) -> Result<(), RegistryError> {
        decode(object)
    }

    fn validate(&self, object: &Value, _old: Option<&Value>, errs: &mut Errors) {
        validate(object, errs);
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn cells(&self, object: &Value, now: Timestamp) -> Vec<Value> {
        let (request, limit) = quota_columns(object);
        vec![
            printing::name(object),
            json!(request),
            json!(limit),
            printing::age(object, now),
        ]
    }
}

const QUOTA_MAPS: [(&str, &str); 3] = [("spec", "hard"), ("status", "hard"), ("status", "used")];

/// Resources a quota may name without a domain.
const STANDARD_QUOTA_RESOURCES: &[&str] = &[
    "cpu",
    "memory",
    "ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.storage",
    "requests.ephemeral-storage",
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "persistentvolumeclaims",
    "configmaps",
    "services.nodeports",
    "services.loadbalancers",
];

/// Resources counted in whole units.
const INTEGER_RESOURCES: &[&str] = &[
    "pods",
    "services",
    "replicationcontrollers",
    "resourcequotas",
    "secrets",
    "persistentvolumeclaims",
    "configmaps",
    "services.nodeports",
    "services.loadbalancers",
];

fn quantity_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Quantities that do not parse fail decoding (400), as in Kubernetes.
fn decode(object: &mut Value) -> Result<(), RegistryError> {
    for (section, field) in QUOTA_MAPS {
        for (_, value) in entries(&object[section], field) {
            if value.is_null() {
                continue;
            }
            let text = quantity_text(&value).unwrap_or_default();
            quantity::parse(&text)
                .map_err(|message| decode_error("ResourceQuota", "v1", message))?;
        }
    }
    Ok(())
}

fn validate(object: &Value, errs: &mut Errors) {
    for (section, field) in QUOTA_MAPS {
        let path = format!("{section}.{field}");
        for (name, value) in entries(&object[section], field) {
            let path = key(&path, &name);
            for message in qualified_name_errors(&name) {
                errs.push(invalid(&path, Bad::Str(&name), &message));
            }
            let is_standard = STANDARD_QUOTA_RESOURCES.contains(&name.as_str())
                || name.starts_with("hugepages-")
                || name.starts_with("requests.hugepages-");
            if !name.contains('/') && !is_standard {
                errs.push(invalid(
                    &path,
                    Bad::Str(&name),
                    "must be a standard resource for quota",
                ));
            }
            let Some(text) = quantity_text(&value) else {
                continue;
            };
            let Ok(amount) = quantity::parse(&text) else {
                continue;
            };
            if amount < 0.0 {
                errs.push(invalid(
                    &path,
                    Bad::Str(text.trim()),
                    "must be greater than or equal to 0",
                ));
            }
            if INTEGER_RESOURCES.contains(&name.as_str()) && !quantity::is_whole(amount) {
                errs.push(invalid(
                    &path,
                    Bad::Go(text.trim().to_string()),
                    "must be an integer",
                ));
            }
        }
    }
}

/// The Request and Limit cells of a ResourceQuota: `name: used/hard` per resource in
/// `status.hard`, sorted, `limits.*` in the Limit column.
fn quota_columns(quota: &Value) -> (String, String) {
    let mut request = Vec::new();
    let mut limit = Vec::new();
    if let Some(hard) = quota["status"]["hard"].as_object() {
        // serde_json maps are sorted by key.
        for (resource, hard_quantity) in hard {
            let used = quota["status"]["used"][resource].as_str().unwrap_or("0");
            let entry = format!(
                "{resource}: {used}/{}",
                hard_quantity.as_str().unwrap_or("0")
            );
            if resource.split('.').next() == Some("limits") && resource.contains('.') {
                limit.push(entry);
            } else {
                request.push(entry);
            }
        }
    }
    (request.join(", "), limit.join(", "))
}
