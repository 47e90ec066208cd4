//! The core group (`v1`): one file per kind, and the helpers ConfigMaps and Secrets share
//! (string and base64 maps checked as the decoder checks them, `immutable`).

mod config_map;
mod namespace;
mod resource_quota;
mod secret;
mod service_account;

pub(crate) use config_map::CONFIG_MAP;
pub(crate) use namespace::NAMESPACE;
pub use namespace::{
    IMMORTAL_NAMESPACES, NAMESPACE_FINALIZER, namespace_terminating, spec_finalizers,
};
pub(crate) use resource_quota::RESOURCE_QUOTA;
pub(crate) use secret::SECRET;
pub(crate) use service_account::SERVICE_ACCOUNT;

use serde_json::{Map, Value};

use crate::error::RegistryError;
use crate::validation::formats::decode_base64;
use crate::validation::{decode_error, json_type};

/// The most bytes a ConfigMap's or Secret's data may hold together.
pub const MAX_DATA_BYTES: usize = 1024 * 1024;
pub(super) const IMMUTABLE: &str = "field is immutable when `immutable` is set";

pub(super) fn entries(object: &Value, field: &str) -> Vec<(String, Value)> {
    object[field]
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default()
}

/// Checks a map of strings as the decoder would, naming `Kind.field` in its error.
pub(super) fn require_string_map(
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
pub(super) fn require_base64_map(
    object: &Value,
    field: &str,
    kind: &str,
) -> Result<(), RegistryError> {
    require_string_map(object, field, kind, "v1")?;
    for (_, value) in entries(object, field) {
        if let Some(text) = value.as_str() {
            decode_base64(text).map_err(|message| decode_error(kind, "v1", &message))?;
        }
    }
    Ok(())
}

pub(super) fn decoded_len(value: &Value) -> usize {
    value
        .as_str()
        .and_then(|text| decode_base64(text).ok())
        .map_or(0, |bytes| bytes.len())
}

pub(super) fn is_immutable(object: &Value) -> bool {
    object["immutable"].as_bool() == Some(true)
}

/// Whether a map field holds the same entries in both objects (absent and empty are equal).
pub(super) fn same_map(new: &Value, old: &Value, field: &str) -> bool {
    let empty = Map::new();
    new[field].as_object().unwrap_or(&empty) == old[field].as_object().unwrap_or(&empty)
}
