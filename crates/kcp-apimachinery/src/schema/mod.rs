//! Custom resource values against their CRD's OpenAPI v3 (structural) schema: validation with
//! Kubernetes' field paths and messages ([`validate`]), pruning of undeclared fields
//! ([`prune`]) and defaulting ([`Defaults`]); and whether a CRD's schema is structural at all
//! ([`structural_errors`]); and CEL validation rules (`x-kubernetes-validations`,
//! [`cel::CelValidator`]).
//!
//! Schemas are the `openAPIV3Schema` JSON of a CRD version, read as they are (no compilation
//! step yet). Paths are written as Kubernetes writes them: `spec.ports[1].name`.

pub mod cel;
pub mod compat;
mod defaults;
mod formats;
mod patterns;
mod prune;
mod structural;
mod validate;

pub use cel::CelValidator;
pub use defaults::Defaults;
pub use prune::{prune, prune_nothing_in};
pub use structural::structural_errors;
pub use validate::validate;

use std::fmt;

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
    fn new(reason: &'static str, field: impl fmt::Display, message: String) -> Self {
        FieldError {
            reason,
            field: field.to_string(),
            message,
        }
    }
}

/// A field path as a walk over a value descends (`spec.ports[1].name`), written out only when
/// a message or a pruned field needs it: a walk that finds nothing to report allocates no path.
#[derive(Clone, Copy)]
enum Path<'a> {
    /// Where the walk began (`""` at the object's root).
    Start(&'a str),
    /// `parent.name` (`name` at the root).
    Field(&'a Path<'a>, &'a str),
    /// `parent[i]`.
    Item(&'a Path<'a>, usize),
}

impl Path<'_> {
    fn is_root(&self) -> bool {
        matches!(self, Path::Start(start) if start.is_empty())
    }
}

impl fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Path::Start(start) => f.write_str(start),
            Path::Field(parent, name) if parent.is_root() => f.write_str(name),
            Path::Field(parent, name) => write!(f, "{parent}.{name}"),
            Path::Item(parent, i) => write!(f, "{parent}[{i}]"),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_written_as_the_string_helpers_write_them() {
        let root = Path::Start("");
        let spec = Path::Field(&root, "spec");
        let ports = Path::Field(&spec, "ports");
        let second = Path::Item(&ports, 1);
        let name = Path::Field(&second, "name");
        assert_eq!(name.to_string(), "spec.ports[1].name");
        assert_eq!(
            name.to_string(),
            child(&index(&child("spec", "ports"), 1), "name")
        );
        let first = Path::Item(&root, 0);
        assert_eq!(
            Path::Field(&first, "a").to_string(),
            child(&index("", 0), "a")
        );
        let started = Path::Start("status");
        assert_eq!(Path::Field(&started, "x").to_string(), "status.x");
    }
}
