//! Events, in both APIs. `v1` events get only the legacy checks (the involved object's
//! namespace, and the reporting fields once `eventTime` is set); `events.k8s.io/v1` events are
//! also held to the strict rules (metadata, `eventTime`, `type`, no deprecated fields). Errors
//! name the fields by their `v1` names (`involvedObject`, `message`), as Kubernetes does.

use serde_json::Value;

use super::field::{Bad, Errors, invalid, required};
use super::formats::qualified_name_errors;
use super::metadata;
use crate::names::{self, NameRule};

const REPORTING_INSTANCE_MAX: usize = 128;
const ACTION_MAX: usize = 128;
const REASON_MAX: usize = 128;
const NOTE_MAX: usize = 1024;

/// The two shapes of one event, read through the names of the API it came from.
struct Fields<'a> {
    object: &'a Value,
    strict: bool,
}

impl<'a> Fields<'a> {
    fn text(&self, field: &str) -> &'a str {
        self.object[field].as_str().unwrap_or_default()
    }
    fn involved_object(&self) -> &'a Value {
        &self.object[if self.strict {
            "regarding"
        } else {
            "involvedObject"
        }]
    }
    fn message(&self) -> &'a str {
        self.text(if self.strict { "note" } else { "message" })
    }
    fn is_set(&self, field: &str) -> bool {
        match &self.object[field] {
            Value::Null => false,
            Value::String(s) => !s.is_empty(),
            Value::Number(n) => n.as_i64() != Some(0),
            Value::Object(o) => o.values().any(|v| !v.is_null() && v != ""),
            _ => true,
        }
    }
}

/// The checks every event passes, whatever API wrote it.
fn legacy(fields: &Fields<'_>, errs: &mut Errors) {
    let namespace = fields.object["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default();
    let involved_namespace = fields.involved_object()["namespace"]
        .as_str()
        .unwrap_or_default();
    let mismatch = || {
        invalid(
            "involvedObject.namespace",
            Bad::Str(involved_namespace),
            "does not match event.namespace",
        )
    };
    if !fields.is_set("eventTime") {
        let matches = if involved_namespace.is_empty() {
            namespace.is_empty() || namespace == "default"
        } else {
            namespace == involved_namespace
        };
        if !matches {
            errs.push(mismatch());
        }
    } else {
        if involved_namespace.is_empty() && namespace != "default" && namespace != "kube-system" {
            errs.push(mismatch());
        }
        let controller = fields.text("reportingController");
        if controller.is_empty() {
            errs.push(required("reportingController", ""));
        }
        for message in qualified_name_errors(controller) {
            errs.push(invalid(
                "reportingController",
                Bad::Str(controller),
                &message,
            ));
        }
        let limited = [
            (
                "reportingInstance",
                fields.text("reportingInstance"),
                REPORTING_INSTANCE_MAX,
            ),
            ("action", fields.text("action"), ACTION_MAX),
            ("reason", fields.text("reason"), REASON_MAX),
        ];
        for (field, value, max) in limited {
            if value.is_empty() {
                errs.push(required(field, ""));
            }
            if value.len() > max {
                errs.push(invalid(
                    field,
                    Bad::Str(""),
                    &format!("can have at most {max} characters"),
                ));
            }
        }
        if fields.message().len() > NOTE_MAX {
            errs.push(invalid(
                "message",
                Bad::Str(""),
                &format!("can have at most {NOTE_MAX} characters"),
            ));
        }
    }
    for message in names::subdomain_errors(namespace) {
        errs.push(invalid("namespace", Bad::Str(namespace), &message));
    }
}

/// A `v1` Event: legacy checks only.
pub fn validate_core(object: &Value, errs: &mut Errors) {
    legacy(
        &Fields {
            object,
            strict: false,
        },
        errs,
    );
}

/// An `events.k8s.io/v1` Event on create.
pub fn validate_strict(object: &Value, errs: &mut Errors) {
    let fields = Fields {
        object,
        strict: true,
    };
    legacy(&fields, errs);
    metadata::validate(object, NameRule::Subdomain, errs);
    series(object, errs);
    if !fields.is_set("eventTime") {
        errs.push(required("eventTime", ""));
    }
    let kind = fields.text("type");
    if kind != "Normal" && kind != "Warning" {
        errs.push(invalid(
            "type",
            Bad::Str(""),
            &format!("has invalid value: {kind}"),
        ));
    }
    for (field, name) in [
        ("deprecatedFirstTimestamp", "firstTimestamp"),
        ("deprecatedLastTimestamp", "lastTimestamp"),
        ("deprecatedCount", "count"),
        ("deprecatedSource", "source"),
    ] {
        if fields.is_set(field) {
            errs.push(invalid(name, Bad::Str(""), "needs to be unset"));
        }
    }
}

fn series(object: &Value, errs: &mut Errors) {
    let series = &object["series"];
    if !series.is_object() {
        return;
    }
    if series["count"].as_i64().unwrap_or(0) < 2 {
        errs.push(invalid(
            "series.count",
            Bad::Str(""),
            "should be at least 2",
        ));
    }
    if series["lastObservedTime"]
        .as_str()
        .is_none_or(str::is_empty)
    {
        errs.push(required("series.lastObservedTime", ""));
    }
}

/// An `events.k8s.io/v1` Event on update: what it says happened may not change.
pub fn validate_strict_update(new: &Value, old: &Value, errs: &mut Errors) {
    let new_fields = Fields {
        object: new,
        strict: true,
    };
    legacy(&new_fields, errs);
    metadata::validate_update(new, old, errs);
    if new["series"] != old["series"] {
        series(new, errs);
    }
    for (field, name) in [
        ("reason", "reason"),
        ("note", "message"),
        ("type", "type"),
        ("action", "action"),
        ("reportingController", "reportingController"),
        ("reportingInstance", "reportingInstance"),
        ("eventTime", "eventTime"),
    ] {
        if new[field] != old[field] {
            let value = new[field].as_str().unwrap_or_default();
            errs.push(invalid(name, Bad::Str(value), "field is immutable"));
        }
    }
}
