//! Patches as Kubernetes applies them: JSON patch (RFC 6902, [`json`]), JSON merge patch
//! (RFC 7386) and strategic merge patch ([`strategic`]), chosen by the request's content type.
//!
//! No patch produces an object deeper than [`crate::json::MAX_DEPTH`] (422 with
//! `exceeded max depth of 100`), and none recurses deeper than its own inputs: merge patches
//! recurse along the patch document, whose depth is checked before they start.

pub mod json;
pub mod strategic;

use serde_json::{Map, Value};

use crate::json::{MAX_DEPTH, depth_message, exceeds_depth};

pub use json::{MAX_COPY_BYTES, MAX_JSON_PATCH_OPERATIONS};

/// Patch kinds by their content type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Json,
    Merge,
    Strategic,
    Apply,
}

impl PatchType {
    /// The patch type a `Content-Type` media type names.
    pub fn from_media_type(media: &str) -> Option<PatchType> {
        match media {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => {
                Some(PatchType::Apply)
            }
            _ => None,
        }
    }
}

/// Why a patch could not be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatchError {
    /// The patch document itself is malformed (400).
    #[error("{0}")]
    Malformed(String),
    /// The patch is well-formed but cannot apply to this object (422 for JSON patch tests and
    /// missing paths).
    #[error("{0}")]
    NotApplicable(String),
    /// More operations than a JSON patch may carry (413).
    #[error("{0}")]
    TooLarge(String),
}

/// Applies an RFC 6902 JSON patch to `object`; all or nothing (see [`json`] for its limits).
pub fn json_patch(object: &Value, patch: &Value) -> Result<Value, PatchError> {
    json::apply(object, patch)
}

/// Applies an RFC 7386 merge patch to `object`.
pub fn merge_patch(object: &Value, patch: &Value) -> Result<Value, PatchError> {
    let Value::Object(fields) = patch else {
        return Err(PatchError::Malformed(
            "merge patch must be a JSON object".into(),
        ));
    };
    // A patch one level deeper than the limit can still only delete there; deeper ones would
    // build objects past it.
    check_patch_depth(patch)?;
    let mut patched = object.clone();
    merge_fields(&mut patched, fields);
    check_result_depth(&patched)?;
    Ok(patched)
}

/// Refuses patch documents whose depth alone would take a result past the limit.
pub(crate) fn check_patch_depth(patch: &Value) -> Result<(), PatchError> {
    if exceeds_depth(patch, MAX_DEPTH + 1) {
        return Err(PatchError::NotApplicable(depth_message()));
    }
    Ok(())
}

/// Refuses results deeper than the limit.
pub(crate) fn check_result_depth(patched: &Value) -> Result<(), PatchError> {
    if exceeds_depth(patched, MAX_DEPTH) {
        return Err(PatchError::NotApplicable(depth_message()));
    }
    Ok(())
}

/// RFC 7386 on one object; recursion follows the patch's objects.
fn merge_fields(target: &mut Value, patch: &Map<String, Value>) {
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(fields) = target else {
        return;
    };
    for (key, value) in patch {
        match value {
            Value::Null => {
                fields.remove(key);
            }
            Value::Object(inner) => {
                merge_fields(fields.entry(key.clone()).or_insert(Value::Null), inner);
            }
            other => {
                fields.insert(key.clone(), other.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn json_patches_apply_atomically() {
        let object = json!({"data": {"a": "1"}});
        let patched = json_patch(
            &object,
            &json!([{"op": "add", "path": "/data/b", "value": "2"}]),
        )
        .unwrap();
        assert_eq!(patched, json!({"data": {"a": "1", "b": "2"}}));
        let failing = json!([{"op": "add", "path": "/data/c", "value": "3"}, {"op": "test", "path": "/data/a", "value": "x"}]);
        assert!(matches!(
            json_patch(&object, &failing),
            Err(PatchError::NotApplicable(_))
        ));
        assert!(matches!(
            json_patch(&object, &json!({"op": "add"})),
            Err(PatchError::Malformed(_))
        ));
    }

    #[test]
    fn merge_patches_set_and_delete_keys() {
        let object = json!({"data": {"a": "1", "b": "2"}, "list": [1, 2]});
        let patched = merge_patch(
            &object,
            &json!({"data": {"a": null, "c": "3"}, "list": [3]}),
        )
        .unwrap();
        assert_eq!(patched, json!({"data": {"b": "2", "c": "3"}, "list": [3]}));
        assert!(merge_patch(&object, &json!([1])).is_err());
        assert_eq!(
            merge_patch(&json!({"a": 1}), &json!({"a": {"b": {"c": null}}})).unwrap(),
            json!({"a": {"b": {}}})
        );
    }

    fn nested(levels: usize) -> Value {
        let mut value = json!({});
        for _ in 1..levels {
            value = json!({ "n": value });
        }
        value
    }

    #[test]
    fn merge_patch_results_stay_within_the_depth_limit() {
        // The root object is one level: the patch's value may add 99.
        let fits = json!({ "n": nested(MAX_DEPTH - 1) });
        assert!(merge_patch(&json!({}), &fits).is_ok());
        let over = json!({ "n": nested(MAX_DEPTH) });
        assert_eq!(
            merge_patch(&json!({}), &over),
            Err(PatchError::NotApplicable(
                "exceeded max depth of 100".into()
            ))
        );
        // Deep patches are refused before any recursion, deep results after.
        let far_over = json!({ "n": nested(MAX_DEPTH + 50) });
        assert!(merge_patch(&json!({}), &far_over).is_err());
        // A stored object deeper than the limit can be made shallower by a patch.
        let legacy = json!({"keep": 1, "deep": nested(MAX_DEPTH + 20)});
        assert_eq!(
            merge_patch(&legacy, &json!({"deep": null})).unwrap(),
            json!({"keep": 1})
        );
        assert!(merge_patch(&legacy, &json!({"keep": 2})).is_err());
    }

    #[test]
    fn content_types_name_patch_types() {
        assert_eq!(
            PatchType::from_media_type("application/strategic-merge-patch+json"),
            Some(PatchType::Strategic)
        );
        assert_eq!(PatchType::from_media_type("application/json"), None);
    }
}
