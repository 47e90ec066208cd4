//! Pruning and defaulting of custom resources by their structural schema, as kube-apiserver
//! does on every write (and defaulting also on every read from storage).

use serde_json::Value;

use super::Path;
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
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
}
