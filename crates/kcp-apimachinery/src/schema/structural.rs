//! Whether a CRD version's schema is *structural*, the rules kube-apiserver enforces when a CRD
//! is created or updated: every specified field has a type, arrays have items, metadata at the
//! root restricts at most `name` and `generateName`, and the logic junctors (`allOf`, `anyOf`,
//! `oneOf`, `not`) only validate values without declaring structure. Errors come sorted by their
//! text, as kube-apiserver sorts them.
//!
//! Not yet checked: that every field mentioned under a junctor is also specified outside it.

use serde_json::{Map, Value};

use super::FieldError;
use crate::object::{flag, text};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

/// The structural-schema violations of `schema`, whose own path is `path` (e.g.
/// `spec.versions[0].schema.openAPIV3Schema`).
pub fn structural_errors(schema: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    invariants(schema, Level::Root, path, &mut errors);
    errors.sort_by_key(|e| format!("{}: {}", e.field, e.message));
    errors
}

fn key(path: &str, name: &str, key: &str) -> String {
    format!("{path}.{name}[{key}]")
}

fn child(path: &str, name: &str) -> String {
    format!("{path}.{name}")
}

fn required(field: String, detail: &str) -> FieldError {
    FieldError::new(
        "FieldValueRequired",
        &field,
        format!("Required value: {detail}"),
    )
}

fn forbidden(field: String, detail: &str) -> FieldError {
    FieldError::new(
        "FieldValueForbidden",
        &field,
        format!("Forbidden: {detail}"),
    )
}

fn invalid(field: String, value: &str, detail: &str) -> FieldError {
    FieldError::new(
        "FieldValueInvalid",
        &field,
        format!("Invalid value: {value}: {detail}"),
    )
}

fn invariants(schema: &Value, level: Level, path: &str, errors: &mut Vec<FieldError>) {
    let kind = text(schema, "type");
    let int_or_string = flag(schema, "x-kubernetes-int-or-string");
    let preserve = flag(schema, "x-kubernetes-preserve-unknown-fields");
    let embedded = flag(schema, "x-kubernetes-embedded-resource");
    let properties = schema.get("properties").and_then(Value::as_object);

    if kind == "array" && schema.get("items").is_none() {
        errors.push(required(child(path, "items"), "must be specified"));
    }
    if let Some(items) = schema.get("items") {
        invariants(items, Level::Item, &child(path, "items"), errors);
    }
    for (name, field) in properties.into_iter().flatten() {
        invariants(field, Level::Field, &key(path, "properties", name), errors);
    }
    if let Some(additional) = schema.get("additionalProperties") {
        if level == Level::Root {
            errors.push(forbidden(
                child(path, "additionalProperties"),
                "must not be used at the root",
            ));
        }
        // `true` (any value allowed) may stand beside properties; `false` or a schema may not.
        if properties.is_some_and(|p| !p.is_empty()) && *additional != Value::Bool(true) {
            errors.push(forbidden(
                child(path, "additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        if additional.is_object() {
            invariants(
                additional,
                Level::Field,
                &child(path, "additionalProperties"),
                errors,
            );
        }
        if embedded {
            errors.push(forbidden(
                child(path, "additionalProperties"),
                "must not be used if x-kubernetes-embedded-resource is set",
            ));
        }
    }
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        errors.push(invalid(
            child(path, "x-kubernetes-preserve-unknown-fields"),
            "false",
            "must be true or undefined",
        ));
    }
    if int_or_string && preserve {
        errors.push(invalid(
            child(path, "x-kubernetes-preserve-unknown-fields"),
            "true",
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if int_or_string && embedded {
        errors.push(invalid(
            child(path, "x-kubernetes-embedded-resource"),
            "true",
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    junctors(schema, level, path, errors);
    list_type_errors(schema, path, errors);
    if level != Level::Root
        && let Some(default) = schema.get("default")
    {
        default_errors(schema, default, path, errors);
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
        && let Err(error) = regex::Regex::new(pattern)
    {
        errors.push(invalid(
            child(path, "pattern"),
            &format!("{pattern:?}"),
            &format!("must be a valid regular expression, but isn't: {error}"),
        ));
    }

    if embedded && kind != "object" {
        if kind.is_empty() {
            errors.push(required(
                child(path, "type"),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        } else {
            errors.push(invalid(
                child(path, "type"),
                &format!("{kind:?}"),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        }
    } else if kind.is_empty() && !int_or_string && !preserve {
        let detail = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errors.push(required(child(path, "type"), detail));
    }
    if level == Level::Root && !kind.is_empty() && kind != "object" {
        errors.push(invalid(
            child(path, "type"),
            &format!("{kind:?}"),
            "must be object at the root",
        ));
    }
    let object_level = level == Level::Root || embedded;
    if object_level {
        for name in ["kind", "apiVersion"] {
            if let Some(field) = properties.and_then(|p| p.get(name))
                && text(field, "type") != "string"
            {
                errors.push(invalid(
                    child(&key(path, "properties", name), "type"),
                    &format!("{:?}", text(field, "type")),
                    "must be string",
                ));
            }
        }
    }
    if let Some(metadata) = properties.and_then(|p| p.get("metadata")) {
        metadata_invariants(
            metadata,
            object_level,
            level,
            &key(path, "properties", "metadata"),
            errors,
        );
    }
    if embedded && !preserve && properties.is_none_or(Map::is_empty) {
        errors.push(required(
            child(path, "properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// A `default`, as kube-apiserver checks it: it must be valid against its own schema and hold
/// no field the schema would prune.
fn default_errors(schema: &Value, default: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let at = child(path, "default");
    let mut pruned = default.clone();
    if !super::prune(schema, &mut pruned).is_empty() {
        errors.push(FieldError::new(
            "FieldValueInvalid",
            &at,
            format!(
                "Invalid value: {}: must not have unknown fields",
                crate::unstructured::go_sharp(default)
            ),
        ));
        return;
    }
    errors.extend(super::validate(schema, default, &at));
}

/// `x-kubernetes-list-type` and `-list-map-keys`, as kube-apiserver checks them: a known list
/// type; keys only with type `map`, and a `map` list with keys naming scalar, required (or
/// defaulted), non-nullable properties of object items.
fn list_type_errors(schema: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let list_type = schema.get("x-kubernetes-list-type").and_then(Value::as_str);
    let keys: Vec<&str> = schema["x-kubernetes-list-map-keys"]
        .as_array()
        .map(|keys| keys.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let go_keys = format!(
        "[]string{{{}}}",
        keys.iter()
            .map(|k| format!("{k:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if let Some(kind) = list_type
        && !["atomic", "set", "map"].contains(&kind)
    {
        errors.push(FieldError::new(
            "FieldValueNotSupported",
            child(path, "x-kubernetes-list-type"),
            format!("Unsupported value: {kind:?}: supported values: \"atomic\", \"set\", \"map\""),
        ));
    }
    const KEYS_NEED_MAP: &str = "must be map if x-kubernetes-list-map-keys is non-empty";
    if !keys.is_empty() {
        match list_type {
            None => errors.push(required(
                child(path, "x-kubernetes-list-type"),
                KEYS_NEED_MAP,
            )),
            Some("map") => {}
            Some(other) => errors.push(invalid(
                child(path, "x-kubernetes-list-type"),
                &format!("{other:?}"),
                KEYS_NEED_MAP,
            )),
        }
    }
    if list_type != Some("map") {
        return;
    }
    if keys.is_empty() {
        errors.push(required(
            child(path, "x-kubernetes-list-map-keys"),
            "must not be empty if x-kubernetes-list-type is map",
        ));
    }
    let Some(items) = schema.get("items").filter(|i| i.is_object()) else {
        errors.push(required(
            child(path, "items"),
            "must have a schema if x-kubernetes-list-type is map",
        ));
        return;
    };
    let item_type = text(items, "type");
    if item_type != "object" {
        errors.push(invalid(
            child(&child(path, "items"), "type"),
            &format!("{item_type:?}"),
            "must be object if parent array's x-kubernetes-list-type is map",
        ));
        return;
    }
    if flag(items, "nullable") {
        errors.push(forbidden(
            child(&child(path, "items"), "nullable"),
            "cannot be nullable when x-kubernetes-list-type is map",
        ));
    }
    let properties = items.get("properties").and_then(Value::as_object);
    let required_keys: Vec<&str> = items["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut seen = Vec::new();
    for name in &keys {
        let item_path = key(&child(path, "items"), "properties", name);
        match properties.and_then(|p| p.get(*name)) {
            Some(property) => {
                if matches!(text(property, "type"), "array" | "object") {
                    errors.push(invalid(
                        child(&item_path, "type"),
                        "\"object\"",
                        "must be a scalar type if parent array's x-kubernetes-list-type is map",
                    ));
                }
                if !required_keys.contains(name) && property.get("default").is_none() {
                    errors.push(required(
                        child(&item_path, "default"),
                        "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                    ));
                }
                if flag(property, "nullable") {
                    errors.push(forbidden(
                        child(&item_path, "nullable"),
                        "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                    ));
                }
            }
            None => errors.push(invalid(
                child(path, "x-kubernetes-list-map-keys"),
                &go_keys,
                "entries must all be names of item properties",
            )),
        }
        if seen.contains(name) {
            errors.push(invalid(
                child(path, "x-kubernetes-list-map-keys"),
                &go_keys,
                "must not contain duplicate entries",
            ));
        }
        seen.push(name);
    }
}

fn metadata_invariants(
    schema: &Value,
    object_level: bool,
    level: Level,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    let kind = text(schema, "type");
    if object_level && kind != "object" {
        errors.push(invalid(
            child(path, "type"),
            &format!("{kind:?}"),
            "must be object",
        ));
    }
    if level != Level::Root {
        return;
    }
    // At the root, metadata may only say something about name and generateName.
    let allowed = |name: &str| name == "name" || name == "generateName";
    let restricts_more = schema.as_object().is_some_and(|fields| {
        fields.iter().any(|(field, value)| match field.as_str() {
            "type" | "description" => false,
            "properties" => value
                .as_object()
                .is_some_and(|p| p.keys().any(|k| !allowed(k))),
            _ => true,
        })
    });
    if restricts_more {
        errors.push(forbidden(
            path.to_string(),
            "must not specify anything other than name and generateName, but metadata is implicitly specified",
        ));
    }
}

/// What the logic junctors may not declare: structure belongs outside them.
fn junctors(schema: &Value, level: Level, path: &str, errors: &mut Vec<FieldError>) {
    let int_or_string_pattern = |entries: &Value| {
        entries.as_array().is_some_and(|e| {
            e.len() == 2
                && e[0] == serde_json::json!({"type": "integer"})
                && e[1] == serde_json::json!({"type": "string"})
        })
    };
    for junctor in ["allOf", "anyOf", "oneOf"] {
        let Some(entries) = schema.get(junctor).and_then(Value::as_array) else {
            continue;
        };
        if junctor == "anyOf" && int_or_string_pattern(&schema["anyOf"]) {
            continue;
        }
        for (i, entry) in entries.iter().enumerate() {
            let entry_path = format!("{path}.{junctor}[{i}]");
            let skip_any_of =
                junctor == "allOf" && i == 0 && int_or_string_pattern(&entry["anyOf"]);
            nested(entry, skip_any_of, level, &entry_path, errors);
        }
    }
    if let Some(not) = schema.get("not") {
        nested(not, false, level, &child(path, "not"), errors);
    }
}

fn nested(
    schema: &Value,
    skip_any_of: bool,
    level: Level,
    path: &str,
    errors: &mut Vec<FieldError>,
) {
    const FORBIDDEN: &[(&str, &str)] = &[
        ("type", "must be empty to be structural"),
        ("additionalProperties", "must be undefined to be structural"),
        ("default", "must be undefined to be structural"),
        ("title", "must be empty to be structural"),
        ("description", "must be empty to be structural"),
        ("externalDocs", "must be undefined to be structural"),
        (
            "x-kubernetes-list-map-keys",
            "must be empty to be structural",
        ),
        (
            "x-kubernetes-list-type",
            "must be undefined to be structural",
        ),
        (
            "x-kubernetes-map-type",
            "must be undefined to be structural",
        ),
        ("x-kubernetes-validations", "must be empty to be structural"),
    ];
    const FALSE_ONLY: &[&str] = &[
        "nullable",
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
        "x-kubernetes-int-or-string",
    ];
    for (name, detail) in FORBIDDEN {
        if schema.get(*name).is_some() {
            errors.push(forbidden(child(path, name), detail));
        }
    }
    for name in FALSE_ONLY {
        if flag(schema, name) {
            errors.push(forbidden(
                child(path, name),
                "must be false to be structural",
            ));
        }
    }
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        if properties.contains_key("metadata") {
            errors.push(forbidden(
                key(path, "properties", "metadata"),
                "must not be specified in a nested context",
            ));
        }
        for (name, field) in properties {
            nested(
                field,
                false,
                Level::Field,
                &key(path, "properties", name),
                errors,
            );
        }
    }
    if let Some(items) = schema.get("items") {
        nested(items, false, level, &child(path, "items"), errors);
    }
    if !skip_any_of {
        junctors(schema, level, path, errors);
    } else {
        for junctor in ["allOf", "oneOf"] {
            for (i, entry) in schema
                .get(junctor)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .enumerate()
            {
                nested(
                    entry,
                    false,
                    level,
                    &format!("{path}.{junctor}[{i}]"),
                    errors,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn messages(schema: Value) -> Vec<String> {
        structural_errors(&schema, "spec.versions[0].schema.openAPIV3Schema")
            .into_iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect()
    }

    #[test]
    fn a_typed_schema_is_structural() {
        assert!(messages(json!({
            "type": "object",
            "properties": {
                "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}},
                "spec": {"type": "object", "properties": {
                    "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "limits": {"type": "object", "additionalProperties": {"type": "integer"}},
                    "either": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                               "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
                }},
            },
        }))
        .is_empty());
    }

    #[test]
    fn list_map_keys_need_a_map_list_of_objects_with_required_scalar_keys() {
        let root = "spec.versions[0].schema.openAPIV3Schema.properties[spec]";
        let schema = |list: Value| json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"ports": list}}}});
        let ports = format!("{root}.properties[ports]");
        assert_eq!(
            messages(schema(
                json!({"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "object"}})
            )),
            vec![format!(
                "{ports}.x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"
            )]
        );
        assert_eq!(
            messages(schema(
                json!({"type": "array", "x-kubernetes-list-type": "set", "x-kubernetes-list-map-keys": ["name"], "items": {"type": "string"}})
            )),
            vec![format!(
                "{ports}.x-kubernetes-list-type: Invalid value: \"set\": must be map if x-kubernetes-list-map-keys is non-empty"
            )]
        );
        assert_eq!(
            messages(schema(
                json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name", "port"],
                "items": {"type": "object", "required": ["port"], "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}})
            )),
            vec![format!(
                "{ports}.items.properties[name].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"
            )]
        );
        assert_eq!(
            messages(schema(
                json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["nope"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}}}})
            )),
            vec![format!(
                "{ports}.x-kubernetes-list-map-keys: Invalid value: []string{{\"nope\"}}: entries must all be names of item properties"
            )]
        );
        assert_eq!(
            messages(schema(
                json!({"type": "array", "x-kubernetes-list-type": "bag", "items": {"type": "string"}})
            )),
            vec![format!(
                "{ports}.x-kubernetes-list-type: Unsupported value: \"bag\": supported values: \"atomic\", \"set\", \"map\""
            )]
        );
        let fine = json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}});
        assert_eq!(messages(schema(fine)), Vec::<String>::new());
    }

    #[test]
    fn defaults_must_be_valid_against_their_schema() {
        let root = "spec.versions[0].schema.openAPIV3Schema.properties[spec]";
        let schema = |size: Value| json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": size}}}});
        assert_eq!(
            messages(schema(json!({"type": "integer", "default": "three"}))),
            vec![format!(
                "{root}.properties[size].default: Invalid value: \"string\": {root}.properties[size].default in body must be of type integer: \"string\""
            )]
        );
        assert_eq!(
            messages(schema(
                json!({"type": "integer", "minimum": 1, "default": 0})
            ))
            .len(),
            1
        );
        assert_eq!(
            messages(schema(
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "default": {"b": "x"}})
            )),
            vec![format!(
                "{root}.properties[size].default: Invalid value: map[string]interface {{}}{{\"b\":\"x\"}}: must not have unknown fields"
            )]
        );
        assert_eq!(
            messages(schema(json!({"type": "integer", "default": 3}))),
            Vec::<String>::new()
        );
    }

    #[test]
    fn additional_properties_true_may_stand_beside_properties() {
        let schema = |additional: Value| {
            json!({"type": "object", "properties": {"spec": {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "additionalProperties": additional,
            }}})
        };
        assert_eq!(messages(schema(json!(true))), Vec::<String>::new());
        let forbidden = "spec.versions[0].schema.openAPIV3Schema.properties[spec].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive";
        assert!(messages(schema(json!(false))).contains(&forbidden.to_string()));
        assert!(messages(schema(json!({"type": "string"}))).contains(&forbidden.to_string()));
    }

    #[test]
    fn missing_types_items_and_misplaced_structure_are_named() {
        let path = "spec.versions[0].schema.openAPIV3Schema";
        assert_eq!(
            messages(json!({
                "type": "object",
                "additionalProperties": {"type": "string"},
                "properties": {
                    "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}},
                    "spec": {"properties": {"list": {"type": "array"}}},
                    "status": {"type": "object", "anyOf": [{"type": "string", "description": "no"}]},
                },
            })),
            vec![
                format!(
                    "{path}.additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
                ),
                format!("{path}.additionalProperties: Forbidden: must not be used at the root"),
                format!(
                    "{path}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
                ),
                format!(
                    "{path}.properties[spec].properties[list].items: Required value: must be specified"
                ),
                format!(
                    "{path}.properties[spec].type: Required value: must not be empty for specified object fields"
                ),
                format!(
                    "{path}.properties[status].anyOf[0].description: Forbidden: must be empty to be structural"
                ),
                format!(
                    "{path}.properties[status].anyOf[0].type: Forbidden: must be empty to be structural"
                ),
            ]
        );
        assert_eq!(
            messages(json!({"type": "string"})),
            vec![format!(
                "{path}.type: Invalid value: \"string\": must be object at the root"
            )]
        );
        assert_eq!(
            messages(
                json!({"type": "object", "properties": {"x": {"type": "object", "x-kubernetes-embedded-resource": true}}})
            ),
            vec![format!(
                "{path}.properties[x].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"
            )]
        );
    }
}
