//! Reading part of a JSON object: the fields a [`Projection`] names are decoded, everything
//! else is skipped without being built. A Table's cells need a few fields of each object
//! (its name, its age, what the printer columns point at); decoding the whole object for them
//! would build its managedFields and annotations only to drop them again.
//!
//! One field of the top level can also be handed back as its bytes ([`project`]'s `raw`), for
//! a caller that copies it into its answer as it is (a Table row's metadata).
//!
//! What a projection yields is exactly the object's value with everything outside the
//! projection left out: a field the projection names is read whole where the projection ends
//! (or wherever the value is not an object), and a duplicate key keeps its last value, as a
//! full decode does. Bytes that are not JSON, or nest deeper than serde_json's recursion
//! limit, yield `None`: the caller decodes them the usual way.
//!
//! Must not know: HTTP, storage, which kinds exist.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::Key;

/// The part of an object to read: the whole of it, or some of its fields, each with its own
/// projection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Projection {
    Whole,
    Fields(BTreeMap<String, Projection>),
}

impl Default for Projection {
    /// Nothing at all (an object of no fields).
    fn default() -> Projection {
        Projection::Fields(BTreeMap::new())
    }
}

impl Projection {
    /// Adds the value at the end of this path of field names, whole (an empty path: the whole
    /// object).
    pub fn include<'p>(&mut self, path: impl IntoIterator<Item = &'p str>) {
        let mut at = self;
        for name in path {
            match at {
                Projection::Whole => return,
                Projection::Fields(fields) => {
                    at = fields.entry(name.to_string()).or_default();
                }
            }
        }
        *at = Projection::Whole;
    }
}

/// The projected value of the JSON object in `bytes`, and the bytes of its top-level field
/// `raw` if it has one (the last, if it has several). `None` when `bytes` is not JSON (or too
/// deep to read).
pub fn project<'a>(
    bytes: &'a [u8],
    projection: &Projection,
    raw: &str,
) -> Option<(Value, Option<&'a RawValue>)> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let top = Top { projection, raw };
    let projected = top.deserialize(&mut deserializer).ok()?;
    deserializer.end().ok()?;
    Some(projected)
}

static WHOLE: Projection = Projection::Whole;

/// The top level: a projected object that also keeps one field's bytes.
struct Top<'p> {
    projection: &'p Projection,
    raw: &'p str,
}

impl<'de, 'p> DeserializeSeed<'de> for Top<'p> {
    type Value = (Value, Option<&'de RawValue>);

    fn deserialize<D: de::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, 'p> Visitor<'de> for Top<'p> {
    type Value = (Value, Option<&'de RawValue>);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let fields = match self.projection {
            Projection::Fields(fields) => Some(fields),
            Projection::Whole => None,
        };
        let mut object = Map::new();
        let mut raw = None;
        while let Some(Key(name)) = map.next_key::<Key<'de>>()? {
            let wanted = match fields {
                Some(fields) => fields.get(&*name),
                None => Some(&WHOLE),
            };
            if *name == *self.raw {
                let bytes: &'de RawValue = map.next_value()?;
                raw = Some(bytes);
                if let Some(projection) = wanted {
                    let value = project_value(bytes.get().as_bytes(), projection)
                        .map_err(de::Error::custom)?;
                    object.insert(name.into_owned(), value);
                }
                continue;
            }
            match wanted {
                Some(projection) => {
                    let value = map.next_value_seed(Projected(projection))?;
                    object.insert(name.into_owned(), value);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((Value::Object(object), raw))
    }
}

fn project_value(bytes: &[u8], projection: &Projection) -> Result<Value, serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = Projected(projection).deserialize(&mut deserializer)?;
    deserializer.end()?;
    Ok(value)
}

/// A value read as far as its projection reaches.
struct Projected<'p>(&'p Projection);

impl<'de> DeserializeSeed<'de> for Projected<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        match self.0 {
            Projection::Whole => Value::deserialize(deserializer),
            Projection::Fields(fields) => deserializer.deserialize_any(Sparse(fields)),
        }
    }
}

/// An object's named fields; any other value whole (a projection into it reaches nothing of it
/// that a path could select apart from the value itself).
struct Sparse<'p>(&'p BTreeMap<String, Projection>);

impl<'de> Visitor<'de> for Sparse<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            match self.0.get(&*key) {
                Some(projection) => {
                    let value = map.next_value_seed(Projected(projection))?;
                    object.insert(key.into_owned(), value);
                }
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Value::Object(object))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Value>()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_bool<E: de::Error>(self, value: bool) -> Result<Value, E> {
        Ok(Value::Bool(value))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Value, E> {
        Ok(Value::from(value))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Value, E> {
        Ok(Value::String(value.to_string()))
    }

    fn visit_string<E: de::Error>(self, value: String) -> Result<Value, E> {
        Ok(Value::String(value))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn projection(paths: &[&[&str]]) -> Projection {
        let mut projection = Projection::default();
        for path in paths {
            projection.include(path.iter().copied());
        }
        projection
    }

    fn projected(value: &Value, paths: &[&[&str]]) -> Value {
        let bytes = serde_json::to_vec(value).unwrap();
        project(&bytes, &projection(paths), "").unwrap().0
    }

    #[test]
    fn only_the_named_fields_are_read_each_whole() {
        let object = json!({
            "metadata": {"name": "a", "creationTimestamp": "2024-01-01T00:00:00Z",
                         "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}],
                         "labels": {"x": "1", "y": "2"}},
            "spec": {"type": {"name": "universal", "path": "root"}, "URL": "https://h"},
            "status": {"phase": "Ready", "conditions": [{"type": "Ready"}]},
        });
        let got = projected(
            &object,
            &[
                &["metadata", "name"],
                &["metadata", "labels", "x"],
                &["spec", "type"],
                &["status", "phase"],
                &["nothing", "here"],
            ],
        );
        assert_eq!(
            got,
            json!({
                "metadata": {"name": "a", "labels": {"x": "1"}},
                "spec": {"type": {"name": "universal", "path": "root"}},
                "status": {"phase": "Ready"},
            })
        );
    }

    #[test]
    fn a_value_that_is_not_an_object_is_read_whole() {
        let object = json!({"spec": [1, {"a": 2}], "status": "odd", "n": 1.5, "m": -3,
                            "z": null, "b": true});
        let paths: &[&[&str]] = &[
            &["spec", "a"],
            &["status", "phase"],
            &["n", "x"],
            &["m", "x"],
            &["z", "x"],
            &["b", "x"],
        ];
        assert_eq!(projected(&object, paths), object);
    }

    #[test]
    fn the_whole_projection_and_an_empty_path_read_everything() {
        let object = json!({"a": {"b": [1, 2]}, "c": "d"});
        assert_eq!(projected(&object, &[&[]]), object);
        let bytes = serde_json::to_vec(&object).unwrap();
        assert_eq!(project(&bytes, &Projection::Whole, "").unwrap().0, object);
        // A longer path under one already whole changes nothing.
        assert_eq!(
            projected(&object, &[&["a"], &["a", "b"]]),
            json!({"a": {"b": [1, 2]}})
        );
    }

    #[test]
    fn the_raw_field_comes_back_as_its_bytes_and_projected_too() {
        let text = br#"{"kind":"W","metadata":{"name":"a\"b","managedFields":[{"m":1}]},"z":[]}"#;
        let projection = projection(&[&["metadata", "name"]]);
        let (value, raw) = project(text, &projection, "metadata").unwrap();
        assert_eq!(value, json!({"metadata": {"name": "a\"b"}}));
        assert_eq!(
            raw.unwrap().get(),
            r#"{"name":"a\"b","managedFields":[{"m":1}]}"#
        );
        // Kept as bytes even when nothing of it is projected.
        let (value, raw) = project(text, &Projection::default(), "metadata").unwrap();
        assert_eq!(value, json!({}));
        assert!(raw.is_some());
        let (_, raw) = project(br#"{"kind":"W"}"#, &projection, "metadata").unwrap();
        assert!(raw.is_none());
    }

    #[test]
    fn escaped_keys_and_duplicates_read_as_a_full_decode_reads_them() {
        let text = br#"{"sp\u0065c":{"a":1},"spec":{"a":2,"b":3},"x":{"a":0}}"#;
        let full: Value = serde_json::from_slice(text).unwrap();
        let projection = projection(&[&["spec", "a"]]);
        let (value, _) = project(text, &projection, "").unwrap();
        assert_eq!(value, json!({"spec": {"a": full["spec"]["a"].clone()}}));
    }

    #[test]
    fn what_is_not_json_or_too_deep_is_refused() {
        let projection = projection(&[&["a"]]);
        for bad in [&b"{"[..], b"[]", b"{\"a\":1} x", b"{\"a\":}", b"\xff"] {
            assert!(project(bad, &projection, "").is_none(), "{bad:?}");
        }
        // Deeper than serde_json reads where it is projected; skipped, however deep, where not.
        let deep = |key: &str, levels: usize| {
            format!(
                "{{\"{key}\":{}1{}}}",
                "[".repeat(levels),
                "]".repeat(levels)
            )
        };
        assert!(project(deep("a", 200).as_bytes(), &projection, "").is_none());
        assert!(project(deep("a", 100).as_bytes(), &projection, "").is_some());
        let skipped = deep("b", 100_000);
        let (value, _) = project(skipped.as_bytes(), &projection, "").unwrap();
        assert_eq!(value, json!({}));
    }
}
