//! The options every write takes besides its body: `fieldManager` (who the write's fields
//! are recorded for; without it, the product name of the client's `User-Agent`) and `force`
//! (only for apply), checked as kube-apiserver checks CreateOptions, UpdateOptions and
//! PatchOptions.

use http::{HeaderMap, header};
use kcp_registry::{Cause, RegistryError};

use crate::scope::Params;

/// The longest `fieldManager`.
const MAX_FIELD_MANAGER: usize = 128;

/// The manager a write by `verb` records its fields under, or the 422 its options earn.
pub(crate) fn field_manager(
    verb: &str,
    params: &Params,
    headers: &HeaderMap,
    apply: bool,
) -> Result<String, RegistryError> {
    let options = match verb {
        "create" => "CreateOptions",
        "update" => "UpdateOptions",
        _ => "PatchOptions",
    };
    if verb == "patch" && !apply && params.get("force").is_some() {
        return Err(invalid(
            options,
            "force",
            "FieldValueForbidden",
            "Forbidden: may not be specified for non-apply patch".into(),
        ));
    }
    let Some(manager) = params.get("fieldManager").filter(|m| !m.is_empty()) else {
        return Ok(from_user_agent(headers));
    };
    if manager.len() > MAX_FIELD_MANAGER {
        return Err(invalid(
            options,
            "fieldManager",
            "FieldValueTooLong",
            format!("Too long: may not be more than {MAX_FIELD_MANAGER} bytes"),
        ));
    }
    if let Some((position, bad)) = manager.char_indices().find(|(_, c)| c.is_control()) {
        return Err(invalid(
            options,
            "fieldManager",
            "FieldValueInvalid",
            format!(
                "Invalid value: {manager:?}: invalid character U+{:04X} {bad:?} (at position {position})",
                bad as u32
            ),
        ));
    }
    Ok(manager.to_string())
}

/// The manager of a write without `fieldManager`: the `User-Agent` up to its first `/`,
/// printable characters only, at most 128 bytes (kube-apiserver's `prefixFromUserAgent`).
fn from_user_agent(headers: &HeaderMap) -> String {
    let agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let product = agent.split('/').next().unwrap_or_default();
    let mut out = String::new();
    for c in product.chars().filter(|c| !c.is_control()) {
        if out.len() >= MAX_FIELD_MANAGER {
            break;
        }
        out.push(c);
    }
    out
}

/// The 422 of invalid write options: `<Options>.meta.k8s.io "" is invalid: <field>: ...`.
pub(crate) fn invalid(
    options: &str,
    field: &str,
    reason: &'static str,
    message: String,
) -> RegistryError {
    RegistryError::Invalid {
        kind: options.into(),
        group: "meta.k8s.io".into(),
        name: String::new(),
        causes: vec![Cause {
            reason,
            field: field.into(),
            message,
        }],
    }
}
