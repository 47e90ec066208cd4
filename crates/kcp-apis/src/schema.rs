//! OpenAPI v3 schemas of the built-in kinds, and pruning of the fields they do not declare.
//!
//! The schemas come from `k8s-openapi`'s types (generated from upstream's own OpenAPI, with
//! upstream's descriptions), turned into `components.schemas` entries named as Kubernetes names
//! them (`io.k8s.api.core.v1.ConfigMap`). Each top-level kind carries
//! `x-kubernetes-group-version-kind`, which `kubectl explain` looks for; list kinds are written
//! here since `k8s-openapi` has no schema for them.
//!
//! Everything is generated once, on first use, for all built-in kinds together.

use std::collections::BTreeSet;
use std::sync::OnceLock;

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

use crate::builtin::{RESOURCES, Resource};

/// Where schemas live inside an OpenAPI v3 document.
pub const REF_PREFIX: &str = "#/components/schemas/";

/// The schema entries every group-version document needs besides its kinds': what the
/// operations of any resource refer to.
pub const COMMON: &[&str] = &[DELETE_OPTIONS, PATCH, STATUS, WATCH_EVENT];
pub const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
pub const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
pub const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
pub const WATCH_EVENT: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent";

/// All schemas of the built-in kinds, keyed by their component name.
pub struct Catalogue {
    schemas: Map<String, Value>,
}

const ANY_JSON: &str = "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.JSON";
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// The schemas of every built-in kind, generated on first use.
pub fn catalogue() -> &'static Catalogue {
    static CATALOGUE: OnceLock<Catalogue> = OnceLock::new();
    CATALOGUE.get_or_init(Catalogue::generate)
}

impl Catalogue {
    fn generate() -> Catalogue {
        let mut generator = SchemaSettings::openapi3().into_generator();
        for name in COMMON {
            common_schema(&mut generator, name);
        }
        let mut kinds = Vec::new();
        for resource in RESOURCES {
            if kind_schema(&mut generator, &resource.group, &resource.kind).is_some() {
                kinds.push(resource);
            }
        }
        let mut schemas = generator.take_definitions(true);
        for resource in kinds {
            let name = component_name(resource);
            if let Some(Value::Object(schema)) = schemas.get_mut(&name) {
                schema.insert(
                    "x-kubernetes-group-version-kind".into(),
                    json!([gvk(resource, &resource.kind)]),
                );
            }
            schemas.insert(format!("{name}List"), list_schema(resource, &name));
        }
        // Kubernetes never requires `metadata` (the server fills it in); `k8s-openapi`'s types
        // do, which kubectl's client-side validation would enforce.
        for schema in schemas.values_mut() {
            if let Value::Object(schema) = schema
                && let Some(Value::Array(required)) = schema.get_mut("required")
            {
                required.retain(|field| field != "metadata");
                if required.is_empty() {
                    schema.remove("required");
                }
            }
        }
        add_list_and_map_extensions(&mut schemas);
        // `JSON` (CRD defaults, enums, examples) holds any JSON value, not only objects.
        if let Some(Value::Object(any)) = schemas.get_mut(ANY_JSON) {
            any.remove("type");
            any.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
        }
        Catalogue { schemas }
    }

    /// The schema of `resource`'s kind server-side apply merges by (a custom resource's
    /// version schema, `custom_schema` as [`crate::custom::CustomResource::schema`] parsed it,
    /// else the built-in kind's), and ObjectMeta's.
    pub fn apply_schema<'a>(
        &'a self,
        resource: &'a Resource,
        custom_schema: Option<&'a Value>,
    ) -> kcp_apimachinery::managedfields::Schema<'a> {
        use kcp_apimachinery::managedfields::Schema;
        let metadata = self.get(OBJECT_META);
        let root = match resource.custom() {
            Some(_) => custom_schema,
            None => self.get(&component_name(resource)),
        };
        let schema = match root {
            Some(root) => Schema::new(root, self),
            // Nothing declared: every shape deduced from the values.
            None => Schema::new(&Value::Null, self),
        };
        match metadata {
            Some(metadata) => schema.with_metadata(metadata),
            None => schema,
        }
    }

    /// One schema by component name.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.schemas.get(name)
    }

    /// The schema `name` with its references inlined (`$ref`, and `allOf` of one reference),
    /// `depth` levels deep; deeper ones become untyped (`{}`): a self-contained schema for
    /// those who cannot follow references (CEL type checking).
    pub fn inlined(&self, name: &str, depth: usize) -> Option<Value> {
        Some(self.inline(self.schemas.get(name)?, depth))
    }

    fn inline(&self, schema: &Value, depth: usize) -> Value {
        let referenced = |reference: &Value| {
            reference
                .as_str()
                .and_then(|r| r.strip_prefix(REF_PREFIX))
                .and_then(|name| self.schemas.get(name))
        };
        match schema {
            Value::Object(fields) => {
                if let Some(target) = fields.get("$ref").and_then(&referenced) {
                    return match depth {
                        0 => json!({}),
                        _ => self.inline(target, depth - 1),
                    };
                }
                let mut out = Map::new();
                for (key, value) in fields {
                    if key == "allOf"
                        && let Some([only]) = value.as_array().map(Vec::as_slice)
                        && let Some(target) = only.get("$ref").and_then(&referenced)
                    {
                        if depth > 0
                            && let Value::Object(inlined) = self.inline(target, depth - 1)
                        {
                            for (k, v) in inlined {
                                out.entry(k).or_insert(v);
                            }
                        }
                        continue;
                    }
                    out.insert(key.clone(), self.inline(value, depth));
                }
                Value::Object(out)
            }
            Value::Array(items) => {
                Value::Array(items.iter().map(|i| self.inline(i, depth)).collect())
            }
            other => other.clone(),
        }
    }

    /// The named schemas and everything they refer to, transitively.
    pub fn closure<'a>(&self, roots: impl IntoIterator<Item = &'a str>) -> Map<String, Value> {
        let mut seen = BTreeSet::new();
        let mut pending: Vec<String> = roots.into_iter().map(str::to_string).collect();
        while let Some(name) = pending.pop() {
            let Some(schema) = self.schemas.get(&name) else {
                continue;
            };
            if seen.insert(name) {
                collect_refs(schema, &mut pending);
            }
        }
        seen.into_iter()
            .filter_map(|name| {
                let schema = self.schemas.get(&name)?.clone();
                Some((name, schema))
            })
            .collect()
    }

    /// Follows `$ref` (directly or as the single `allOf` entry) to the schema it names.
    fn resolve<'a>(&'a self, schema: &'a Value) -> &'a Value {
        let mut current = schema;
        for _ in 0..8 {
            let target = match current.get("$ref").and_then(Value::as_str) {
                Some(reference) => reference,
                None => match current.get("allOf").and_then(Value::as_array) {
                    Some(all) if all.len() == 1 => match all[0].get("$ref").and_then(Value::as_str)
                    {
                        Some(reference) => reference,
                        None => return current,
                    },
                    _ => return current,
                },
            };
            match target
                .strip_prefix(REF_PREFIX)
                .and_then(|name| self.schemas.get(name))
            {
                Some(next) => current = next,
                None => return current,
            }
        }
        current
    }

    /// Removes from `object` the fields the schema of `resource`'s kind does not declare, as
    /// decoding into the typed object does in Kubernetes, and returns their paths
    /// (`spec.foo`, `rules[0].bar`). Kinds without a schema are left alone.
    pub fn prune_unknown(&self, resource: &Resource, object: &mut Value) -> Vec<String> {
        let mut unknown = Vec::new();
        if let Some(custom) = resource.custom() {
            // The CRD's schema below the root, ObjectMeta's for the metadata.
            if let Some(schema) = custom.schema() {
                unknown = kcp_apimachinery::schema::prune(&schema, object);
            }
            if let (Some(meta), Some(metadata)) =
                (self.schemas.get(OBJECT_META), object.get_mut("metadata"))
            {
                self.prune(meta, metadata, "metadata", &mut unknown);
            }
            return unknown;
        }
        if let Some(schema) = self.schemas.get(&component_name(resource)) {
            self.prune(schema, object, "", &mut unknown);
        }
        unknown
    }

    /// The values of `object` whose JSON type the schema of `resource`'s kind does not allow
    /// (a number where a string belongs), each described as
    /// Kubernetes' JSON decoder does: `json: cannot unmarshal number into Go struct field
    /// ObjectMeta.metadata.name of type string`. `null` is allowed anywhere, as in Go.
    pub fn type_errors(&self, resource: &Resource, object: &Value) -> Vec<String> {
        let mut errors = Vec::new();
        if resource.custom.is_some() {
            // Custom resources: the schema's own types are checked by validation (422).
            if let (Some(meta), Some(metadata)) =
                (self.schemas.get(OBJECT_META), object.get("metadata"))
            {
                self.check_types(meta, metadata, "metadata", &mut errors);
            }
            return errors;
        }
        if let Some(schema) = self.schemas.get(&component_name(resource)) {
            self.check_types(schema, object, "", &mut errors);
        }
        errors
    }

    fn check_types(&self, schema: &Value, value: &Value, path: &str, errors: &mut Vec<String>) {
        let schema = self.resolve(schema);
        if value.is_null() {
            return;
        }
        if let Some(expected) = schema.get("type").and_then(Value::as_str) {
            let fits = match expected {
                "string" => value.is_string(),
                "integer" => value.is_i64() || value.is_u64(),
                "number" => value.is_number(),
                "boolean" => value.is_boolean(),
                "object" => value.is_object(),
                "array" => value.is_array(),
                _ => true,
            };
            if !fits {
                let found = match value {
                    Value::Bool(_) => "bool",
                    Value::Number(_) => "number",
                    Value::String(_) => "string",
                    Value::Array(_) => "array",
                    Value::Object(_) => "object",
                    Value::Null => "null",
                };
                errors.push(format!(
                    "json: cannot unmarshal {found} into Go struct field {} of type {expected}",
                    if path.is_empty() { "." } else { path }
                ));
                return;
            }
        } else if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
            && !(value.is_string() || value.is_number())
        {
            errors.push(format!(
                "json: cannot unmarshal {} into Go struct field {path} of type int or string",
                if value.is_object() {
                    "object"
                } else {
                    "array or bool"
                }
            ));
            return;
        }
        match value {
            Value::Object(fields) => {
                if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                    for (key, field) in fields {
                        if let Some(field_schema) = properties.get(key) {
                            self.check_types(field_schema, field, &join(path, key), errors);
                        }
                    }
                } else if let Some(values) = schema.get("additionalProperties")
                    && values.is_object()
                {
                    for (key, field) in fields {
                        self.check_types(values, field, &format!("{path}[{key}]"), errors);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item_schema) = schema.get("items") {
                    for (index, item) in items.iter().enumerate() {
                        self.check_types(item_schema, item, &format!("{path}[{index}]"), errors);
                    }
                }
            }
            _ => {}
        }
    }

    fn prune(&self, schema: &Value, value: &mut Value, path: &str, unknown: &mut Vec<String>) {
        let schema = self.resolve(schema);
        match value {
            Value::Object(fields) => {
                if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                    fields.retain(|key, _| {
                        let known = properties.contains_key(key);
                        if !known {
                            unknown.push(join(path, key));
                        }
                        known
                    });
                    for (key, field) in fields.iter_mut() {
                        self.prune(&properties[key], field, &join(path, key), unknown);
                    }
                } else if let Some(values) = schema.get("additionalProperties")
                    && values.is_object()
                {
                    for (key, field) in fields.iter_mut() {
                        self.prune(values, field, &format!("{path}[{key}]"), unknown);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item_schema) = schema.get("items") {
                    for (index, item) in items.iter_mut().enumerate() {
                        self.prune(item_schema, item, &format!("{path}[{index}]"), unknown);
                    }
                }
            }
            _ => {}
        }
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn collect_refs(schema: &Value, out: &mut Vec<String>) {
    match schema {
        Value::Object(fields) => {
            for (key, value) in fields {
                if key == "$ref"
                    && let Some(name) = value.as_str().and_then(|r| r.strip_prefix(REF_PREFIX))
                {
                    out.push(name.to_string());
                } else {
                    collect_refs(value, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| collect_refs(item, out)),
        _ => {}
    }
}

impl kcp_apimachinery::managedfields::Resolve for Catalogue {
    fn resolve(&self, reference: &str) -> Option<&Value> {
        self.schemas.get(reference.strip_prefix(REF_PREFIX)?)
    }
}

/// Kubernetes' list and map extensions (`x-kubernetes-list-type`, `-list-map-keys`,
/// `-map-type`, `-patch-strategy`, `-patch-merge-key`) on the definitions and properties that
/// have them upstream: server-side apply merges by them, and clients read them from OpenAPI.
/// `k8s-openapi`'s types do not carry them; `schema_extensions.json` is written from
/// Kubernetes' own OpenAPI by `scripts/gen-schema-extensions`.
fn add_list_and_map_extensions(schemas: &mut Map<String, Value>) {
    let extensions: Map<String, Value> =
        serde_json::from_str(include_str!("schema_extensions.json")).unwrap_or_default();
    for (name, fields) in extensions {
        let (Some(Value::Object(schema)), Value::Object(fields)) = (schemas.get_mut(&name), fields)
        else {
            continue;
        };
        for (field, extension) in fields {
            let Value::Object(extension) = extension else {
                continue;
            };
            let target = if field.is_empty() {
                Some(&mut *schema)
            } else {
                schema
                    .get_mut("properties")
                    .and_then(|p| p.get_mut(&field))
                    .and_then(Value::as_object_mut)
            };
            let Some(target) = target else { continue };
            // A bare `$ref` has no siblings in OpenAPI v3: wrap it in `allOf`, as Kubernetes
            // writes its own documents.
            if let Some(reference) = target.remove("$ref") {
                target.insert("allOf".into(), json!([{ "$ref": reference }]));
            }
            target.extend(extension);
        }
    }
}

/// `{group, kind, version}` as the `x-kubernetes-group-version-kind` entries spell it.
pub fn gvk(resource: &Resource, kind: &str) -> Value {
    json!({"group": resource.group, "kind": kind, "version": resource.version})
}

/// The component name of a resource's kind, e.g. `io.k8s.api.rbac.v1.Role`.
pub fn component_name(resource: &Resource) -> String {
    if resource.custom.is_some() {
        // Custom kinds are named by their reversed group: `com.example.v1.Widget`.
        let reversed: Vec<&str> = resource.group.rsplit('.').collect();
        return format!(
            "{}.{}.{}",
            reversed.join("."),
            resource.version,
            resource.kind
        );
    }
    builtin_component(&resource.group, &resource.version, &resource.kind)
}

/// The component name Kubernetes gives the built-in kind `kind` of `group`/`version`
/// (`io.k8s.api.rbac.v1.Role`), subresources' kinds (TokenRequest) included.
pub fn builtin_component(group: &str, version: &str, kind: &str) -> String {
    let package = match group {
        "" => "io.k8s.api.core".to_string(),
        "apiextensions.k8s.io" => "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions".into(),
        // The first segment: `rbac.authorization.k8s.io` is `rbac`.
        group => format!("io.k8s.api.{}", group.split('.').next().unwrap_or(group)),
    };
    format!("{package}.{version}.{kind}")
}

/// The schema of a custom resource's kind as OpenAPI documents publish it: its CRD version's
/// schema with the standard `apiVersion`, `kind` and `metadata` fields and its
/// group-version-kind; and the schema of its list.
pub fn custom_schemas(resource: &Resource) -> Vec<(String, Value)> {
    let name = component_name(resource);
    let mut schema = resource
        .custom()
        .and_then(|custom| custom.schema_once())
        .map(|schema| Value::clone(&schema))
        .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    if let Value::Object(fields) = &mut schema {
        let properties = fields.entry("properties").or_insert_with(|| json!({}));
        if let Value::Object(properties) = properties {
            properties.insert(
                "apiVersion".into(),
                json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}),
            );
            properties.insert(
                "kind".into(),
                json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}),
            );
            properties.insert(
                "metadata".into(),
                json!({"allOf": [{"$ref": format!("{REF_PREFIX}{OBJECT_META}")}], "description": "Standard object's metadata."}),
            );
        }
        fields.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([gvk(resource, &resource.kind)]),
        );
    }
    let list = list_schema(resource, &name);
    vec![(format!("{name}List"), list), (name, schema)]
}

/// [`custom_schemas`] of a custom resource as the JSON members of an OpenAPI document's
/// `components.schemas` (`"<name>List":{...},"<name>":{...}`): made on first use and kept with
/// the resource, so a document of its group version is put together from its resources' texts
/// without a cache of documents, and what it costs lives and dies with the resource (about the
/// weight of its schema). `None` for built-in resources.
pub fn custom_schema_members(resource: &Resource) -> Option<&str> {
    let custom = resource.custom()?;
    let text = custom.openapi.get_or_init(|| {
        let mut text = String::new();
        for (name, schema) in custom_schemas(resource) {
            if !text.is_empty() {
                text.push(',');
            }
            text.push_str(&Value::String(name).to_string());
            text.push(':');
            text.push_str(&schema.to_string());
        }
        text.into_boxed_str()
    });
    Some(text)
}

fn list_schema(resource: &Resource, item: &str) -> Value {
    json!({
        "description": format!("{}List is a list of {} objects.", resource.kind, resource.kind),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."},
            "kind": {"type": "string", "description": "Kind is a string value representing the REST resource this object represents."},
            "items": {
                "type": "array",
                "description": format!("Items is the list of {} objects.", resource.kind),
                "items": {"$ref": format!("{REF_PREFIX}{item}")},
            },
            "metadata": {
                "description": "Standard list metadata.",
                "allOf": [{"$ref": format!("{REF_PREFIX}io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta")}],
            },
        },
        "x-kubernetes-group-version-kind": [gvk(resource, &format!("{}List", resource.kind))],
    })
}

fn add<T: JsonSchema>(generator: &mut SchemaGenerator) -> Option<()> {
    generator.subschema_for::<T>();
    Some(())
}

fn common_schema(generator: &mut SchemaGenerator, name: &str) {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
    match name {
        DELETE_OPTIONS => add::<meta::DeleteOptions>(generator),
        PATCH => add::<meta::Patch>(generator),
        STATUS => add::<meta::Status>(generator),
        WATCH_EVENT => add::<meta::WatchEvent<()>>(generator),
        _ => None,
    };
    add::<meta::ListMeta>(generator);
}

/// Registers the schema of a built-in kind; `None` if there is no typed schema for it.
fn kind_schema(generator: &mut SchemaGenerator, group: &str, kind: &str) -> Option<()> {
    use k8s_openapi::api::{
        admissionregistration::v1 as admission, authentication::v1 as authn,
        authorization::v1 as authz, certificates::v1 as certificates, coordination::v1 as coord,
        core::v1 as core, events::v1 as events, flowcontrol::v1 as flowcontrol, rbac::v1 as rbac,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiextensions;
    let g = generator;
    match (group, kind) {
        ("", "Namespace") => add::<core::Namespace>(g),
        ("", "ConfigMap") => add::<core::ConfigMap>(g),
        ("", "Secret") => add::<core::Secret>(g),
        ("", "ServiceAccount") => add::<core::ServiceAccount>(g),
        ("", "Event") => add::<core::Event>(g),
        ("", "ResourceQuota") => add::<core::ResourceQuota>(g),
        ("authentication.k8s.io", "TokenReview") => add::<authn::TokenReview>(g),
        ("authentication.k8s.io", "SelfSubjectReview") => add::<authn::SelfSubjectReview>(g),
        ("authorization.k8s.io", "LocalSubjectAccessReview") => {
            add::<authz::LocalSubjectAccessReview>(g)
        }
        ("authorization.k8s.io", "SelfSubjectAccessReview") => {
            add::<authz::SelfSubjectAccessReview>(g)
        }
        ("authorization.k8s.io", "SelfSubjectRulesReview") => {
            add::<authz::SelfSubjectRulesReview>(g)
        }
        ("authorization.k8s.io", "SubjectAccessReview") => add::<authz::SubjectAccessReview>(g),
        ("certificates.k8s.io", "CertificateSigningRequest") => {
            add::<certificates::CertificateSigningRequest>(g)
        }
        ("coordination.k8s.io", "Lease") => add::<coord::Lease>(g),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => add::<rbac::ClusterRoleBinding>(g),
        ("rbac.authorization.k8s.io", "ClusterRole") => add::<rbac::ClusterRole>(g),
        ("rbac.authorization.k8s.io", "RoleBinding") => add::<rbac::RoleBinding>(g),
        ("rbac.authorization.k8s.io", "Role") => add::<rbac::Role>(g),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration") => {
            add::<admission::MutatingWebhookConfiguration>(g)
        }
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration") => {
            add::<admission::ValidatingWebhookConfiguration>(g)
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            add::<admission::ValidatingAdmissionPolicy>(g)
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => {
            add::<admission::ValidatingAdmissionPolicyBinding>(g)
        }
        ("events.k8s.io", "Event") => add::<events::Event>(g),
        ("flowcontrol.apiserver.k8s.io", "FlowSchema") => add::<flowcontrol::FlowSchema>(g),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration") => {
            add::<flowcontrol::PriorityLevelConfiguration>(g)
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            add::<apiextensions::CustomResourceDefinition>(g)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(group: &str, kind: &str) -> &'static Resource {
        RESOURCES
            .iter()
            .find(|r| r.group == group && r.kind == kind)
            .unwrap()
    }

    #[test]
    fn crd_schemas_hold_any_json_in_enums_and_defaults() {
        let crd = json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {
            "type": "object",
            "properties": {"color": {"type": "string", "enum": ["red", 1, null], "default": "red"},
                           "size": {"type": "integer", "default": 3, "example": [1]}},
        }}}]}});
        let crds = resource("apiextensions.k8s.io", "CustomResourceDefinition");
        assert_eq!(catalogue().type_errors(crds, &crd), Vec::<String>::new());
        let mut pruned = crd.clone();
        assert!(catalogue().prune_unknown(crds, &mut pruned).is_empty());
        assert_eq!(pruned, crd);
    }

    #[test]
    fn every_built_in_kind_has_a_schema_with_its_group_version_kind() {
        let catalogue = catalogue();
        for r in RESOURCES {
            let name = component_name(r);
            let schema = catalogue
                .get(&name)
                .unwrap_or_else(|| panic!("no schema {name}"));
            assert_eq!(
                schema["x-kubernetes-group-version-kind"][0]["kind"], *r.kind,
                "{name}"
            );
            assert!(schema["properties"]["metadata"].is_object(), "{name}");
            assert!(catalogue.get(&format!("{name}List")).is_some());
        }
    }

    #[test]
    fn closure_follows_references() {
        let schemas = catalogue().closure(["io.k8s.api.core.v1.ConfigMap"]);
        assert!(schemas.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        assert!(schemas.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry"));
        assert!(!schemas.contains_key("io.k8s.api.rbac.v1.Role"));
    }

    #[test]
    fn pruning_drops_undeclared_fields_and_names_their_paths() {
        let mut object = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "r", "labels": {"a": "b"}, "colour": "red"},
            "rules": [{"verbs": ["get"], "resources": ["configmaps"], "size": 3}],
            "extra": true,
        });
        let unknown =
            catalogue().prune_unknown(resource("rbac.authorization.k8s.io", "Role"), &mut object);
        assert_eq!(unknown, vec!["extra", "metadata.colour", "rules[0].size"]);
        assert_eq!(
            object,
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "r", "labels": {"a": "b"}},
                "rules": [{"verbs": ["get"], "resources": ["configmaps"]}],
            })
        );
    }

    #[test]
    fn values_of_the_wrong_type_are_named() {
        let object = json!({
            "metadata": {"name": 7, "labels": {"a": 1}, "finalizers": "no", "annotations": null},
            "data": {"ok": "aGk=", "bad": 5},
            "immutable": "yes",
        });
        let errors = catalogue().type_errors(resource("", "Secret"), &object);
        assert_eq!(
            errors,
            vec![
                "json: cannot unmarshal number into Go struct field data[bad] of type string",
                "json: cannot unmarshal string into Go struct field immutable of type boolean",
                "json: cannot unmarshal string into Go struct field metadata.finalizers of type array",
                "json: cannot unmarshal number into Go struct field metadata.labels[a] of type string",
                "json: cannot unmarshal number into Go struct field metadata.name of type string",
            ]
        );
        let fine = json!({"metadata": {"name": "s"}, "data": {"k": "aGVsbG8="}, "type": "Opaque"});
        assert!(
            catalogue()
                .type_errors(resource("", "Secret"), &fine)
                .is_empty()
        );
        let lease = json!({"spec": {"leaseDurationSeconds": 1.5}});
        assert_eq!(
            catalogue()
                .type_errors(resource("coordination.k8s.io", "Lease"), &lease)
                .len(),
            1
        );
        let quota = json!({"spec": {"hard": {"cpu": 2, "memory": "1Gi"}}});
        assert!(
            catalogue()
                .type_errors(resource("", "ResourceQuota"), &quota)
                .is_empty()
        );
    }

    #[test]
    fn maps_keep_any_key() {
        let mut object = json!({"metadata": {"name": "c"}, "data": {"any key": "v"}});
        assert!(
            catalogue()
                .prune_unknown(resource("", "ConfigMap"), &mut object)
                .is_empty()
        );
        assert_eq!(object["data"]["any key"], "v");
    }
}
