//! Reading and writing fields of JSON objects (`serde_json::Value`), the one place every crate
//! does it.
//!
//! Reads never fail: a path is a list of field names walked from the value, and anything missing
//! on the way, or of another JSON type than asked for, reads as absent (`None`, `""`, `false`, no
//! strings). Use them where the shape was already checked (decoding refuses wrong JSON types with
//! a 400 before any rule runs) or where a wrong shape simply means "not set".
//!
//! Writes never panic: a client (or a stored object written before a rule existed) may put a
//! string, a number or an array where an object is expected, and `value["a"]["b"] = x` panics on
//! those (serde_json's `IndexMut`). [`object_mut`] and [`set`] create missing (or `null`) objects
//! on the way and report the first value of the wrong type as [`WrongType`] instead.
//!
//! Reads and writes that must answer with `k8s.io/apimachinery`'s accessor errors (the scale
//! subresource) are next door, in [`crate::unstructured`].
//!
//! Must not know: which kind an object is, or how a caller words an error.

use serde_json::{Map, Value};

use crate::json::json_type;

/// The value at `path` under `value` (`&[]`: `value` itself); `None` when a field on the way is
/// missing or not an object.
pub fn at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(value, |value, field| value.get(field))
}

/// The value at a dotted path (`metadata.name`), as [`at`] reads it.
pub fn at_dotted<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .try_fold(value, |value, field| value.get(field))
}

/// The string at `path`, or `""` when it is absent or not a string.
pub fn str_at<'a>(value: &'a Value, path: &[&str]) -> &'a str {
    at(value, path).and_then(Value::as_str).unwrap_or_default()
}

/// The integer at `path`, if there is one that fits an `i64`.
pub fn i64_at(value: &Value, path: &[&str]) -> Option<i64> {
    at(value, path).and_then(Value::as_i64)
}

/// The boolean at `path`, if there is one.
pub fn bool_at(value: &Value, path: &[&str]) -> Option<bool> {
    at(value, path).and_then(Value::as_bool)
}

/// The string field `field` of `value`, or `""` when it is absent or not a string (the
/// one-field [`str_at`], for the common `value[field].as_str().unwrap_or_default()`).
pub fn text<'a>(value: &'a Value, field: &str) -> &'a str {
    value.get(field).and_then(Value::as_str).unwrap_or_default()
}

/// Whether the field `field` of `value` is `true` (absent or not a boolean: `false`).
pub fn flag(value: &Value, field: &str) -> bool {
    value.get(field).and_then(Value::as_bool).unwrap_or(false)
}

/// The items of the array `value` as strings, one per item, so that item `i` of the answer is
/// item `i` of the array and field paths built from its positions stay right. An item that is
/// not a string reads as `""`: a `null` item, as Go decodes it into a `[]string`, and any other
/// type, which decoding already refused with a 400. Not an array: no strings.
pub fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .into_iter()
        .flatten()
        .map(|item| item.as_str().unwrap_or_default().to_string())
        .collect()
}

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

/// Sets the field at `path` to `new` (`&[]`: replaces `value`), creating missing objects on the
/// way.
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
    fn reads_by_path() {
        let value = json!({
            "metadata": {"name": "a", "generation": 3, "labels": {"x": "y"}},
            "spec": {"paused": true, "list": ["a", 1, null, "b"], "text": 5},
            "items": [{"name": "i"}],
        });
        assert_eq!(at(&value, &[]), Some(&value));
        assert_eq!(
            at(&value, &["metadata", "labels"]),
            Some(&json!({"x": "y"}))
        );
        assert_eq!(at(&value, &["metadata", "name", "deeper"]), None);
        assert_eq!(at(&value, &["items", "0"]), None);
        assert_eq!(at(&value, &["missing", "name"]), None);
        assert_eq!(at_dotted(&value, "metadata.labels.x"), Some(&json!("y")));
        assert_eq!(at_dotted(&value, "metadata.nope"), None);

        assert_eq!(str_at(&value, &["metadata", "name"]), "a");
        assert_eq!(str_at(&value, &["metadata", "generation"]), "");
        assert_eq!(str_at(&value, &["spec", "missing"]), "");
        assert_eq!(i64_at(&value, &["metadata", "generation"]), Some(3));
        assert_eq!(i64_at(&value, &["metadata", "name"]), None);
        assert_eq!(bool_at(&value, &["spec", "paused"]), Some(true));
        assert_eq!(bool_at(&value, &["spec", "text"]), None);

        assert_eq!(text(&value["metadata"], "name"), "a");
        assert_eq!(text(&value["spec"], "text"), "");
        assert_eq!(text(&json!("scalar"), "name"), "");
        assert!(flag(&value["spec"], "paused"));
        assert!(!flag(&value["spec"], "text"));
        assert!(!flag(&value["spec"], "missing"));
    }

    #[test]
    fn strings_keep_the_positions_of_the_array() {
        assert_eq!(strings(&json!(["a", 1, null, "b"])), vec!["a", "", "", "b"]);
        assert_eq!(strings(&json!([])), Vec::<String>::new());
        assert_eq!(strings(&json!("a")), Vec::<String>::new());
        assert_eq!(strings(&Value::Null), Vec::<String>::new());
    }

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
        let mut root = Value::Null;
        set(&mut root, &[], json!({"a": 1})).unwrap();
        assert_eq!(root, json!({"a": 1}));
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
        assert_eq!(
            WrongType {
                field: "spec".into(),
                found: "string"
            }
            .to_string(),
            "spec must be an object, not string"
        );
        assert_eq!(
            WrongType {
                field: String::new(),
                found: "array"
            }
            .to_string(),
            "the object must be an object, not array"
        );
    }
}
