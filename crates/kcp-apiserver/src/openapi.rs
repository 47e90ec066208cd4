//! OpenAPI v3: the root index (`/openapi/v3`) and one document per group version
//! (`/openapi/v3/api/v1`, `/openapi/v3/apis/<group>/<version>`), as kube-apiserver serves them.
//!
//! kubectl reads these to validate (`apply`, `create -f`, `replace`, `edit`: it sends
//! `fieldValidation=Strict` once it sees that parameter on a PATCH operation carrying the object's
//! `x-kubernetes-group-version-kind`) and to explain (`kubectl explain`). The PATCH operations list
//! JSON patch, merge patch and apply patch bodies but not strategic merge patch, so kubectl
//! computes strategic patches from its compiled-in types rather than from these schemas.
//!
//! Documents are built once per group version and served with a content hash: the root names
//! each document by `?hash=`, a request with the current hash may be cached for good, and
//! `If-None-Match` answers 304. Those of custom resources are cached by the identity of their
//! resources ([`CustomDocuments`]): weakly, so the cache neither keeps a deleted CRD's resources
//! alive nor grows with CRD churn, and within a byte budget.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, OnceLock, Weak};

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode, header};
use kcp_apis::builtin::{self, Resource, ResourceRef};
use kcp_apis::schema::{self, REF_PREFIX};
use serde_json::{Map, Value, json};

use crate::served::Served;
use crate::status::{Body, failure, full, json_response};

/// One rendered group-version document.
struct Document {
    bytes: Bytes,
    hash: String,
}

impl Document {
    fn new(value: &Value) -> Document {
        let bytes = Bytes::from(serde_json::to_vec(value).unwrap_or_default());
        let digest = ring::digest::digest(&ring::digest::SHA512_256, &bytes);
        let hash = digest.as_ref().iter().map(|b| format!("{b:02X}")).collect();
        Document { bytes, hash }
    }
}

/// The most bytes of custom documents [`CUSTOM_DOCUMENTS`] keeps.
const CUSTOM_DOCUMENTS_BYTES: usize = 32 << 20;

/// The documents of custom group versions of every server in the process.
static CUSTOM_DOCUMENTS: LazyLock<Mutex<CustomDocuments>> =
    LazyLock::new(|| Mutex::new(CustomDocuments::new(CUSTOM_DOCUMENTS_BYTES)));

/// The documents of custom group versions, one per distinct set of (interned) resources, so
/// every cluster with the same CRDs shares one.
///
/// Entries are keyed by the addresses of their resources and hold them weakly: an entry is
/// used only while all its resources are alive (so a freed address that a new resource reuses
/// can never match), dead entries are dropped at every insert, and the least recently used
/// ones go once the documents exceed the byte budget.
struct CustomDocuments {
    entries: HashMap<Vec<usize>, CachedDocument>,
    /// The bytes of the documents held.
    bytes: usize,
    budget: usize,
    /// Counts lookups, to tell which entry was used least recently.
    clock: u64,
}

struct CachedDocument {
    /// The custom resources whose addresses make the key (static ones need no check).
    resources: Vec<Weak<Resource>>,
    document: Arc<Document>,
    used: u64,
}

impl CachedDocument {
    fn alive(&self) -> bool {
        self.resources.iter().all(|r| r.strong_count() > 0)
    }
}

/// What identifies a served resource while it lives: its address.
fn identity(resource: &ResourceRef) -> usize {
    match resource {
        ResourceRef::Static(resource) => std::ptr::from_ref::<Resource>(resource) as usize,
        ResourceRef::Shared(resource) => Arc::as_ptr(resource) as usize,
    }
}

impl CustomDocuments {
    fn new(budget: usize) -> CustomDocuments {
        CustomDocuments {
            entries: HashMap::new(),
            bytes: 0,
            budget,
            clock: 0,
        }
    }

    fn get(&mut self, key: &[usize]) -> Option<Arc<Document>> {
        self.clock += 1;
        let entry = self.entries.get_mut(key).filter(|entry| entry.alive())?;
        entry.used = self.clock;
        Some(Arc::clone(&entry.document))
    }

    fn insert(&mut self, key: Vec<usize>, resources: &[&ResourceRef], document: &Arc<Document>) {
        let size = document.bytes.len();
        if size > self.budget {
            return;
        }
        self.entries.retain(|_, entry| entry.alive());
        self.entries.remove(&key);
        self.bytes = self.entries.values().map(|e| e.document.bytes.len()).sum();
        while self.bytes + size > self.budget {
            let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, entry)| entry.used)
                .map(|(key, _)| key.clone())
            else {
                break;
            };
            if let Some(evicted) = self.entries.remove(&oldest) {
                self.bytes -= evicted.document.bytes.len();
            }
        }
        let resources = resources
            .iter()
            .filter_map(|r| match r {
                ResourceRef::Static(_) => None,
                ResourceRef::Shared(resource) => Some(Arc::downgrade(resource)),
            })
            .collect();
        self.bytes += size;
        self.entries.insert(
            key,
            CachedDocument {
                resources,
                document: Arc::clone(document),
                used: self.clock,
            },
        );
    }

    /// The document of these resources: cached, or built (outside the lock) and cached.
    fn document(cache: &Mutex<CustomDocuments>, resources: &[&ResourceRef]) -> Arc<Document> {
        let lock = || cache.lock().unwrap_or_else(|e| e.into_inner());
        let key: Vec<usize> = resources.iter().map(|r| identity(r)).collect();
        if let Some(document) = lock().get(&key) {
            return document;
        }
        let plain: Vec<&Resource> = resources.iter().map(|r| &***r).collect();
        let document = Arc::new(Document::new(&custom_group_version_document(&plain)));
        lock().insert(key, resources, &document);
        document
    }
}

/// The documents `served` has: the built-in ones, then one per custom group version.
fn served_documents(served: &Served) -> Vec<(String, DocumentRef)> {
    let mut all: Vec<(String, DocumentRef)> = documents()
        .iter()
        .map(|(path, document)| (path.clone(), DocumentRef::Builtin(document)))
        .collect();
    for (group, versions) in served.groups() {
        if builtin::groups().iter().any(|(g, _)| *g == group) {
            continue;
        }
        for version in versions {
            let resources: Vec<&ResourceRef> = served
                .non_builtin_in_group_version(group, version)
                .collect();
            all.push((
                gv_path(group, version),
                DocumentRef::Custom(CustomDocuments::document(&CUSTOM_DOCUMENTS, &resources)),
            ));
        }
    }
    all
}

/// Every OpenAPI v3 document `served` has, decoded, and whether it is of custom resources (for
/// `/openapi/v2`, which converts their schemas as kube-apiserver converts CRDs' schemas).
pub(crate) fn v3_documents(served: &Served) -> Vec<(bool, Value)> {
    served_documents(served)
        .iter()
        .filter_map(|(_, document)| {
            let custom = matches!(document, DocumentRef::Custom(_));
            Some((custom, serde_json::from_slice(&document.bytes).ok()?))
        })
        .collect()
}

enum DocumentRef {
    Builtin(&'static Document),
    Custom(Arc<Document>),
}

impl std::ops::Deref for DocumentRef {
    type Target = Document;
    fn deref(&self) -> &Document {
        match self {
            DocumentRef::Builtin(document) => document,
            DocumentRef::Custom(document) => document,
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
    served: &Served,
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
                let url = format!("{prefix}/openapi/v3/{path}?hash={}", document.hash);
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
    let etag = format!("\"{}\"", document.hash);
    let cache_control = if hash_param(query) == Some(document.hash.as_str()) {
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
        builder
            .status(StatusCode::OK)
            .body(full(document.bytes.clone()))
    };
    response.unwrap_or_else(|_| Response::new(full(Bytes::new())))
}

fn hash_param(query: Option<&str>) -> Option<&str> {
    query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("hash="))
}

/// The OpenAPI v3 document of one group version of custom resources: their schemas, the
/// shared ones their operations refer to, and their paths.
fn custom_group_version_document(resources: &[&Resource]) -> Value {
    let mut paths = Map::new();
    let roots = schema::COMMON.iter().copied().chain([
        "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",
        "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta",
    ]);
    let mut schemas = schema::catalogue().closure(roots);
    for resource in resources {
        schemas.extend(schema::custom_schemas(resource));
        add_resource_paths(&mut paths, resource);
    }
    json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes CRD Swagger", "version": "v0.1.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    })
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

    fn document(path: &str) -> Value {
        serde_json::from_slice(&documents()[path].bytes).unwrap()
    }

    #[test]
    fn the_root_points_into_the_cluster_with_hashes() {
        let response = serve(
            &Served::builtin(),
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
        let response = serve(&Served::builtin(), "", "/api/v1", Some(&query), &headers);
        assert_eq!(response.status(), StatusCode::NOT_MODIFIED);
        let response = serve(
            &Served::builtin(),
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
            &Served::builtin(),
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

    fn document_of(cache: &Mutex<CustomDocuments>, resources: &[ResourceRef]) -> Arc<Document> {
        CustomDocuments::document(cache, &resources.iter().collect::<Vec<_>>())
    }

    fn key(resources: &[ResourceRef]) -> Vec<usize> {
        resources.iter().map(identity).collect()
    }

    #[test]
    fn custom_documents_are_shared_and_hold_their_resources_weakly() {
        let served = Served::with(widgets("a"));
        let listed = served_documents(&served);
        assert!(listed.iter().any(|(path, _)| path == "apis/example.com/v1"));

        let cache = Mutex::new(CustomDocuments::new(CUSTOM_DOCUMENTS_BYTES));
        let resources = widgets("a");
        let first = document_of(&cache, &resources);
        assert!(Arc::ptr_eq(&first, &document_of(&cache, &resources)));
        let doc: Value = serde_json::from_slice(&first.bytes).unwrap();
        assert!(doc["components"]["schemas"]["com.example.v1.Widget"].is_object());
        let dead_key = key(&resources);
        let weak = match &resources[0] {
            ResourceRef::Shared(resource) => Arc::downgrade(resource),
            ResourceRef::Static(_) => unreachable!("custom resources are shared"),
        };
        drop(resources);
        assert!(
            weak.upgrade().is_none(),
            "the cache keeps no resource alive"
        );
        assert!(
            cache.lock().unwrap().get(&dead_key).is_none(),
            "an entry of freed resources never matches (their addresses may be reused)"
        );
        let others = widgets("b");
        document_of(&cache, &others);
        let cache = cache.lock().unwrap();
        assert_eq!(cache.entries.len(), 1, "dead entries are dropped");
        assert!(cache.entries.contains_key(&key(&others)));
    }

    #[test]
    fn custom_documents_stay_within_their_budget_least_recently_used_first() {
        let size = document_of(
            &Mutex::new(CustomDocuments::new(CUSTOM_DOCUMENTS_BYTES)),
            &widgets("0"),
        )
        .bytes
        .len();
        let cache = Mutex::new(CustomDocuments::new(size * 5 / 2));
        let sets: Vec<Vec<ResourceRef>> = (0..3).map(|n| widgets(&n.to_string())).collect();
        document_of(&cache, &sets[0]);
        document_of(&cache, &sets[1]);
        document_of(&cache, &sets[0]);
        document_of(&cache, &sets[2]);
        let cache = cache.lock().unwrap();
        assert!(cache.bytes <= cache.budget);
        let mut kept: Vec<&Vec<usize>> = cache.entries.keys().collect();
        kept.sort();
        let mut expected = [key(&sets[0]), key(&sets[2])];
        expected.sort();
        assert_eq!(kept, expected.iter().collect::<Vec<_>>());
    }
}
