//! Secret: data keys and base64 values within 1 MiB, `stringData` folded into `data` (it is
//! write-only), `type` defaulted to `Opaque` and then immutable, the keys each known type
//! requires, nothing changes once `immutable` is set. Field selector: `type`.

use base64::Engine;
use jiff::Timestamp;
use kcp_apimachinery::object;
use kcp_apis::builtin::Resource;
use serde_json::{Map, Value, json};

use super::{
    IMMUTABLE, MAX_DATA_BYTES, decoded_len, entries, is_immutable, require_base64_map,
    require_string_map, same_map,
};
use crate::error::RegistryError;
use crate::kinds::Kind;
use crate::kinds::printing::{self, Column, col};
use crate::validation::decode_error;
use crate::validation::field::{Bad, Errors, forbidden, invalid, key, required, too_long};
use crate::validation::formats::{config_key_errors, decode_base64};
use crate::validation::metadata;

pub(crate) struct Secret;
pub(crate) static SECRET: Secret = Secret;

const COLUMNS: &[Column] = &[
    printing::NAME,
    col(
        "Type",
        "string",
        "Used to facilitate programmatic handling of secret data.",
    ),
    col(
        "Data",
        "string",
        "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'.",
    ),
    printing::AGE,
];

impl Kind for Secret {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "Secret")
    }

    fn decode(&self, _: &Resource, object: &mut Value) -> Result<(), RegistryError> {
        decode(object)
    }

    fn validate_update(&self, _: &Resource, new: &Value, old: &Value, errs: &mut Errors) {
        metadata::validate_update(new, old, errs);
        validate_type_and_immutable(new, old, errs);
        metadata::validate(new, self.name_rule(), errs);
        validate(new, errs);
    }

    fn validate(&self, object: &Value, _old: Option<&Value>, errs: &mut Errors) {
        validate(object, errs);
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        &["type"]
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn cells(&self, object: &Value, now: Timestamp) -> Vec<Value> {
        // The API defaults an empty type to Opaque.
        let kind = match object::str_at(object, &["type"]) {
            "" => "Opaque",
            kind => kind,
        };
        vec![
            printing::name(object),
            json!(kind),
            json!(printing::count(object, &["data"])),
            printing::age(object, now),
        ]
    }
}

/// Checks `data` is base64, folds `stringData` into `data` (it is write-only, as in Kubernetes)
/// and defaults `type` to `Opaque`.
fn decode(object: &mut Value) -> Result<(), RegistryError> {
    require_base64_map(object, "data", "Secret")?;
    require_string_map(object, "stringData", "Secret", "v1")?;
    let string_data = object
        .as_object_mut()
        .and_then(|fields| fields.remove("stringData"));
    if let Some(Value::Object(string_data)) = string_data {
        // `data` was checked above: absent, null or an object of base64 strings.
        let data = object::object_mut(object, &["data"]).map_err(|e| {
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

fn validate(object: &Value, errs: &mut Errors) {
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
    match object::text(object, "type") {
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

fn validate_type_and_immutable(new: &Value, old: &Value, errs: &mut Errors) {
    // Secrets stored before `type` was defaulted count as `Opaque`.
    let type_of = |secret: &Value| match object::text(secret, "type") {
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
