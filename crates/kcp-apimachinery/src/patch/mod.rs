//! Patches as Kubernetes applies them: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and
//! strategic merge patch ([`strategic`]), chosen by the request's content type.

pub mod strategic;

use serde_json::Value;

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
}

/// Most operations a JSON patch may carry, as kube-apiserver limits them.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// Applies an RFC 6902 JSON patch to `object`; all or nothing.
pub fn json_patch(object: &Value, patch: &Value) -> Result<Value, PatchError> {
    let operations = patch.as_array().ok_or_else(|| {
        PatchError::Malformed("json patch must be a JSON array of operations".into())
    })?;
    if operations.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::Malformed(format!(
            "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
            operations.len()
        )));
    }
    let patch: json_patch::Patch = serde_json::from_value(patch.clone())
        .map_err(|e| PatchError::Malformed(format!("invalid json patch: {e}")))?;
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &patch)
        .map_err(|e| PatchError::NotApplicable(e.to_string()))?;
    Ok(patched)
}

/// Applies an RFC 7386 merge patch to `object`.
pub fn merge_patch(object: &Value, patch: &Value) -> Result<Value, PatchError> {
    if !patch.is_object() {
        return Err(PatchError::Malformed(
            "merge patch must be a JSON object".into(),
        ));
    }
    let mut patched = object.clone();
    json_patch::merge(&mut patched, patch);
    Ok(patched)
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
