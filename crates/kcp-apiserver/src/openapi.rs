//! OpenAPI v3: the root index (`/openapi/v3`) and one document per group version
//! (`/openapi/v3/api/v1`, `/openapi/v3/apis/<group>/<version>`), as kube-apiserver serves them.
//!
//! kubectl reads these to validate (`apply`, `create -f`, `replace`, `edit`: it sends
//! `fieldValidation=Strict` once it sees that parameter on a PATCH operation carrying the object's
//! `x-kubernetes-group-version-kind`) and to explain (`kubectl explain`). The PATCH operations list
//! JSON patch, merge patch and apply patch bodies but not strategic merge patch, so kubectl
//! computes strategic patches from its compiled-in types rather than from these schemas.
//!
//! Documents are served with a content hash: the root names each document by `?hash=`, a
//! request with the current hash may be cached for good, and `If-None-Match` answers 304. Those
//! of the built-in group versions are built once. Those of custom resources are put together
//! when asked for ([`CustomDocument`]) from texts each resource keeps
//! (`kcp_apis::schema::custom_schema_members`, made on its first use), the schemas every
//! document shares (built once) and the resources' paths (small, made each time): there is no
//! cache of documents to bound or to prune, and what a CRD's document costs lives and dies with
//! its resources. Their hash is made of their CRDs' spec digests, so the root index (which
//! kubectl reads before every `create -f`) makes no text.

use std::collections::HashMap;
use std::sync::OnceLock;

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode, header};
use kcp_apis::builtin::{self, Resource};
use kcp_apis::schema::{self, REF_PREFIX};
use serde_json::{Map, Value, json};

use crate::status::{Body, failure, full, json_response};
use kcp_registry::ServedResources;

/// One rendered group-version document.
struct Document {
    bytes: Bytes,
    hash: String,
}

impl Document {
    fn new(value: &Value) -> Document {
        let bytes = Bytes::from(serde_json::to_vec(value).unwrap_or_default());
        let digest = ring::digest::digest(&ring::digest::SHA512_256, &bytes);
        Document {
            bytes,
            hash: hex(digest.as_ref()),
        }
    }
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02X}")).collect()
}

/// The document of one group version of custom resources, to be put together when asked for:
/// the shared schemas ([`shared_custom_members`]), each resource's schemas (the text it keeps)
/// and the resources' paths. Its hash digests the same parts.
struct CustomDocument<'a> {
    resources: Vec<&'a Resource>,
    /// `paths` as JSON.
    paths: String,
    hash: String,
}

impl<'a> CustomDocument<'a> {
    fn new(resources: Vec<&'a Resource>) -> CustomDocument<'a> {
        let mut paths = Map::new();
        for resource in &resources {
            add_resource_paths(&mut paths, resource);
        }
        let paths = Value::Object(paths).to_string();
        let mut context = ring::digest::Context::new(&ring::digest::SHA512_256);
        context.update(shared_custom_members().as_bytes());
        // A resource's schemas follow from its CRD's spec and its version: no text is made.
        for resource in &resources {
            if let Some(custom) = resource.custom() {
                context.update(&custom.spec_digest);
                context.update(resource.version.as_bytes());
            }
        }
        context.update(paths.as_bytes());
        CustomDocument {
            resources,
            paths,
            hash: hex(context.finish().as_ref()),
        }
    }

    /// The document's JSON, as [`Document::new`] would write its value.
    fn bytes(&self) -> Bytes {
        let members: Vec<&str> = self
            .resources
            .iter()
            .filter_map(|resource| schema::custom_schema_members(resource))
            .collect();
        let shared = shared_custom_members();
        let size = shared.len() + members.iter().map(|m| m.len() + 1).sum::<usize>();
        let mut out = String::with_capacity(size + self.paths.len() + 128);
        out.push_str(r#"{"components":{"schemas":{"#);
        out.push_str(shared);
        for text in members {
            out.push(',');
            out.push_str(text);
        }
        out.push_str(r#"}},"info":{"title":"Kubernetes CRD Swagger","version":"v0.1.0"},"openapi":"3.0.0","paths":"#);
        out.push_str(&self.paths);
        out.push('}');
        Bytes::from(out)
    }
}

/// The schemas every custom group version's document holds (ObjectMeta and what it refers
/// to, the shared list and status kinds), as JSON object members; built once.
fn shared_custom_members() -> &'static str {
    static SHARED: OnceLock<String> = OnceLock::new();
    SHARED.get_or_init(|| {
        let roots = schema::COMMON.iter().copied().chain([
            "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
            "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta",
        ]);
        let schemas = Value::Object(schema::catalogue().closure(roots)).to_string();
        // Their members, without the braces of the object.
        schemas[1..schemas.len() - 1].to_string()
    })
}

/// The documents `served` has: the built-in ones, then one per custom group version.
fn served_documents<'a>(served: &'a ServedResources) -> Vec<(String, DocumentRef<'a>)> {
    let mut all: Vec<(String, DocumentRef<'a>)> = documents()
        .iter()
        .map(|(path, document)| (path.clone(), DocumentRef::Builtin(document)))
        .collect();
    for (group, versions) in served.groups() {
        if builtin::groups().iter().any(|(g, _)| *g == group) {
            continue;
        }
        for version in versions {
            let resources: Vec<&Resource> = served
                .non_builtin_in_group_version(group, version)
                .map(|r| &**r)
                .collect();
            all.push((
                gv_path(group, version),
                DocumentRef::Custom(CustomDocument::new(resources)),
            ));
        }
    }
    all
}

/// The OpenAPI v3 documents of the built-in group versions, decoded (for `/openapi/v2`).
pub(crate) fn builtin_v3_documents() -> impl Iterator<Item = Value> {
    documents()
        .values()
        .filter_map(|document| serde_json::from_slice(&document.bytes).ok())
}

/// The OpenAPI v3 documents of the group versions of `served` that are not built in, decoded
/// (for `/openapi/v2`, which converts their schemas as kube-apiserver converts CRDs' schemas).
pub(crate) fn custom_v3_documents(served: &ServedResources) -> Vec<Value> {
    served_documents(served)
        .iter()
        .filter(|(_, document)| matches!(document, DocumentRef::Custom(_)))
        .filter_map(|(_, document)| serde_json::from_slice(&document.bytes()).ok())
        .collect()
}

enum DocumentRef<'a> {
    Builtin(&'static Document),
    Custom(CustomDocument<'a>),
}

impl DocumentRef<'_> {
    fn hash(&self) -> &str {
        match self {
            DocumentRef::Builtin(document) => &document.hash,
            DocumentRef::Custom(document) => &document.hash,
        }
    }

    fn bytes(&self) -> Bytes {
        match self {
            DocumentRef::Builtin(document) => document.bytes.clone(),
            DocumentRef::Custom(document) => document.bytes(),
        }
    }
}

/// The documents of every built-in group version, keyed by `api/v1` or `apis/<group>/<version>`.
fn documents() -> &'static HashMap<String, Document> {
    static DOCUMENTS: OnceLock<HashMap<String, Document>> = OnceLock::new();
    DOCUMENTS.get_or_init(|| {
        let mut versions = vec![("", "v1")];
        for (group, group_versions) in builtin::groups() {
            versions.extend(group_versions.into_iter().map(|v| (group, v)));
        }
        versions
            .into_iter()
            .map(|(group, version)| {
                let document = Document::new(&group_version_document(group, version));
                (gv_path(group, version), document)
            })
            .collect()
    })
}

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// Answers `GET <prefix>/openapi/v3[/...]`; `rest` is the path after `/openapi/v3`, `prefix`
/// the logical cluster part of the URL (`/clusters/root`) the index must point back into.
pub fn serve(
    served: &ServedResources,
    prefix: &str,
    rest: &str,
    query: Option<&str>,
    headers: &HeaderMap,
) -> Response<Body> {
    let rest = rest.trim_matches('/');
    let documents = served_documents(served);
    if rest.is_empty() {
        let paths: Map<String, Value> = documents
            .iter()
            .map(|(path, document)| {
                let url = format!("{prefix}/openapi/v3/{path}?hash={}", document.hash());
                (path.clone(), json!({"serverRelativeURL": url}))
            })
            .collect();
        return json_response(StatusCode::OK, &json!({"paths": paths}));
    }
    let Some((_, document)) = documents.iter().find(|(path, _)| path == rest) else {
        return failure(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        );
    };
    let etag = format!("\"{}\"", document.hash());
    let cache_control = if hash_param(query) == Some(document.hash()) {
        "public, immutable, max-age=31536000"
    } else {
        "no-cache, private"
    };
    let builder = Response::builder()
        .header(header::ETAG, &etag)
        .header(header::CACHE_CONTROL, cache_control)
        .header(header::CONTENT_TYPE, "application/json");
    let not_modified = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|tag| tag.trim() == etag));
    let response = if not_modified {
        builder
            .status(StatusCode::NOT_MODIFIED)
            .body(full(Bytes::new()))
    } else {
        builder.status(StatusCode::OK).body(full(document.bytes()))
    };
    response.unwrap_or_else(|_| Response::new(full(Bytes::new())))
}

fn hash_param(query: Option<&str>) -> Option<&str> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("hash="))
}

/// The OpenAPI v3 document of one group version.
fn group_version_document(group: &str, version: &str) -> Value {
    let resources: Vec<&Resource> = builtin::in_group_version(group, version).collect();
    let mut paths = Map::new();
    let mut roots: Vec<String> = schema::COMMON.iter().map(|s| s.to_string()).collect();
    for resource in &resources {
        let name = schema::component_name(resource);
        if schema::catalogue().get(&name).is_none() {
            continue;
        }
        roots.push(format!("{name}List"));
        roots.push(name);
        add_resource_paths(&mut paths, resource);
    }
    let schemas = schema::catalogue().closure(roots.iter().map(String::as_str));
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": crate::version::GIT_VERSION},
        "paths": paths,
        "components": {"schemas": schemas},
    })
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("{REF_PREFIX}{name}")})
}

fn json_content(schema: Value) -> Value {
    json!({"application/json": {"schema": schema}, "application/yaml": {"schema": schema}})
}

fn string_param(name: &str, location: &str, description: &str) -> Value {
    let mut param = json!({
        "name": name,
        "in": location,
        "description": description,
        "schema": {"type": "string", "uniqueItems": true},
    });
    if location == "path" {
        param["required"] = json!(true);
    }
    param
}

fn query(name: &str, description: &str) -> Value {
    string_param(name, "query", description)
}

fn write_params(patch: bool) -> Vec<Value> {
    let mut params = vec![
        query(
            "dryRun",
            "When present, indicates that modifications should not be persisted. Valid value: All.",
        ),
        query(
            "fieldManager",
            "fieldManager is a name associated with the actor or entity that is making these changes.",
        ),
        query(
            "fieldValidation",
            "fieldValidation instructs the server on how to handle objects in the request (POST/PUT/PATCH) containing unknown or duplicate fields. Valid values are: Ignore, Warn (the default) and Strict.",
        ),
    ];
    if patch {
        params.push(json!({
            "name": "force",
            "in": "query",
            "description": "Force is going to \"force\" Apply requests. It must be unset for non-apply patch requests.",
            "schema": {"type": "boolean", "uniqueItems": true},
        }));
    }
    params
}

fn list_params() -> Vec<Value> {
    [
        ("allowWatchBookmarks", "requests watch events with type \"BOOKMARK\"."),
        ("continue", "The continue option should be set when retrieving more results from the server."),
        ("fieldSelector", "A selector to restrict the list of returned objects by their fields."),
        ("labelSelector", "A selector to restrict the list of returned objects by their labels."),
        ("limit", "limit is a maximum number of responses to return for a list call."),
        ("resourceVersion", "resourceVersion sets a constraint on what resource versions a request may be served from."),
        ("resourceVersionMatch", "resourceVersionMatch determines how resourceVersion is applied to list calls."),
        ("sendInitialEvents", "`sendInitialEvents=true` may be set together with `watch=true`."),
        ("timeoutSeconds", "Timeout for the list/watch call."),
        ("watch", "Watch for changes to the described resources and return them as a stream of add, update, and remove notifications."),
    ]
    .into_iter()
    .map(|(name, description)| query(name, description))
    .collect()
}

struct Operation<'a> {
    method: &'a str,
    action: &'a str,
    verb_id: &'a str,
    description: String,
    params: Vec<Value>,
    body: Option<Value>,
    response: Value,
}

fn add_resource_paths(paths: &mut Map<String, Value>, resource: &Resource) {
    let name = schema::component_name(resource);
    let list = format!("{name}List");
    let base = format!("/{}", gv_path(&resource.group, &resource.version));
    let scope = if resource.namespaced {
        "/namespaces/{namespace}"
    } else {
        ""
    };
    let collection = format!("{base}{scope}/{}", resource.name);
    let item = format!("{collection}/{{name}}");
    let kind: &str = &resource.kind;
    let verbs = resource.verbs;
    let has = |verb: &str| verbs.contains(&verb);
    let object = || schema_ref(&name);

    let mut collection_ops = Vec::new();
    if has("list") {
        collection_ops.push(Operation {
            method: "get",
            action: "list",
            verb_id: "list",
            description: format!("list or watch objects of kind {kind}"),
            params: list_params(),
            body: None,
            response: schema_ref(&list),
        });
    }
    if has("create") {
        collection_ops.push(Operation {
            method: "post",
            action: "post",
            verb_id: "create",
            description: format!("create a {kind}"),
            params: write_params(false),
            body: Some(json_content(object())),
            response: object(),
        });
    }
    if has("deletecollection") {
        let mut params = list_params();
        params.push(query(
            "dryRun",
            "When present, indicates that modifications should not be persisted.",
        ));
        collection_ops.push(Operation {
            method: "delete",
            action: "deletecollection",
            verb_id: "deleteCollection",
            description: format!("delete collection of {kind}"),
            params,
            body: Some(json_content(schema_ref(schema::DELETE_OPTIONS))),
            response: schema_ref(schema::STATUS),
        });
    }
    let mut item_ops = Vec::new();
    if has("get") {
        item_ops.push(Operation {
            method: "get",
            action: "get",
            verb_id: "read",
            description: format!("read the specified {kind}"),
            params: Vec::new(),
            body: None,
            response: object(),
        });
    }
    if has("update") {
        item_ops.push(Operation {
            method: "put",
            action: "put",
            verb_id: "replace",
            description: format!("replace the specified {kind}"),
            params: write_params(false),
            body: Some(json_content(object())),
            response: object(),
        });
    }
    if has("patch") {
        item_ops.push(patch_operation(kind));
    }
    if has("delete") {
        item_ops.push(Operation {
            method: "delete",
            action: "delete",
            verb_id: "delete",
            description: format!("delete a {kind}"),
            params: vec![query(
                "dryRun",
                "When present, indicates that modifications should not be persisted.",
            )],
            body: Some(json_content(schema_ref(schema::DELETE_OPTIONS))),
            response: schema_ref(schema::STATUS),
        });
    }

    let mut path_params = Vec::new();
    if resource.namespaced {
        path_params.push(string_param(
            "namespace",
            "path",
            "object name and auth scope, such as for teams and projects",
        ));
    }
    insert_path(
        paths,
        &collection,
        resource,
        &path_params,
        collection_ops,
        "",
    );
    path_params.push(string_param("name", "path", &format!("name of the {kind}")));
    insert_path(paths, &item, resource, &path_params, item_ops, "");
    for (subresource, subresource_verbs) in resource.subresources {
        if *subresource != "status" {
            continue;
        }
        let mut ops = vec![Operation {
            method: "get",
            action: "get",
            verb_id: "read",
            description: format!("read status of the specified {kind}"),
            params: Vec::new(),
            body: None,
            response: object(),
        }];
        if subresource_verbs.contains(&"update") {
            ops.push(Operation {
                method: "put",
                action: "put",
                verb_id: "replace",
                description: format!("replace status of the specified {kind}"),
                params: write_params(false),
                body: Some(json_content(object())),
                response: object(),
            });
        }
        if subresource_verbs.contains(&"patch") {
            ops.push(patch_operation(kind));
        }
        insert_path(
            paths,
            &format!("{item}/status"),
            resource,
            &path_params,
            ops,
            "Status",
        );
    }
}

fn patch_operation<'a>(kind: &str) -> Operation<'a> {
    let patch = schema_ref(schema::PATCH);
    Operation {
        method: "patch",
        action: "patch",
        verb_id: "patch",
        description: format!("partially update the specified {kind}"),
        params: write_params(true),
        body: Some(json!({
            "content": {
                "application/apply-patch+yaml": {"schema": patch},
                "application/json-patch+json": {"schema": patch},
                "application/merge-patch+json": {"schema": patch},
            },
            "required": true,
        })),
        response: Value::Null,
    }
}

fn insert_path(
    paths: &mut Map<String, Value>,
    path: &str,
    resource: &Resource,
    path_params: &[Value],
    operations: Vec<Operation<'_>>,
    suffix: &str,
) {
    if operations.is_empty() {
        return;
    }
    let object = schema_ref(&schema::component_name(resource));
    let mut item = Map::new();
    item.insert("parameters".into(), json!(path_params));
    for op in operations {
        let scope = if resource.namespaced {
            "Namespaced"
        } else {
            ""
        };
        let operation_id = format!(
            "{}{}{}{scope}{}{suffix}",
            op.verb_id,
            pascal(&resource.group),
            pascal(&resource.version),
            resource.kind
        );
        let response = if op.response.is_null() {
            object.clone()
        } else {
            op.response
        };
        let mut value = json!({
            "tags": [tag(resource)],
            "description": op.description,
            "operationId": operation_id,
            "parameters": op.params,
            "responses": {
                "200": {"description": "OK", "content": json_content(response)},
                "401": {"description": "Unauthorized"},
            },
            "x-kubernetes-action": op.action,
            "x-kubernetes-group-version-kind": schema::gvk(resource, &resource.kind),
        });
        if let Some(body) = op.body {
            value["requestBody"] = if body.get("content").is_some() {
                body
            } else {
                json!({"content": body, "required": true})
            };
        }
        item.insert(op.method.into(), value);
    }
    paths.insert(path.to_string(), Value::Object(item));
}

fn tag(resource: &Resource) -> String {
    format!("{}_{}", tag_group(&resource.group), resource.version)
}

fn tag_group(group: &str) -> String {
    match group {
        "" => "core".into(),
        group => group.trim_end_matches(".k8s.io").replace('.', "_"),
    }
}

/// `rbac.authorization.k8s.io` → `RbacAuthorization`, `""` → `Core`, `v1` → `V1`.
fn pascal(word: &str) -> String {
    let word = if word.is_empty() {
        "core".to_string()
    } else {
        word.trim_end_matches(".k8s.io").to_string()
    };
    word.split('.')
        .map(|part| {
            let mut chars = part.chars();
            chars
                .next()
                .map(|first| first.to_ascii_uppercase().to_string() + chars.as_str())
                .unwrap_or_default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcp_apis::builtin::ResourceRef;

    fn document(path: &str) -> Value {
        serde_json::from_slice(&documents()[path].bytes).unwrap()
    }

    #[test]
    fn the_root_points_into_the_cluster_with_hashes() {
        let response = serve(
            &ServedResources::builtin(),
            "/clusters/root",
            "",
            None,
            &HeaderMap::new(),
        );
        assert_eq!(response.status(), StatusCode::OK);
        assert!(documents().contains_key("api/v1"));
        assert!(documents().contains_key("apis/rbac.authorization.k8s.io/v1"));
        let hash = &documents()["api/v1"].hash;
        assert_eq!(hash.len(), 64);
    }

    #[test]
    fn patch_operations_carry_the_kind_and_field_validation() {
        let doc = document("api/v1");
        let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"],
            json!({"group": "", "kind": "ConfigMap", "version": "v1"})
        );
        let params = patch["parameters"].as_array().unwrap();
        assert!(params.iter().any(|p| p["name"] == "fieldValidation"));
        let content = patch["requestBody"]["content"].as_object().unwrap();
        assert!(content.contains_key("application/merge-patch+json"));
        assert!(!content.contains_key("application/strategic-merge-patch+json"));
        assert_eq!(patch["operationId"], "patchCoreV1NamespacedConfigMap");
        let namespace = &doc["paths"]["/api/v1/namespaces/{name}"]["patch"];
        assert_eq!(
            namespace["x-kubernetes-group-version-kind"]["kind"],
            "Namespace"
        );
    }

    #[test]
    fn documents_hold_the_schemas_they_refer_to() {
        let doc = document("apis/rbac.authorization.k8s.io/v1");
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        assert!(schemas.contains_key("io.k8s.api.rbac.v1.Role"));
        assert!(schemas.contains_key("io.k8s.api.rbac.v1.PolicyRule"));
        assert!(schemas.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        assert!(!schemas.contains_key("io.k8s.api.core.v1.ConfigMap"));
        let mut refs = Vec::new();
        collect(&doc, &mut refs);
        for name in refs {
            assert!(schemas.contains_key(&name), "dangling reference {name}");
        }
    }

    fn collect(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, value) in map {
                    match value.as_str().and_then(|r| r.strip_prefix(REF_PREFIX)) {
                        Some(name) if key == "$ref" => out.push(name.to_string()),
                        _ => collect(value, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
            _ => {}
        }
    }

    #[test]
    fn a_matching_etag_is_not_modified() {
        let hash = documents()["api/v1"].hash.clone();
        let mut headers = HeaderMap::new();
        headers.insert(
            header::IF_NONE_MATCH,
            format!("\"{hash}\"").parse().unwrap(),
        );
        let query = format!("hash={hash}");
        let response = serve(
            &ServedResources::builtin(),
            "",
            "/api/v1",
            Some(&query),
            &headers,
        );
        assert_eq!(response.status(), StatusCode::NOT_MODIFIED);
        let response = serve(
            &ServedResources::builtin(),
            "",
            "/api/v1",
            Some(&query),
            &HeaderMap::new(),
        );
        assert_eq!(response.status(), StatusCode::OK);
        assert!(
            response.headers()[header::CACHE_CONTROL]
                .to_str()
                .unwrap()
                .contains("immutable")
        );
        let response = serve(
            &ServedResources::builtin(),
            "",
            "/apis/nope/v1",
            None,
            &HeaderMap::new(),
        );
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
    }

    fn widgets(description: &str) -> Vec<ResourceRef> {
        let resources = kcp_apis::custom::Interner::default().resources(&json!({
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": {"type": "object", "description": description}}}]
        }));
        resources.iter().cloned().map(ResourceRef::from).collect()
    }

    #[test]
    fn custom_documents_are_put_together_from_their_resources_texts() {
        let resources = widgets("a");
        let served = ServedResources::with(resources.clone());
        let listed = served_documents(&served);
        // Listing (and hashing) them makes no text.
        let custom = resources[0].custom().unwrap();
        assert!(custom.openapi.get().is_none() && !custom.schema_is_parsed());
        let (_, document) = listed
            .iter()
            .find(|(path, _)| path == "apis/example.com/v1")
            .expect("the custom group version is listed");
        let bytes = document.bytes();
        let doc: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(doc["openapi"], "3.0.0");
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        assert_eq!(schemas["com.example.v1.Widget"]["description"], "a");
        assert!(schemas.contains_key("com.example.v1.WidgetList"));
        assert!(schemas.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        assert!(
            doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"]["patch"]
                .is_object()
        );
        // Every reference resolves within the document.
        let mut refs = Vec::new();
        collect(&doc, &mut refs);
        for reference in refs {
            assert!(schemas.contains_key(&reference), "{reference}");
        }
        // The same resources hash the same; another schema hashes otherwise.
        let again = served_documents(&served);
        assert_eq!(again.last().unwrap().1.hash(), document.hash());
        let other = ServedResources::with(widgets("b"));
        let other = served_documents(&other);
        assert_ne!(other.last().unwrap().1.hash(), document.hash());
        // The text is made once and kept with the resource.
        let first = schema::custom_schema_members(&resources[0]).unwrap() as *const _;
        let second = schema::custom_schema_members(&resources[0]).unwrap() as *const _;
        assert_eq!(first, second);
    }
}
