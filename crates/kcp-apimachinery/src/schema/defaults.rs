//! Defaulting of custom resources by their structural schema, as kube-apiserver does on every
//! write and on every read from storage ([`Defaults::apply`]), and the check that lets a read
//! skip it ([`Defaults::fill_nothing_in`]).

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::json::Key;
use crate::object::flag;

/// Sets field `name` to `default` where it is absent, or `null` and not `nullable`.
fn fill(fields: &mut serde_json::Map<String, Value>, name: &str, default: &Value, nullable: bool) {
    let kept = match fields.get(name) {
        None => false,
        Some(Value::Null) => nullable,
        Some(_) => true,
    };
    if !kept {
        fields.insert(name.to_string(), default.clone());
    }
}

/// A schema's `default`s, compiled once: only the levels with a `default` at or below them, so
/// applying them ([`Defaults::apply`]) visits nothing else. (Walking the whole schema for each
/// object took 6% of a list of 1,000 workspaces, for their two defaults.)
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Defaults {
    /// The properties with a `default`: name, value, and whether `null` is kept (`nullable`).
    set: Vec<(String, Value, bool)>,
    /// The properties with defaults below them.
    below: Vec<(String, Defaults)>,
    /// `additionalProperties` (of a schema without properties), with defaults below it.
    additional: Option<Box<Defaults>>,
    /// `items`, with defaults below it.
    items: Option<Box<Defaults>>,
}

impl Defaults {
    /// The defaults `schema` sets on properties (`None` if it sets none): of `properties`, of
    /// `additionalProperties` where there are no properties, and of `items`, at any depth.
    pub fn compile(schema: &Value) -> Option<Defaults> {
        let defaults = Defaults::of(schema);
        (!defaults.is_empty()).then_some(defaults)
    }

    fn of(schema: &Value) -> Defaults {
        let mut defaults = Defaults::default();
        let below = |schema: &Value| Some(Defaults::of(schema)).filter(|d| !d.is_empty());
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (name, field_schema) in properties {
                if let Some(value) = field_schema.get("default") {
                    let nullable = flag(field_schema, "nullable");
                    defaults.set.push((name.clone(), value.clone(), nullable));
                }
                if let Some(nested) = below(field_schema) {
                    defaults.below.push((name.clone(), nested));
                }
            }
        } else if let Some(values) = schema.get("additionalProperties").filter(|a| a.is_object()) {
            defaults.additional = below(values).map(Box::new);
        }
        if let Some(items) = schema.get("items") {
            defaults.items = below(items).map(Box::new);
        }
        defaults
    }

    fn is_empty(&self) -> bool {
        self.set.is_empty()
            && self.below.is_empty()
            && self.additional.is_none()
            && self.items.is_none()
    }

    /// Fills in the defaults for absent fields (and for `null` where the field is not
    /// nullable), level by level: a defaulted object is itself defaulted further down.
    pub fn apply(&self, value: &mut Value) {
        match value {
            Value::Object(fields) => {
                for (name, default, nullable) in &self.set {
                    fill(fields, name, default, *nullable);
                }
                for (name, nested) in &self.below {
                    if let Some(field) = fields.get_mut(name) {
                        nested.apply(field);
                    }
                }
                if let Some(values) = &self.additional {
                    for field in fields.values_mut() {
                        values.apply(field);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item) = &self.items {
                    for each in items {
                        item.apply(each);
                    }
                }
            }
            _ => {}
        }
    }

    /// Whether [`Defaults::apply`] would leave the JSON value `json` as it is: every defaulted
    /// field present (and not a `null` it would replace), at every level `apply` visits. Read
    /// without building the value, so a read can serve stored bytes that need no defaults as
    /// they are. `false` also when `json` is not JSON (or nested deeper than `serde_json`'s
    /// limit): the caller then decodes it and applies the defaults.
    pub fn fill_nothing_in(&self, json: &[u8]) -> bool {
        let mut reader = serde_json::Deserializer::from_slice(json);
        Check(self).deserialize(&mut reader).is_ok() && reader.end().is_ok()
    }
}

/// [`Defaults::fill_nothing_in`] as a serde seed: reads a value, failing as soon as `apply`
/// would fill something in (or the input is not JSON), looking only into the levels the
/// defaults reach. Its value: whether the value read was `null`.
struct Check<'a>(&'a Defaults);

impl<'de> DeserializeSeed<'de> for Check<'_> {
    type Value = bool;

    fn deserialize<D: Deserializer<'de>>(self, reader: D) -> Result<bool, D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Check<'_> {
    type Value = bool;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
        Ok(true)
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<bool, E> {
        Ok(false)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut fields: A) -> Result<bool, A::Error> {
        let defaults = self.0;
        // Which of the defaulted fields are there and kept (a `null` only where nullable).
        let mut kept = vec![false; defaults.set.len()];
        while let Some(Key(name)) = fields.next_key::<Key<'de>>()? {
            let set = defaults.set.iter().position(|(field, ..)| *field == name);
            // `compile` makes either named levels or `additionalProperties`, never both.
            let below = defaults
                .below
                .iter()
                .find(|(field, _)| *field == name)
                .map(|(_, nested)| nested)
                .or(defaults.additional.as_deref());
            let null = match below {
                Some(nested) => fields.next_value_seed(Check(nested))?,
                None if set.is_some() => fields.next_value_seed(Check(&NONE))?,
                None => {
                    fields.next_value::<IgnoredAny>()?;
                    false
                }
            };
            if let Some(at) = set {
                kept[at] = !null || defaults.set[at].2;
            }
        }
        match kept.iter().all(|kept| *kept) {
            true => Ok(false),
            false => Err(de::Error::custom("a default would be filled in")),
        }
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<bool, A::Error> {
        match self.0.items.as_deref() {
            Some(item) => while items.next_element_seed(Check(item))?.is_some() {},
            None => while items.next_element::<IgnoredAny>()?.is_some() {},
        }
        Ok(false)
    }
}

/// No defaults: a level [`Check`] only reads to learn whether it is `null`.
static NONE: Defaults = Defaults {
    set: Vec::new(),
    below: Vec::new(),
    additional: None,
    items: None,
};

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn defaults_fill_absent_and_null_fields_level_by_level() {
        let schema = json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "default": {},
            "properties": {
                "replicas": {"type": "integer", "default": 1},
                "mode": {"type": "string", "default": "fast"},
                "note": {"type": "string", "nullable": true, "default": "n"},
                "ports": {"type": "array", "items": {"type": "object", "properties": {
                    "protocol": {"type": "string", "default": "TCP"},
                }}},
            },
        }}});
        let defaults = Defaults::compile(&schema).expect("the schema sets defaults");
        let mut empty = json!({});
        defaults.apply(&mut empty);
        assert_eq!(
            empty,
            json!({"spec": {"replicas": 1, "mode": "fast", "note": "n"}})
        );
        let mut given = json!({"spec": {"replicas": 3, "mode": null, "note": null, "ports": [{}]}});
        defaults.apply(&mut given);
        assert_eq!(
            given,
            json!({"spec": {"replicas": 3, "mode": "fast", "note": null, "ports": [{"protocol": "TCP"}]}})
        );
    }

    #[test]
    fn defaults_reach_lists_maps_and_defaulted_objects_and_nothing_else() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "default": {}, "properties": {
                "size": {"type": "integer", "default": 3},
                "tag": {"type": "string", "nullable": true, "default": "x"},
                "plain": {"type": "string"},
                "ports": {"type": "array", "items": {"type": "object", "properties": {
                    "protocol": {"type": "string", "default": "TCP"},
                }}},
                "labels": {"type": "object", "additionalProperties": {
                    "type": "object", "properties": {"on": {"type": "boolean", "default": true}},
                }},
            }},
            "status": {"type": "object", "properties": {"n": {"type": "integer"}}},
        }});
        let cases = [
            (json!({}), json!({"spec": {"size": 3, "tag": "x"}})),
            (
                json!({"spec": null}),
                json!({"spec": {"size": 3, "tag": "x"}}),
            ),
            (
                json!({"spec": {"size": null, "tag": null, "plain": "p"}}),
                json!({"spec": {"size": 3, "tag": null, "plain": "p"}}),
            ),
            (
                json!({"spec": {"ports": [{}, {"protocol": "UDP"}, 7], "labels": {"a": {}, "b": {"on": false}}}}),
                json!({"spec": {"size": 3, "tag": "x",
                    "ports": [{"protocol": "TCP"}, {"protocol": "UDP"}, 7],
                    "labels": {"a": {"on": true}, "b": {"on": false}}}}),
            ),
            (
                json!({"spec": "not an object", "status": {}}),
                json!({"spec": "not an object", "status": {}}),
            ),
            (json!([{"spec": {}}]), json!([{"spec": {}}])),
        ];
        let defaults = Defaults::compile(&schema).expect("the schema sets defaults");
        for (mut object, expected) in cases {
            defaults.apply(&mut object);
            assert_eq!(object, expected);
        }
        let without =
            json!({"type": "object", "properties": {"a": {"type": "object", "properties": {}}}});
        assert_eq!(Defaults::compile(&without), None);
    }

    #[test]
    fn the_check_agrees_with_applying_the_defaults() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "default": {}, "properties": {
                "size": {"type": "integer", "default": 3},
                "tag": {"type": "string", "nullable": true, "default": "x"},
                "ports": {"type": "array", "items": {"type": "object", "properties": {
                    "protocol": {"type": "string", "default": "TCP"},
                }}},
                "labels": {"type": "object", "additionalProperties": {
                    "type": "object", "properties": {"on": {"type": "boolean", "default": true}},
                }},
            }},
        }});
        let defaults = Defaults::compile(&schema).expect("the schema sets defaults");
        let full = json!({"size": 1, "tag": "t"});
        let objects = [
            json!({}),
            json!({"spec": null}),
            json!({"spec": "text", "status": {"deep": [[{"spec": {}}]]}}),
            json!({"spec": full}),
            json!({"spec": {"size": 1}}),
            json!({"spec": {"size": null, "tag": "t"}}),
            json!({"spec": {"size": 1, "tag": null}}),
            json!({"spec": {"size": 1, "tag": "t", "ports": [{"protocol": "UDP"}, 7, null]}}),
            json!({"spec": {"size": 1, "tag": "t", "ports": [{"protocol": "UDP"}, {}]}}),
            json!({"spec": {"size": 1, "tag": "t", "ports": {"protocol": null}}}),
            json!({"spec": {"size": 1, "tag": "t", "labels": {"a": {"on": false}, "b": 1}}}),
            json!({"spec": {"size": 1, "tag": "t", "labels": {"a": {"on": false}, "b": {}}}}),
            json!({"spec": {"size": 1, "tag": "t", "labels": {"a": {"on": null}}}}),
            json!({"metadata": {"name": "a"}, "spec": {"tag": "t", "size": {"not": "a number"}}}),
            json!([{"spec": {}}]),
            json!("text"),
            json!(null),
        ];
        for object in objects {
            let mut applied = object.clone();
            defaults.apply(&mut applied);
            let bytes = serde_json::to_vec(&object).expect("a value encodes");
            assert_eq!(
                defaults.fill_nothing_in(&bytes),
                applied == object,
                "{object}"
            );
        }
    }

    #[test]
    fn the_check_reads_escaped_keys_and_refuses_what_is_not_json() {
        let schema = json!({"type": "object", "properties": {
            "a\"b": {"type": "string", "default": "x"},
        }});
        let defaults = Defaults::compile(&schema).expect("the schema sets defaults");
        assert!(defaults.fill_nothing_in(br#"{"a\"b":"y"}"#));
        assert!(defaults.fill_nothing_in(br#" {"a\u0022b" : "y"} "#));
        assert!(!defaults.fill_nothing_in(br#"{"ab":"y"}"#));
        for not_json in [
            &b""[..],
            b"{",
            br#"{"a\"b":"y"} x"#,
            br#"{"a\"b":"y""#,
            b"\xff",
        ] {
            assert!(!defaults.fill_nothing_in(not_json));
        }
        // What the defaults do not reach is skipped at any depth, without recursing.
        let nested = |depth: usize| {
            let (open, close) = ("[".repeat(depth), "]".repeat(depth));
            format!(r#"{{"a\"b":"y","c":{open}{close}}}"#)
        };
        assert!(defaults.fill_nothing_in(nested(100_000).as_bytes()));
        assert!(!defaults.fill_nothing_in(nested(100_000).trim_end_matches('}').as_bytes()));
    }
}
