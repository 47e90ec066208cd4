//! What every kind's Table shares: the [`Column`] type, the `Name`, `Age` and `Created At`
//! columns, and the cell helpers the printers of kube-apiserver use (ages as kubectl prints
//! them, entry counts, `<none>` for empty; strings at a path are read with
//! [`kcp_apimachinery::object`]). Each kind declares its own columns and cells in its rule set
//! ([`super::Kind::columns`], [`super::Kind::cells`]).
//!
//! Kinds without a printer upstream get the default convertor's `Name`, `Created At` (roles,
//! cluster roles, CRDs) or, with no rule set at all, `Name`, `Age`. The server always fills
//! every column; kubectl hides the wide ones.

use jiff::Timestamp;
use kcp_apimachinery::object;
use serde_json::{Value, json};

/// One column of a Table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    pub name: &'static str,
    /// The OpenAPI type: `string`, `integer`, `date`, ...
    pub kind: &'static str,
    pub format: &'static str,
    pub description: &'static str,
    pub priority: u8,
}

impl Column {
    pub fn to_json(self) -> Value {
        json!({
            "name": self.name,
            "type": self.kind,
            "format": self.format,
            "description": self.description,
            "priority": self.priority,
        })
    }
}

pub const fn col(name: &'static str, kind: &'static str, description: &'static str) -> Column {
    Column {
        name,
        kind,
        format: "",
        description,
        priority: 0,
    }
}

pub const fn wide(name: &'static str, kind: &'static str, description: &'static str) -> Column {
    Column {
        priority: 1,
        ..col(name, kind, description)
    }
}

pub const NAME: Column = Column {
    format: "name",
    ..col(
        "Name",
        "string",
        "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated.",
    )
};
pub const AGE: Column = col(
    "Age",
    "string",
    "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.",
);
pub const CREATED_AT: Column = Column {
    name: "Created At",
    kind: "date",
    ..AGE
};

pub const NAME_AGE: &[Column] = &[NAME, AGE];
pub const NAME_CREATED_AT: &[Column] = &[NAME, CREATED_AT];

/// The Name cell.
pub fn name(object: &Value) -> Value {
    json!(object::str_at(object, &["metadata", "name"]))
}

/// The Age cell.
pub fn age(object: &Value, now: Timestamp) -> Value {
    json!(since(object["metadata"]["creationTimestamp"].as_str(), now))
}

/// How many entries the map or list at `path` has (0 when absent).
pub fn count(object: &Value, path: &[&str]) -> usize {
    match object::at(object, path) {
        Some(Value::Object(map)) => map.len(),
        Some(Value::Array(items)) => items.len(),
        _ => 0,
    }
}

pub fn or_none(text: &str) -> &str {
    if text.is_empty() { "<none>" } else { text }
}

/// How long ago `timestamp` was, as kubectl prints ages; `<unknown>` when absent or unreadable.
pub fn since(timestamp: Option<&str>, now: Timestamp) -> String {
    match timestamp.and_then(|t| t.parse::<Timestamp>().ok()) {
        Some(then) => human_duration(now.as_second() - then.as_second()),
        None => "<unknown>".to_string(),
    }
}

/// The creation time in RFC 3339 UTC, as the default Table convertor prints it.
pub fn created_at(object: &Value) -> String {
    object["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(|t| t.parse::<Timestamp>().ok())
        .map_or_else(
            || "0001-01-01T00:00:00Z".to_string(),
            |t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        )
}

/// Durations as Kubernetes prints them (apimachinery's `HumanDuration`): `45s`, `3m20s`, `2h10m`,
/// `5d`, `2y30d`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    let s = seconds.max(0);
    if s < 120 {
        return format!("{s}s");
    }
    let m = s / 60;
    if m < 10 {
        return match s % 60 {
            0 => format!("{m}m"),
            rest => format!("{m}m{rest}s"),
        };
    }
    if m < 180 {
        return format!("{m}m");
    }
    let h = s / 3600;
    if h < 8 {
        return match m % 60 {
            0 => format!("{h}h"),
            rest => format!("{h}h{rest}m"),
        };
    }
    if h < 48 {
        return format!("{h}h");
    }
    if h < 24 * 8 {
        return match h % 24 {
            0 => format!("{}d", h / 24),
            rest => format!("{}d{rest}h", h / 24),
        };
    }
    if h < 24 * 365 * 2 {
        return format!("{}d", h / 24);
    }
    if h < 24 * 365 * 8 {
        let years = h / 24 / 365;
        return match (h / 24) % 365 {
            0 => format!("{years}y"),
            days => format!("{years}y{days}d"),
        };
    }
    format!("{}y", h / 24 / 365)
}

/// The cells of the default Table convertor: Name, Created At.
pub fn name_created_at(object: &Value) -> Vec<Value> {
    vec![name(object), json!(created_at(object))]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(200), "3m20s");
        assert_eq!(human_duration(300), "5m");
        assert_eq!(human_duration(3600), "60m");
        assert_eq!(human_duration(4 * 3600 + 60), "4h1m");
        assert_eq!(human_duration(30 * 3600), "30h");
        assert_eq!(human_duration(3 * 86400 + 3600), "3d1h");
        assert_eq!(human_duration(30 * 86400), "30d");
        assert_eq!(human_duration(800 * 86400), "2y70d");
        assert_eq!(human_duration(-5), "<invalid>");
    }
}
