//! Conditions of an object's status, as Kubernetes writes them: one per type, whose
//! `lastTransitionTime` moves only when the status changes.

use serde_json::{Value, json};

/// A condition to set.
#[derive(Clone)]
pub(crate) struct Condition<'a> {
    pub kind: &'a str,
    pub status: bool,
    pub reason: &'a str,
    pub message: String,
}

/// The condition `kind` of `status`, if present.
pub(crate) fn find<'a>(status: &'a Value, kind: &str) -> Option<&'a Value> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// Whether `status` already has `condition` (same status, reason and message).
pub(crate) fn holds(status: &Value, condition: &Condition<'_>) -> bool {
    let value = if condition.status { "True" } else { "False" };
    find(status, condition.kind).is_some_and(|old| {
        old["status"] == value
            && old["reason"].as_str().unwrap_or_default() == condition.reason
            && old["message"].as_str().unwrap_or_default() == condition.message
    })
}

/// Sets a condition in `status.conditions`, keeping its transition time if the status stays.
pub(crate) fn set(status: &mut Value, condition: Condition<'_>) {
    let value = if condition.status { "True" } else { "False" };
    let since = match find(status, condition.kind) {
        Some(old) if old["status"] == value => old["lastTransitionTime"].clone(),
        _ => json!(kcp_registry::now()),
    };
    let mut next = json!({
        "type": condition.kind,
        "status": value,
        "lastTransitionTime": since,
    });
    // Empty reasons and messages are left out, as Go's omitempty does.
    if !condition.reason.is_empty() {
        next["reason"] = json!(condition.reason);
    }
    if !condition.message.is_empty() {
        next["message"] = json!(condition.message);
    }
    if !status["conditions"].is_array() {
        status["conditions"] = json!([]);
    }
    if let Some(conditions) = status["conditions"].as_array_mut() {
        match conditions.iter_mut().find(|c| c["type"] == condition.kind) {
            Some(old) => *old = next,
            None => conditions.push(next),
        }
    }
}
