//! ConfigMap: data keys, the 1 MiB limit over `data` and `binaryData` together, no key in
//! both, base64 binary data, nothing changes once `immutable` is set.

use jiff::Timestamp;
use kcp_apis::builtin::Resource;
use serde_json::Value;

use super::{
    IMMUTABLE, MAX_DATA_BYTES, decoded_len, entries, is_immutable, require_base64_map,
    require_string_map, same_map,
};
use crate::error::RegistryError;
use crate::kinds::Kind;
use crate::kinds::printing::{self, Column, col};
use crate::validation::field::{Bad, Errors, forbidden, invalid, key, too_long};
use crate::validation::formats::config_key_errors;
use crate::validation::metadata;

pub(crate) struct ConfigMap;
pub(crate) static CONFIG_MAP: ConfigMap = ConfigMap;

const COLUMNS: &[Column] = &[
    printing::NAME,
    col(
        "Data",
        "string",
        "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'.",
    ),
    printing::AGE,
];

impl Kind for ConfigMap {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "ConfigMap")
    }

    fn decode(&self, _: &Resource, object: &mut Value) -> Result<(), RegistryError> {
        decode(object)
    }

    fn validate_update(&self, _: &Resource, new: &Value, old: &Value, errs: &mut Errors) {
        metadata::validate_update(new, old, errs);
        validate_immutable(new, old, errs);
        metadata::validate(new, self.name_rule(), errs);
        validate(new, errs);
    }

    fn validate(&self, object: &Value, _old: Option<&Value>, errs: &mut Errors) {
        validate(object, errs);
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn cells(&self, object: &Value, now: Timestamp) -> Vec<Value> {
        let data = printing::count(object, &["data"]) + printing::count(object, &["binaryData"]);
        vec![
            printing::name(object),
            serde_json::json!(data),
            printing::age(object, now),
        ]
    }
}

fn decode(object: &mut Value) -> Result<(), RegistryError> {
    require_string_map(object, "data", "ConfigMap", "v1")?;
    require_base64_map(object, "binaryData", "ConfigMap")
}

fn validate(object: &Value, errs: &mut Errors) {
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

fn validate_immutable(new: &Value, old: &Value, errs: &mut Errors) {
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
