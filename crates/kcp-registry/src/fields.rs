//! Writes into JSON objects that never panic: a client (or a stored object written before a
//! rule existed) may put a string, a number or an array where an object is expected, and
//! `value["a"]["b"] = x` panics on those (serde_json's `IndexMut`). These helpers create missing
//! (or `null`) objects on the way and report the first value of the wrong type instead.
//!
//! Must not know: which kind an object is, or how a caller words the error.

use kcp_apimachinery::json::json_type;
use serde_json::{Map, Value};

/// A value of the wrong JSON type where an object was needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrongType {
    /// The dotted path of the value (`spec`, `metadata.annotations`; empty for the root).
    pub field: String,
    /// Its JSON type, as Go's decoder names it (`string`, `number`, `array`, `bool`).
    pub found: &'static str,
}

impl std::fmt::Display for WrongType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let field = if self.field.is_empty() {
            "the object"
        } else {
            &self.field
        };
        write!(f, "{field} must be an object, not {}", self.found)
    }
}

impl std::error::Error for WrongType {}

/// The object at `path` under `value` (`&[]`: `value` itself), created where missing or `null`.
pub fn object_mut<'a>(
    value: &'a mut Value,
    path: &[&str],
) -> Result<&'a mut Map<String, Value>, WrongType> {
    let mut current = value;
    let mut depth = 0;
    loop {
        if current.is_null() {
            *current = Value::Object(Map::new());
        }
        let found = json_type(current);
        let Value::Object(map) = current else {
            return Err(WrongType {
                field: path[..depth].join("."),
                found,
            });
        };
        let Some(field) = path.get(depth) else {
            return Ok(map);
        };
        current = map.entry(field.to_string()).or_insert(Value::Null);
        depth += 1;
    }
}

/// Sets the field at `path` (at least one segment) to `new`, creating missing objects on the way.
pub fn set(value: &mut Value, path: &[&str], new: Value) -> Result<(), WrongType> {
    let Some((last, parents)) = path.split_last() else {
        *value = new;
        return Ok(());
    };
    object_mut(value, parents)?.insert(last.to_string(), new);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn missing_and_null_objects_are_created() {
        let mut value = json!({"spec": null});
        set(&mut value, &["spec", "type", "name"], json!("x")).unwrap();
        set(&mut value, &["status", "phase"], json!("Ready")).unwrap();
        assert_eq!(
            value,
            json!({"spec": {"type": {"name": "x"}}, "status": {"phase": "Ready"}})
        );
        object_mut(&mut value, &["metadata", "labels"])
            .unwrap()
            .insert("a".into(), json!("b"));
        assert_eq!(value["metadata"], json!({"labels": {"a": "b"}}));
    }

    #[test]
    fn values_of_the_wrong_type_are_reported_not_overwritten() {
        for (mut value, field, found) in [
            (json!({"spec": "x"}), "spec", "string"),
            (json!({"spec": 1}), "spec", "number"),
            (json!({"spec": []}), "spec", "array"),
            (json!({"spec": {"type": true}}), "spec.type", "bool"),
            (json!("x"), "", "string"),
        ] {
            let before = value.clone();
            assert_eq!(
                set(&mut value, &["spec", "type", "name"], json!("n")),
                Err(WrongType {
                    field: field.into(),
                    found
                })
            );
            assert_eq!(value, before);
        }
    }
}
