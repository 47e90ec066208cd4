//! Conditions of an object's status, as Kubernetes writes them: one per type, whose
//! `lastTransitionTime` moves only when the status changes. Setting a condition that already
//! holds (same status, reason and message) changes nothing at all, so the write that would
//! carry it is skipped by the registry and wakes no watcher.

use kcp_apimachinery::object;
use serde_json::{Map, Value, json};

/// A condition to set.
#[derive(Clone)]
pub(crate) struct Condition<'a> {
    pub kind: &'a str,
    pub status: bool,
    pub reason: &'a str,
    pub message: String,
}

impl Condition<'_> {
    fn status_text(&self) -> &'static str {
        if self.status { "True" } else { "False" }
    }
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
    find(status, condition.kind).is_some_and(|old| same(old, condition))
}

fn same(old: &Value, condition: &Condition<'_>) -> bool {
    old["status"] == condition.status_text()
        && object::text(old, "reason") == condition.reason
        && object::text(old, "message") == condition.message
}

/// Sets a condition in the `status` object's `conditions`, keeping its transition time if the
/// status stays; answers whether anything changed (nothing does when it already holds).
pub(crate) fn set(status: &mut Map<String, Value>, condition: Condition<'_>) -> bool {
    let value = condition.status_text();
    let conditions = status.entry("conditions").or_insert_with(|| json!([]));
    if !conditions.is_array() {
        *conditions = json!([]);
    }
    let Some(conditions) = conditions.as_array_mut() else {
        return false;
    };
    let old = conditions.iter_mut().find(|c| c["type"] == condition.kind);
    if old.as_deref().is_some_and(|old| same(old, &condition)) {
        return false;
    }
    let since = match &old {
        Some(old) if old["status"] == value => old["lastTransitionTime"].clone(),
        _ => json!(kcp_registry::now()),
    };
    let mut next = Map::new();
    next.insert("type".into(), json!(condition.kind));
    next.insert("status".into(), json!(value));
    next.insert("lastTransitionTime".into(), since);
    // Empty reasons and messages are left out, as Go's omitempty does.
    if !condition.reason.is_empty() {
        next.insert("reason".into(), json!(condition.reason));
    }
    if !condition.message.is_empty() {
        next.insert("message".into(), json!(condition.message));
    }
    match old {
        Some(old) => *old = Value::Object(next),
        None => conditions.push(Value::Object(next)),
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(status: bool, reason: &'static str, message: &str) -> Condition<'static> {
        Condition {
            kind: "Ready",
            status,
            reason,
            message: message.into(),
        }
    }

    #[test]
    fn a_condition_that_holds_changes_nothing() {
        let old = json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Fine",
            "message": "ok", "lastTransitionTime": "2024-01-01T00:00:00Z", "severity": "Info"}]});
        let mut status = old.as_object().cloned().unwrap();
        assert!(!set(&mut status, ready(true, "Fine", "ok")));
        assert_eq!(Value::Object(status), old);
    }

    #[test]
    fn the_transition_time_moves_only_with_the_status() {
        let mut status =
            json!({"conditions": [{"type": "Ready", "status": "True", "reason": "Fine",
            "lastTransitionTime": "2024-01-01T00:00:00Z"}]})
            .as_object()
            .cloned()
            .unwrap();
        assert!(set(&mut status, ready(true, "Other", "why")));
        let condition = &status["conditions"][0];
        assert_eq!(condition["lastTransitionTime"], "2024-01-01T00:00:00Z");
        assert_eq!(
            (&condition["reason"], &condition["message"]),
            (&json!("Other"), &json!("why"))
        );
        assert!(set(&mut status, ready(false, "Broken", "")));
        let condition = &status["conditions"][0];
        assert_ne!(condition["lastTransitionTime"], "2024-01-01T00:00:00Z");
        assert!(condition.get("message").is_none());
        assert_eq!(status["conditions"].as_array().map(Vec::len), Some(1));
    }

    #[test]
    fn conditions_of_the_wrong_type_are_replaced() {
        let mut status = json!({"conditions": "x"}).as_object().cloned().unwrap();
        assert!(set(&mut status, ready(true, "", "")));
        assert_eq!(status["conditions"][0]["type"], "Ready");
    }
}
