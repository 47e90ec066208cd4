//! `meta.k8s.io/v1 Table` responses: what `kubectl get` prints. Every kind gets Name and Age for
//! now; per-kind columns come with the printers of each kind.

use serde_json::{Value, json};

/// A Table of `objects` (list items or a single object).
pub fn render(
    objects: &[Value],
    resource_version: Option<&str>,
    continue_token: Option<&str>,
) -> Value {
    let now = jiff::Timestamp::now();
    let rows: Vec<Value> = objects
        .iter()
        .map(|object| {
            let metadata = &object["metadata"];
            let age = metadata["creationTimestamp"]
                .as_str()
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
                .map(|created| human_duration(now.as_second() - created.as_second()))
                .unwrap_or_else(|| "<unknown>".to_string());
            json!({
                "cells": [metadata["name"], age],
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": metadata,
                },
            })
        })
        .collect();
    let mut list_meta = json!({});
    if let Some(rv) = resource_version {
        list_meta["resourceVersion"] = json!(rv);
    }
    if let Some(token) = continue_token {
        list_meta["continue"] = json!(token);
    }
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "description": "Name must be unique within a namespace.", "priority": 0},
            {"name": "Age", "type": "string", "format": "", "description": "CreationTimestamp is a timestamp representing the server time when this object was created.", "priority": 0},
        ],
        "rows": rows,
    })
}

/// Durations as kubectl prints ages: `45s`, `3m20s`, `2h10m`, `5d`.
pub fn human_duration(seconds: i64) -> String {
    let s = seconds.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86400);
    match s {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 => format!("{m}m{}s", s % 60),
        _ if h < 3 => format!("{m}m"),
        _ if h < 8 => format!("{h}h{}m", m % 60),
        _ if h < 48 => format!("{h}h"),
        _ if d < 8 => format!("{d}d{}h", h % 24),
        _ => format!("{d}d"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(200), "3m20s");
        assert_eq!(human_duration(3600), "60m");
        assert_eq!(human_duration(4 * 3600 + 60), "4h1m");
        assert_eq!(human_duration(30 * 3600), "30h");
        assert_eq!(human_duration(3 * 86400 + 3600), "3d1h");
        assert_eq!(human_duration(30 * 86400), "30d");
    }

    #[test]
    fn rows_carry_name_age_and_metadata() {
        let table = render(
            &[json!({"metadata": {"name": "a", "creationTimestamp": "2020-01-01T00:00:00Z"}})],
            Some("7"),
            None,
        );
        assert_eq!(table["rows"][0]["cells"][0], "a");
        assert!(
            table["rows"][0]["cells"][1]
                .as_str()
                .unwrap()
                .ends_with('d')
        );
        assert_eq!(table["rows"][0]["object"]["metadata"]["name"], "a");
        assert_eq!(table["metadata"]["resourceVersion"], "7");
    }
}
