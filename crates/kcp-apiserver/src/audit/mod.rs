//! The audit log, as kube-apiserver writes it: `audit.k8s.io/v1` Events for the requests the
//! policy (`policy`) selects, at its level, through bounded queues to a log file or a webhook
//! (`sink`), never holding a request up.
//!
//! The router opens a [`Record`] for each request and fills it as the request goes: the user
//! once authenticated (and the impersonated one), the logical cluster once its path resolved,
//! the authorization decision, the request body, admission's annotations ([`Notes`]). When
//! the answer is ready the events are written: `RequestReceived` (timestamped when the request
//! came) and `ResponseComplete`, or for watches `RequestReceived` and `ResponseStarted`, then
//! `ResponseComplete` when the stream ends; a panicking handler writes `Panic`. Requests that
//! were never authenticated are not audited.
//!
//! kcp's annotations are on every event of a request to a workspace: `kcp.io/cluster` and
//! `tenancy.kcp.io/workspace` (its logical cluster) and `kcp.io/path` (its path); besides
//! kube's `authorization.k8s.io/decision` and admission's (webhooks' `<webhook>/<key>`,
//! `mutation.webhook.admission.k8s.io/round_<r>_index_<i>`, policies' `<policy>/<key>` and
//! `validation.policy.admission.k8s.io/validation_failure`). Request objects are decoded from
//! whatever media type they came in; response objects only from JSON answers. Not written:
//! authorization reasons.

pub mod policy;
pub mod sink;

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::BodyExt;
use kcp_registry::admission::webhooks::Notes;
use serde_json::{Map, Value, json};

use crate::authn::User;
use crate::request_info::RequestInfo;
use crate::status::Body;
use policy::{Attributes, Decision, Level, Policy, ResourceAttributes};
use sink::Sink;

/// The largest response body kept for `RequestResponse` events; larger ones are not logged.
const MAX_LOGGED_RESPONSE: usize = 4 << 20;

/// The audit policy and the backends.
pub struct Auditor {
    policy: Policy,
    sink: Sink,
    metrics: sink::AuditMetrics,
}

impl std::fmt::Debug for Auditor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auditor").finish_non_exhaustive()
    }
}

/// What is known of one request so far.
#[derive(Default)]
struct Known {
    user: Option<User>,
    impersonated: Option<User>,
    /// The request as resolved (its logical cluster's name).
    info: Option<RequestInfo>,
    /// The workspace path the request named, if it named one.
    path: Option<String>,
    decision: Option<&'static str>,
    /// The request body and its media type.
    body: Option<(Bytes, Option<String>)>,
    notes: Option<Arc<Notes>>,
}

/// One request being audited.
pub struct Record {
    id: String,
    received: jiff::Timestamp,
    uri: String,
    user_agent: Option<String>,
    source_ip: Option<String>,
    known: Mutex<Known>,
}

impl std::fmt::Debug for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Record")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Record {
    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        self.known.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set_user(&self, user: &User) {
        self.known().user = Some(user.clone());
    }

    pub fn set_impersonated(&self, user: &User) {
        self.known().impersonated = Some(user.clone());
    }

    /// The request as resolved, with the path it named (`root:org:team`) if it named one.
    pub fn set_info(&self, info: &RequestInfo, requested: Option<&str>) {
        let mut known = self.known();
        known.info = Some(info.clone());
        known.path = requested
            .filter(|p| *p == "root" || p.contains(':'))
            .map(str::to_string);
    }

    pub fn set_decision(&self, allowed: bool) {
        self.known().decision = Some(if allowed { "allow" } else { "forbid" });
    }

    pub fn set_body(&self, body: &Bytes, content_type: Option<&str>) {
        self.known().body = Some((body.clone(), content_type.map(str::to_string)));
    }

    pub fn set_notes(&self, notes: Arc<Notes>) {
        self.known().notes = Some(notes);
    }
}

/// An identifier for a request (kube takes the client's `Audit-ID` header, else a UUID).
fn audit_id(headers: &http::HeaderMap) -> String {
    headers
        .get("audit-id")
        .and_then(|v| v.to_str().ok())
        .filter(|v| !v.is_empty() && v.len() <= 64)
        .map(str::to_string)
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string())
}

fn micro_time(at: jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

fn user_json(user: &User) -> Value {
    let mut object = Map::new();
    object.insert("username".into(), json!(user.name));
    if !user.uid.is_empty() {
        object.insert("uid".into(), json!(user.uid));
    }
    if !user.groups.is_empty() {
        object.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        object.insert("extra".into(), json!(user.extra));
    }
    Value::Object(object)
}

impl Auditor {
    pub fn new(policy: Policy, sink: Sink, metrics: sink::AuditMetrics) -> Auditor {
        Auditor {
            policy,
            sink,
            metrics,
        }
    }

    /// Its counters, for the server's `/metrics`.
    pub fn metrics(&self) -> &sink::AuditMetrics {
        &self.metrics
    }

    /// A record for a request just received.
    pub fn begin(
        &self,
        _method: &http::Method,
        uri: &http::Uri,
        headers: &http::HeaderMap,
        peer: Option<std::net::IpAddr>,
    ) -> Arc<Record> {
        Arc::new(Record {
            id: audit_id(headers),
            received: jiff::Timestamp::now(),
            uri: uri.path_and_query().map_or("/", |p| p.as_str()).to_string(),
            user_agent: headers
                .get(http::header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            source_ip: peer.map(|ip| ip.to_string()),
            known: Mutex::new(Known::default()),
        })
    }

    /// What the policy decides about `record` (None until the user is known).
    fn decide(&self, known: &Known) -> Decision {
        let (Some(user), Some(info)) = (&known.user, &known.info) else {
            return Decision {
                level: Level::None,
                omit_stages: Vec::new(),
                omit_managed_fields: false,
            };
        };
        let attributes = match info {
            RequestInfo::Resource(r) => Attributes {
                user: &user.name,
                groups: &user.groups,
                verb: &r.verb,
                resource: Some(ResourceAttributes {
                    group: &r.group,
                    resource: r.resource.split(':').next().unwrap_or_default(),
                    subresource: r.subresource.as_deref().unwrap_or_default(),
                    namespace: r.namespace.as_deref().unwrap_or_default(),
                    name: r.name.as_deref().unwrap_or_default(),
                }),
                path: "",
            },
            RequestInfo::NonResource { verb, path, .. } => Attributes {
                user: &user.name,
                groups: &user.groups,
                verb,
                resource: None,
                path,
            },
        };
        self.policy.decide(&attributes)
    }

    /// Whether `record`'s request body is logged (level Request or more).
    pub fn wants_body(&self, record: &Record) -> bool {
        self.decide(&record.known()).level >= Level::Request
    }

    /// Writes the events of a finished request and answers its response (for a watch, one
    /// whose end writes `ResponseComplete`).
    pub async fn finish(
        self: &Arc<Self>,
        record: Arc<Record>,
        response: http::Response<Body>,
        registry: &kcp_registry::Registry,
    ) -> http::Response<Body> {
        let (decision, watch, cluster) = {
            let known = record.known();
            let watch = matches!(&known.info, Some(RequestInfo::Resource(r)) if r.verb == "watch");
            let cluster = match &known.info {
                Some(RequestInfo::Resource(r)) => r.cluster.clone(),
                Some(RequestInfo::NonResource { cluster, .. }) => cluster.clone(),
                None => None,
            };
            (self.decide(&known), watch, cluster)
        };
        if decision.level == Level::None {
            return response;
        }
        // The path of a request that named its workspace by cluster name, as kcp reads it.
        let named_path = record.known().path.clone();
        let path = match (&cluster, named_path) {
            (_, Some(path)) => Some(path),
            (Some(cluster), None) if cluster != kcp_registry::ALL_CLUSTERS => registry
                .logical_cluster_shared(cluster)
                .await
                .ok()
                .and_then(|lc| {
                    lc["metadata"]["annotations"][kcp_registry::tenancy::PATH_ANNOTATION]
                        .as_str()
                        .map(str::to_string)
                }),
            _ => None,
        };
        let status = response.status();
        // Failures are read for their Status (small); successes only at RequestResponse.
        let read_body = decision.level >= Level::RequestResponse || status.as_u16() >= 400;
        let (response, response_object) = if read_body && !watch {
            let (parts, body) = response.into_parts();
            let bytes = body
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            let object = (bytes.len() <= MAX_LOGGED_RESPONSE)
                .then(|| serde_json::from_slice::<Value>(&bytes).ok())
                .flatten();
            (
                http::Response::from_parts(parts, crate::status::full(bytes)),
                object,
            )
        } else {
            (response, None)
        };
        let base = self.event(&record, &decision, cluster.as_deref(), path.as_deref());
        let stages_now: &[&str] = match watch {
            true => &["RequestReceived", "ResponseStarted"],
            false => &["RequestReceived", "ResponseComplete"],
        };
        for stage in stages_now {
            self.write(
                &base,
                &decision,
                stage,
                status,
                response_object.as_ref(),
                &record,
            );
        }
        if !watch {
            return response;
        }
        let done = WatchEnded {
            auditor: Arc::clone(self),
            base,
            decision,
            status,
            record,
        };
        response.map(|body| crate::limits::holding(body, done))
    }

    /// Writes a `Panic` event for a request whose handler panicked.
    pub fn panicked(&self, record: &Record) {
        let known = record.known();
        let decision = self.decide(&known);
        drop(known);
        if decision.level == Level::None {
            return;
        }
        let base = self.event(record, &decision, None, None);
        self.write(
            &base,
            &decision,
            "Panic",
            http::StatusCode::INTERNAL_SERVER_ERROR,
            None,
            record,
        );
    }

    /// The fields every event of `record` has.
    fn event(
        &self,
        record: &Record,
        decision: &Decision,
        cluster: Option<&str>,
        path: Option<&str>,
    ) -> Map<String, Value> {
        let known = record.known();
        let mut event = Map::new();
        event.insert("kind".into(), json!("Event"));
        event.insert("apiVersion".into(), json!("audit.k8s.io/v1"));
        event.insert("level".into(), json!(decision.level.as_str()));
        event.insert("auditID".into(), json!(record.id));
        event.insert("requestURI".into(), json!(record.uri));
        let verb = match &known.info {
            Some(RequestInfo::Resource(r)) => r.verb.clone(),
            Some(RequestInfo::NonResource { verb, .. }) => verb.clone(),
            None => String::new(),
        };
        event.insert("verb".into(), json!(verb));
        if let Some(user) = &known.user {
            event.insert("user".into(), user_json(user));
        }
        if let Some(impersonated) = &known.impersonated {
            event.insert("impersonatedUser".into(), user_json(impersonated));
        }
        if let Some(ip) = &record.source_ip {
            event.insert("sourceIPs".into(), json!([ip]));
        }
        if let Some(agent) = &record.user_agent {
            event.insert("userAgent".into(), json!(agent));
        }
        if let Some(RequestInfo::Resource(r)) = &known.info {
            let mut object_ref = Map::new();
            object_ref.insert(
                "resource".into(),
                json!(r.resource.split(':').next().unwrap_or_default()),
            );
            for (field, value) in [
                ("namespace", r.namespace.as_deref()),
                ("name", r.name.as_deref()),
                ("subresource", r.subresource.as_deref()),
            ] {
                if let Some(value) = value.filter(|v| !v.is_empty()) {
                    object_ref.insert(field.into(), json!(value));
                }
            }
            if !r.group.is_empty() {
                object_ref.insert("apiGroup".into(), json!(r.group));
            }
            object_ref.insert("apiVersion".into(), json!(r.version));
            event.insert("objectRef".into(), Value::Object(object_ref));
        }
        if decision.level >= Level::Request
            && let Some((body, content_type)) = &known.body
            && let Some(mut object) = request_object(body, content_type.as_deref())
        {
            if decision.omit_managed_fields
                && let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut)
            {
                metadata.remove("managedFields");
            }
            event.insert("requestObject".into(), object);
        }
        event.insert(
            "requestReceivedTimestamp".into(),
            json!(micro_time(record.received)),
        );
        let mut annotations = Map::new();
        if let Some(cluster) = cluster {
            annotations.insert("kcp.io/cluster".into(), json!(cluster));
            annotations.insert("tenancy.kcp.io/workspace".into(), json!(cluster));
            annotations.insert("kcp.io/path".into(), json!(path.unwrap_or_default()));
        }
        if let Some(decision) = known.decision {
            annotations.insert("authorization.k8s.io/decision".into(), json!(decision));
        }
        if let Some(notes) = &known.notes {
            for (key, value) in notes.annotations() {
                annotations.insert(key, json!(value));
            }
        }
        if !annotations.is_empty() {
            event.insert("annotations".into(), Value::Object(annotations));
        }
        event
    }

    /// Writes the event of `stage`, unless the policy omits it.
    fn write(
        &self,
        base: &Map<String, Value>,
        decision: &Decision,
        stage: &str,
        status: http::StatusCode,
        response_object: Option<&Value>,
        record: &Record,
    ) {
        if decision.omit_stages.iter().any(|s| s == stage) {
            return;
        }
        let mut event = base.clone();
        event.insert("stage".into(), json!(stage));
        let now = match stage {
            "RequestReceived" => record.received,
            _ => jiff::Timestamp::now(),
        };
        event.insert("stageTimestamp".into(), json!(micro_time(now)));
        if stage != "RequestReceived" {
            let mut response_status = json!({"metadata": {}, "code": status.as_u16()});
            if let Some(failure) =
                response_object.filter(|o| o["kind"] == "Status" && o["status"] == "Failure")
            {
                for field in ["status", "message", "reason"] {
                    if let Some(value) = failure.get(field) {
                        response_status[field] = value.clone();
                    }
                }
            }
            event.insert("responseStatus".into(), response_status);
            if decision.level >= Level::RequestResponse
                && let Some(object) = response_object
            {
                let mut object = object.clone();
                if decision.omit_managed_fields
                    && let Some(metadata) =
                        object.get_mut("metadata").and_then(Value::as_object_mut)
                {
                    metadata.remove("managedFields");
                }
                event.insert("responseObject".into(), object);
            }
        }
        if let Ok(bytes) = serde_json::to_vec(&Value::Object(event)) {
            self.sink.emit(bytes.into());
        }
    }
}

/// A request body as JSON: objects in any media type the server reads, patches as sent.
fn request_object(body: &[u8], content_type: Option<&str>) -> Option<Value> {
    if body.is_empty() {
        return None;
    }
    let media = content_type.unwrap_or("application/json");
    if media.starts_with("application/vnd.kubernetes.protobuf")
        || media.starts_with("application/yaml")
    {
        return crate::body::decode_object(Some(media), body, None)
            .ok()
            .map(|d| d.value);
    }
    serde_json::from_slice(body).ok()
}

/// Writes a watch's `ResponseComplete` when its stream ends.
struct WatchEnded {
    auditor: Arc<Auditor>,
    base: Map<String, Value>,
    decision: Decision,
    status: http::StatusCode,
    record: Arc<Record>,
}

impl Drop for WatchEnded {
    fn drop(&mut self) {
        self.auditor.write(
            &self.base,
            &self.decision,
            "ResponseComplete",
            self.status,
            None,
            &self.record,
        );
    }
}
