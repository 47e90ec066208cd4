//! Pruning of custom resources by their structural schema, as kube-apiserver does on every
//! write and every read from storage.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::Path;
use crate::json::Key;
use crate::object::flag;

/// Fields every object keeps at its root (and embedded resources at theirs).
const OBJECT_FIELDS: &[&str] = &["apiVersion", "kind", "metadata"];

/// Removes the fields the schema does not declare, unless a level says
/// `x-kubernetes-preserve-unknown-fields: true`, and returns their paths (for `fieldValidation`).
pub fn prune(schema: &Value, value: &mut Value) -> Vec<String> {
    let mut pruned = Vec::new();
    prune_at(schema, value, &Path::Start(""), true, &mut pruned);
    pruned
}

fn prune_at(
    schema: &Value,
    value: &mut Value,
    path: &Path<'_>,
    root: bool,
    pruned: &mut Vec<String>,
) {
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    let keeps_object_fields = root || flag(schema, "x-kubernetes-embedded-resource");
    match value {
        Value::Object(fields) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            // `additionalProperties: true` keeps any key; its value has no schema, so an object
            // there keeps nothing (as Kubernetes prunes against no schema).
            let any_key = schema.get("additionalProperties") == Some(&Value::Bool(true));
            let no_schema = Value::Object(Default::default());
            let additional = additional.or(any_key.then_some(&no_schema));
            let declared = |name: &str| {
                properties.is_some_and(|p| p.contains_key(name))
                    || (keeps_object_fields && OBJECT_FIELDS.contains(&name))
            };
            // Read first, changed only when something goes (nearly never on reads).
            if additional.is_none() && !preserve && !fields.keys().all(|name| declared(name)) {
                fields.retain(|name, _| {
                    let keep = declared(name);
                    if !keep {
                        pruned.push(Path::Field(path, name).to_string());
                    }
                    keep
                });
            }
            for (name, field) in fields.iter_mut() {
                if keeps_object_fields && name == "metadata" {
                    // ObjectMeta's rules, not the schema's, decide what metadata keeps.
                    continue;
                }
                let field_schema = properties.and_then(|p| p.get(name)).or(additional);
                if let Some(field_schema) = field_schema {
                    prune_at(field_schema, field, &Path::Field(path, name), false, pruned);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    prune_at(item_schema, item, &Path::Item(path, i), false, pruned);
                }
            }
        }
        _ => {}
    }
}

/// Whether [`prune`] would remove nothing from the JSON value `json`: read without building
/// the value, so a read can serve stored bytes that need no pruning as they are. `false` also
/// when `json` is not JSON (the caller then decodes it and prunes).
pub fn prune_nothing_in(schema: &Value, json: &[u8]) -> bool {
    let mut reader = serde_json::Deserializer::from_slice(json);
    PruneCheck { schema, root: true }
        .deserialize(&mut reader)
        .is_ok()
        && reader.end().is_ok()
}

/// [`prune_nothing_in`] as a serde seed, level by level as `prune_at` walks: fails as soon as
/// a field would go (or the input is not JSON).
#[derive(Clone, Copy)]
struct PruneCheck<'s> {
    schema: &'s Value,
    root: bool,
}

impl<'de> DeserializeSeed<'de> for PruneCheck<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, reader: D) -> Result<(), D::Error> {
        reader.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for PruneCheck<'_> {
    type Value = ();

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a JSON value")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut fields: A) -> Result<(), A::Error> {
        let schema = self.schema;
        let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
        let keeps_object_fields = self.root || flag(schema, "x-kubernetes-embedded-resource");
        let properties = schema.get("properties").and_then(Value::as_object);
        let additional = schema.get("additionalProperties").filter(|a| a.is_object());
        let any_key = schema.get("additionalProperties") == Some(&Value::Bool(true));
        let no_schema = Value::Object(Default::default());
        let additional = additional.or(any_key.then_some(&no_schema));
        while let Some(Key(name)) = fields.next_key::<Key<'de>>()? {
            let declared = properties.is_some_and(|p| p.contains_key(&*name))
                || (keeps_object_fields && OBJECT_FIELDS.contains(&&*name));
            if !declared && additional.is_none() && !preserve {
                return Err(de::Error::custom("a field would be pruned"));
            }
            let field_schema = properties.and_then(|p| p.get(&*name)).or(additional);
            match field_schema {
                Some(field_schema) if !(keeps_object_fields && name == "metadata") => fields
                    .next_value_seed(PruneCheck {
                        schema: field_schema,
                        root: false,
                    })?,
                _ => {
                    fields.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<(), A::Error> {
        match self.schema.get("items") {
            Some(item) => {
                let item = PruneCheck {
                    schema: item,
                    root: false,
                };
                while items.next_element_seed(item)?.is_some() {}
            }
            None => while items.next_element::<IgnoredAny>()?.is_some() {},
        }
        Ok(())
    }
}

#[cfg(test)]
mod metadata_tests {
    use serde_json::json;

    #[test]
    fn a_declared_metadata_schema_does_not_prune_object_meta() {
        let schema = json!({"type": "object", "properties": {
            "metadata": {"type": "object"},
            "spec": {"type": "object"},
        }});
        let mut object = json!({"metadata": {"name": "a", "labels": {"x": "y"}}, "spec": {"z": 1}});
        assert_eq!(super::prune(&schema, &mut object), vec!["spec.z"]);
        assert_eq!(object["metadata"]["name"], "a");
        assert_eq!(object["metadata"]["labels"]["x"], "y");
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_check_agrees_with_pruning() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer"},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                         "properties": {"known": {"type": "object", "properties": {}}}},
                "template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {}},
                "items": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
                "any": {"type": "object", "additionalProperties": true},
                "map": {"type": "object", "additionalProperties": {"type": "object", "properties": {"on": {"type": "boolean"}}}},
            }},
        }});
        let objects = [
            json!({"apiVersion": "x.io/v1", "kind": "X", "metadata": {"name": "x", "anything": 1}}),
            json!({"metadata": {}, "spec": {"size": 1, "items": [{"a": "1"}, 7, null]}}),
            json!({"spec": {"size": 1, "colour": "red"}}),
            json!({"status": {}}),
            json!({"spec": {"items": [{"a": "1"}, {"b": "2"}]}}),
            json!({"spec": {"free": {"anything": {"goes": [1, {"x": 2}]}}}}),
            json!({"spec": {"free": {"known": {"not": "declared"}}}}),
            json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"x": 1}}}}),
            json!({"spec": {"template": {"kind": "Pod", "extra": 1}}}),
            json!({"spec": {"any": {"a": 1, "b": "2", "c": []}}}),
            json!({"spec": {"any": {"c": {"deep": 1}}}}),
            json!({"spec": {"map": {"a": {"on": true}, "b": {}}}}),
            json!({"spec": {"map": {"a": {"off": true}}}}),
            json!({"spec": "text", "metadata": "not an object"}),
            json!([{"spec": {"x": 1}}]),
            json!(3),
        ];
        for object in objects {
            let mut pruned = object.clone();
            let nothing = prune(&schema, &mut pruned).is_empty();
            let bytes = serde_json::to_vec(&object).expect("a value encodes");
            assert_eq!(prune_nothing_in(&schema, &bytes), nothing, "{object}");
        }
        assert!(!prune_nothing_in(&schema, b"{\"spec\":"));
        assert!(!prune_nothing_in(&schema, b"{} {}"));
    }

    #[test]
    fn undeclared_fields_go_unless_preserved() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer"},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "template": {"type": "object", "x-kubernetes-embedded-resource": true, "properties": {}},
                "items": {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "string"}}}},
            }},
        }});
        let mut object = json!({
            "apiVersion": "x.io/v1", "kind": "X", "metadata": {"name": "x"},
            "status": {"ok": true},
            "spec": {
                "size": 1, "colour": "red",
                "free": {"anything": {"goes": 1}},
                "template": {"apiVersion": "v1", "kind": "Pod", "metadata": {}, "extra": 1},
                "items": [{"a": "1", "b": "2"}],
            },
        });
        let pruned = prune(&schema, &mut object);
        assert_eq!(
            pruned,
            vec![
                "status",
                "spec.colour",
                "spec.items[0].b",
                "spec.template.extra"
            ]
        );
        assert_eq!(object["spec"]["free"]["anything"]["goes"], 1);
        assert_eq!(object["spec"]["template"]["kind"], "Pod");
        assert_eq!(object["apiVersion"], "x.io/v1");
    }

    #[test]
    fn additional_properties_true_keeps_any_key_with_schemaless_values() {
        let schema = json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "additionalProperties": true,
        }}});
        let mut object = json!({"spec": {"a": "1", "b": 2, "c": {"deep": 1}}});
        assert_eq!(prune(&schema, &mut object), vec!["spec.c.deep"]);
        assert_eq!(object["spec"], json!({"a": "1", "b": 2, "c": {}}));
    }
}
