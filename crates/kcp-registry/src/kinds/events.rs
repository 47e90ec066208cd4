//! Events, in both APIs. `v1` events get only the legacy checks (the involved object's
//! namespace, and the reporting fields once `eventTime` is set); `events.k8s.io/v1` events are
//! also held to the strict rules (metadata, `eventTime`, `type`, no deprecated fields). Errors
//! name the fields by their `v1` names (`involvedObject`, `message`), as Kubernetes does.

use std::borrow::Cow;

use jiff::Timestamp;
use kcp_apimachinery::dns::dns1123_subdomain_errors;
use kcp_apimachinery::object;
use kcp_apis::builtin::Resource;
use serde_json::{Value, json};

use crate::kinds::printing::{self, Column, col, wide};
use crate::kinds::{Kind, field_at_path};
use crate::names::NameRule;
use crate::validation::field::{self, Bad, Errors, invalid, required};
use crate::validation::formats::qualified_name_errors;
use crate::validation::metadata;

/// `v1` Events.
pub(crate) struct CoreEvent;
pub(crate) static CORE_EVENT: CoreEvent = CoreEvent;
/// `events.k8s.io/v1` Events.
pub(crate) struct Event;
pub(crate) static EVENT: Event = Event;

/// The fields a field selector on `v1` events may name, as kube-apiserver's conversions list.
const SELECTABLE: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

const COLUMNS: &[Column] = &[
    col(
        "Last Seen",
        "string",
        "The time at which the most recent occurrence of this event was recorded.",
    ),
    col(
        "Type",
        "string",
        "Type of this event (Normal, Warning), new types could be added in the future",
    ),
    col(
        "Reason",
        "string",
        "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
    ),
    col("Object", "string", "The object that this event is about."),
    wide(
        "Subobject",
        "string",
        "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2].",
    ),
    wide(
        "Source",
        "string",
        "The component reporting this event. Should be a short machine understandable string.",
    ),
    col(
        "Message",
        "string",
        "A human-readable description of the status of this operation.",
    ),
    wide(
        "First Seen",
        "string",
        "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
    ),
    wide(
        "Count",
        "string",
        "The number of times this event has occurred.",
    ),
    Column {
        priority: 1,
        ..printing::NAME
    },
];

impl Kind for CoreEvent {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("", "Event")
    }

    /// Legacy events are not validated; their names only have to fit in a URL.
    fn name_rule(&self) -> NameRule {
        NameRule::PathSegment
    }

    fn validate_create(&self, _: &Resource, object: &Value, errs: &mut Errors) {
        only_name(object, self.name_rule(), errs);
        validate_core(object, errs);
    }

    fn validate_update(&self, _: &Resource, new: &Value, _old: &Value, errs: &mut Errors) {
        validate_core(new, errs);
    }

    fn selectable_fields(&self) -> &'static [&'static str] {
        SELECTABLE
    }

    fn field_value<'a>(&self, object: &'a Value, field: &str) -> Option<Cow<'a, str>> {
        match field {
            "source" => object["source"]["component"].as_str().map(Cow::Borrowed),
            _ => field_at_path(object, field),
        }
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn cells(&self, object: &Value, now: Timestamp) -> Vec<Value> {
        event_cells(object, now)
    }
}

impl Kind for Event {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("events.k8s.io", "Event")
    }

    fn validate_create(&self, _: &Resource, object: &Value, errs: &mut Errors) {
        validate_strict(object, errs);
    }

    fn validate_update(&self, _: &Resource, new: &Value, old: &Value, errs: &mut Errors) {
        validate_strict_update(new, old, errs);
    }

    fn columns(&self) -> &'static [Column] {
        COLUMNS
    }

    fn cells(&self, object: &Value, now: Timestamp) -> Vec<Value> {
        event_cells(&event_as_core(object), now)
    }
}

/// Only what storage needs of a name: present and one path segment.
fn only_name(object: &Value, rule: NameRule, errs: &mut Errors) {
    let name = object::str_at(object, &["metadata", "name"]);
    if name.is_empty() {
        errs.push(field::required(
            "metadata.name",
            "name or generateName is required",
        ));
    }
    for message in rule.errors(name, false) {
        errs.push(field::invalid(
            "metadata.name",
            field::Bad::Str(name),
            &message,
        ));
    }
}

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
        object::text(self.object, field)
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
    let namespace = object::str_at(fields.object, &["metadata", "namespace"]);
    let involved_namespace = object::text(fields.involved_object(), "namespace");
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
    for message in dns1123_subdomain_errors(namespace) {
        errs.push(invalid("namespace", Bad::Str(namespace), &message));
    }
}

/// A `v1` Event: legacy checks only.
fn validate_core(object: &Value, errs: &mut Errors) {
    legacy(
        &Fields {
            object,
            strict: false,
        },
        errs,
    );
}

/// An `events.k8s.io/v1` Event on create.
fn validate_strict(object: &Value, errs: &mut Errors) {
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
fn validate_strict_update(new: &Value, old: &Value, errs: &mut Errors) {
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
            let value = object::text(new, field);
            errs.push(invalid(name, Bad::Str(value), "field is immutable"));
        }
    }
}

/// An `events.k8s.io` Event in the core Event's field names (what upstream converts it to
/// before printing).
fn event_as_core(object: &Value) -> Value {
    let mut core = object.clone();
    for (from, to) in [
        ("regarding", "involvedObject"),
        ("note", "message"),
        ("deprecatedFirstTimestamp", "firstTimestamp"),
        ("deprecatedLastTimestamp", "lastTimestamp"),
        ("deprecatedCount", "count"),
        ("deprecatedSource", "source"),
        ("reportingController", "reportingComponent"),
    ] {
        if let Some(value) = object.get(from) {
            core[to] = value.clone();
        }
    }
    core
}

/// The cells of a core Event, wide columns included.
fn event_cells(event: &Value, now: Timestamp) -> Vec<Value> {
    let first_seen = match event["firstTimestamp"].as_str() {
        Some(first) => printing::since(Some(first), now),
        None => printing::since(event["eventTime"].as_str(), now),
    };
    let mut last_seen = match event["lastTimestamp"].as_str() {
        Some(last) => printing::since(Some(last), now),
        None => first_seen.clone(),
    };
    let mut count = event["count"].as_i64().unwrap_or(0);
    if event["series"].is_object() {
        last_seen = printing::since(event["series"]["lastObservedTime"].as_str(), now);
        count = event["series"]["count"].as_i64().unwrap_or(0);
    } else if count == 0 {
        count = 1;
    }
    let kind = object::str_at(event, &["involvedObject", "kind"]).to_lowercase();
    let object = match object::str_at(event, &["involvedObject", "name"]) {
        "" => kind,
        name => format!("{kind}/{name}"),
    };
    let component = first_non_empty(
        object::str_at(event, &["source", "component"]),
        object::str_at(event, &["reportingComponent"]),
    );
    let instance = first_non_empty(
        object::str_at(event, &["source", "host"]),
        object::str_at(event, &["reportingInstance"]),
    );
    let source = if instance.is_empty() {
        component.to_string()
    } else {
        format!("{component}, {instance}")
    };
    vec![
        json!(last_seen),
        json!(object::str_at(event, &["type"])),
        json!(object::str_at(event, &["reason"])),
        json!(object),
        json!(object::str_at(event, &["involvedObject", "fieldPath"])),
        json!(source),
        json!(object::str_at(event, &["message"]).trim()),
        json!(first_seen),
        json!(count),
        json!(object::str_at(event, &["metadata", "name"])),
    ]
}

fn first_non_empty<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a.is_empty() { b } else { a }
}
