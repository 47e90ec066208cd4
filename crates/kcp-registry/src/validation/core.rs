//! The core kinds with rules of their own: Namespace (spec finalizers), ConfigMap and Secret
//! (data keys, sizes, `immutable`, Secret types and their required keys), ResourceQuota
//! (quantities, resource names).

use base64::Engine;
use serde_json::{Map, Value, json};

use super::field::{Bad, Errors, forbidden, invalid, key, required, too_long};
use super::formats::{config_key_errors, decode_base64, qualified_name_errors};
use super::{decode_error, json_type, quantity};
use crate::error::RegistryError;

/// The most bytes a ConfigMap's or Secret's data may hold together.
pub const MAX_DATA_BYTES: usize = 1024 * 1024;
const IMMUTABLE: &str = "field is immutable when `immutable` is set";

fn entries(object: &Value, field: &str) -> Vec<(String, Value)> {
    object[field]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default()
}

/// Checks a map of strings as the decoder would, naming `Kind.field` in its error.
fn require_string_map(
    object: &Value,
    field: &str,
    kind: &str,
    version: &str,
) -> Result<(), RegistryError> {
    let value = &object[field];
    if value.is_null() {
        return Ok(());
    }
    let Some(map) = value.as_object() else {
        return Err(decode_error(
            kind,
            version,
            &format!(
                "json: cannot unmarshal {} into Go struct field {kind}.{field} of type map[string]string",
                json_type(value)
            ),
        ));
    };
    for item in map.values() {
        if !item.is_string() && !item.is_null() {
            return Err(decode_error(
                kind,
                version,
                &format!(
                    "json: cannot unmarshal {} into Go struct field {kind}.{field} of type string",
                    json_type(item)
                ),
            ));
        }
    }
    Ok(())
}

/// Checks that every value of a `map[string][]byte` field is base64, as the decoder does.
fn require_base64_map(object: &Value, field: &str, kind: &str) -> Result<(), RegistryError> {
    require_string_map(object, field, kind, "v1")?;
    for (_, value) in entries(object, field) {
        if let Some(text) = value.as_str() {
            decode_base64(text).map_err(|message| decode_error(kind, "v1", &message))?;
        }
    }
    Ok(())
}

fn decoded_len(value: &Value) -> usize {
    value
        .as_str()
        .and_then(|text| decode_base64(text).ok())
        .map_or(0, |bytes| bytes.len())
}

// --- Namespace -------------------------------------------------------------------------------

pub fn validate_namespace(object: &Value, errs: &mut Errors) {
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

// --- ConfigMap -------------------------------------------------------------------------------

pub fn prepare_config_map(object: &mut Value) -> Result<(), RegistryError> {
    require_string_map(object, "data", "ConfigMap", "v1")?;
    require_base64_map(object, "binaryData", "ConfigMap")
}

pub fn validate_config_map(object: &Value, errs: &mut Errors) {
    let data = entries(object, "data");
    let binary = entries(object, "binaryData");
    let mut total = 0;
    for (name, value) in &data {
        for message in config_key_errors(name) {
            errs.push(invalid(key("data", name), Bad::Str(name), &message));
        }
        if binary.iter().any(|(b, _)| b == name) {
            errs.push(invalid(
                key("data", name),
                Bad::Str(name),
                "duplicate of key present in binaryData",
            ));
        }
        total += value.as_str().map_or(0, str::len);
    }
    for (name, value) in &binary {
        for message in config_key_errors(name) {
            errs.push(invalid(key("binaryData", name), Bad::Str(name), &message));
        }
        total += decoded_len(value);
    }
    if total > MAX_DATA_BYTES {
        // Kubernetes names the whole object with an empty path, printed as `[]`.
        errs.push(too_long("[]", MAX_DATA_BYTES));
    }
}

fn is_immutable(object: &Value) -> bool {
    object["immutable"].as_bool() == Some(true)
}

/// Whether a map field holds the same entries in both objects (absent and empty are equal).
fn same_map(new: &Value, old: &Value, field: &str) -> bool {
    let empty = Map::new();
    new[field].as_object().unwrap_or(&empty) == old[field].as_object().unwrap_or(&empty)
}

pub fn validate_config_map_update(new: &Value, old: &Value, errs: &mut Errors) {
    if is_immutable(old) {
        if !is_immutable(new) {
            errs.push(forbidden("immutable", IMMUTABLE));
        }
        for field in ["data", "binaryData"] {
            if !same_map(new, old, field) {
                errs.push(forbidden(field, IMMUTABLE));
            }
        }
    }
}

// --- Secret ----------------------------------------------------------------------------------

/// Checks `data` is base64, folds `stringData` into `data` (it is write-only, as in Kubernetes)
/// and defaults `type` to `Opaque`.
pub fn prepare_secret(object: &mut Value) -> Result<(), RegistryError> {
    require_base64_map(object, "data", "Secret")?;
    require_string_map(object, "stringData", "Secret", "v1")?;
    let string_data = object
        .as_object_mut()
        .and_then(|fields| fields.remove("stringData"));
    if let Some(Value::Object(string_data)) = string_data {
        // `data` was checked above: absent, null or an object of base64 strings.
        let data = crate::fields::object_mut(object, &["data"]).map_err(|e| {
            decode_error(
                "Secret",
                "v1",
                &format!(
                    "json: cannot unmarshal {} into Go struct field Secret.data of type map[string][]uint8",
                    e.found
                ),
            )
        })?;
        for (name, value) in string_data {
            let text = value.as_str().unwrap_or_default();
            let encoded = base64::engine::general_purpose::STANDARD.encode(text);
            data.insert(name, Value::String(encoded));
        }
    }
    if object["type"].as_str().is_none_or(str::is_empty) {
        object["type"] = json!("Opaque");
    }
    Ok(())
}

pub fn validate_secret(object: &Value, errs: &mut Errors) {
    let data = entries(object, "data");
    let mut total = 0;
    for (name, value) in &data {
        for message in config_key_errors(name) {
            errs.push(invalid(key("data", name), Bad::Str(name), &message));
        }
        total += decoded_len(value);
    }
    if total > MAX_DATA_BYTES {
        errs.push(too_long("data", MAX_DATA_BYTES));
    }
    let has = |name: &str| data.iter().any(|(k, _)| k == name);
    let bytes_of = |name: &str| {
        data.iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.as_str().and_then(|t| decode_base64(t).ok()))
    };
    let json_errors = |name: &str, errs: &mut Errors| match bytes_of(name) {
        None => errs.push(required(key("data", name), "")),
        Some(bytes) => {
            if let Err(error) = serde_json::from_slice::<Map<String, Value>>(&bytes) {
                errs.push(invalid(
                    key("data", name),
                    Bad::Str("<secret contents redacted>"),
                    &error.to_string(),
                ));
            }
        }
    };
    match object["type"].as_str().unwrap_or_default() {
        "kubernetes.io/service-account-token" => {
            let account = object["metadata"]["annotations"]["kubernetes.io/service-account.name"]
                .as_str()
                .unwrap_or_default();
            if account.is_empty() {
                errs.push(required(
                    key("metadata.annotations", "kubernetes.io/service-account.name"),
                    "",
                ));
            }
        }
        "kubernetes.io/dockercfg" => json_errors(".dockercfg", errs),
        "kubernetes.io/dockerconfigjson" => json_errors(".dockerconfigjson", errs),
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            errs.push(required(key("data", "username"), ""));
            errs.push(required(key("data", "password"), ""));
        }
        "kubernetes.io/ssh-auth" if bytes_of("ssh-privatekey").is_none_or(|b| b.is_empty()) => {
            errs.push(required(key("data", "ssh-privatekey"), ""));
        }
        "kubernetes.io/tls" => {
            for name in ["tls.crt", "tls.key"] {
                if !has(name) {
                    errs.push(required(key("data", name), ""));
                }
            }
        }
        _ => {}
    }
}

pub fn validate_secret_update(new: &Value, old: &Value, errs: &mut Errors) {
    // Secrets stored before `type` was defaulted count as `Opaque`.
    let type_of = |secret: &Value| match secret["type"].as_str().unwrap_or_default() {
        "" => "Opaque".to_string(),
        other => other.to_string(),
    };
    let new_type = type_of(new);
    if new_type != type_of(old) {
        errs.push(invalid("type", Bad::Str(&new_type), "field is immutable"));
    }
    if is_immutable(old) {
        if !is_immutable(new) {
            errs.push(forbidden("immutable", IMMUTABLE));
        }
        if !same_map(new, old, "data") {
            errs.push(forbidden("data", IMMUTABLE));
        }
    }
}

// --- ResourceQuota ---------------------------------------------------------------------------

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
pub fn prepare_resource_quota(object: &mut Value) -> Result<(), RegistryError> {
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

pub fn validate_resource_quota(object: &Value, errs: &mut Errors) {
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
