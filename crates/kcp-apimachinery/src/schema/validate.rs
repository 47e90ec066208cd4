//! Validation of a value against a CRD's OpenAPI v3 (structural) schema, with the field paths
//! and messages kube-apiserver gives for custom resources. Every error is reported, not just the
//! first.

use std::collections::HashSet;

use serde_json::Value;

use super::{FieldError, Path, json_type};
use crate::object::flag;

/// Every way `value` breaks `schema`, at `path` (`""` for the object root).
pub fn validate(schema: &Value, value: &Value, path: &str) -> Vec<FieldError> {
    let mut errors = Vec::new();
    check(schema, value, &Path::Start(path), &mut errors);
    errors
}

fn shown(value: &Value) -> String {
    match value {
        Value::String(text) => format!("{text:?}"),
        other => other.to_string(),
    }
}

fn invalid(path: &Path<'_>, value: &Value, detail: String) -> FieldError {
    FieldError::new(
        "FieldValueInvalid",
        path,
        format!("Invalid value: {}: {detail}", shown(value)),
    )
}

fn number(schema: &Value, key: &str) -> Option<f64> {
    schema.get(key).and_then(Value::as_f64)
}

fn count(schema: &Value, key: &str) -> Option<usize> {
    schema.get(key).and_then(Value::as_u64).map(|n| n as usize)
}

/// Whether `value` has the schema's `type` (with `x-kubernetes-int-or-string` and `nullable`).
fn type_fits(schema: &Value, value: &Value) -> bool {
    if value.is_null() {
        return flag(schema, "nullable");
    }
    if flag(schema, "x-kubernetes-int-or-string") {
        return value.is_string() || value.is_i64() || value.is_u64();
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("string") => value.is_string(),
        Some("integer") => value.is_i64() || value.is_u64(),
        Some("number") => value.is_number(),
        Some("boolean") => value.is_boolean(),
        Some("object") => value.is_object(),
        Some("array") => value.is_array(),
        _ => true,
    }
}

fn check(schema: &Value, value: &Value, path: &Path<'_>, errors: &mut Vec<FieldError>) {
    if !type_fits(schema, value) {
        // Kubernetes turns int-or-string into the type list `integer,string`.
        let expected = schema
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("integer,string");
        let found = json_type(value);
        errors.push(FieldError::new(
            "FieldValueInvalid",
            path,
            format!(
                "Invalid value: {found:?}: {path} in body must be of type {expected}: {found:?}"
            ),
        ));
        return;
    }
    if value.is_null() {
        return;
    }
    if let Some(allowed) = schema.get("enum").and_then(Value::as_array)
        && !allowed.contains(value)
    {
        let supported: Vec<String> = allowed.iter().map(shown).collect();
        errors.push(FieldError::new(
            "FieldValueNotSupported",
            path,
            format!(
                "Unsupported value: {}: supported values: {}",
                shown(value),
                supported.join(", ")
            ),
        ));
    }
    match value {
        Value::String(text) => check_string(schema, value, text, path, errors),
        Value::Number(_) => check_number(schema, value, path, errors),
        Value::Array(items) => check_array(schema, items, path, errors),
        Value::Object(fields) => check_object(schema, value, fields, path, errors),
        _ => {}
    }
}

fn check_string(
    schema: &Value,
    value: &Value,
    text: &str,
    path: &Path<'_>,
    errors: &mut Vec<FieldError>,
) {
    let length = text.chars().count();
    if let Some(max) = count(schema, "maxLength")
        && length > max
    {
        errors.push(FieldError::new(
            "FieldValueTooLong",
            path,
            format!("Too long: may not be more than {max} bytes"),
        ));
    }
    if let Some(min) = count(schema, "minLength")
        && length < min
    {
        errors.push(invalid(
            path,
            value,
            format!("{path} in body should be at least {min} chars long"),
        ));
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        match super::patterns::compiled(pattern) {
            Some(re) if !re.is_match(text) => errors.push(invalid(
                path,
                value,
                format!("{path} in body should match '{pattern}'"),
            )),
            Some(_) => {}
            None => errors.push(invalid(
                path,
                value,
                format!("{path} in body has an invalid pattern '{pattern}'"),
            )),
        }
    }
    if let Some(format) = schema.get("format").and_then(Value::as_str)
        && let Some(problem) = super::formats::check(format, text)
    {
        errors.push(invalid(
            path,
            value,
            format!("{path} in body must be of type {format}: {problem}"),
        ));
    }
}

fn check_number(schema: &Value, value: &Value, path: &Path<'_>, errors: &mut Vec<FieldError>) {
    let Some(n) = value.as_f64() else { return };
    if let Some(min) = number(schema, "minimum") {
        if flag(schema, "exclusiveMinimum") && n <= min {
            errors.push(invalid(
                path,
                value,
                format!("{path} in body should be greater than {min}"),
            ));
        } else if n < min {
            errors.push(invalid(
                path,
                value,
                format!("{path} in body should be greater than or equal to {min}"),
            ));
        }
    }
    if let Some(max) = number(schema, "maximum") {
        if flag(schema, "exclusiveMaximum") && n >= max {
            errors.push(invalid(
                path,
                value,
                format!("{path} in body should be less than {max}"),
            ));
        } else if n > max {
            errors.push(invalid(
                path,
                value,
                format!("{path} in body should be less than or equal to {max}"),
            ));
        }
    }
    if let Some(factor) = number(schema, "multipleOf")
        && factor > 0.0
        && (n / factor).fract().abs() > f64::EPSILON
    {
        errors.push(invalid(
            path,
            value,
            format!("{path} in body should be a multiple of {factor}"),
        ));
    }
}

fn check_array(schema: &Value, items: &[Value], path: &Path<'_>, errors: &mut Vec<FieldError>) {
    if let Some(max) = count(schema, "maxItems")
        && items.len() > max
    {
        errors.push(FieldError::new(
            "FieldValueTooMany",
            path,
            format!("Too many: {}: must have at most {max} items", items.len()),
        ));
    }
    if let Some(min) = count(schema, "minItems")
        && items.len() < min
    {
        errors.push(invalid(
            path,
            &Value::from(items.len()),
            format!("{path} in body should have at least {min} items"),
        ));
    }
    if let Some(item_schema) = schema.get("items") {
        for (i, item) in items.iter().enumerate() {
            check(item_schema, item, &Path::Item(path, i), errors);
        }
    }
    match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => {
            let mut seen = HashSet::new();
            for (i, item) in items.iter().enumerate() {
                if !seen.insert(item.to_string()) {
                    errors.push(FieldError::new(
                        "FieldValueDuplicate",
                        Path::Item(path, i),
                        format!("Duplicate value: {}", shown(item)),
                    ));
                }
            }
        }
        Some("map") => {
            let keys: Vec<&str> = schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|keys| keys.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut seen = HashSet::new();
            for (i, item) in items.iter().enumerate() {
                let key: Vec<String> = keys.iter().map(|k| item[*k].to_string()).collect();
                if !seen.insert(key) {
                    let shown_key: serde_json::Map<String, Value> = keys
                        .iter()
                        .filter_map(|k| item.get(*k).map(|v| (k.to_string(), v.clone())))
                        .collect();
                    errors.push(FieldError::new(
                        "FieldValueDuplicate",
                        Path::Item(path, i),
                        format!("Duplicate value: {}", Value::Object(shown_key)),
                    ));
                }
            }
        }
        _ => {}
    }
}

fn check_object(
    schema: &Value,
    value: &Value,
    fields: &serde_json::Map<String, Value>,
    path: &Path<'_>,
    errors: &mut Vec<FieldError>,
) {
    if flag(schema, "x-kubernetes-embedded-resource") {
        // An embedded object names its own kind, as a top-level object does.
        for name in ["apiVersion", "kind"] {
            if fields
                .get(name)
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
            {
                errors.push(FieldError::new(
                    "FieldValueRequired",
                    Path::Field(path, name),
                    "Required value: must not be empty".to_string(),
                ));
            }
        }
    }
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !fields.contains_key(name) {
                errors.push(FieldError::new(
                    "FieldValueRequired",
                    Path::Field(path, name),
                    "Required value".into(),
                ));
            }
        }
    }
    if let Some(max) = count(schema, "maxProperties")
        && fields.len() > max
    {
        errors.push(FieldError::new(
            "FieldValueTooMany",
            path,
            format!("Too many: {}: must have at most {max} items", fields.len()),
        ));
    }
    if let Some(min) = count(schema, "minProperties")
        && fields.len() < min
    {
        errors.push(invalid(
            path,
            value,
            format!("{path} in body should have at least {min} properties"),
        ));
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    let additional = schema.get("additionalProperties").filter(|a| a.is_object());
    for (name, field) in fields {
        let field_path = Path::Field(path, name);
        if let Some(field_schema) = properties.and_then(|p| p.get(name)) {
            check(field_schema, field, &field_path, errors);
        } else if let Some(values) = additional {
            check(values, field, &field_path, errors);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn messages(schema: Value, value: Value) -> Vec<String> {
        validate(&schema, &value, "")
            .into_iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect()
    }

    fn spec(properties: Value) -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": properties}}})
    }

    #[test]
    fn embedded_resources_name_their_kind() {
        let schema = json!({"type": "object", "properties": {"template": {
            "type": "object", "x-kubernetes-embedded-resource": true,
            "x-kubernetes-preserve-unknown-fields": true}}});
        assert_eq!(
            messages(schema.clone(), json!({"template": {"spec": {}}})),
            [
                "template.apiVersion: Required value: must not be empty",
                "template.kind: Required value: must not be empty",
            ]
        );
        assert!(
            messages(
                schema,
                json!({"template": {"apiVersion": "v1", "kind": "Pod"}})
            )
            .is_empty()
        );
    }

    #[test]
    fn types_enums_and_required_fields() {
        let schema = json!({
            "type": "object",
            "required": ["spec"],
            "properties": {"spec": {
                "type": "object",
                "required": ["replicas"],
                "properties": {
                    "replicas": {"type": "integer"},
                    "colour": {"type": "string", "enum": ["red", "green"]},
                    "port": {"x-kubernetes-int-or-string": true},
                    "note": {"type": "string", "nullable": true},
                },
            }},
        });
        assert_eq!(
            messages(
                schema.clone(),
                json!({"spec": {"replicas": "3", "colour": "pink", "port": true, "note": null}})
            ),
            vec![
                "spec.colour: Unsupported value: \"pink\": supported values: \"red\", \"green\"",
                "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
                "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
            ]
        );
        assert_eq!(
            messages(schema.clone(), json!({"spec": {}})),
            vec!["spec.replicas: Required value"]
        );
        assert_eq!(messages(schema, json!({})), vec!["spec: Required value"]);
    }

    #[test]
    fn bounds_lengths_and_patterns() {
        let schema = spec(json!({
            "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
            "ratio": {"type": "number", "minimum": 0, "exclusiveMinimum": true},
            "name": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
            "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
        }));
        assert_eq!(
            messages(
                schema,
                json!({"spec": {"replicas": 11, "ratio": 0, "name": "ABCDEFG", "tags": ["a", "b", "a"]}})
            ),
            vec![
                "spec.name: Too long: may not be more than 5 bytes",
                "spec.name: Invalid value: \"ABCDEFG\": spec.name in body should match '^[a-z]+$'",
                "spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0",
                "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
                "spec.tags: Too many: 3: must have at most 2 items",
                "spec.tags[2]: Duplicate value: \"a\"",
            ]
        );
    }

    #[test]
    fn map_lists_are_unique_by_their_keys() {
        let schema = spec(json!({"ports": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}},
        }}));
        assert_eq!(
            messages(
                schema,
                json!({"spec": {"ports": [{"name": "http", "port": 80}, {"name": "http", "port": 81}]}})
            ),
            vec!["spec.ports[1]: Duplicate value: {\"name\":\"http\"}"]
        );
    }

    #[test]
    fn maps_validate_every_value() {
        let schema = spec(
            json!({"limits": {"type": "object", "additionalProperties": {"type": "integer"}}}),
        );
        assert_eq!(
            messages(schema, json!({"spec": {"limits": {"a": 1, "b": "x"}}})),
            vec![
                "spec.limits.b: Invalid value: \"string\": spec.limits.b in body must be of type integer: \"string\""
            ]
        );
    }
}
