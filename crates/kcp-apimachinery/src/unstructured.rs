//! Reading and writing nested fields of a JSON object by a dotted path, with the errors of
//! `k8s.io/apimachinery/pkg/apis/meta/v1/unstructured` (`NestedInt64`, `NestedString`,
//! `SetNestedField`), which custom resources' scale subresource reports as they are.
//!
//! Paths are given as CRDs write them, `.spec.replicas`; the leading dot is optional.
//! Reads and writes that need no Go error texts use [`crate::object`] (paths as field lists).

use serde_json::{Map, Value};

fn fields(path: &str) -> Vec<&str> {
    path.strip_prefix('.').unwrap_or(path).split('.').collect()
}

/// `.a.b` for the first `n` fields, as the accessor errors name paths.
fn json_path(fields: &[&str]) -> String {
    format!(".{}", fields.join("."))
}

/// A value as Go's `%v` prints its decoded form.
fn go_value(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        Value::Object(fields) => {
            let mut entries: Vec<String> = fields
                .iter()
                .map(|(k, v)| format!("{k}:{}", go_value(v)))
                .collect();
            entries.sort();
            format!("map[{}]", entries.join(" "))
        }
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(go_value).collect::<Vec<_>>().join(" ")
        ),
        other => crate::jsonpath::text(other),
    }
}

/// Go's `%T` of a decoded JSON value (integers decode as int64, other numbers as float64).
fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() || n.is_u64() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// The value at `path`: `Ok(None)` when a field on the way is missing or null, an error when
/// something on the way is not an object.
pub fn nested_field<'a>(object: &'a Value, path: &str) -> Result<Option<&'a Value>, String> {
    let fields = fields(path);
    let mut value = object;
    for (i, field) in fields.iter().enumerate() {
        match value {
            Value::Null => return Ok(None),
            Value::Object(map) => match map.get(*field) {
                Some(next) => value = next,
                None => return Ok(None),
            },
            other => {
                return Err(format!(
                    "{} accessor error: {} is of the type {}, expected map[string]interface{{}}",
                    json_path(&fields[..=i]),
                    go_value(other),
                    go_type(other)
                ));
            }
        }
    }
    Ok(Some(value))
}

fn expected(path: &str, value: &Value, want: &str) -> String {
    format!(
        "{} accessor error: {} is of the type {}, expected {want}",
        json_path(&fields(path)),
        go_value(value),
        go_type(value)
    )
}

/// `NestedInt64`: the integer at `path`, `None` if absent.
pub fn nested_int64(object: &Value, path: &str) -> Result<Option<i64>, String> {
    match nested_field(object, path)? {
        None => Ok(None),
        Some(value) => value
            .as_i64()
            .map(Some)
            .ok_or_else(|| expected(path, value, "int64")),
    }
}

/// `NestedString`: the string at `path`, `None` if absent.
pub fn nested_string<'a>(object: &'a Value, path: &str) -> Result<Option<&'a str>, String> {
    match nested_field(object, path)? {
        None => Ok(None),
        Some(value) => value
            .as_str()
            .map(Some)
            .ok_or_else(|| expected(path, value, "string")),
    }
}

/// `SetNestedField`: sets `path` to `value`, making the objects on the way (a null or missing
/// field becomes an object); an error if something on the way is not an object.
pub fn set_nested_field(object: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let fields = fields(path);
    let mut current = object;
    for (i, field) in fields.iter().enumerate() {
        if current.is_null() {
            *current = Value::Object(Map::new());
        }
        let Value::Object(map) = current else {
            return Err(format!(
                "value cannot be set because {} is not a map[string]interface{{}}",
                json_path(&fields[..i])
            ));
        };
        if i == fields.len() - 1 {
            map.insert(field.to_string(), value);
            return Ok(());
        }
        current = map.entry(field.to_string()).or_insert(Value::Null);
    }
    Ok(())
}

/// `value` as Go's `%#v` prints an unstructured value (what a field error shows for a value
/// that is not a string or a number): `map[string]interface {}{"a":"x", "b":1}`,
/// `[]interface {}{"a"}`, `interface {}(nil)`.
pub fn go_sharp(value: &Value) -> String {
    match value {
        Value::Null => "interface {}(nil)".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => serde_json::to_string(s).unwrap_or_default(),
        Value::Array(items) => format!(
            "[]interface {{}}{{{}}}",
            items.iter().map(go_sharp).collect::<Vec<_>>().join(", ")
        ),
        Value::Object(fields) => {
            let mut keys: Vec<&String> = fields.keys().collect();
            keys.sort();
            let entries: Vec<String> = keys
                .into_iter()
                .map(|key| {
                    let key_text = serde_json::to_string(key).unwrap_or_default();
                    format!("{key_text}:{}", go_sharp(&fields[key]))
                })
                .collect();
            format!("map[string]interface {{}}{{{}}}", entries.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reads_integers_and_strings_with_apimachinerys_errors() {
        let object = json!({"spec": {"replicas": 3, "name": "x", "ratio": 1.5, "list": [1]}});
        assert_eq!(nested_int64(&object, ".spec.replicas"), Ok(Some(3)));
        assert_eq!(nested_int64(&object, "spec.replicas"), Ok(Some(3)));
        assert_eq!(nested_int64(&object, ".spec.missing"), Ok(None));
        assert_eq!(nested_int64(&object, ".status.replicas"), Ok(None));
        assert_eq!(
            nested_int64(&object, ".spec.name"),
            Err(".spec.name accessor error: x is of the type string, expected int64".into())
        );
        assert_eq!(
            nested_int64(&object, ".spec.ratio"),
            Err(".spec.ratio accessor error: 1.5 is of the type float64, expected int64".into())
        );
        assert_eq!(
            nested_int64(&object, ".spec.name.deeper"),
            Err(".spec.name.deeper accessor error: x is of the type string, expected map[string]interface{}".into())
        );
        assert_eq!(nested_string(&object, ".spec.name"), Ok(Some("x")));
        assert_eq!(
            nested_string(&object, ".spec.list"),
            Err(
                ".spec.list accessor error: [1] is of the type []interface {}, expected string"
                    .into()
            )
        );
    }

    #[test]
    fn sets_fields_making_the_objects_on_the_way() {
        let mut object = json!({"spec": {"other": 1}, "status": null});
        set_nested_field(&mut object, ".spec.replicas", json!(5)).unwrap();
        set_nested_field(&mut object, ".status.deep.replicas", json!(2)).unwrap();
        assert_eq!(
            object,
            json!({"spec": {"other": 1, "replicas": 5}, "status": {"deep": {"replicas": 2}}})
        );
        let mut odd = json!({"spec": "text"});
        assert_eq!(
            set_nested_field(&mut odd, ".spec.replicas", json!(1)),
            Err("value cannot be set because .spec is not a map[string]interface{}".into())
        );
    }
}
