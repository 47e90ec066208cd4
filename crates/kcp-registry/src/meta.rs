//! Accessors and server-managed fields of `metadata`.

use kcp_storage::Revision;
use serde_json::{Map, Value, json};

/// The `metadata` object, created if missing or not an object (an object that is not a JSON
/// object at all becomes an empty one: the callers' objects always are, requests are checked).
pub fn metadata_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.is_object() {
        *object = json!({});
    }
    if object.get("metadata").is_none_or(|m| !m.is_object())
        && let Some(fields) = object.as_object_mut()
    {
        fields.insert("metadata".into(), json!({}));
    }
    match object.get_mut("metadata") {
        Some(Value::Object(metadata)) => metadata,
        // Both were made objects just above.
        _ => unreachable!("metadata is an object"),
    }
}

/// A string field of `metadata`.
pub fn string<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object.get("metadata")?.get(field)?.as_str()
}

/// The current time as Kubernetes writes `creationTimestamp` and `deletionTimestamp`.
pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// Whole seconds since an RFC 3339 timestamp (as [`now`] writes them), if it parses.
pub fn seconds_since(timestamp: &str) -> Option<i64> {
    let then: jiff::Timestamp = timestamp.parse().ok()?;
    Some(jiff::Timestamp::now().as_second() - then.as_second())
}

pub fn new_uid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Sets `metadata.resourceVersion` (it is never stored, only served). Revision 0 (a dry-run
/// create) leaves it unset.
pub fn set_resource_version(object: &mut Value, revision: Revision) {
    if revision == 0 {
        return;
    }
    metadata_mut(object).insert(
        "resourceVersion".into(),
        Value::String(revision.to_string()),
    );
}

/// Removes `metadata.resourceVersion` before storing.
pub fn take_resource_version(object: &mut Value) -> Option<String> {
    match metadata_mut(object).remove("resourceVersion")? {
        Value::String(rv) if !rv.is_empty() => Some(rv),
        _ => None,
    }
}

/// Whether the object still has finalizers.
pub fn has_finalizers(object: &Value) -> bool {
    object["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty())
}

/// The annotation that names the logical cluster of every object served (never stored: it
/// comes from the storage key).
pub const CLUSTER_ANNOTATION: &str = "kcp.io/cluster";

/// Sets `metadata.annotations["kcp.io/cluster"]`.
pub fn set_cluster_annotation(object: &mut Value, cluster: &str) {
    let metadata = metadata_mut(object);
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Default::default()));
    if !annotations.is_object() {
        *annotations = Value::Object(Default::default());
    }
    if let Some(annotations) = annotations.as_object_mut() {
        annotations.insert(
            CLUSTER_ANNOTATION.into(),
            Value::String(cluster.to_string()),
        );
    }
}

/// Removes `kcp.io/cluster` before an object is stored (and `annotations` if that was all).
pub fn remove_cluster_annotation(object: &mut Value) {
    let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let Some(annotations) = metadata
        .get_mut("annotations")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if annotations.remove(CLUSTER_ANNOTATION).is_some() && annotations.is_empty() {
        metadata.remove("annotations");
    }
}
