//! What the cost estimate knows of the values rules see: their CEL kind and their worst-case
//! size, from the schema as Kubernetes derives it (its `SchemaDeclType`). A list holds at most
//! `maxItems` items, or else as many of its smallest items as fit in a 3 MiB request; a map
//! `maxProperties` entries, or as many smallest entries as fit; a string `maxLength` × 4 bytes
//! (a code point takes up to four), the longest `enum` value, or a whole request; durations
//! and timestamps their longest text. Objects have no size of their own (as in Kubernetes,
//! comparing them is estimated by their fields' selections, not by their size).
//!
//! Also the cardinality of a schema node: how many times its rules can run for one object.

use std::collections::BTreeMap;

use serde_json::Value;

use super::values::escape;
use crate::object::flag;

/// The largest request body Kubernetes accepts, which bounds every unbounded size.
pub(super) const MAX_REQUEST_BYTES: u64 = 3 * 1024 * 1024;

/// The longest JSON text of a duration and of a date-time, with quotes; of a date.
const MAX_DURATION_JSON: u64 = 32;
const MAX_DATETIME_JSON: u64 = 32;
const DATE_JSON: u64 = 12;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Kind {
    Bool,
    Int,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    List(Box<Ty>),
    /// String keys.
    Map(Box<Ty>),
    /// Declared properties by their CEL (escaped) names.
    Object(BTreeMap<String, Ty>),
    /// `x-kubernetes-int-or-string`, or what the estimate cannot tell.
    Dyn,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Ty {
    pub(super) kind: Kind,
    /// Most list items, map entries, or bytes of a string; 0 for objects and scalars.
    pub(super) max: u64,
    /// The fewest bytes the value takes in JSON.
    pub(super) min_json: u64,
}

fn bound(schema: &Value, key: &str) -> Option<u64> {
    schema
        .get(key)
        .and_then(Value::as_i64)
        .map(|n| u64::try_from(n).unwrap_or(0))
}

impl Ty {
    pub(super) fn scalar(kind: Kind) -> Ty {
        let min_json = match kind {
            Kind::Bool => 4,
            Kind::String | Kind::Bytes => 2,
            _ => 1,
        };
        Ty {
            kind,
            max: 0,
            min_json,
        }
    }

    pub(super) fn string(max: u64) -> Ty {
        Ty {
            max,
            ..Ty::scalar(Kind::String)
        }
    }

    pub(super) fn list(item: Ty, max: u64) -> Ty {
        Ty {
            kind: Kind::List(Box::new(item)),
            max,
            min_json: 2,
        }
    }

    pub(super) fn map(value: Ty, max: u64) -> Ty {
        Ty {
            kind: Kind::Map(Box::new(value)),
            max,
            min_json: 2,
        }
    }

    pub(super) fn dynamic(max: u64) -> Ty {
        Ty {
            kind: Kind::Dyn,
            max,
            min_json: 1,
        }
    }

    /// What the estimate knows of a value it cannot type: anything that fits in a request.
    pub(super) fn unknown() -> Ty {
        Ty::dynamic(MAX_REQUEST_BYTES)
    }

    /// The type of values under `schema`, or `None` when CEL cannot see them (no type, or
    /// items or values it cannot see). `resource_root` adds `apiVersion`, `kind` and
    /// `metadata.{name,generateName}` as Kubernetes does at the root of a resource.
    pub(super) fn of(schema: &Value, resource_root: bool) -> Option<Ty> {
        if flag(schema, "x-kubernetes-int-or-string") {
            let max = match bound(schema, "maxLength") {
                Some(length) => length.saturating_mul(4),
                None => MAX_REQUEST_BYTES - 2,
            };
            return Some(Ty::dynamic(max));
        }
        let text = |key: &str| schema.get(key).and_then(Value::as_str).unwrap_or_default();
        match text("type") {
            "array" => {
                let items = schema.get("items").filter(|i| i.is_object())?;
                let item = Ty::of(items, flag(items, "x-kubernetes-embedded-resource"))?;
                let max = bound(schema, "maxItems")
                    .unwrap_or_else(|| (MAX_REQUEST_BYTES - 2) / (item.min_json + 1));
                Some(Ty::list(item, max))
            }
            "object" => Ty::object(schema, resource_root),
            "string" => Some(match text("format") {
                "byte" => Ty {
                    max: bound(schema, "maxLength").unwrap_or(MAX_REQUEST_BYTES - 2),
                    ..Ty::scalar(Kind::Bytes)
                },
                "duration" => Ty {
                    kind: Kind::Duration,
                    max: MAX_DURATION_JSON,
                    min_json: 3,
                },
                "date" => Ty {
                    kind: Kind::Timestamp,
                    max: DATE_JSON,
                    min_json: DATE_JSON,
                },
                "date-time" => Ty {
                    kind: Kind::Timestamp,
                    max: MAX_DATETIME_JSON,
                    min_json: 21,
                },
                _ => Ty::string(match bound(schema, "maxLength") {
                    Some(length) => length.saturating_mul(4),
                    None => match schema.get("enum").and_then(Value::as_array) {
                        Some(values) if !values.is_empty() => values
                            .iter()
                            .filter_map(Value::as_str)
                            .map(|v| v.len() as u64)
                            .max()
                            .unwrap_or(0),
                        _ => MAX_REQUEST_BYTES - 2,
                    },
                }),
            }),
            "boolean" => Some(Ty::scalar(Kind::Bool)),
            "number" => Some(Ty::scalar(Kind::Double)),
            "integer" => Some(Ty::scalar(Kind::Int)),
            _ => None,
        }
    }

    fn object(schema: &Value, resource_root: bool) -> Option<Ty> {
        let properties = schema.get("properties").and_then(Value::as_object);
        if let Some(values) = schema.get("additionalProperties").filter(|a| a.is_object())
            && properties.is_none_or(|p| p.is_empty())
            && !resource_root
        {
            let value = Ty::of(values, flag(values, "x-kubernetes-embedded-resource"))?;
            let max = bound(schema, "maxProperties")
                .unwrap_or_else(|| (MAX_REQUEST_BYTES - 2) / (value.min_json + 6));
            return Some(Ty::map(value, max));
        }
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let mut fields = BTreeMap::new();
        let mut min_json: u64 = 2;
        for (name, property) in properties.into_iter().flatten() {
            let Some(ty) = Ty::of(property, flag(property, "x-kubernetes-embedded-resource"))
            else {
                continue;
            };
            if required.contains(&name.as_str()) && property.get("default").is_none() {
                min_json = min_json
                    .saturating_add(name.len() as u64)
                    .saturating_add(ty.min_json)
                    .saturating_add(4);
            }
            if let Some(key) = escape(name) {
                fields.insert(key, ty);
            }
        }
        if resource_root {
            add_type_and_object_meta(&mut fields);
        }
        Some(Ty {
            kind: Kind::Object(fields),
            max: 0,
            min_json,
        })
    }

    /// The size CEL's `size()` would give (entries, items, bytes); the estimate's unit for
    /// what a value costs to traverse.
    pub(super) fn size(&self) -> u64 {
        match self.kind {
            Kind::List(_) | Kind::Map(_) | Kind::String | Kind::Bytes | Kind::Dyn => self.max,
            Kind::Object(_) => 0,
            _ => 1,
        }
    }

    /// Whether values of this type are cheap to copy whatever the data: numbers, booleans,
    /// durations, timestamps and short strings.
    pub(super) fn is_small(&self) -> bool {
        match self.kind {
            Kind::Bool | Kind::Int | Kind::Double | Kind::Duration | Kind::Timestamp => true,
            Kind::String | Kind::Bytes => self.max <= 64,
            _ => false,
        }
    }

    /// The type of an item (lists) or a value (maps).
    pub(super) fn element(&self) -> Option<&Ty> {
        match &self.kind {
            Kind::List(item) | Kind::Map(item) => Some(item),
            _ => None,
        }
    }
}

/// `apiVersion`, `kind` and `metadata.{name,generateName}`, unless the schema already
/// declares them as strings.
fn add_type_and_object_meta(fields: &mut BTreeMap<String, Ty>) {
    let unbounded = || Ty::string(MAX_REQUEST_BYTES - 2);
    let is_string = |ty: Option<&Ty>| ty.is_some_and(|t| t.kind == Kind::String);
    let declared = is_string(fields.get("apiVersion"))
        && is_string(fields.get("kind"))
        && match fields.get("metadata").map(|m| &m.kind) {
            Some(Kind::Object(meta)) => {
                is_string(meta.get("name")) && is_string(meta.get("generateName"))
            }
            _ => false,
        };
    if declared {
        return;
    }
    fields.insert("apiVersion".into(), unbounded());
    fields.insert("kind".into(), unbounded());
    let meta = BTreeMap::from([
        ("name".to_string(), unbounded()),
        ("generateName".to_string(), unbounded()),
    ]);
    fields.insert(
        "metadata".into(),
        Ty {
            kind: Kind::Object(meta),
            max: 0,
            min_json: 2,
        },
    );
}

/// How many times a node's rules can run per object: the product of the `maxItems` and
/// `maxProperties` of the lists and maps above it, or `None` when one of them is unbounded.
/// `children` is the factor `schema` applies to the nodes below it.
pub(super) fn child_cardinality(parent: Option<u64>, schema: &Value, child: Child) -> Option<u64> {
    let factor = match child {
        Child::Property => Some(1),
        Child::Items => bound(schema, "maxItems"),
        Child::Values => bound(schema, "maxProperties"),
    };
    Some(parent?.saturating_mul(factor?))
}

#[derive(Debug, Clone, Copy)]
pub(super) enum Child {
    Property,
    Items,
    Values,
}

/// The most times a value of at least `min_json` bytes can occur in one request, for rules
/// under unbounded lists or maps (Kubernetes' `MaxCardinality`).
pub(super) fn max_cardinality(min_json: u64) -> u64 {
    MAX_REQUEST_BYTES / min_json.saturating_add(1)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn sizes_follow_kubernetes() {
        let list = Ty::of(
            &json!({"type": "array", "items": {"type": "string"}}),
            false,
        )
        .unwrap();
        assert_eq!(list.max, (MAX_REQUEST_BYTES - 2) / 3);
        let bounded = Ty::of(
            &json!({"type": "array", "maxItems": 10, "items": {"type": "string", "maxLength": 5}}),
            false,
        )
        .unwrap();
        assert_eq!(bounded.max, 10);
        assert_eq!(bounded.element().unwrap().max, 20);
        let map = Ty::of(
            &json!({"type": "object", "additionalProperties": {"type": "integer"}}),
            false,
        )
        .unwrap();
        assert_eq!(map.max, (MAX_REQUEST_BYTES - 2) / 7);
        let object = Ty::of(
            &json!({"type": "object", "required": ["ab"], "properties": {"ab": {"type": "boolean"}}}),
            false,
        )
        .unwrap();
        assert_eq!(object.min_json, 2 + 2 + 4 + 4);
        let enumerated = Ty::of(&json!({"type": "string", "enum": ["a", "abcd"]}), false).unwrap();
        assert_eq!(enumerated.max, 4);
        assert_eq!(max_cardinality(2), MAX_REQUEST_BYTES / 3);
    }
}
