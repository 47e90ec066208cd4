//! Custom resources: the [`Resource`]s a CustomResourceDefinition serves, one per served version,
//! with what serving them needs beyond the catalogue's data ([`CustomResource`]: the version's
//! schema, subresources, printer columns, selectable fields, conversion).
//!
//! Resources are interned ([`Interner`]): every logical cluster whose CRD has the same spec gets
//! the very same `Arc<Resource>`s, so a schema is read (and its rules compiled) once per distinct
//! CRD, not once per cluster. They are reference-counted: held by the clusters serving them and
//! by requests in flight, freed with the last holder. The interner keeps only weak entries keyed
//! by a digest of the spec, pruned as they die; nothing here grows with the CRDs ever seen.

use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use kcp_apimachinery::object::{strings, text};
use kcp_apimachinery::schema::Defaults;
use kcp_apimachinery::schema::cel::CelValidator;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::builtin::{CRUD, Name, Names, Resource};
use crate::frozen::{FrozenSchema, Warm};

const STATUS_VERBS: &[&str] = &["get", "patch", "update"];

/// What serving one version of a custom resource needs besides its names.
pub struct CustomResource {
    /// The CRD's name, `<plural>.<group>`.
    pub crd_name: String,
    /// `<Kind>List`.
    pub list_kind: String,
    /// The version objects are stored at.
    pub storage_version: String,
    /// Every version of the CRD, served or not, in the CRD's order.
    pub versions: Vec<String>,
    /// The version's `openAPIV3Schema`, if it has one, frozen as text ([`Self::schema`] parses
    /// it): shared with the CRD's other versions whose schemas are the same (often most of a
    /// multi-version CRD's).
    schema: Option<FrozenSchema>,
    /// The schema's defaults, compiled, if it sets any: decoded requests and reads (of stored
    /// objects too) apply them.
    pub defaults: Option<Defaults>,
    /// The schema's compiled `x-kubernetes-validations`, if it has any (that compile).
    pub cel: Option<CelValidator>,
    /// Whether the `status` subresource is enabled.
    pub status: bool,
    /// The `scale` subresource, if enabled.
    pub scale: Option<Scale>,
    pub printer_columns: Vec<PrinterColumn>,
    /// `selectableFields` as paths without the leading dot (`spec.color`).
    pub selectable_fields: Vec<String>,
    /// The Warning a request for a deprecated version gets.
    pub deprecation_warning: Option<String>,
    pub conversion: Conversion,
    /// The identity hash of the APIExport it is bound from (its objects are stored under it,
    /// apart from a local CRD's or another export's of the same name); empty for a local CRD.
    pub identity: String,
    /// The SHA-256 of its CRD's spec (and identity), which everything here follows from
    /// (OpenAPI documents are hashed with it, without making their text).
    pub spec_digest: [u8; 32],
    /// Its OpenAPI schemas as JSON text, made on first use
    /// ([`crate::schema::custom_schema_members`]).
    pub openapi: std::sync::OnceLock<Box<str>>,
}

impl std::fmt::Debug for CustomResource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CustomResource")
            .field("crd_name", &self.crd_name)
            .finish_non_exhaustive()
    }
}

impl CustomResource {
    /// The version's `openAPIV3Schema`, if it has one, parsed (and kept so while its kind is
    /// among those in use).
    pub fn schema(&self) -> Option<Arc<Value>> {
        self.schema.as_ref().map(FrozenSchema::get)
    }

    /// [`Self::schema`] for a one-off use that must not keep it parsed (building its OpenAPI).
    pub fn schema_once(&self) -> Option<Arc<Value>> {
        self.schema.as_ref().map(FrozenSchema::get_once)
    }

    /// Whether its schema is held parsed now: for tests.
    pub fn schema_is_parsed(&self) -> bool {
        self.schema.as_ref().is_some_and(FrozenSchema::is_parsed)
    }
}

/// Interned: the same spec is the same value.
impl PartialEq for CustomResource {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for CustomResource {}

/// `subresources.scale`: JSON paths (with their leading dot) of the replica fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scale {
    pub spec_replicas_path: String,
    pub status_replicas_path: String,
    pub label_selector_path: Option<String>,
}

/// One `additionalPrinterColumns` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    pub name: String,
    /// integer, number, string, boolean or date.
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub json_path: String,
}

/// How objects move between versions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Conversion {
    /// Only `apiVersion` changes.
    None,
    /// A ConversionReview is posted to a webhook.
    Webhook(Webhook),
}

/// `spec.conversion.webhook`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// `clientConfig.url`; service references have no meaning in kcp and give `None`.
    pub url: Option<String>,
    /// `clientConfig.caBundle`, decoded (PEM).
    pub ca_bundle: Option<Vec<u8>>,
    pub review_versions: Vec<String>,
}

/// kube-apiserver's Warning for a deprecated version without its own `deprecationWarning`:
/// `<group>/<version> <Kind> is deprecated`, and `; use <group>/<version> <Kind>` naming the
/// most preferred served, non-deprecated version that Kubernetes ranks above it.
fn default_deprecation_warning(group: &str, kind: &str, name: &str, versions: &[Value]) -> String {
    let message = format!("{group}/{name} {kind} is deprecated");
    let newer = versions
        .iter()
        .filter(|v| v["served"].as_bool() == Some(true) && v["deprecated"].as_bool() != Some(true))
        .map(|v| text(v, "name"))
        .filter(|candidate| compare_versions(candidate, name) == Ordering::Less)
        .min_by(|a, b| compare_versions(a, b));
    match newer {
        Some(newer) => format!("{message}; use {group}/{newer} {kind}"),
        None => message,
    }
}

/// The name of the CRD for `plural` of `group`: `<plural>.<group>`, and `<plural>.core` for the
/// core group (as kcp's prototype named the CRDs of Kubernetes' core resources).
pub fn crd_name(plural: &str, group: &str) -> String {
    match group {
        "" => format!("{plural}.core"),
        group => format!("{plural}.{group}"),
    }
}

/// Kubernetes' version priority (`CompareKubeAwareVersionStrings`, as an ordering where the
/// preferred version comes first): GA before beta before alpha, higher numbers first, then
/// versions of any other form alphabetically.
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    fn parse(version: &str) -> Option<(u8, u64, u64)> {
        let rest = version.strip_prefix('v')?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let major: u64 = rest[..digits].parse().ok()?;
        let tail = &rest[digits..];
        let (stability, minor) = if tail.is_empty() {
            (2, 0)
        } else if let Some(n) = tail.strip_prefix("beta") {
            (1, n.parse().ok()?)
        } else if let Some(n) = tail.strip_prefix("alpha") {
            (0, n.parse().ok()?)
        } else {
            return None;
        };
        Some((stability, major, minor))
    }
    match (parse(a), parse(b)) {
        (Some(x), Some(y)) => y.cmp(&x),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// The subresources served for these settings (static: there are only four combinations).
fn served_subresources(
    status: bool,
    scale: bool,
) -> &'static [(&'static str, &'static [&'static str])] {
    const STATUS: (&str, &[&str]) = ("status", STATUS_VERBS);
    const SCALE: (&str, &[&str]) = ("scale", STATUS_VERBS);
    match (status, scale) {
        (true, true) => &[STATUS, SCALE],
        (true, false) => &[STATUS],
        (false, true) => &[SCALE],
        (false, false) => &[],
    }
}

fn owned(text: &str) -> Name {
    Cow::Owned(text.to_string())
}

/// The served resources of a CRD spec, one per served version, built fresh (callers intern).
/// A version's schema with its compiled defaults and rules.
type CompiledSchema<'a> = (
    &'a Value,
    FrozenSchema,
    Option<Defaults>,
    Option<CelValidator>,
);

/// `schema` (frozen for `warm`, kept parsed without one), its defaults and its rules,
/// compiled, or those of an earlier version with the same schema (`compiled`).
fn compiled_schema<'a>(
    compiled: &mut Vec<CompiledSchema<'a>>,
    schema: Option<&'a Value>,
    warm: Option<&Arc<Warm>>,
) -> (Option<FrozenSchema>, Option<Defaults>, Option<CelValidator>) {
    let Some(schema) = schema else {
        return (None, None, None);
    };
    if let Some((_, shared, defaults, cel)) = compiled.iter().find(|(known, ..)| *known == schema) {
        return (Some(shared.clone()), defaults.clone(), cel.clone());
    }
    let frozen = match warm {
        Some(warm) => FrozenSchema::new(schema, warm),
        None => FrozenSchema::parsed(schema.clone()),
    };
    let defaults = Defaults::compile(schema);
    // A CRD whose rules do not compile is refused when it is written.
    let cel = CelValidator::compile(schema).ok().flatten();
    compiled.push((schema, frozen.clone(), defaults.clone(), cel.clone()));
    (Some(frozen), defaults, cel)
}

/// The served resources of a CRD spec, their schemas frozen for `warm` (kept parsed without
/// one: kcp's own kinds).
pub(crate) fn build(spec: &Value, warm: Option<&Arc<Warm>>) -> Vec<Resource> {
    build_digested(spec, "", digest(spec, ""), warm)
}

/// [`build`] of a spec whose digest is known, for `identity`.
fn build_digested(
    spec: &Value,
    identity: &str,
    spec_digest: Digest,
    warm: Option<&Arc<Warm>>,
) -> Vec<Resource> {
    let group = text(spec, "group");
    let names = &spec["names"];
    let plural = text(names, "plural");
    let kind = text(names, "kind");
    let singular = match text(names, "singular") {
        "" => kind.to_lowercase(),
        given => given.to_string(),
    };
    let list_kind = match text(names, "listKind") {
        "" => format!("{kind}List"),
        given => given.to_string(),
    };
    let all_versions = spec["versions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let storage_version = all_versions
        .iter()
        .find(|v| v["storage"].as_bool() == Some(true))
        .map(|v| text(v, "name"))
        .unwrap_or_default();
    let crd_name = self::crd_name(plural, group);
    let versions: Vec<String> = all_versions
        .iter()
        .map(|v| text(v, "name").to_string())
        .collect();
    let short_names: Names = strings(&names["shortNames"])
        .into_iter()
        .map(Cow::Owned)
        .collect();
    let categories: Names = strings(&names["categories"])
        .into_iter()
        .map(Cow::Owned)
        .collect();
    let namespaced = text(spec, "scope") != "Cluster";
    let conversion = match text(&spec["conversion"], "strategy") {
        "Webhook" => {
            let webhook = &spec["conversion"]["webhook"];
            let config = &webhook["clientConfig"];
            Conversion::Webhook(Webhook {
                url: config
                    .get("url")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                ca_bundle: config
                    .get("caBundle")
                    .and_then(Value::as_str)
                    .and_then(|b| {
                        use base64::Engine;
                        base64::engine::general_purpose::STANDARD.decode(b).ok()
                    }),
                review_versions: strings(&webhook["conversionReviewVersions"]),
            })
        }
        _ => Conversion::None,
    };
    // Versions with the same schema share it, its defaults and its rules.
    let mut compiled: Vec<CompiledSchema<'_>> = Vec::new();
    all_versions
        .iter()
        .filter(|v| v["served"].as_bool() == Some(true))
        .map(|version| {
            let (schema, defaults, cel) = compiled_schema(
                &mut compiled,
                version["schema"].get("openAPIV3Schema"),
                warm,
            );
            let subresources = &version["subresources"];
            let status = subresources.get("status").is_some_and(Value::is_object);
            let scale = subresources
                .get("scale")
                .filter(|s| s.is_object())
                .map(|s| Scale {
                    spec_replicas_path: text(s, "specReplicasPath").to_string(),
                    status_replicas_path: text(s, "statusReplicasPath").to_string(),
                    label_selector_path: s
                        .get("labelSelectorPath")
                        .and_then(Value::as_str)
                        .map(str::to_string),
                });
            let subresources = served_subresources(status, scale.is_some());
            let printer_columns = version["additionalPrinterColumns"]
                .as_array()
                .map(|columns| {
                    columns
                        .iter()
                        .map(|c| PrinterColumn {
                            name: text(c, "name").to_string(),
                            type_: text(c, "type").to_string(),
                            format: text(c, "format").to_string(),
                            description: text(c, "description").to_string(),
                            priority: c["priority"].as_i64().unwrap_or(0),
                            json_path: text(c, "jsonPath").to_string(),
                        })
                        .collect()
                })
                .unwrap_or_default();
            let selectable_fields = version["selectableFields"]
                .as_array()
                .map(|fields| {
                    fields
                        .iter()
                        .map(|f| text(f, "jsonPath").trim_start_matches('.').to_string())
                        .collect()
                })
                .unwrap_or_default();
            let name = text(version, "name");
            let deprecation_warning = (version["deprecated"].as_bool() == Some(true)).then(|| {
                match version.get("deprecationWarning").and_then(Value::as_str) {
                    Some(warning) => warning.to_string(),
                    None => default_deprecation_warning(group, kind, name, all_versions),
                }
            });
            let custom = CustomResource {
                crd_name: crd_name.clone(),
                list_kind: list_kind.clone(),
                storage_version: storage_version.to_string(),
                versions: versions.clone(),
                defaults,
                cel,
                schema,
                status,
                scale,
                printer_columns,
                selectable_fields,
                deprecation_warning,
                conversion: conversion.clone(),
                identity: identity.to_string(),
                spec_digest,
                openapi: std::sync::OnceLock::new(),
            };
            Resource {
                group: owned(group),
                version: owned(name),
                name: owned(plural),
                singular: owned(&singular),
                kind: owned(kind),
                namespaced,
                verbs: CRUD,
                short_names: short_names.clone(),
                categories: categories.clone(),
                subresources,
                custom: Some(Arc::new(custom)),
            }
        })
        .collect()
}

/// The served resources of one CRD spec, one per served version in the CRD's order, shared by
/// every logical cluster whose CRD has that spec (and by the requests using them).
pub type Resources = Arc<[Arc<Resource>]>;

/// A SHA-256 digest of a spec's JSON text (serde_json writes object keys sorted, so equal
/// values have equal digests) and of the identity it is served under, if any.
type Digest = [u8; 32];

fn digest(spec: &Value, identity: &str) -> Digest {
    let mut hasher = Sha256::new();
    if !identity.is_empty() {
        // A JSON text never starts with a NUL: identities cannot collide with specs.
        hasher.update([0]);
        hasher.update(identity.as_bytes());
        hasher.update([0]);
    }
    // Writing into a hasher cannot fail, nor can serializing a `Value`.
    let _ = serde_json::to_writer(&mut hasher, spec);
    hasher.finalize().into()
}

/// Hands out one shared set of resources per distinct CRD spec, as long as anyone holds it.
///
/// Entries are weak and keyed by the spec's digest: the interner keeps neither the spec text
/// nor the resources alive. The logical clusters serving a CRD (the registry's index) and the
/// requests, watches and controllers using its resources hold them; when the last lets go they
/// are freed, and the dead entry is pruned once dead entries could outnumber live ones.
#[derive(Default)]
pub struct Interner {
    specs: Mutex<Specs>,
    /// The schemas kept parsed.
    warm: Arc<Warm>,
}

#[derive(Default)]
struct Specs {
    entries: HashMap<Digest, Weak<[Arc<Resource>]>>,
    /// Prune dead entries when there are this many (twice the live ones after the last prune).
    prune_at: usize,
}

/// The fewest entries pruning waits for.
const MIN_PRUNE: usize = 64;

impl Specs {
    fn live(&self, digest: &Digest) -> Option<Resources> {
        self.entries.get(digest).and_then(Weak::upgrade)
    }

    fn insert(&mut self, digest: Digest, resources: &Resources) {
        if self.entries.len() >= self.prune_at {
            self.entries.retain(|_, entry| entry.strong_count() > 0);
            self.prune_at = (self.entries.len() * 2).max(MIN_PRUNE);
        }
        self.entries.insert(digest, Arc::downgrade(resources));
    }
}

impl Interner {
    fn lock(&self) -> MutexGuard<'_, Specs> {
        self.specs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The served resources of a CRD `spec`: the same `Arc`s for the same spec while anyone
    /// holds them, built (schema read, rules compiled) otherwise.
    pub fn resources(&self, spec: &Value) -> Resources {
        self.resources_with_identity(spec, "")
    }

    /// [`Interner::resources`] for a spec served under an APIExport's `identity` (empty: a
    /// local CRD): the same spec under two identities is two sets of resources, stored apart.
    pub fn resources_with_identity(&self, spec: &Value, identity: &str) -> Resources {
        let digest = digest(spec, identity);
        if let Some(live) = self.lock().live(&digest) {
            return live;
        }
        // Built outside the lock: compiling a big schema must not stall every other cluster.
        let built: Resources = build_digested(spec, identity, digest, Some(&self.warm))
            .into_iter()
            .map(Arc::new)
            .collect();
        let mut specs = self.lock();
        if let Some(raced) = specs.live(&digest) {
            return raced;
        }
        specs.insert(digest, &built);
        built
    }

    /// How many distinct CRD specs have their set of resources alive (held by some cluster's
    /// index entry; a request holding one resource keeps that resource, not the entry).
    pub fn live(&self) -> usize {
        self.lock()
            .entries
            .values()
            .filter(|entry| entry.strong_count() > 0)
            .count()
    }

    /// How many entries the interner keeps, dead ones not yet pruned included.
    pub fn entries(&self) -> usize {
        self.lock().entries.len()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn spec(schema: Value) -> Value {
        json!({
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"], "categories": ["all"]},
            "versions": [
                {"name": "v1", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": schema},
                 "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                 "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size", "priority": 1}],
                 "selectableFields": [{"jsonPath": ".spec.color"}]},
                {"name": "v2", "served": false, "storage": false},
                {"name": "v0", "served": true, "storage": false, "deprecated": true}
            ]
        })
    }

    #[test]
    fn one_resource_per_served_version() {
        let interner = Interner::default();
        let resources = interner.resources(&spec(json!({"type": "object"})));
        assert_eq!(resources.len(), 2);
        let v1 = &resources[0];
        assert_eq!(
            (&*v1.group, &*v1.version, &*v1.name),
            ("example.com", "v1", "widgets")
        );
        assert_eq!((&*v1.singular, &*v1.kind), ("widget", "Widget"));
        assert_eq!(*v1.short_names, ["wd"]);
        assert_eq!(*v1.categories, ["all"]);
        let custom = v1.custom().unwrap();
        assert_eq!(custom.crd_name, "widgets.example.com");
        assert_eq!(custom.list_kind, "WidgetList");
        assert_eq!(custom.storage_version, "v1");
        assert_eq!(custom.versions, ["v1", "v2", "v0"]);
        assert!(custom.status);
        assert_eq!(
            v1.subresources.iter().map(|s| s.0).collect::<Vec<_>>(),
            ["status", "scale"]
        );
        assert_eq!(custom.printer_columns[0].priority, 1);
        assert_eq!(custom.selectable_fields, ["spec.color"]);
        assert!(custom.defaults.is_none());
        assert!(custom.cel.is_none());
        let v0 = resources[1].custom().unwrap();
        assert_eq!(
            v0.deprecation_warning.as_deref(),
            Some("example.com/v0 Widget is deprecated; use example.com/v1 Widget")
        );
    }

    #[test]
    fn the_default_deprecation_warning_names_the_preferred_newer_version() {
        let version = |name: &str, served: bool, deprecated: bool| json!({"name": name, "served": served, "deprecated": deprecated});
        let versions = [
            version("v1alpha1", true, true),
            version("v1beta1", true, true),
            version("v1", true, false),
            version("v2", false, false),
            version("v1beta2", true, false),
        ];
        let warning = |name| default_deprecation_warning("example.com", "Widget", name, &versions);
        assert_eq!(
            warning("v1beta1"),
            "example.com/v1beta1 Widget is deprecated; use example.com/v1 Widget"
        );
        assert_eq!(
            warning("v1alpha1"),
            "example.com/v1alpha1 Widget is deprecated; use example.com/v1 Widget"
        );
        assert_eq!(warning("v3"), "example.com/v3 Widget is deprecated");
    }

    #[test]
    fn versions_sort_as_kubernetes_prefers_them() {
        let mut versions = vec!["v1alpha1", "foo", "v1", "v2beta1", "v2", "v1beta2", "v10"];
        versions.sort_by(|a, b| compare_versions(a, b));
        assert_eq!(
            versions,
            ["v10", "v2", "v1", "v2beta1", "v1beta2", "v1alpha1", "foo"]
        );
    }

    #[test]
    fn the_same_spec_is_the_same_resource() {
        let interner = Interner::default();
        let a = interner.resources(&spec(json!({"type": "object"})));
        let b = interner.resources(&spec(json!({"type": "object"})));
        assert!(Arc::ptr_eq(&a, &b));
        let c = interner.resources(&spec(json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer", "default": 1}}}}
        })));
        assert!(!Arc::ptr_eq(&a, &c));
        assert!(c[0].custom().unwrap().defaults.is_some());
        let d = interner.resources(&spec(json!({
            "type": "object",
            "properties": {"spec": {"type": "object"}},
            "x-kubernetes-validations": [{"rule": "has(self.spec)"}],
        })));
        assert!(d[0].custom().unwrap().cel.is_some());
        assert_ne!(a[0], c[0]);
        assert_eq!(interner.live(), 3);
    }

    #[test]
    fn schemas_are_kept_as_text_parsed_on_use_and_shared_by_equal_versions() {
        let interner = Interner::default();
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object"}}});
        let mut two_versions = spec(schema.clone());
        two_versions["versions"][2]["schema"] = json!({"openAPIV3Schema": schema});
        let resources = interner.resources(&two_versions);
        let (v1, v0) = (
            resources[0].custom().unwrap(),
            resources[1].custom().unwrap(),
        );
        assert!(!v1.schema_is_parsed());
        let parsed = v1.schema().unwrap();
        assert_eq!(*parsed, schema);
        assert!(Arc::ptr_eq(&parsed, &v0.schema().unwrap()));
        drop(parsed);
        // Kept parsed while in use lately.
        assert!(v0.schema_is_parsed());
    }

    #[test]
    fn resources_are_freed_with_their_last_holder() {
        let interner = Interner::default();
        let held = interner.resources(&spec(json!({"type": "object"})));
        let weak = Arc::downgrade(&held[0]);
        let schema = Arc::downgrade(held[0].custom.as_ref().unwrap());
        // A request's handle on one version keeps that resource (and its schema) alive, not
        // the set: the interner only shares sets that some logical cluster serves.
        let handle = Arc::clone(&held[0]);
        drop(held);
        assert_eq!(interner.live(), 0);
        assert!(weak.upgrade().is_some() && schema.upgrade().is_some());
        drop(handle);
        assert!(weak.upgrade().is_none());
        assert!(schema.upgrade().is_none());
        assert_eq!(interner.live(), 0);
        // The same spec again is built afresh.
        let again = interner.resources(&spec(json!({"type": "object"})));
        assert_eq!(interner.live(), 1);
        assert_eq!(again.len(), 2);
    }

    #[test]
    fn dead_entries_are_pruned() {
        let interner = Interner::default();
        let kept = interner.resources(&spec(json!({"type": "object"})));
        for n in 0..500 {
            let schema = json!({"type": "object", "description": format!("revision {n}")});
            drop(interner.resources(&spec(schema)));
        }
        assert!(interner.entries() <= MIN_PRUNE, "{}", interner.entries());
        assert_eq!(interner.live(), 1);
        assert!(Arc::ptr_eq(
            &kept,
            &interner.resources(&spec(json!({"type": "object"})))
        ));
    }
}
