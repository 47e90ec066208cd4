//! Custom resource values against their CRD's OpenAPI v3 (structural) schema: validation with
//! Kubernetes' field paths and messages ([`validate`]), pruning of undeclared fields
//! ([`prune`]) and defaulting ([`default`]); and whether a CRD's schema is structural at all
//! ([`structural_errors`]); and CEL validation rules (`x-kubernetes-validations`,
//! [`cel::CelValidator`]).
//!
//! Schemas are the `openAPIV3Schema` JSON of a CRD version, read as they are (no compilation
//! step yet). Paths are written as Kubernetes writes them: `spec.ports[1].name`.

pub mod cel;
mod formats;
mod patterns;
mod prune;
mod structural;
mod validate;

pub use cel::CelValidator;
pub use prune::{default, prune};
pub use structural::structural_errors;
pub use validate::validate;

use serde_json::Value;

/// One field-level problem, as a `Status` cause: `reason` (`FieldValueInvalid`,
/// `FieldValueRequired`, ...), the field path and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub reason: &'static str,
    pub field: String,
    pub message: String,
}

impl FieldError {
    fn new(reason: &'static str, field: &str, message: String) -> Self {
        FieldError {
            reason,
            field: field.to_string(),
            message,
        }
    }
}

/// `path.name`, or `name` at the root.
fn child(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

/// `path[i]`.
fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// The JSON type name of a value as the messages spell it.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
