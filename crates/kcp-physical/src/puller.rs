//! The CRD puller (kcp's `crd-puller`): one CustomResourceDefinition per requested resource
//! (`deployments.apps`, `pods`, `widgets.example.com`) of the cluster a client talks to. The
//! `crd-puller` binary and `kubectl kcp crd pull` print them; the cluster-controller's importer
//! turns them into APIResourceImports.
//!
//! A resource a CRD serves is pulled as that CRD (its spec and its approval annotation; no
//! status, no server fields). Any other is built from the cluster's discovery (scope, names,
//! short names, categories, the status and scale subresources) and its OpenAPI v3 schema (v2
//! where the cluster serves no v3), made structural as kcp's puller did: references inlined
//! (past a depth, objects keep unknown fields), patch strategies turned into list types (`merge`
//! with a key: a `map` list keyed by it; without: a `set`), int-or-string and quantities as
//! `x-kubernetes-int-or-string`, raw extensions as objects keeping unknown fields, the root
//! `metadata` as a plain object, no defaults (a built-in kind's server defaults it in code; its
//! documents' zero-value defaults are not valid structural ones). A schema that is still not structural is refused with its
//! errors. Core resources are named `<plural>.core`, as kcp named them. Kubernetes' own groups
//! carry the `api-approved.kubernetes.io` annotation Kubernetes asks of them (kcp's puller wrote
//! one too), so the CRDs apply as they are. Not pulled: printer columns of built-in kinds (their
//! columns are the server's code, not its OpenAPI).

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};

/// The approval annotation Kubernetes requires of CRDs in its own groups.
pub const API_APPROVED: &str = "api-approved.kubernetes.io";

/// What pulled CRDs of Kubernetes' own groups say in [`API_APPROVED`].
pub const IMPORTED: &str = "unapproved, imported from a Kubernetes cluster";

/// How deep references are followed before a value keeps unknown fields instead.
const MAX_DEPTH: usize = 16;

/// A resource as asked for: `plural[.group]` (or a singular or short name).
struct Wanted<'a> {
    name: &'a str,
    group: &'a str,
}

fn wanted(text: &str) -> Wanted<'_> {
    match text.split_once('.') {
        Some((name, "core")) => Wanted { name, group: "" },
        Some((name, group)) => Wanted { name, group },
        None => Wanted {
            name: text,
            group: "",
        },
    }
}

/// Whether a CRD of `group` needs Kubernetes' approval annotation: its protected domains, and
/// its own groups without a dot (the core group among them).
pub fn needs_approval(group: &str) -> bool {
    !group.contains('.')
        || ["k8s.io", "kubernetes.io"]
            .iter()
            .any(|domain| group == *domain || group.ends_with(&format!(".{domain}")))
}

/// The CRD name of `plural` in `group`: `<plural>.<group>`, `<plural>.core` for the core group.
pub fn crd_name(plural: &str, group: &str) -> String {
    match group {
        "" => format!("{plural}.core"),
        group => format!("{plural}.{group}"),
    }
}

/// One pass over a cluster's APIs: discovery and OpenAPI documents are read once per pass,
/// however many resources share them.
pub struct Puller<'c> {
    client: &'c kube::Client,
    read: HashMap<String, Option<Arc<Value>>>,
}

impl<'c> Puller<'c> {
    /// A pass over what `client` serves.
    pub fn new(client: &'c kube::Client) -> Self {
        Puller {
            client,
            read: HashMap::new(),
        }
    }

    /// GETs `path` as JSON (once per pass); `None` for a 404.
    async fn get(&mut self, path: &str) -> anyhow::Result<Option<Arc<Value>>> {
        if let Some(read) = self.read.get(path) {
            return Ok(read.clone());
        }
        let request = http::Request::get(path)
            .header(http::header::ACCEPT, "application/json")
            .body(Vec::new())?;
        let read = match self.client.request::<Value>(request).await {
            Ok(value) => Some(Arc::new(value)),
            Err(kube::Error::Api(status)) if status.code == 404 => None,
            Err(kube::Error::Api(status)) => bail!("{path}: {}", status.message),
            Err(other) => return Err(anyhow::Error::new(other).context(format!("GET {path}"))),
        };
        self.read.insert(path.to_string(), read.clone());
        Ok(read)
    }

    /// The group versions to look in: the core one, or the group's, preferred first.
    async fn versions(&mut self, group: &str) -> anyhow::Result<Vec<String>> {
        if group.is_empty() {
            return Ok(vec!["v1".into()]);
        }
        let groups = self
            .get("/apis")
            .await?
            .context("the cluster lists no API groups")?;
        let Some(group) = groups["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|g| g["name"] == group)
        else {
            return Err(NotServed.into());
        };
        let preferred = group["preferredVersion"]["version"]
            .as_str()
            .unwrap_or_default();
        let mut versions: Vec<String> = group["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v["version"].as_str().map(str::to_string))
            .collect();
        versions.sort_by_key(|v| v != preferred);
        Ok(versions)
    }

    /// The CRD of `resource` (`plural[.group]`, a singular or short name); an error that is
    /// [`NotServed`] when the cluster serves no such resource.
    pub async fn pull(&mut self, resource: &str) -> anyhow::Result<Value> {
        let Discovered {
            group,
            version,
            found,
            resources,
        } = self.discover(resource).await?;
        let plural = found["name"].as_str().unwrap_or_default();
        let crd_path = format!(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{}",
            crd_name(plural, &group)
        );
        if let Some(crd) = self.get(&crd_path).await? {
            return Ok(cleaned(&crd));
        }
        let kind = found["kind"].as_str().unwrap_or_default();
        let v3 = format!("/openapi/v3{}", api_path(&group, &version));
        let document = match self.get(&v3).await? {
            Some(document) => document,
            None => self
                .get("/openapi/v2")
                .await?
                .with_context(|| format!("the cluster serves neither {v3} nor /openapi/v2"))?,
        };
        let schemas = document["components"]["schemas"]
            .as_object()
            .or_else(|| document["definitions"].as_object())
            .context("the OpenAPI document has no schemas")?;
        from_openapi(schemas, &group, &version, kind, plural, &found, &resources)
    }

    /// `resource` as kube-rs names it (group, preferred served version, kind, plural), from
    /// discovery; an error that is [`NotServed`] when the cluster serves no such resource.
    pub async fn api_resource(&mut self, resource: &str) -> anyhow::Result<kube::api::ApiResource> {
        let Discovered {
            group,
            version,
            found,
            ..
        } = self.discover(resource).await?;
        let kind = found["kind"].as_str().unwrap_or_default();
        let plural = found["name"].as_str().unwrap_or_default();
        let gvk = kube::core::GroupVersionKind::gvk(&group, &version, kind);
        Ok(kube::api::ApiResource::from_gvk_with_plural(&gvk, plural))
    }

    /// Where discovery lists `resource` (`plural[.group]`, a singular or short name): the first
    /// of its group's versions, preferred first, that serves it.
    async fn discover(&mut self, resource: &str) -> anyhow::Result<Discovered> {
        let wanted = wanted(resource);
        for version in self.versions(wanted.group).await? {
            let Some(list) = self.get(&api_path(wanted.group, &version)).await? else {
                continue;
            };
            let resources = list["resources"].as_array().cloned().unwrap_or_default();
            let found = resources.iter().find(|r| {
                let name = r["name"].as_str().unwrap_or_default();
                !name.contains('/')
                    && (name == wanted.name
                        || r["singularName"] == wanted.name
                        || r["kind"]
                            .as_str()
                            .is_some_and(|k| k.eq_ignore_ascii_case(wanted.name))
                        || r["shortNames"]
                            .as_array()
                            .is_some_and(|s| s.iter().any(|n| n == wanted.name)))
            });
            if let Some(found) = found.cloned() {
                return Ok(Discovered {
                    group: wanted.group.to_string(),
                    version,
                    found,
                    resources,
                });
            }
        }
        Err(NotServed.into())
    }
}

/// A resource as discovery lists it.
struct Discovered {
    group: String,
    version: String,
    /// Its entry.
    found: Value,
    /// Every entry of its group version (its subresources among them).
    resources: Vec<Value>,
}

/// The cluster serves no such resource.
#[derive(Debug, thiserror::Error)]
#[error("the cluster serves no such resource")]
pub struct NotServed;

/// Pulls each of `resources` from the cluster `client` talks to.
pub async fn pull(client: &kube::Client, resources: &[String]) -> anyhow::Result<Vec<Value>> {
    let mut puller = Puller::new(client);
    let mut crds = Vec::new();
    for text in resources {
        crds.push(
            puller
                .pull(text)
                .await
                .with_context(|| format!("pulling {text}"))?,
        );
    }
    Ok(crds)
}

fn api_path(group: &str, version: &str) -> String {
    match group {
        "" => format!("/api/{version}"),
        group => format!("/apis/{group}/{version}"),
    }
}

/// A CRD as its manifest: its name, approval annotation and spec.
fn cleaned(crd: &Value) -> Value {
    let mut metadata = json!({"name": crd["metadata"]["name"]});
    if let Some(approval) = crd["metadata"]["annotations"].get(API_APPROVED) {
        metadata["annotations"] = json!({API_APPROVED: approval});
    }
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata,
        "spec": crd["spec"],
    })
}

/// The CRD of a built-in resource, from its discovery entry and the schemas of its OpenAPI
/// document (v3's `components.schemas` or v2's `definitions`: references are followed by their
/// last segment either way).
fn from_openapi(
    schemas: &Map<String, Value>,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    resource: &Value,
    resources: &[Value],
) -> anyhow::Result<Value> {
    let schema = schemas
        .values()
        .find(|s| {
            s["x-kubernetes-group-version-kind"]
                .as_array()
                .is_some_and(|gvks| {
                    gvks.iter().any(|g| {
                        g["group"] == group && g["version"] == version && g["kind"] == kind
                    })
                })
        })
        .with_context(|| format!("the OpenAPI document has no schema of {kind}"))?;
    let mut schema = structural(schemas, schema, 0);
    if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
        properties.insert("metadata".into(), json!({"type": "object"}));
    }
    let errors = kcp_apimachinery::schema::structural_errors(
        &schema,
        "spec.versions[0].schema.openAPIV3Schema",
    );
    if !errors.is_empty() {
        let errors: Vec<String> = errors
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        bail!("the schema is not structural:\n{}", errors.join("\n"));
    }
    let has = |sub: &str| {
        resources
            .iter()
            .any(|r| r["name"] == format!("{plural}/{sub}").as_str())
    };
    let mut subresources = Map::new();
    if has("status") && schema["properties"].get("status").is_some() {
        subresources.insert("status".into(), json!({}));
    }
    let replicas = |part: &str| {
        schema["properties"][part]["properties"]
            .get("replicas")
            .is_some()
    };
    if has("scale") && replicas("spec") && replicas("status") {
        let mut scale =
            json!({"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"});
        if schema["properties"]["status"]["properties"]
            .get("selector")
            .is_some()
        {
            scale["labelSelectorPath"] = json!(".status.selector");
        }
        subresources.insert("scale".into(), scale);
    }
    let mut names = json!({
        "plural": plural,
        "singular": resource["singularName"].as_str().filter(|s| !s.is_empty()).map(str::to_string).unwrap_or_else(|| kind.to_lowercase()),
        "kind": kind,
        "listKind": format!("{kind}List"),
    });
    for field in ["shortNames", "categories"] {
        if resource[field].as_array().is_some_and(|a| !a.is_empty()) {
            names[field] = resource[field].clone();
        }
    }
    let mut served = json!({
        "name": version,
        "served": true,
        "storage": true,
        "schema": {"openAPIV3Schema": schema},
    });
    if !subresources.is_empty() {
        served["subresources"] = Value::Object(subresources);
    }
    let mut metadata = json!({"name": crd_name(plural, group)});
    if needs_approval(group) {
        metadata["annotations"] = json!({API_APPROVED: IMPORTED});
    }
    Ok(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": metadata,
        "spec": {
            "group": group,
            "names": names,
            "scope": if resource["namespaced"] == true { "Namespaced" } else { "Cluster" },
            "versions": [served],
            // What a server defaults it to: the CRD reads back as written.
            "conversion": {"strategy": "None"},
        },
    }))
}

/// `schema` made structural: references inlined, Kubernetes' OpenAPI extensions translated.
fn structural(schemas: &Map<String, Value>, schema: &Value, depth: usize) -> Value {
    fn target<'s>(
        schemas: &'s Map<String, Value>,
        reference: &Value,
    ) -> Option<(&'s str, &'s Value)> {
        let name = reference.as_str()?.rsplit('/').next()?;
        schemas.get_key_value(name).map(|(k, v)| (k.as_str(), v))
    }
    // `$ref`, or `allOf` of one reference (how OpenAPI v3 documents add a description).
    let referenced = schema
        .get("$ref")
        .and_then(|r| target(schemas, r))
        .or_else(|| {
            schema["allOf"]
                .as_array()
                .filter(|all| all.len() == 1)
                .and_then(|all| all[0].get("$ref"))
                .and_then(|r| target(schemas, r))
        });
    if let Some((name, referenced)) = referenced {
        let mut inlined = match name {
            // Quantities and int-or-strings: either a number or a string.
            n if n.ends_with("api.resource.Quantity") || n.ends_with("util.intstr.IntOrString") => {
                json!({"x-kubernetes-int-or-string": true})
            }
            // Raw extensions hold any object.
            n if n.ends_with("runtime.RawExtension") => {
                json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
            }
            _ if depth >= MAX_DEPTH => {
                json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
            }
            _ => structural(schemas, referenced, depth + 1),
        };
        if let Some(description) = schema.get("description") {
            inlined["description"] = description.clone();
        }
        return inlined;
    }
    let Some(fields) = schema.as_object() else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in fields {
        match key.as_str() {
            "properties" => {
                let properties = value
                    .as_object()
                    .map(|p| {
                        p.iter()
                            .map(|(k, v)| (k.clone(), structural(schemas, v, depth)))
                            .collect()
                    })
                    .unwrap_or_default();
                out.insert(key.clone(), Value::Object(properties));
            }
            "items" | "additionalProperties" if value.is_object() => {
                out.insert(key.clone(), structural(schemas, value, depth));
            }
            // Built-in kinds are defaulted by their server's code; their documents' defaults
            // (zero values: `{}` for objects with required fields, `""` outside enums) are not
            // valid structural defaults.
            "default"
            | "x-kubernetes-group-version-kind"
            | "x-kubernetes-unions"
            | "x-kubernetes-patch-strategy"
            | "x-kubernetes-patch-merge-key"
            | "$ref"
            | "allOf" => {}
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    if out.get("x-kubernetes-int-or-string") == Some(&json!(true)) {
        out.remove("type");
        out.remove("format");
    }
    // An object of nothing declared holds anything (a free-form value).
    if out.get("type") == Some(&json!("object"))
        && out.get("properties").is_none()
        && out.get("additionalProperties").is_none()
    {
        out.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
    }
    if out.get("type") == Some(&json!("array")) && out.get("x-kubernetes-list-type").is_none() {
        let strategy = fields
            .get("x-kubernetes-patch-strategy")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let merge_key = fields
            .get("x-kubernetes-patch-merge-key")
            .and_then(Value::as_str);
        match (strategy.split(',').any(|s| s == "merge"), merge_key) {
            (true, Some(key)) if out["items"]["properties"].get(key).is_some() => {
                out.insert("x-kubernetes-list-type".into(), json!("map"));
                out.insert("x-kubernetes-list-map-keys".into(), json!([key]));
            }
            (true, _)
                if out["items"]["type"]
                    .as_str()
                    .is_some_and(|t| t != "object" && t != "array") =>
            {
                out.insert("x-kubernetes-list-type".into(), json!("set"));
            }
            _ => {}
        }
    }
    // A map list's keys are required (or defaulted), as structural schemas want them.
    if out.get("x-kubernetes-list-type") == Some(&json!("map")) {
        let keys: Vec<String> = out
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .map(|k| {
                k.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let items = &mut out["items"];
        let mut required = items["required"].as_array().cloned().unwrap_or_default();
        for key in keys {
            let defaulted = items["properties"][key.as_str()].get("default").is_some();
            if !defaulted && !required.iter().any(|r| *r == key.as_str()) {
                required.push(json!(key));
            }
        }
        if !required.is_empty() {
            items["required"] = Value::Array(required);
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_and_extensions_become_structural() {
        let schemas = json!({
            "io.k8s.api.x.v1.Thing": {
                "type": "object",
                "x-kubernetes-group-version-kind": [{"group": "x.io", "version": "v1", "kind": "Thing"}],
                "properties": {
                    "metadata": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}]},
                    "spec": {"allOf": [{"$ref": "#/components/schemas/io.k8s.api.x.v1.Spec"}], "description": "the spec"},
                },
            },
            "io.k8s.api.x.v1.Spec": {
                "type": "object",
                "properties": {
                    "ports": {"type": "array", "x-kubernetes-patch-strategy": "merge", "x-kubernetes-patch-merge-key": "port",
                              "items": {"type": "object", "properties": {"port": {"type": "integer"}, "name": {"type": "string"}}}},
                    "finalizers": {"type": "array", "x-kubernetes-patch-strategy": "merge", "items": {"type": "string"}},
                    "size": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity"},
                    "target": {"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.util.intstr.IntOrString"}]},
                    "raw": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.runtime.RawExtension"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                },
            },
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "object", "properties": {"name": {"type": "string"}}},
            "io.k8s.apimachinery.pkg.api.resource.Quantity": {"oneOf": [{"type": "string"}, {"type": "number"}]},
            "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string", "format": "int-or-string"},
            "io.k8s.apimachinery.pkg.runtime.RawExtension": {"type": "object"},
        });
        let resource = json!({"name": "things", "singularName": "thing", "namespaced": true, "kind": "Thing", "shortNames": ["th"]});
        let resources = vec![resource.clone(), json!({"name": "things/status"})];
        let crd = from_openapi(
            schemas.as_object().unwrap(),
            "x.io",
            "v1",
            "Thing",
            "things",
            &resource,
            &resources,
        )
        .unwrap();
        assert_eq!(crd["metadata"]["name"], "things.x.io");
        assert!(crd["metadata"].get("annotations").is_none());
        assert_eq!(crd["spec"]["names"]["shortNames"], json!(["th"]));
        let schema = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"];
        assert_eq!(schema["properties"]["metadata"], json!({"type": "object"}));
        let spec = &schema["properties"]["spec"];
        assert_eq!(spec["description"], "the spec");
        let ports = &spec["properties"]["ports"];
        assert_eq!(ports["x-kubernetes-list-type"], "map");
        assert_eq!(ports["x-kubernetes-list-map-keys"], json!(["port"]));
        assert_eq!(ports["items"]["required"], json!(["port"]));
        assert_eq!(
            spec["properties"]["finalizers"]["x-kubernetes-list-type"],
            "set"
        );
        assert_eq!(
            spec["properties"]["size"],
            json!({"x-kubernetes-int-or-string": true})
        );
        assert_eq!(
            spec["properties"]["target"],
            json!({"x-kubernetes-int-or-string": true})
        );
        assert_eq!(
            spec["properties"]["raw"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
        // No status in the schema: no status subresource.
        assert!(crd["spec"]["versions"][0].get("subresources").is_none());
    }

    #[test]
    fn openapi_v2_definitions_make_the_same_crd_and_kubernetes_groups_are_approved() {
        // Swagger 2.0: `definitions`, references without `allOf`, quantities as strings.
        let definitions = json!({
            "io.k8s.api.apps.v1.Deployment": {
                "type": "object",
                "x-kubernetes-group-version-kind": [{"group": "apps", "version": "v1", "kind": "Deployment"}],
                "properties": {
                    "metadata": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"},
                    "spec": {"$ref": "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"},
                    "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
                },
            },
            "io.k8s.api.apps.v1.DeploymentSpec": {
                "type": "object",
                "properties": {
                    "replicas": {"type": "integer", "format": "int32"},
                    "cpu": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"},
                },
            },
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta": {"type": "object"},
            "io.k8s.apimachinery.pkg.api.resource.Quantity": {"type": "string"},
        });
        let resource = json!({"name": "deployments", "singularName": "deployment", "namespaced": true, "kind": "Deployment"});
        let resources = vec![
            resource.clone(),
            json!({"name": "deployments/status"}),
            json!({"name": "deployments/scale"}),
        ];
        let crd = from_openapi(
            definitions.as_object().unwrap(),
            "apps",
            "v1",
            "Deployment",
            "deployments",
            &resource,
            &resources,
        )
        .unwrap();
        assert_eq!(crd["metadata"]["name"], "deployments.apps");
        assert_eq!(crd["metadata"]["annotations"][API_APPROVED], IMPORTED);
        let version = &crd["spec"]["versions"][0];
        let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(spec["properties"]["replicas"]["type"], "integer");
        assert_eq!(
            spec["properties"]["cpu"],
            json!({"x-kubernetes-int-or-string": true})
        );
        assert_eq!(version["subresources"]["status"], json!({}));
        assert_eq!(
            version["subresources"]["scale"]["specReplicasPath"],
            ".spec.replicas"
        );
        assert!(needs_approval("") && needs_approval("apps"));
        assert!(needs_approval("storage.k8s.io") && !needs_approval("example.com"));
        assert_eq!(crd_name("pods", ""), "pods.core");
    }
}
