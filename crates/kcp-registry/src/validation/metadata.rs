//! `metadata` rules every kind shares (`ValidateObjectMeta` and its update half): names and
//! `generateName` by the kind's [`NameRule`], labels, annotations (keys and total size),
//! owner references, finalizers and generation.

use serde_json::Value;

use super::field::{Bad, Errors, forbidden, go_strings, invalid, required, too_long};
use super::formats::qualified_name_errors;
use crate::names::NameRule;
use kcp_apimachinery::labels::validation::{go_quote, label_value_errors};
use kcp_apimachinery::object::{self, strings};

/// The most bytes all annotation keys and values together may have.
pub const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

fn string_map(metadata: &Value, field: &str) -> Vec<(String, String)> {
    metadata[field]
        .as_object()
        .map(|map| {
            map.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// The checks of a new object's metadata; the name must already be generated.
pub fn validate(object: &Value, rule: NameRule, errs: &mut Errors) {
    validate_named(object, rule, None, errs);
}

/// [`validate`] with one more problem of the name a kind found itself.
pub fn validate_named(object: &Value, rule: NameRule, name_error: Option<&str>, errs: &mut Errors) {
    let metadata = &object["metadata"];
    let generate_name = object::text(metadata, "generateName");
    if !generate_name.is_empty() {
        for message in rule.errors(generate_name, true) {
            errs.push(invalid(
                "metadata.generateName",
                Bad::Str(generate_name),
                &message,
            ));
        }
    }
    let name = object::text(metadata, "name");
    if name.is_empty() {
        errs.push(required(
            "metadata.name",
            "name or generateName is required",
        ));
    } else {
        for message in rule.errors(name, false) {
            errs.push(invalid("metadata.name", Bad::Str(name), &message));
        }
        if let Some(message) = name_error {
            errs.push(invalid("metadata.name", Bad::Str(name), message));
        }
    }
    validate_common(metadata, errs);
}

/// What create and update both check: generation, labels, annotations, owner references,
/// finalizers.
fn validate_common(metadata: &Value, errs: &mut Errors) {
    if let Some(generation) = metadata["generation"].as_i64().filter(|g| *g < 0) {
        errs.push(invalid(
            "metadata.generation",
            Bad::Int(generation),
            "must be greater than or equal to 0",
        ));
    }
    for (key, value) in string_map(metadata, "labels") {
        for message in qualified_name_errors(&key) {
            errs.push(invalid("metadata.labels", Bad::Str(&key), &message));
        }
        for message in label_value_errors(&value) {
            errs.push(invalid("metadata.labels", Bad::Str(&value), &message));
        }
    }
    let annotations = string_map(metadata, "annotations");
    for (key, _) in &annotations {
        for message in qualified_name_errors(&key.to_lowercase()) {
            errs.push(invalid("metadata.annotations", Bad::Str(key), &message));
        }
    }
    let total: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    if total > ANNOTATIONS_MAX_BYTES {
        errs.push(too_long("metadata.annotations", ANNOTATIONS_MAX_BYTES));
    }
    validate_owner_references(&metadata["ownerReferences"], errs);
    validate_finalizers(&metadata["finalizers"], errs);
}

/// The checks of an update's metadata against the stored object's, then those of any object.
pub fn validate_update(new: &Value, old: &Value, errs: &mut Errors) {
    if old["metadata"]["deletionTimestamp"].is_string() {
        let old_finalizers = strings(&old["metadata"]["finalizers"]);
        let mut added: Vec<String> = strings(&new["metadata"]["finalizers"])
            .into_iter()
            .filter(|f| !old_finalizers.contains(f))
            .collect();
        added.sort();
        added.dedup();
        if !added.is_empty() {
            errs.push(forbidden(
                "metadata.finalizers",
                &format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers {}",
                    go_strings(&added)
                ),
            ));
        }
    }
}

/// One owner reference as Go's `%#v` prints a `v1.OwnerReference`.
fn go_owner_reference(reference: &Value) -> String {
    let text = |field: &str| go_quote(object::text(reference, field));
    let flag = |field: &str| match reference[field].as_bool() {
        None => "(*bool)(nil)".to_string(),
        Some(value) => format!("&{value}"),
    };
    format!(
        "v1.OwnerReference{{APIVersion:{}, Kind:{}, Name:{}, UID:{}, Controller:{}, BlockOwnerDeletion:{}}}",
        text("apiVersion"),
        text("kind"),
        text("name"),
        text("uid"),
        flag("controller"),
        flag("blockOwnerDeletion"),
    )
}

fn validate_owner_references(references: &Value, errs: &mut Errors) {
    let Some(references) = references.as_array() else {
        return;
    };
    const PATH: &str = "metadata.ownerReferences";
    let mut first_controller: Option<String> = None;
    for reference in references {
        let text = |field: &str| object::text(reference, field);
        let api_version = text("apiVersion");
        // `group/version` or `version`; anything else parses to no version at all.
        let (group, version) = match api_version.split('/').collect::<Vec<_>>().as_slice() {
            [version] => ("", *version),
            [group, version] => (*group, *version),
            _ => ("", ""),
        };
        if version.is_empty() {
            errs.push(invalid(
                format!("{PATH}.apiVersion"),
                Bad::Str(api_version),
                "version must not be empty",
            ));
        }
        for field in ["kind", "name", "uid"] {
            if text(field).is_empty() {
                errs.push(invalid(
                    format!("{PATH}.{field}"),
                    Bad::Str(""),
                    "must not be empty",
                ));
            }
        }
        if group.is_empty() && version == "v1" && text("kind") == "Event" {
            errs.push(invalid(
                PATH,
                Bad::Go(go_owner_reference(reference)),
                "/v1, Kind=Event is disallowed from being an owner",
            ));
        }
        if reference["controller"].as_bool() == Some(true) {
            let current = format!("{}/{}", text("kind"), text("name"));
            match &first_controller {
                Some(first) => {
                    let all: Vec<String> = references.iter().map(go_owner_reference).collect();
                    errs.push(invalid(
                        PATH,
                        Bad::Go(format!("[]v1.OwnerReference{{{}}}", all.join(", "))),
                        &format!(
                            "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {current}"
                        ),
                    ));
                }
                None => first_controller = Some(current),
            }
        }
    }
}

fn validate_finalizers(finalizers: &Value, errs: &mut Errors) {
    let finalizers = strings(finalizers);
    for finalizer in &finalizers {
        for message in qualified_name_errors(finalizer) {
            errs.push(invalid(
                "metadata.finalizers",
                Bad::Str(finalizer),
                &message,
            ));
        }
    }
    let has = |name: &str| finalizers.iter().any(|f| f == name);
    if has("orphan") && has("foregroundDeletion") {
        errs.push(invalid(
            "metadata.finalizers",
            Bad::Go(go_strings(&finalizers)),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
}
