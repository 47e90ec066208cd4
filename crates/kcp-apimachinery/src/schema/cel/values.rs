//! JSON values as CEL rules see them, typed by the schema like kube-apiserver's
//! `UnstructuredToVal`: declared properties under their escaped names (`x-prop` is
//! `x__dash__prop`), null fields absent, unknown fields invisible, `apiVersion`, `kind`,
//! `metadata.name` and `metadata.generateName` at a resource root, `integer` as int,
//! `number` as double, and `duration`, `date`, `date-time` and `byte` strings as CEL
//! durations, timestamps and bytes.

use base64::Engine;
use kube_cel::cel::common::types::{
    CelBool, CelBytes, CelDouble, CelDuration, CelInt, CelList, CelMap, CelMapKey, CelNull,
    CelString, CelTimestamp, CelUInt,
};
use kube_cel::cel::common::value::Val;
use serde_json::Value;

use super::needs::Need;
use crate::object::{flag, text};
use std::collections::HashMap;

/// What a schema node makes of a value, built once per rule-carrying node.
#[derive(Debug)]
pub(super) enum Shape {
    /// Declared properties only.
    Object(Vec<Field>),
    /// `additionalProperties`: every key, as written.
    Map(Box<Shape>),
    List(Box<Shape>),
    Text(Format),
    Integer,
    Number,
    Boolean,
    /// `x-kubernetes-int-or-string`: whatever the value is.
    Dynamic,
    /// No type (only `x-kubernetes-preserve-unknown-fields`): invisible to CEL.
    Unknown,
}

#[derive(Debug)]
pub(super) struct Field {
    name: String,
    key: String,
    shape: Shape,
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Format {
    Plain,
    Duration,
    Date,
    DateTime,
    Byte,
}

impl Shape {
    /// The shape of `schema`; `resource_root` for the object root and embedded resources,
    /// which also show `apiVersion`, `kind` and `metadata.{name,generateName}`.
    pub(super) fn of(schema: &Value, resource_root: bool) -> Shape {
        if flag(schema, "x-kubernetes-int-or-string") {
            return Shape::Dynamic;
        }
        match text(schema, "type") {
            "object" => Shape::object(schema, resource_root),
            "array" => match schema.get("items") {
                Some(items) => {
                    match Shape::of(items, flag(items, "x-kubernetes-embedded-resource")) {
                        Shape::Unknown => Shape::Unknown,
                        item => Shape::List(Box::new(item)),
                    }
                }
                None => Shape::List(Box::new(Shape::Dynamic)),
            },
            "string" => Shape::Text(match text(schema, "format") {
                "duration" => Format::Duration,
                "date" => Format::Date,
                "date-time" => Format::DateTime,
                "byte" => Format::Byte,
                _ => Format::Plain,
            }),
            "integer" => Shape::Integer,
            "number" => Shape::Number,
            "boolean" => Shape::Boolean,
            _ => Shape::Unknown,
        }
    }

    fn object(schema: &Value, resource_root: bool) -> Shape {
        let properties = schema.get("properties").and_then(Value::as_object);
        if !resource_root
            && properties.is_none_or(|p| p.is_empty())
            && let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object())
        {
            return match Shape::of(
                additional,
                flag(additional, "x-kubernetes-embedded-resource"),
            ) {
                Shape::Unknown => Shape::Unknown,
                value => Shape::Map(Box::new(value)),
            };
        }
        let meta = ["apiVersion", "kind", "metadata"];
        let mut fields: Vec<Field> = properties
            .into_iter()
            .flatten()
            .filter(|(name, _)| !(resource_root && meta.contains(&name.as_str())))
            .filter_map(|(name, property)| {
                let key = escape(name)?;
                match Shape::of(property, flag(property, "x-kubernetes-embedded-resource")) {
                    Shape::Unknown => None,
                    shape => Some(Field::new(name, key, shape)),
                }
            })
            .collect();
        if resource_root {
            let string = || Shape::Text(Format::Plain);
            fields.push(Field::new("apiVersion", "apiVersion".into(), string()));
            fields.push(Field::new("kind", "kind".into(), string()));
            let metadata = vec![
                Field::new("name", "name".into(), string()),
                Field::new("generateName", "generateName".into(), string()),
            ];
            fields.push(Field::new(
                "metadata",
                "metadata".into(),
                Shape::Object(metadata),
            ));
        }
        Shape::Object(fields)
    }
}

impl Field {
    fn new(name: &str, key: String, shape: Shape) -> Field {
        Field {
            name: name.to_string(),
            key,
            shape,
        }
    }
}

/// CEL's reserved words: a property named like one is reached as `__<word>__`.
const RESERVED: &[&str] = &[
    "true",
    "false",
    "null",
    "in",
    "as",
    "break",
    "const",
    "continue",
    "else",
    "for",
    "function",
    "if",
    "import",
    "let",
    "loop",
    "package",
    "namespace",
    "return",
    "var",
    "void",
    "while",
];

/// The name a property has in CEL, or `None` when it cannot be reached at all (only
/// `[a-zA-Z_.-/][a-zA-Z0-9_.-/]*` can).
pub(super) fn escape(name: &str) -> Option<String> {
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut chars = name.chars();
    let first = chars.next()?;
    let symbol = |c: char| matches!(c, '_' | '.' | '-' | '/');
    if !(first.is_ascii_alphabetic() || symbol(first))
        || !chars.all(|c| c.is_ascii_alphanumeric() || symbol(c))
    {
        return None;
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("__") {
            out.push_str("__underscores__");
            rest = after;
            continue;
        }
        match c {
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            other => out.push(other),
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(out)
}

fn string(s: &str) -> Box<dyn Val> {
    Box::new(CelString::from(s))
}

fn map(entries: HashMap<CelMapKey, Box<dyn Val>>) -> Box<dyn Val> {
    Box::new(CelMap::from(entries))
}

/// `value` as CEL sees it under `shape`, built straight into CEL's runtime values (one
/// pass, no intermediate copy). A value that does not fit its shape (schema validation
/// reports those) is shown as plain JSON.
pub(super) fn to_cel(value: &Value, shape: &Shape) -> Box<dyn Val> {
    match (shape, value) {
        (_, Value::Null) => Box::new(CelNull),
        (Shape::Object(fields), Value::Object(object)) => {
            let mut entries = HashMap::with_capacity(fields.len().min(object.len()));
            for field in fields {
                if let Some(v) = object.get(&field.name).filter(|v| !v.is_null()) {
                    entries.insert(CelMapKey::from(field.key.as_str()), to_cel(v, &field.shape));
                }
            }
            map(entries)
        }
        (Shape::Map(values), Value::Object(object)) => map(object
            .iter()
            .map(|(k, v)| (CelMapKey::from(k.as_str()), to_cel(v, values)))
            .collect()),
        (Shape::List(item), Value::Array(items)) => Box::new(CelList::from(
            items.iter().map(|v| to_cel(v, item)).collect::<Vec<_>>(),
        )),
        (Shape::Text(format), Value::String(s)) => formatted(s, *format),
        (Shape::Number, Value::Number(n)) => {
            Box::new(CelDouble::from(n.as_f64().unwrap_or_default()))
        }
        _ => plain(value),
    }
}

/// Like [`to_cel`], but only the parts of `value` that `need` names.
pub(super) fn to_cel_needed(value: &Value, shape: &Shape, need: &Need) -> Box<dyn Val> {
    let fields_needed = match need {
        Need::Nothing => return Box::new(CelNull),
        Need::Everything => return to_cel(value, shape),
        Need::Fields(fields_needed) => fields_needed,
    };
    match (shape, value) {
        (Shape::Object(fields), Value::Object(object)) => {
            let mut entries = HashMap::with_capacity(fields_needed.len());
            for field in fields {
                if let Some(below) = fields_needed.get(&field.key)
                    && let Some(v) = object.get(&field.name).filter(|v| !v.is_null())
                {
                    entries.insert(
                        CelMapKey::from(field.key.as_str()),
                        to_cel_needed(v, &field.shape, below),
                    );
                }
            }
            map(entries)
        }
        (Shape::Map(values), Value::Object(object)) => map(fields_needed
            .iter()
            .filter_map(|(key, below)| {
                let v = object.get(key)?;
                Some((
                    CelMapKey::from(key.as_str()),
                    to_cel_needed(v, values, below),
                ))
            })
            .collect()),
        _ => to_cel(value, shape),
    }
}

/// JSON as CEL sees it without a schema.
pub(super) fn plain(value: &Value) -> Box<dyn Val> {
    match value {
        Value::Null => Box::new(CelNull),
        Value::Bool(b) => Box::new(CelBool::from(*b)),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => Box::new(CelInt::from(i)),
            (None, Some(u)) => Box::new(CelUInt::from(u)),
            _ => Box::new(CelDouble::from(n.as_f64().unwrap_or_default())),
        },
        Value::String(s) => string(s),
        Value::Array(items) => Box::new(CelList::from(items.iter().map(plain).collect::<Vec<_>>())),
        Value::Object(object) => map(object
            .iter()
            .map(|(k, v)| (CelMapKey::from(k.as_str()), plain(v)))
            .collect()),
    }
}

fn formatted(s: &str, format: Format) -> Box<dyn Val> {
    let converted: Option<Box<dyn Val>> = match format {
        Format::Plain => None,
        Format::Duration => go_duration(s).map(|d| Box::new(CelDuration::from(d)) as Box<dyn Val>),
        Format::DateTime => chrono::DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| Box::new(CelTimestamp::from(t)) as Box<dyn Val>),
        Format::Date => chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|t| Box::new(CelTimestamp::from(t.and_utc().fixed_offset())) as Box<dyn Val>),
        Format::Byte => base64::engine::general_purpose::STANDARD
            .decode(s)
            .ok()
            .map(|b| Box::new(CelBytes::from(b)) as Box<dyn Val>),
    };
    converted.unwrap_or_else(|| string(s))
}

/// A Go duration (`1h30m`, `-1.5s`, `300ms`), also with `d` and `w` units.
fn go_duration(s: &str) -> Option<chrono::Duration> {
    let (negative, mut rest) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(chrono::Duration::zero());
    }
    if rest.is_empty() {
        return None;
    }
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..number_end].parse().ok()?;
        rest = &rest[number_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_end] {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "d" => 86400e9,
            "w" => 7.0 * 86400e9,
            _ => return None,
        };
        rest = &rest[unit_end..];
        nanos += number * unit;
    }
    if !nanos.is_finite() || nanos > i64::MAX as f64 {
        return None;
    }
    let duration = chrono::Duration::nanoseconds(nanos as i64);
    Some(if negative { -duration } else { duration })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_follows_kubernetes() {
        assert_eq!(escape("replicas").as_deref(), Some("replicas"));
        assert_eq!(escape("x-prop").as_deref(), Some("x__dash__prop"));
        assert_eq!(escape("a.b/c").as_deref(), Some("a__dot__b__slash__c"));
        assert_eq!(
            escape("redact__d").as_deref(),
            Some("redact__underscores__d")
        );
        assert_eq!(escape("namespace").as_deref(), Some("__namespace__"));
        assert_eq!(escape("1abc"), None);
        assert_eq!(escape("a b"), None);
    }

    #[test]
    fn go_durations() {
        assert_eq!(go_duration("1h30m"), Some(chrono::Duration::minutes(90)));
        assert_eq!(
            go_duration("-1.5s"),
            Some(-chrono::Duration::milliseconds(1500))
        );
        assert_eq!(go_duration("0"), Some(chrono::Duration::zero()));
        assert_eq!(go_duration("5x"), None);
        assert_eq!(go_duration(""), None);
    }
}
