//! The write path on an in-memory store: a script of requests (creates, updates, status
//! updates, every patch type, deletes) over built-in kinds, kcp's kinds, CRDs and a custom
//! resource, sent through the whole API server ([`Router`]) as a client sends them.
//!
//! The input is segments separated by NUL bytes; a segment is three selector bytes (verb,
//! resource, name) and then the request body. Properties, after every request:
//! - no answer is a 5xx (a 5xx is a server bug or a poisoned object);
//! - an object a write answered with reads back (GET) as the write answered it;
//! - everything in storage reads back through the storage decoder and is within
//!   [`MAX_DEPTH`](kcp_apimachinery::json::MAX_DEPTH): a stored object that cannot be read
//!   back is a failure;
//!
//! and at the end every collection lists (in its cluster and, for kinds that are not custom
//! resources, across all clusters) and every listed item reads.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, header};
use http_body_util::{BodyExt, Full};
use kcp_apimachinery::json::{MAX_DEPTH, decode_stored, exceeds_depth};
use kcp_apimachinery::object;
use kcp_apiserver::authn::{TokenAuthenticator, User, token_digest};
use kcp_apiserver::router::Router;
use kcp_registry::Registry;
use kcp_storage::{MemoryStorage, RangeRequest, Storage};
use serde_json::{Value, json};

/// The CRD every script starts with: widgets.example.com, namespaced, two versions (no
/// conversion webhook), defaults, a CEL rule, status and scale subresources.
fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {"name": "v1", "served": true, "storage": true,
                 "subresources": {"status": {}, "scale": {
                     "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
                 "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                     "spec": {"type": "object",
                              "x-kubernetes-validations": [{"rule": "self.size <= 100", "message": "too big"}],
                              "properties": {
                                  "size": {"type": "integer", "default": 1},
                                  "replicas": {"type": "integer"},
                                  "tags": {"type": "array", "maxItems": 10,
                                           "items": {"type": "string", "maxLength": 20}},
                                  "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}},
                     "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}}}}}},
                {"name": "v1beta1", "served": true, "storage": false,
                 "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}
            ]
        }
    })
}

/// Collections the script writes to, under `/clusters/root`.
const COLLECTIONS: &[&str] = &[
    "/api/v1/namespaces/default/configmaps",
    "/api/v1/namespaces/default/secrets",
    "/api/v1/namespaces/default/serviceaccounts",
    "/api/v1/namespaces",
    "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    "/apis/example.com/v1/namespaces/default/widgets",
    "/apis/example.com/v1beta1/namespaces/default/widgets",
    "/apis/tenancy.kcp.io/v1alpha1/workspaces",
    "/apis/core.kcp.io/v1alpha1/logicalclusters",
    "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
    "/apis/coordination.k8s.io/v1/namespaces/default/leases",
    "/api/v1/namespaces/default/events",
];

/// Names the script picks from (a CRD's name must be `<plural>.<group>`; a logical cluster's is
/// `cluster`).
const NAMES: &[&str] = &["a", "b", "widgets.example.com", "cluster"];

/// What one segment's verb byte selects: method, content type, subresource.
const VERBS: &[(Method, &str, &str)] = &[
    (Method::POST, "application/json", ""),
    (Method::PUT, "application/json", ""),
    (Method::PUT, "application/json", "/status"),
    (Method::PATCH, "application/merge-patch+json", ""),
    (Method::PATCH, "application/json-patch+json", ""),
    (Method::PATCH, "application/strategic-merge-patch+json", ""),
    (Method::DELETE, "application/json", ""),
    (Method::POST, "application/yaml", ""),
    (Method::PATCH, "application/merge-patch+json", "/status"),
    (Method::PUT, "application/json", "/scale"),
    (Method::PATCH, "application/merge-patch+json", "/scale"),
    (Method::PUT, "application/json", "/finalize"),
];

/// Tokens the runner inserts.
pub const TOKENS: &[&str] = &[
    "\u{0}",
    "{\"metadata\":{\"name\":\"a\"}}",
    "{\"metadata\":{\"name\":\"b\",\"finalizers\":[\"x/y\"]}}",
    "{\"metadata\":{\"finalizers\":null}}",
    "{\"metadata\":{\"deletionTimestamp\":\"2020-01-01T00:00:00Z\"}}",
    "{\"metadata\":{\"managedFields\":[{\"manager\":\"m\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{}}]}}",
    "{\"spec\":{\"size\":5,\"replicas\":2,\"free\":{}}}",
    "{\"spec\":{\"replicas\":\"x\"}}",
    "{\"spec\":{\"cluster\":\"other\"}}",
    "{\"status\":{\"replicas\":3}}",
    "{\"data\":{\"k\":\"v\"}}",
    "[{\"op\":\"add\",\"path\":\"/data\",\"value\":{}}]",
    "[{\"op\":\"copy\",\"from\":\"/metadata\",\"path\":\"/data/x\"}]",
    "[{\"op\":\"add\",\"path\":\"/spec/free/a\",\"value\":[[[[{}]]]]}]",
    "\"apiVersion\":\"v1\",",
    "\"kind\":\"ConfigMap\",",
    "\"resourceVersion\":\"1\"",
    "\"generation\":9223372036854775807",
    "{\"a\":",
    "[[[[[[[[",
    "{",
    "}",
    "\"",
];

/// Runs one script; panics when a property fails.
///
/// Release builds run it on the caller's thread (the runner's 2 MiB stack, as the server's
/// worker threads). Debug builds' frames are several times larger than release's, so there the
/// script gets a thread with a 16 MiB stack; the server is never built that way.
pub fn run(data: &[u8]) {
    if cfg!(debug_assertions) {
        let data = data.to_vec();
        let outcome = std::thread::Builder::new()
            .stack_size(16 * 1024 * 1024)
            .spawn(move || RUNTIME.with(|runtime| runtime.block_on(script(&data))))
            .expect("spawn a script thread")
            .join();
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
    } else {
        RUNTIME.with(|runtime| runtime.block_on(script(data)));
    }
}

thread_local! {
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
}

struct Server {
    router: Router,
    storage: Arc<MemoryStorage>,
    registry: Registry,
}

struct Answer {
    code: u16,
    body: Value,
    text: String,
}

impl Server {
    fn new() -> Server {
        let mut authn = TokenAuthenticator::default();
        authn.add(
            token_digest("t"),
            User {
                name: "admin".into(),
                groups: vec!["system:masters".into()],
                ..Default::default()
            },
        );
        let storage = Arc::new(MemoryStorage::new());
        let registry = Registry::new(storage.clone());
        let router = Router::new(authn, registry.clone());
        Server {
            router,
            storage,
            registry,
        }
    }

    async fn send(&self, method: &Method, path: &str, content_type: &str, body: &[u8]) -> Answer {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::AUTHORIZATION, "Bearer t")
            .header(header::CONTENT_TYPE, content_type)
            .header(header::ACCEPT, "application/json")
            .body(Full::new(Bytes::copy_from_slice(body)))
            .expect("a well-formed request");
        let response = self.router.handle(request).await;
        let code = response.status().as_u16();
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("in-memory bodies are read whole")
            .to_bytes();
        Answer {
            code,
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            text: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }

    async fn get(&self, path: &str) -> Answer {
        self.send(&Method::GET, path, "application/json", b"").await
    }

    /// The CRD of [`widget_crd`], created and marked Established as the CRD controller would.
    async fn establish_widgets(&self) {
        let base = "/clusters/root/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
        let created = self
            .send(
                &Method::POST,
                base,
                "application/json",
                widget_crd().to_string().as_bytes(),
            )
            .await;
        assert_eq!(created.code, 201, "{}", created.text);
        let mut crd = created.body;
        crd["status"]["conditions"] = json!([
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": ""},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": ""}
        ]);
        let established = self
            .send(
                &Method::PUT,
                &format!("{base}/widgets.example.com/status"),
                "application/json",
                crd.to_string().as_bytes(),
            )
            .await;
        assert_eq!(established.code, 200, "{}", established.text);
    }

    /// Every key in storage reads back through the storage decoder, within the write limit.
    async fn check_storage(&self, after: &str) {
        let all = self
            .storage
            .range(RangeRequest::prefix(Vec::new()))
            .await
            .expect("the in-memory store lists");
        for kv in all.kvs {
            let key = String::from_utf8_lossy(&kv.key);
            let value = decode_stored(&kv.value)
                .unwrap_or_else(|e| panic!("after {after}: {key} does not read back: {e}"));
            assert!(
                !exceeds_depth(&value, MAX_DEPTH),
                "after {after}: {key} was stored deeper than {MAX_DEPTH} levels"
            );
        }
    }
}

/// One request of the script.
struct Step<'a> {
    method: &'a Method,
    content_type: &'a str,
    path: String,
    /// The collection the object is in, for reading it back.
    collection: String,
    body: &'a [u8],
}

fn step(segment: &[u8]) -> Option<Step<'_>> {
    let [verb, resource, name, body @ ..] = segment else {
        return None;
    };
    let (method, content_type, subresource) = &VERBS[usize::from(*verb) % VERBS.len()];
    let collection = COLLECTIONS[usize::from(*resource) % COLLECTIONS.len()];
    let name = NAMES[usize::from(*name) % NAMES.len()];
    let collection = format!("/clusters/root{collection}");
    let path = if *method == Method::POST {
        collection.clone()
    } else {
        format!("{collection}/{name}{subresource}")
    };
    Some(Step {
        method,
        content_type,
        path,
        collection,
        body,
    })
}

/// `name` as a URL path segment: what is not unreserved is percent-encoded (some kinds, such as
/// core events, take names with spaces).
fn escape(name: &str) -> String {
    let mut escaped = String::with_capacity(name.len());
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            escaped.push(char::from(byte));
        } else {
            escaped.push_str(&format!("%{byte:02X}"));
        }
    }
    escaped
}

async fn script(data: &[u8]) {
    let server = Server::new();
    server
        .registry
        .bootstrap_root("https://localhost:6443")
        .await
        .expect("root bootstraps on an empty store");
    server.establish_widgets().await;
    let trace = std::env::var_os("KCP_FUZZ_TRACE").is_some();
    for segment in data.split(|&b| b == 0) {
        let Some(step) = step(segment) else {
            continue;
        };
        let label = format!(
            "{} {} ({}) {}",
            step.method,
            step.path,
            step.content_type,
            String::from_utf8_lossy(step.body)
        );
        let answer = server
            .send(step.method, &step.path, step.content_type, step.body)
            .await;
        if trace {
            eprintln!("{label}\n  -> {} {}", answer.code, answer.text);
        }
        assert!(
            answer.code < 500,
            "{label} answered {}: {}",
            answer.code,
            answer.text
        );
        let wrote_object = matches!(answer.code, 200 | 201)
            && *step.method != Method::DELETE
            && !step.path.ends_with("/scale")
            && answer.body.get("metadata").is_some();
        if wrote_object {
            let name = escape(object::str_at(&answer.body, &["metadata", "name"]));
            let read = server.get(&format!("{}/{name}", step.collection)).await;
            let deleted = answer.body["metadata"].get("deletionTimestamp").is_some();
            match read.code {
                200 => assert_eq!(
                    read.body, answer.body,
                    "{label}: a GET reads another object than the write answered"
                ),
                404 if deleted => {}
                code => panic!("{label}: the written object reads {code}: {}", read.text),
            }
        }
        server.check_storage(&label).await;
    }
    for collection in COLLECTIONS {
        let list = server.get(&format!("/clusters/root{collection}")).await;
        let custom = collection.contains("example.com");
        if custom && list.code == 404 {
            // The script changed or deleted the CRD.
            continue;
        }
        assert_eq!(list.code, 200, "LIST {collection}: {}", list.text);
        for item in list.body["items"].as_array().into_iter().flatten() {
            let name = escape(object::str_at(item, &["metadata", "name"]));
            let read = server
                .get(&format!("/clusters/root{collection}/{name}"))
                .await;
            assert_eq!(
                read.code, 200,
                "GET of listed {collection}/{name}: {}",
                read.text
            );
        }
        if custom {
            // Custom resources are listed across clusters only as metadata.
            continue;
        }
        let everywhere = collection.replace("/namespaces/default/", "/");
        let list = server.get(&format!("/clusters/*{everywhere}")).await;
        assert_eq!(
            list.code, 200,
            "LIST /clusters/*{everywhere}: {}",
            list.text
        );
    }
}
