//! CustomResourceDefinition as a stored object: the name is `<plural>.<group>`, the group a
//! dotted domain, a known scope, DNS-1035 version names without repeats and exactly one
//! storage version, the required names; group and plural never change. Schemas and the rest
//! of the CRD semantics are not checked here, except that every version has a structural
//! schema whose CEL rules (`x-kubernetes-validations`) compile and are within Kubernetes'
//! estimated cost limits (not estimated again when an update leaves a version's schema as it
//! was, as in Kubernetes), printer columns, scale subresource paths and selectable fields
//! (paths into the schema to string, boolean or integer fields), the conversion settings (a
//! webhook needs a client config and a ConversionReview version the server speaks) and, on
//! updates, `status.storedVersions`. Defaults as in `apiextensions/v1`: `singular`, `listKind`,
//! `conversion.strategy`.

use std::collections::HashSet;

use jiff::Timestamp;
use kcp_apimachinery::dns::{dns1035_label_errors, dns1123_subdomain_errors};
use kcp_apimachinery::labels::validation::go_quote;
use kcp_apimachinery::object::text;
use kcp_apimachinery::patch::strategic::ListStrategy;
use kcp_apimachinery::schema::cel::valid_field_path;
use kcp_apimachinery::schema::{CelValidator, FieldError, structural_errors};
use kcp_apis::builtin::Resource;
use serde_json::{Value, json};

use super::admission::validate_client_config;
use crate::error::RegistryError;
use crate::kinds::printing::{self, Column};
use crate::kinds::{Deletion, Generation, Kind, conditions_list_strategy};
use crate::strategy::{self, Part};
use crate::validation::field::{
    Bad, Errors, duplicate, forbidden, index, invalid, not_supported, required,
};
use crate::validation::metadata;

pub(crate) struct CustomResourceDefinition;
pub(crate) static CUSTOM_RESOURCE_DEFINITION: CustomResourceDefinition = CustomResourceDefinition;

impl Kind for CustomResourceDefinition {
    fn group_kind(&self) -> (&'static str, &'static str) {
        ("apiextensions.k8s.io", "CustomResourceDefinition")
    }

    fn decode(&self, _: &Resource, object: &mut Value) -> Result<(), RegistryError> {
        default(object);
        Ok(())
    }

    fn validate_create(&self, _: &Resource, object: &Value, errs: &mut Errors) {
        metadata::validate_named(object, self.name_rule(), name_error(object), errs);
        validate(object, errs);
        validate_api_approval(object, None, errs);
    }

    fn validate_update(&self, _: &Resource, new: &Value, old: &Value, errs: &mut Errors) {
        metadata::validate_update(new, old, errs);
        metadata::validate_named(new, self.name_rule(), name_error(new), errs);
        validate(new, errs);
        validate_update(new, old, errs);
        validate_api_approval(new, Some(old), errs);
    }

    fn prepare_create(&self, resource: &Resource, part: Part, object: &mut Value) {
        strategy::drop_status_on_create(resource, part, object);
        record_stored_version(object);
    }

    fn prepare_update(
        &self,
        resource: &Resource,
        part: Part,
        stored: &Value,
        requested: Value,
    ) -> Value {
        let mut next = strategy::update_of_part(resource, part, stored, requested);
        // A status written from an older read must not drop the storage version either.
        record_stored_version(&mut next);
        next
    }

    fn generation(&self, _: &Resource) -> Generation {
        Generation::Fields(&["spec"])
    }

    fn list_strategy(&self, path: &[&str]) -> ListStrategy {
        conditions_list_strategy(path)
    }

    fn columns(&self) -> &'static [Column] {
        printing::NAME_CREATED_AT
    }

    fn cells(&self, object: &Value, _now: Timestamp) -> Vec<Value> {
        printing::name_created_at(object)
    }

    fn deletion(&self) -> Deletion {
        Deletion::ServedResources
    }
}

/// Adds a CRD's storage version to `status.storedVersions` (the versions objects may be
/// stored at, which only a status write may shorten).
fn record_stored_version(crd: &mut Value) {
    let storage = crd["spec"]["versions"].as_array().and_then(|versions| {
        versions
            .iter()
            .find(|v| v["storage"].as_bool() == Some(true))
            .and_then(|v| v["name"].as_str())
            .map(str::to_string)
    });
    let Some(storage) = storage else {
        return;
    };
    let Some(status) = crate::kinds::status_object(crd) else {
        return;
    };
    let stored = status.entry("storedVersions").or_insert_with(|| json!([]));
    if let Value::Array(versions) = stored
        && !versions.iter().any(|v| v == storage.as_str())
    {
        versions.push(json!(storage));
    }
}

/// Fills in `names.singular` (the lower-cased kind), `names.listKind` (`<Kind>List`) and
/// `conversion.strategy: None`.
fn default(object: &mut Value) {
    let Some(spec) = object.get_mut("spec").filter(|spec| spec.is_object()) else {
        return;
    };
    let kind = text(&spec["names"], "kind").to_string();
    if spec["names"].is_object() && !kind.is_empty() {
        if text(&spec["names"], "singular").is_empty() {
            spec["names"]["singular"] = json!(kind.to_lowercase());
        }
        if text(&spec["names"], "listKind").is_empty() {
            spec["names"]["listKind"] = json!(format!("{kind}List"));
        }
    }
    if spec["conversion"].is_null() {
        spec["conversion"] = json!({"strategy": "None"});
    }
}

/// Extra rule for the object's name: it must be `<plural>.<group>`.
fn name_error(object: &Value) -> Option<&'static str> {
    let spec = &object["spec"];
    let expected = kcp_apis::custom::crd_name(text(&spec["names"], "plural"), text(spec, "group"));
    (text(&object["metadata"], "name") != expected)
        .then_some(r#"must be spec.names.plural+"."+spec.group"#)
}

/// Go's `%#v` of the versions, cut to what identifies them.
fn go_versions(versions: &[Value]) -> String {
    let items: Vec<String> = versions
        .iter()
        .map(|v| {
            format!(
                "apiextensions.CustomResourceDefinitionVersion{{Name:{}, Served:{}, Storage:{}, ...}}",
                go_quote(text(v, "name")),
                v["served"].as_bool().unwrap_or(false),
                v["storage"].as_bool().unwrap_or(false),
            )
        })
        .collect();
    format!(
        "[]apiextensions.CustomResourceDefinitionVersion{{{}}}",
        items.join(", ")
    )
}

/// A version's schema must be structural, and then its CEL rules must compile and be within
/// Kubernetes' estimated cost limits (paths of both relative to `schema_path`; the limit of
/// the whole schema is reported at `schema_path` itself).
fn schema_errors(schema: &Value, schema_path: &str, errs: &mut Errors) {
    let cause = |e: FieldError| crate::Cause {
        reason: e.reason,
        field: e.field,
        message: e.message,
    };
    let structural = structural_errors(schema, schema_path);
    if !structural.is_empty() {
        errs.extend(structural.into_iter().map(cause));
        return;
    }
    errs.extend(CelValidator::check(schema).into_iter().map(|mut e| {
        e.field = if e.field.is_empty() {
            schema_path.to_string()
        } else {
            format!("{schema_path}.{}", e.field)
        };
        cause(e)
    }));
}

/// Whether `cause` holds an estimated cost against a CRD (and not a mistake in it).
fn is_cost(cause: &crate::Cause) -> bool {
    cause.reason == "FieldValueForbidden"
        && (cause.message.contains(" exceeds budget by factor of ")
            || cause.message.contains("contributed to estimated rule"))
}

/// As Kubernetes does on updates, drops the estimated costs of versions whose schema did not
/// change: a CRD stored under other limits (or estimated otherwise) stays updatable.
fn forgive_unchanged_costs(new: &Value, old: &Value, errs: &mut Errors) {
    fn schema(version: &Value) -> Option<&Value> {
        version.get("schema")?.get("openAPIV3Schema")
    }
    let old_versions = old["spec"]["versions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let unchanged: Vec<String> = new["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(_, version)| {
            old_versions
                .iter()
                .any(|o| o.get("name") == version.get("name") && schema(o) == schema(version))
        })
        .map(|(i, _)| format!("{}.schema.openAPIV3Schema", index("spec.versions", i)))
        .collect();
    errs.retain(|cause| {
        !(is_cost(cause)
            && unchanged
                .iter()
                .any(|path| cause.field == *path || cause.field.starts_with(&format!("{path}."))))
    });
}

/// Kubernetes' own API groups whose names have no dot, the core group (`""`) first. A CRD may
/// serve one of their resources in a workspace (as kcp's prototype did, for the workload APIs a
/// physical cluster serves) when it carries the approval annotation Kubernetes asks of its
/// protected groups, which API negotiation and `crd-puller` write; never a resource the server
/// itself serves.
const KUBERNETES_GROUPS: &[&str] = &["", "apps", "autoscaling", "batch", "extensions", "policy"];

/// Whether `object` is an approved CRD for a resource of one of [`KUBERNETES_GROUPS`].
fn serves_kubernetes_group(object: &Value) -> bool {
    KUBERNETES_GROUPS.contains(&text(&object["spec"], "group"))
        && matches!(approval(object), Approval::Approved | Approval::Bypassed)
}

fn validate(object: &Value, errs: &mut Errors) {
    let spec = &object["spec"];
    let group = text(spec, "group");
    if serves_kubernetes_group(object) {
        let plural = text(&spec["names"], "plural");
        if kcp_apis::builtin::RESOURCES
            .iter()
            .any(|r| r.group == group && r.name == plural)
        {
            errs.push(invalid(
                "spec.names.plural",
                Bad::Str(plural),
                "is a resource the server itself serves in this group",
            ));
        }
    } else if group.is_empty() {
        errs.push(required("spec.group", ""));
    } else {
        let problems = dns1123_subdomain_errors(group);
        if !problems.is_empty() {
            errs.push(invalid("spec.group", Bad::Str(group), &problems.join(",")));
        } else if !group.contains('.') {
            errs.push(invalid(
                "spec.group",
                Bad::Str(group),
                "should be a domain with at least one dot",
            ));
        }
    }
    let scope = text(spec, "scope");
    if scope.is_empty() {
        errs.push(required("spec.scope", ""));
    } else if scope != "Cluster" && scope != "Namespaced" {
        errs.push(not_supported(
            "spec.scope",
            Bad::Str(scope),
            &["Cluster", "Namespaced"],
        ));
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    let mut seen: Vec<&str> = Vec::new();
    let mut unique = true;
    for (i, version) in versions.iter().enumerate() {
        let name = text(version, "name");
        if seen.contains(&name) {
            unique = false;
        } else {
            seen.push(name);
        }
        // In kube-apiserver's order: the name, then the schema, subresources, printer columns
        // and selectable fields (`validateCustomResourceDefinitionVersion`).
        let version_path = index("spec.versions", i);
        let problems = dns1035_label_errors(name);
        if !problems.is_empty() {
            errs.push(invalid(
                format!("{version_path}.name"),
                Bad::Str(name),
                &problems.join(","),
            ));
        }
        let schema_path = format!("{version_path}.schema.openAPIV3Schema");
        let schema = version["schema"]
            .get("openAPIV3Schema")
            .filter(|schema| schema.is_object());
        match schema {
            Some(schema) => schema_errors(schema, &schema_path, errs),
            None => errs.push(required(schema_path, "schemas are required")),
        }
        if let Some(scale) = version["subresources"].get("scale") {
            let path = format!("{version_path}.subresources.scale");
            validate_scale(scale, &path, errs);
        }
        for (j, column) in version["additionalPrinterColumns"]
            .as_array()
            .into_iter()
            .flatten()
            .enumerate()
        {
            let path = index(&format!("{version_path}.additionalPrinterColumns"), j);
            validate_printer_column(column, &path, errs);
        }
        let selectable = version["selectableFields"]
            .as_array()
            .filter(|fields| !fields.is_empty());
        if let Some(fields) = selectable {
            let path = format!("{version_path}.selectableFields");
            match schema {
                Some(schema) => validate_selectable_fields(fields, schema, &path, errs),
                // kube's message, though it is the missing schema that is refused.
                None => errs.push(invalid(
                    path,
                    Bad::Str(""),
                    "selectableFields may only be set when version.schema.openAPIV3Schema is not included",
                )),
            }
        }
    }
    if !unique {
        errs.push(invalid(
            "spec.versions",
            Bad::Go(go_versions(&versions)),
            "must contain unique version names",
        ));
    }
    let storage = versions
        .iter()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .count();
    if storage != 1 {
        errs.push(invalid(
            "spec.versions",
            Bad::Go(go_versions(&versions)),
            "must have exactly one version marked as storage version",
        ));
    }
    for field in ["plural", "singular", "kind", "listKind"] {
        if text(&spec["names"], field).is_empty() {
            errs.push(required(format!("spec.names.{field}"), ""));
        }
    }
    let conversion = &spec["conversion"];
    let strategy = text(conversion, "strategy");
    match strategy {
        "" => errs.push(required("spec.conversion.strategy", "")),
        "None" | "Webhook" => {}
        other => errs.push(not_supported(
            "spec.conversion.strategy",
            Bad::Str(other),
            &["None", "Webhook"],
        )),
    }
    if strategy != "None"
        && !strategy.is_empty()
        && spec["preserveUnknownFields"].as_bool() == Some(true)
    {
        errs.push(invalid(
            "spec.conversion.strategy",
            Bad::Str(strategy),
            "must be None if spec.preserveUnknownFields is true",
        ));
    }
    let webhook = &conversion["webhook"];
    let client_config = &webhook["clientConfig"];
    let review_versions = &webhook["conversionReviewVersions"];
    if strategy == "Webhook" {
        if client_config.is_object() {
            validate_client_config(client_config, "spec.conversion.webhookClientConfig", errs);
        } else {
            errs.push(required(
                "spec.conversion.webhookClientConfig",
                "required when strategy is set to Webhook",
            ));
        }
        validate_review_versions(review_versions, errs);
    } else {
        if client_config.is_object() {
            errs.push(forbidden(
                "spec.conversion.webhookClientConfig",
                "should not be set when strategy is not set to Webhook",
            ));
        }
        if review_versions.as_array().is_some_and(|v| !v.is_empty()) {
            errs.push(forbidden(
                "spec.conversion.conversionReviewVersions",
                "should not be set when strategy is not set to Webhook",
            ));
        }
    }
}

/// A printer column, as kube-apiserver checks it: a name, a type and format it knows, and a
/// simple JSON path (its messages name the path `JSONPath`, after its internal field).
fn validate_printer_column(column: &Value, path: &str, errs: &mut Errors) {
    const TYPES: &str = "boolean,date,integer,number,string";
    const FORMATS: &str = "byte,date,date-time,double,float,int32,int64,password";
    if text(column, "name").is_empty() {
        errs.push(required(format!("{path}.name"), ""));
    }
    let kind = text(column, "type");
    if kind.is_empty() {
        errs.push(required(
            format!("{path}.type"),
            &format!("must be one of {TYPES}"),
        ));
    } else if !TYPES.split(',').any(|t| t == kind) {
        errs.push(invalid(
            format!("{path}.type"),
            Bad::Str(kind),
            &format!("must be one of {TYPES}"),
        ));
    }
    let format = text(column, "format");
    if !format.is_empty() && !FORMATS.split(',').any(|f| f == format) {
        errs.push(invalid(
            format!("{path}.format"),
            Bad::Str(format),
            &format!("must be one of {FORMATS}"),
        ));
    }
    let json_path = text(column, "jsonPath");
    if json_path.is_empty() {
        errs.push(required(format!("{path}.JSONPath"), ""));
    } else if !json_path.starts_with('.') {
        errs.push(invalid(
            format!("{path}.JSONPath"),
            Bad::Str(json_path),
            "must be a simple json path starting with .",
        ));
    }
}

/// How many distinct selectable fields a version may have.
const MAX_SELECTABLE_FIELDS: usize = 8;

/// A version's `selectableFields` (at `path`), as kube-apiserver checks them: each `jsonPath`
/// set, a valid path into the version's `schema` without array notation (the field path
/// check of CEL rules), outside `metadata`, to a field of type string, boolean or integer,
/// and not the same field twice; at most 8 distinct fields.
fn validate_selectable_fields(fields: &[Value], schema: &Value, path: &str, errs: &mut Errors) {
    let mut unique = HashSet::new();
    for (j, field) in fields.iter().enumerate() {
        let field_path = format!("{}.jsonPath", index(path, j));
        let json_path = text(field, "jsonPath");
        if json_path.is_empty() {
            errs.push(required(field_path, ""));
            continue;
        }
        let (found, node) = match valid_field_path(json_path, schema, false) {
            Ok(found) => found,
            Err(reason) => {
                errs.push(invalid(
                    field_path,
                    Bad::Str(json_path),
                    &format!("is an invalid path: {reason}"),
                ));
                continue;
            }
        };
        // The first step of the path (a map key is written `[key]`, never `metadata`).
        if found.split(['.', '[']).next() == Some("metadata") {
            errs.push(invalid(
                field_path.clone(),
                Bad::Str(json_path),
                "must not point to fields in metadata",
            ));
        }
        if !matches!(
            node.get("type").and_then(Value::as_str),
            Some("string" | "boolean" | "integer")
        ) {
            errs.push(invalid(
                field_path.clone(),
                Bad::Str(json_path),
                "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            ));
        }
        if !unique.insert(found) {
            errs.push(duplicate(field_path, Bad::Str(json_path)));
        }
    }
    if unique.len() > MAX_SELECTABLE_FIELDS {
        errs.push(crate::Cause {
            reason: "FieldValueTooMany",
            field: path.to_string(),
            message: format!(
                "Too many: {}: must have at most {MAX_SELECTABLE_FIELDS} items",
                unique.len()
            ),
        });
    }
}

/// The annotation approving a CRD in a group the Kubernetes community protects.
const API_APPROVED: &str = "api-approved.kubernetes.io";

/// Where a CRD stands on Kubernetes' API approval.
#[derive(Debug, PartialEq, Eq)]
enum Approval {
    Missing,
    Bypassed,
    Approved,
    Invalid,
}

fn approval(crd: &Value) -> Approval {
    let annotation = crd["metadata"]["annotations"][API_APPROVED]
        .as_str()
        .unwrap_or_default();
    let is_url = annotation.split_once("://").is_some_and(|(scheme, rest)| {
        scheme
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
            && !rest
                .split(['/', '?', '#'])
                .next()
                .unwrap_or_default()
                .is_empty()
            && !annotation.contains(char::is_whitespace)
    });
    match annotation {
        "" => Approval::Missing,
        _ if annotation.starts_with("unapproved") => Approval::Bypassed,
        _ if is_url => Approval::Approved,
        _ => Approval::Invalid,
    }
}

/// CRDs in `k8s.io` and `kubernetes.io` groups (and their subdomains) need the approval
/// annotation, a URL or a reason starting with `unapproved`; an update that leaves the
/// approval as it was passes.
fn validate_api_approval(new: &Value, old: Option<&Value>, errs: &mut Errors) {
    let group = text(&new["spec"], "group");
    let protected = ["k8s.io", "kubernetes.io"]
        .iter()
        .any(|domain| group == *domain || group.ends_with(&format!(".{domain}")))
        // An invalid annotation on a Kubernetes group's CRD is named as such.
        || (KUBERNETES_GROUPS.contains(&group) && approval(new) == Approval::Invalid);
    if !protected {
        return;
    }
    let state = approval(new);
    if old.is_some_and(|old| approval(old) == state) {
        return;
    }
    let path = format!("metadata.annotations[{API_APPROVED}]");
    let link = "see https://github.com/kubernetes/enhancements/pull/1111";
    match state {
        Approval::Approved | Approval::Bypassed => {}
        Approval::Missing => errs.push(required(
            path,
            &format!("protected groups must have approval annotation \"{API_APPROVED}\", {link}"),
        )),
        Approval::Invalid => {
            let value = text(&new["metadata"]["annotations"], API_APPROVED);
            errs.push(invalid(
                path,
                Bad::Str(value),
                &format!(
                    "protected groups must have approval annotation \"{API_APPROVED}\" with either a URL or a reason starting with \"unapproved\", {link}"
                ),
            ));
        }
    }
}

/// A scale subresource's paths, as kube-apiserver checks them: simple dotted JSON paths, spec
/// replicas under `.spec.`, status replicas under `.status.`, the label selector (optional)
/// under either.
fn validate_scale(scale: &Value, path: &str, errs: &mut Errors) {
    let fields: [(&str, &[&str], &str); 3] = [
        (
            "specReplicasPath",
            &[".spec."],
            "should be a json path under .spec",
        ),
        (
            "statusReplicasPath",
            &[".status."],
            "should be a json path under .status",
        ),
        (
            "labelSelectorPath",
            &[".spec.", ".status."],
            "should be a json path under either .spec or .status",
        ),
    ];
    for (field, prefixes, message) in fields {
        let field_path = format!("{path}.{field}");
        let value = text(scale, field);
        if value.is_empty() {
            if field != "labelSelectorPath" {
                errs.push(required(field_path, ""));
            }
        } else if !value.starts_with('.') {
            errs.push(invalid(
                field_path,
                Bad::Str(value),
                "must be a simple json path starting with .",
            ));
        } else if !prefixes.iter().any(|prefix| value.starts_with(prefix)) {
            errs.push(invalid(field_path, Bad::Str(value), message));
        }
    }
}

/// The ConversionReview versions the API server understands.
const REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// `conversionReviewVersions`: present, no repeats, DNS-1035 labels, one the server speaks.
fn validate_review_versions(versions: &Value, errs: &mut Errors) {
    const PATH: &str = "spec.conversion.conversionReviewVersions";
    let versions: Vec<&str> = versions
        .as_array()
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if versions.is_empty() {
        errs.push(required(PATH, ""));
        return;
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, version) in versions.iter().enumerate() {
        if seen.contains(version) {
            errs.push(invalid(
                index(PATH, i),
                Bad::Str(version),
                "duplicate version",
            ));
            continue;
        }
        seen.push(version);
        for problem in dns1035_label_errors(version) {
            errs.push(invalid(index(PATH, i), Bad::Str(version), &problem));
        }
    }
    if !versions.iter().any(|v| REVIEW_VERSIONS.contains(v)) {
        let quoted: Vec<String> = versions.iter().map(|v| go_quote(v)).collect();
        errs.push(invalid(
            PATH,
            Bad::Go(format!("[]string{{{}}}", quoted.join(", "))),
            &format!(
                "must include at least one of {}",
                REVIEW_VERSIONS.join(", ")
            ),
        ));
    }
}

/// `status.storedVersions` of a CRD being updated: not empty, holding the storage version, and
/// only versions still in `spec.versions` (objects may be stored at any of them).
fn validate_stored_versions(crd: &Value, errs: &mut Errors) {
    const PATH: &str = "status.storedVersions";
    let stored: Vec<&str> = crd["status"]["storedVersions"]
        .as_array()
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let go_list = || {
        let quoted: Vec<String> = stored.iter().map(|v| go_quote(v)).collect();
        Bad::Go(format!("[]string{{{}}}", quoted.join(", ")))
    };
    if stored.is_empty() {
        errs.push(invalid(
            PATH,
            go_list(),
            "must have at least one stored version",
        ));
        return;
    }
    let versions = crd["spec"]["versions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for version in &versions {
        let name = text(version, "name");
        if version["storage"].as_bool() == Some(true) && !stored.contains(&name) {
            errs.push(invalid(
                PATH,
                go_list(),
                &format!("must have the storage version {name}"),
            ));
        }
    }
    for (i, name) in stored.iter().enumerate() {
        if !versions.iter().any(|v| text(v, "name") == *name) {
            errs.push(invalid(
                index(PATH, i),
                Bad::Str(name),
                &format!(
                    "missing from spec.versions; {name} was previously a storage version, and must remain in spec.versions until a storage migration ensures no data remains persisted in {name} and removes {name} from status.storedVersions"
                ),
            ));
        }
    }
}

/// Group and plural make up the name and the storage location: they never change. Once the CRD
/// is Established, objects are stored under its scope and kind, so those stay too (as
/// kube-apiserver: changing them would strand stored objects under keys nothing reads). The
/// stored versions must stay served or not (see [`validate_stored_versions`]).
fn validate_update(new: &Value, old: &Value, errs: &mut Errors) {
    forgive_unchanged_costs(new, old, errs);
    validate_stored_versions(new, errs);
    type Field = fn(&Value) -> String;
    let mut immutable: Vec<(&str, Field)> = vec![
        ("spec.group", |v| text(&v["spec"], "group").to_string()),
        ("spec.names.plural", |v| {
            text(&v["spec"]["names"], "plural").to_string()
        }),
    ];
    if established(old) {
        immutable.push(("spec.scope", |v| text(&v["spec"], "scope").to_string()));
        immutable.push(("spec.names.kind", |v| {
            text(&v["spec"]["names"], "kind").to_string()
        }));
    }
    for (path, get) in immutable {
        let (new_value, old_value) = (get(new), get(old));
        if new_value != old_value {
            errs.push(invalid(path, Bad::Str(&new_value), "field is immutable"));
        }
    }
}

/// Whether the CRD's `Established` condition is true.
fn established(crd: &Value) -> bool {
    crd["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Established" && c["status"] == "True")
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::{validate, validate_api_approval, validate_update};

    fn crd_with_schema(schema: Value) -> Value {
        json!({"metadata": {"name": "widgets.example.com"}, "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "conversion": {"strategy": "None"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": schema}}],
        }})
    }

    fn errors(object: &Value) -> Vec<String> {
        let mut errs = Vec::new();
        validate(object, &mut errs);
        errs.into_iter()
            .map(|c| format!("{} {}: {}", c.reason, c.field, c.message))
            .collect()
    }

    #[test]
    fn rules_that_compile_pass() {
        let crd = crd_with_schema(json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": [{"rule": "self.a < self.b", "message": "a below b"}],
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        }}}));
        assert_eq!(errors(&crd), Vec::<String>::new());
    }

    #[test]
    fn a_rule_that_does_not_compile_is_invalid() {
        let crd = crd_with_schema(json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": [{"rule": "self.a <"}],
            "properties": {"a": {"type": "integer"}},
        }}}));
        let errors = errors(&crd);
        assert_eq!(errors.len(), 1, "{errors:?}");
        let expected = "FieldValueInvalid spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: \
            Invalid value: apiextensions.ValidationRule{Rule:\"self.a <\", Message:\"\", MessageExpression:\"\", \
            Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: \
            compilation failed: ERROR: <input>:1:";
        assert!(errors[0].starts_with(expected), "{}", errors[0]);
    }

    #[test]
    fn an_empty_rule_is_required() {
        let crd =
            crd_with_schema(json!({"type": "object", "x-kubernetes-validations": [{"rule": ""}]}));
        assert_eq!(
            errors(&crd),
            [
                "FieldValueRequired spec.versions[0].schema.openAPIV3Schema.x-kubernetes-validations[0].rule: Required value: rule is not specified"
            ]
        );
    }

    #[test]
    fn rules_over_the_estimated_cost_limits_are_forbidden() {
        let crd = crd_with_schema(json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": [{"rule": "self.items.all(x, self.items.all(y, x == y))"}],
            "properties": {"items": {"type": "array", "items": {"type": "string"}}},
        }}}));
        let hint = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";
        assert_eq!(
            errors(&crd),
            [
                format!("FieldValueForbidden spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x {hint}"),
                "FieldValueForbidden spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Forbidden: contributed to estimated rule & messageExpression cost total exceeding cost limit for entire OpenAPIv3 schema".to_string(),
                format!("FieldValueForbidden spec.versions[0].schema.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule & messageExpression cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x {hint}"),
            ]
        );
    }

    #[test]
    fn unchanged_schemas_are_not_estimated_again_on_update() {
        let costly = json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": [{"rule": "self.items.all(x, self.items.all(y, x == y))"}],
            "properties": {"items": {"type": "array", "items": {"type": "string"}}},
        }}});
        let mut old = crd_with_schema(costly.clone());
        old["status"] = json!({"storedVersions": ["v1"]});
        let mut relabelled = old.clone();
        relabelled["metadata"]["labels"] = json!({"a": "b"});
        let mut errs = Vec::new();
        validate(&relabelled, &mut errs);
        validate_update(&relabelled, &old, &mut errs);
        assert!(errs.is_empty(), "{errs:?}");
        // A changed schema is estimated again.
        let mut changed = old.clone();
        changed["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["x-kubernetes-validations"]
            [0]["message"] = json!("m");
        let mut errs = Vec::new();
        validate(&changed, &mut errs);
        validate_update(&changed, &old, &mut errs);
        assert_eq!(errs.len(), 3, "{errs:?}");
    }

    #[test]
    fn scope_and_kind_are_immutable_once_established() {
        let mut old = crd_with_schema(json!({"type": "object"}));
        old["status"] = json!({"storedVersions": ["v1"]});
        let mut changed = old.clone();
        changed["spec"]["scope"] = json!("Cluster");
        changed["spec"]["names"]["kind"] = json!("Gadget");
        let messages = |old: &Value| {
            let mut errs = Vec::new();
            validate_update(&changed, old, &mut errs);
            errs.into_iter()
                .map(|c| format!("{}: {}", c.field, c.message))
                .collect::<Vec<_>>()
        };
        assert_eq!(messages(&old), Vec::<String>::new(), "not yet Established");
        old["status"]["conditions"] = json!([{"type": "Established", "status": "True"}]);
        assert_eq!(
            messages(&old),
            [
                "spec.scope: Invalid value: \"Cluster\": field is immutable",
                "spec.names.kind: Invalid value: \"Gadget\": field is immutable",
            ]
        );
    }

    #[test]
    fn printer_columns_need_a_name_a_known_type_and_a_simple_path() {
        let mut crd = crd_with_schema(json!({"type": "object"}));
        crd["spec"]["versions"][0]["additionalPrinterColumns"] = json!([
            {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
            {"name": "", "type": "text", "format": "hex", "jsonPath": "status.phase"},
        ]);
        let path = "spec.versions[0].additionalPrinterColumns[1]";
        assert_eq!(
            errors(&crd),
            vec![
                format!("FieldValueRequired {path}.name: Required value"),
                format!(
                    "FieldValueInvalid {path}.type: Invalid value: \"text\": must be one of boolean,date,integer,number,string"
                ),
                format!(
                    "FieldValueInvalid {path}.format: Invalid value: \"hex\": must be one of byte,date,date-time,double,float,int32,int64,password"
                ),
                format!(
                    "FieldValueInvalid {path}.JSONPath: Invalid value: \"status.phase\": must be a simple json path starting with ."
                ),
            ]
        );
    }

    /// A schema with a field of each kind a selectable field may or may not point to.
    fn selectable_schema() -> Value {
        json!({"type": "object", "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
            "spec": {"type": "object", "properties": {
                "s": {"type": "string"},
                "i": {"type": "integer"},
                "b": {"type": "boolean"},
                "e": {"type": "string", "enum": ["red", "blue"]},
                "f": {"type": "string", "format": "date-time"},
                "a": {"type": "object", "properties": {"b": {"type": "string"}}},
                "num": {"type": "number"},
                "list": {"type": "array", "items": {"type": "string"}},
                "m": {"type": "object", "additionalProperties": {"type": "string"}},
                "c": {"type": "string"},
                "d": {"type": "string"},
            }},
        }})
    }

    fn selectable(paths: &[&str]) -> Value {
        paths.iter().map(|p| json!({"jsonPath": p})).collect()
    }

    #[test]
    fn selectable_fields_point_to_strings_booleans_and_integers() {
        let mut crd = crd_with_schema(selectable_schema());
        crd["spec"]["versions"][0]["selectableFields"] = selectable(&[
            ".spec.s",
            ".spec.i",
            ".spec.b",
            ".spec.e",
            ".spec.f",
            ".spec.a.b",
        ]);
        assert_eq!(errors(&crd), Vec::<String>::new());
        // A map value is a field too (a string here), whatever its key (`..` names the key `.`).
        crd["spec"]["versions"][0]["selectableFields"] = selectable(&[".spec.m.key", ".spec.m.."]);
        assert_eq!(errors(&crd), Vec::<String>::new());
        crd["spec"]["versions"][0]["selectableFields"] = json!([]);
        assert_eq!(errors(&crd), Vec::<String>::new());
    }

    #[test]
    fn selectable_fields_need_a_valid_path_to_a_scalar_outside_metadata() {
        let mut crd = crd_with_schema(selectable_schema());
        crd["spec"]["versions"][0]["selectableFields"] = json!([
            {},
            {"jsonPath": ".spec.missing"},
            {"jsonPath": "spec.s"},
            {"jsonPath": ".spec['s']"},
            {"jsonPath": ".spec."},
            {"jsonPath": ".metadata.name"},
            {"jsonPath": ".spec.a"},
            {"jsonPath": ".spec.num"},
            {"jsonPath": ".spec.s"},
            {"jsonPath": ".spec.s"},
            {"jsonPath": ".metadata"},
            {"jsonPath": ".spec.list"},
            {"jsonPath": ".spec.list[0]"},
            {"jsonPath": ".spec.s]"},
            {"jsonPath": ".spec..s"},
            {"jsonPath": ".spec.["},
            {"jsonPath": "'spec'.s"},
            {"jsonPath": ".spec['s'"},
            {"jsonPath": ".spec.s.x"},
            {"jsonPath": "."},
        ]);
        let path = "spec.versions[0].selectableFields";
        let scalar = "must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.";
        assert_eq!(
            errors(&crd),
            vec![
                format!("FieldValueRequired {path}[0].jsonPath: Required value"),
                format!(
                    "FieldValueInvalid {path}[1].jsonPath: Invalid value: \".spec.missing\": is an invalid path: does not refer to a valid field"
                ),
                format!(
                    "FieldValueInvalid {path}[2].jsonPath: Invalid value: \"spec.s\": is an invalid path: expected [ or . but got: spec"
                ),
                format!(
                    "FieldValueInvalid {path}[3].jsonPath: Invalid value: \".spec['s']\": is an invalid path: array notation is not allowed"
                ),
                format!(
                    "FieldValueInvalid {path}[4].jsonPath: Invalid value: \".spec.\": is an invalid path: unexpected end of JSON path"
                ),
                format!(
                    "FieldValueInvalid {path}[5].jsonPath: Invalid value: \".metadata.name\": must not point to fields in metadata"
                ),
                format!(
                    "FieldValueInvalid {path}[6].jsonPath: Invalid value: \".spec.a\": {scalar}"
                ),
                format!(
                    "FieldValueInvalid {path}[7].jsonPath: Invalid value: \".spec.num\": {scalar}"
                ),
                format!("FieldValueDuplicate {path}[9].jsonPath: Duplicate value: \".spec.s\""),
                format!(
                    "FieldValueInvalid {path}[10].jsonPath: Invalid value: \".metadata\": must not point to fields in metadata"
                ),
                format!(
                    "FieldValueInvalid {path}[10].jsonPath: Invalid value: \".metadata\": {scalar}"
                ),
                format!(
                    "FieldValueInvalid {path}[11].jsonPath: Invalid value: \".spec.list\": {scalar}"
                ),
                format!(
                    "FieldValueInvalid {path}[12].jsonPath: Invalid value: \".spec.list[0]\": is an invalid path: array notation is not allowed"
                ),
                format!(
                    "FieldValueInvalid {path}[13].jsonPath: Invalid value: \".spec.s]\": is an invalid path: expected [ or . but got: ]"
                ),
                format!(
                    "FieldValueInvalid {path}[14].jsonPath: Invalid value: \".spec..s\": is an invalid path: does not refer to a valid field"
                ),
                format!(
                    "FieldValueInvalid {path}[15].jsonPath: Invalid value: \".spec.[\": is an invalid path: does not refer to a valid field"
                ),
                format!(
                    "FieldValueInvalid {path}[16].jsonPath: Invalid value: \"'spec'.s\": is an invalid path: expected [ or . but got: 'spec'"
                ),
                format!(
                    "FieldValueInvalid {path}[17].jsonPath: Invalid value: \".spec['s'\": is an invalid path: array notation is not allowed"
                ),
                format!(
                    "FieldValueInvalid {path}[18].jsonPath: Invalid value: \".spec.s.x\": is an invalid path: does not refer to a valid field"
                ),
                format!(
                    "FieldValueInvalid {path}[19].jsonPath: Invalid value: \".\": is an invalid path: unexpected end of JSON path"
                ),
            ]
        );
    }

    #[test]
    fn at_most_eight_distinct_selectable_fields() {
        let mut crd = crd_with_schema(selectable_schema());
        let eight = [
            ".spec.s",
            ".spec.i",
            ".spec.b",
            ".spec.e",
            ".spec.f",
            ".spec.a.b",
            ".spec.c",
            ".spec.d",
        ];
        // Eight, one of them twice: a duplicate, not too many.
        let mut paths = eight.to_vec();
        paths.push(".spec.d");
        crd["spec"]["versions"][0]["selectableFields"] = selectable(&paths);
        assert_eq!(
            errors(&crd),
            [
                "FieldValueDuplicate spec.versions[0].selectableFields[8].jsonPath: Duplicate value: \".spec.d\""
            ]
        );
        paths.push(".spec.m.key");
        crd["spec"]["versions"][0]["selectableFields"] = selectable(&paths);
        assert_eq!(
            errors(&crd),
            [
                "FieldValueDuplicate spec.versions[0].selectableFields[8].jsonPath: Duplicate value: \".spec.d\"",
                "FieldValueTooMany spec.versions[0].selectableFields: Too many: 9: must have at most 8 items",
            ]
        );
    }

    #[test]
    fn selectable_fields_need_a_schema_and_come_last_among_a_versions_errors() {
        let mut crd = crd_with_schema(selectable_schema());
        let version = &mut crd["spec"]["versions"][0];
        version["name"] = json!("V1");
        version["subresources"] =
            json!({"scale": {"specReplicasPath": "spec.i", "statusReplicasPath": ".status.i"}});
        version["additionalPrinterColumns"] =
            json!([{"name": "", "type": "string", "jsonPath": ".spec.s"}]);
        version["selectableFields"] = selectable(&[".spec.num"]);
        let errors_of = |crd: &Value| {
            errors(crd)
                .into_iter()
                .filter(|e| !e.contains("DNS-1035"))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            errors_of(&crd),
            [
                "FieldValueInvalid spec.versions[0].subresources.scale.specReplicasPath: Invalid value: \"spec.i\": must be a simple json path starting with .",
                "FieldValueRequired spec.versions[0].additionalPrinterColumns[0].name: Required value",
                "FieldValueInvalid spec.versions[0].selectableFields[0].jsonPath: Invalid value: \".spec.num\": must point to a field of type string, boolean or integer. Enum string fields and strings with formats are allowed.",
            ]
        );
        assert!(errors(&crd)[0].starts_with(
            "FieldValueInvalid spec.versions[0].name: Invalid value: \"V1\": a DNS-1035 label"
        ));
        let mut crd = crd_with_schema(selectable_schema());
        crd["spec"]["versions"][0]
            .as_object_mut()
            .unwrap()
            .remove("schema");
        crd["spec"]["versions"][0]["selectableFields"] = selectable(&[".spec.s"]);
        assert_eq!(
            errors(&crd),
            [
                "FieldValueRequired spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required",
                "FieldValueInvalid spec.versions[0].selectableFields: Invalid value: \"\": selectableFields may only be set when version.schema.openAPIV3Schema is not included",
            ]
        );
    }

    #[test]
    fn kubernetes_groups_are_served_by_approved_crds_only() {
        let approved = |group: &str, plural: &str| {
            let mut crd = crd_with_schema(json!({"type": "object"}));
            crd["spec"]["group"] = json!(group);
            crd["spec"]["names"]["plural"] = json!(plural);
            crd["metadata"]["annotations"] =
                json!({"api-approved.kubernetes.io": "unapproved, imported"});
            crd
        };
        assert_eq!(
            errors(&approved("apps", "deployments")),
            Vec::<String>::new()
        );
        assert_eq!(errors(&approved("", "pods")), Vec::<String>::new());
        assert!(super::name_error(&approved("", "pods")).is_some());
        let mut pods = approved("", "pods");
        pods["metadata"]["name"] = json!("pods.core");
        assert_eq!(super::name_error(&pods), None);
        // What the server serves itself stays its own.
        assert_eq!(
            errors(&approved("", "configmaps")),
            [
                "FieldValueInvalid spec.names.plural: Invalid value: \"configmaps\": is a resource the server itself serves in this group"
            ]
        );
        // Without the approval, Kubernetes' rules hold.
        let mut unapproved = approved("apps", "deployments");
        unapproved["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("annotations");
        assert_eq!(
            errors(&unapproved),
            [
                "FieldValueInvalid spec.group: Invalid value: \"apps\": should be a domain with at least one dot"
            ]
        );
        unapproved["spec"]["group"] = json!("");
        assert_eq!(
            errors(&unapproved),
            ["FieldValueRequired spec.group: Required value"]
        );
        // Other dotless groups never.
        assert_eq!(errors(&approved("widgets", "things")).len(), 1);
    }

    #[test]
    fn protected_groups_need_the_approval_annotation() {
        let mut crd = crd_with_schema(json!({"type": "object"}));
        crd["spec"]["group"] = json!("things.k8s.io");
        let mut errs = Vec::new();
        validate_api_approval(&crd, None, &mut errs);
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0].field,
            "metadata.annotations[api-approved.kubernetes.io]"
        );
        assert_eq!(
            errs[0].message,
            "Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111"
        );
        let verdict = |annotation: &str| {
            let mut crd = crd.clone();
            crd["metadata"]["annotations"] = json!({"api-approved.kubernetes.io": annotation});
            let mut errs = Vec::new();
            validate_api_approval(&crd, None, &mut errs);
            errs.len()
        };
        assert_eq!(
            verdict("https://github.com/kubernetes/kubernetes/pull/78458"),
            0
        );
        assert_eq!(verdict("unapproved, experimental"), 0);
        assert_eq!(verdict("maybe"), 1);
        // An update that keeps the approval as it was passes, even without one.
        let mut errs = Vec::new();
        validate_api_approval(&crd, Some(&crd), &mut errs);
        assert!(errs.is_empty());
        // Other groups need nothing.
        crd["spec"]["group"] = json!("example.com");
        validate_api_approval(&crd, None, &mut errs);
        assert!(errs.is_empty());
    }

    #[test]
    fn scale_paths_are_simple_json_paths_under_spec_and_status() {
        let mut crd = crd_with_schema(json!({"type": "object"}));
        crd["spec"]["versions"][0]["subresources"] = json!({"scale": {
            "specReplicasPath": "spec.replicas",
            "statusReplicasPath": ".status",
            "labelSelectorPath": ".metadata.labels",
        }});
        assert_eq!(
            errors(&crd),
            [
                "FieldValueInvalid spec.versions[0].subresources.scale.specReplicasPath: Invalid value: \"spec.replicas\": must be a simple json path starting with .",
                "FieldValueInvalid spec.versions[0].subresources.scale.statusReplicasPath: Invalid value: \".status\": should be a json path under .status",
                "FieldValueInvalid spec.versions[0].subresources.scale.labelSelectorPath: Invalid value: \".metadata.labels\": should be a json path under either .spec or .status",
            ]
        );
        crd["spec"]["versions"][0]["subresources"] = json!({"scale": {}});
        assert_eq!(
            errors(&crd),
            [
                "FieldValueRequired spec.versions[0].subresources.scale.specReplicasPath: Required value",
                "FieldValueRequired spec.versions[0].subresources.scale.statusReplicasPath: Required value",
            ]
        );
        crd["spec"]["versions"][0]["subresources"] = json!({"scale": {
            "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector"}});
        assert_eq!(errors(&crd), Vec::<String>::new());
    }
}
