//! Routing: which requests need a user, and who answers them.
//!
//! Health checks and `/version` answer anyone, as kube-apiserver's `system:public-info-viewer`
//! allows, and are never limited. Everything else needs an authenticated user, is then admitted
//! by the in-flight limits and answered within the request timeout ([`crate::limits`]), after
//! the layers of its URL tree's mount ([`crate::mount`]: path resolution, identity,
//! authorization): discovery documents, then resource requests (handed to
//! [`crate::handlers`]); other paths
//! answer 404 with Kubernetes' message. Metrics name a group and resource only for
//! authenticated requests whose resource something serves, so made-up paths add no series.
//! The response representation is negotiated once here, from the `Accept` header: API
//! responses (resources, discovery, their errors) are written in it directly, JSON or YAML;
//! bodies are gzip-compressed when large ([`crate::compression`]).

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::BodyExt;
use kcp_registry::Registry;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use crate::authn::{TokenAuthenticator, User};
use crate::authz::{Authorizer, Decision};
use crate::discovery;
use crate::limits::{self, Class, LimitConfig, Limits};
use crate::metrics::Metrics;
use crate::mount::Layer;
use crate::negotiation::{self, Encoding, Negotiated, NotAcceptable};
use crate::request_info::{self, RequestInfo, ResourceRequest};
use crate::status::{Body, encoded, failure_as, json_response, text_response};
use kcp_registry::ServedResources;

/// Request bodies above this size answer 413, as kube-apiserver's limit.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Answers requests; shared by every connection.
#[derive(Clone)]
pub struct Router {
    authn: TokenAuthenticator,
    authz: Authorizer,
    registry: Registry,
    metrics: Arc<Metrics>,
    limits: Arc<Limits>,
    /// Writes the audit log, when the server keeps one.
    auditor: Option<Arc<crate::audit::Auditor>>,
}

impl Router {
    /// A router with kube-apiserver's default limits ([`LimitConfig::default`]).
    pub fn new(authn: TokenAuthenticator, registry: Registry) -> Self {
        Router {
            authn,
            authz: Authorizer::new(registry.clone()),
            registry,
            metrics: Arc::new(Metrics::new()),
            limits: Limits::new(LimitConfig::default()),
            auditor: None,
        }
    }

    /// The same router writing audit events through `auditor`.
    pub fn with_auditor(mut self, auditor: crate::audit::Auditor) -> Self {
        if let Some(metrics) = Arc::get_mut(&mut self.metrics) {
            auditor.metrics().register(metrics.registry_mut());
        }
        self.auditor = Some(Arc::new(auditor));
        self
    }

    /// The same router asking `webhook` about what RBAC does not allow.
    pub fn with_authorization_webhook(
        mut self,
        webhook: crate::authz::webhook::AuthorizationWebhook,
    ) -> Self {
        self.authz = self.authz.with_webhook(webhook);
        self
    }

    /// The same router with other in-flight limits and request timeout.
    pub fn with_limits(mut self, config: LimitConfig) -> Self {
        self.limits = Limits::new(config);
        self
    }

    /// The same router, its `/metrics` also rendering what `register` adds (before it serves).
    pub fn with_metrics(
        mut self,
        register: impl FnOnce(&mut prometheus_client::registry::Registry),
    ) -> Self {
        if let Some(metrics) = Arc::get_mut(&mut self.metrics) {
            register(metrics.registry_mut());
        }
        self
    }

    /// Answers one request and records it in the metrics. Never fails: every error is a
    /// `Status` response.
    pub async fn handle<B>(&self, request: Request<B>) -> Response<Body>
    where
        B: http_body::Body<Data = Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let started = Instant::now();
        let record = self.auditor.as_ref().map(|auditor| {
            let peer = request
                .extensions()
                .get::<crate::serve::PeerAddress>()
                .map(|p| p.0.ip());
            auditor.begin(request.method(), request.uri(), request.headers(), peer)
        });
        let (mount, view, path) = crate::mount::of(request.uri().path());
        let info = request_info::parse(request.method(), path, request.uri().query());
        let (verb, group, resource) = match &info {
            RequestInfo::Resource(r) => (r.verb.clone(), r.group.clone(), r.resource.clone()),
            RequestInfo::NonResource { verb, .. } => (verb.clone(), String::new(), String::new()),
        };
        let api_response = match &info {
            RequestInfo::Resource(_) => true,
            RequestInfo::NonResource { path, .. } => {
                path == "/api" || path.starts_with("/api/") || path.starts_with("/apis")
            }
        };
        let answer = match &info {
            RequestInfo::Resource(resource) => crate::handlers::answer_of(resource),
            RequestInfo::NonResource { .. } => negotiation::Answer::Object,
        };
        let negotiated = negotiation::negotiate(request.headers(), answer);
        let encoding = match &negotiated {
            Ok(negotiated) if api_response => negotiated.encoding,
            _ => Encoding::Json,
        };
        let gzip = crate::compression::accepts_gzip(request.headers());
        let route = Route {
            mount,
            view,
            record: record.clone(),
        };
        let admitted = self.admit(request, route, info, negotiated, encoding);
        let (response, served) = match (&self.auditor, &record) {
            (Some(auditor), Some(record)) => {
                match futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(admitted)).await
                {
                    Ok(answered) => answered,
                    Err(panic) => {
                        auditor.panicked(record);
                        std::panic::resume_unwind(panic);
                    }
                }
            }
            _ => admitted.await,
        };
        let response = match (&self.auditor, record) {
            (Some(auditor), Some(record)) => auditor.finish(record, response, &self.registry).await,
            _ => response,
        };
        let response = crate::compression::maybe_gzip(response, gzip).await;
        // Labels only from bounded sets: a resource nothing serves, or any path of a client
        // that is not even authenticated, must not become a new series.
        let (group, resource) = if served {
            (group, resource)
        } else {
            (String::new(), String::new())
        };
        self.metrics.observe(
            &verb,
            &group,
            &resource,
            response.status().as_u16(),
            started.elapsed(),
        );
        response
    }

    /// Whether the logical cluster of `request` (already resolved) serves its resource.
    fn serves(&self, request: &ResourceRequest) -> bool {
        let (group, version, plural) = (
            request.group.as_str(),
            request.version.as_str(),
            request.resource.as_str(),
        );
        match request.cluster.as_deref() {
            Some(kcp_registry::ALL_CLUSTERS) => self
                .registry
                .serves_anywhere(group, version, plural)
                .is_some(),
            Some(cluster) => self
                .registry
                .serves(cluster, group, version, plural)
                .is_some(),
            None => {
                kcp_apis::builtin::in_group_version(group, version).any(|r| r.name == plural)
                    || kcp_apis::system::find(group, version, plural).is_some()
            }
        }
    }

    /// Answers the public endpoints to anyone; authenticates the rest, admits them by the
    /// in-flight limits and answers them within the request timeout. Also says whether the
    /// request was authenticated and for a resource its logical cluster serves.
    async fn admit<B>(
        &self,
        request: Request<B>,
        route: Route,
        info: RequestInfo,
        negotiated: Result<Negotiated, NotAcceptable>,
        encoding: Encoding,
    ) -> (Response<Body>, bool)
    where
        B: http_body::Body<Data = Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let read_only = matches!(*request.method(), Method::GET | Method::HEAD);
        if let RequestInfo::NonResource { path, .. } = &info {
            match path.as_str() {
                "/healthz" | "/livez" | "/readyz" if read_only => {
                    return (text_response(StatusCode::OK, "ok"), false);
                }
                "/version" | "/version/" if read_only => {
                    return (
                        crate::status::encoded_json(StatusCode::OK, crate::version::json()),
                        false,
                    );
                }
                _ => {}
            }
        }
        // Header values may carry any UTF-8, as Go's servers pass them on.
        let authorization = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| std::str::from_utf8(v.as_bytes()).ok());
        // A verified client certificate comes first, as in kube-apiserver's authenticators.
        let certificate_user = request
            .extensions()
            .get::<crate::authn::ClientCertificateUser>()
            .map(|user| user.0.clone());
        let identified = match certificate_user {
            Some(user) => Ok(Some(user)),
            None => self.authn.identify(&self.registry, authorization).await,
        };
        let identified = match identified {
            Ok(identified) => identified,
            Err(error) => {
                return (
                    crate::error::ApiError::from(error).into_response(encoding),
                    false,
                );
            }
        };
        let Some(user) = identified.as_ref() else {
            return (
                failure_as(
                    encoding,
                    StatusCode::UNAUTHORIZED,
                    "Unauthorized",
                    "Unauthorized",
                ),
                false,
            );
        };
        if let Some(record) = &route.record {
            record.set_user(user);
            record.set_info(&info, None);
        }
        let class = Class::of(match &info {
            RequestInfo::Resource(r) => &r.verb,
            RequestInfo::NonResource { verb, .. } => verb,
        });
        let permit = if limits::exempt(&user.groups) {
            None
        } else {
            match self.limits.admit(class, &user.name) {
                Ok(permit) => Some(permit),
                Err(rejected) => {
                    tracing::debug!(user = %user.name, ?class, ?rejected, "request not admitted");
                    return (limits::too_many_requests(encoding), false);
                }
            }
        };
        let timeout = self.limits.config().request_timeout;
        let mut served = false;
        let answer = self.answer(request, route, info, user, negotiated, &mut served);
        let response = if timeout.is_zero() {
            answer.await
        } else {
            // Dropping the answer on time-out cancels it and gives its place back.
            tokio::time::timeout(timeout, answer)
                .await
                .unwrap_or_else(|_| limits::timed_out(encoding))
        };
        match (class, permit) {
            // A watch keeps its place while its stream is open.
            (Class::Watch, Some(permit)) => {
                (response.map(|body| limits::holding(body, permit)), served)
            }
            _ => (response, served),
        }
    }

    async fn answer<B>(
        &self,
        request: Request<B>,
        route: Route,
        info: RequestInfo,
        user: &User,
        negotiated: Result<Negotiated, NotAcceptable>,
        served: &mut bool,
    ) -> Response<Body>
    where
        B: http_body::Body<Data = Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (parts, body) = request.into_parts();
        let record = route.record.as_deref();
        let read_only = matches!(parts.method, Method::GET | Method::HEAD);
        let encoding = negotiated.as_ref().map_or(Encoding::Json, |n| n.encoding);
        let requested_cluster = cluster_of(&info).map(str::to_string);
        let mut flow = Flow {
            info,
            user: Cow::Borrowed(user),
            requested_cluster,
            view: route.view,
            view_served: None,
            record,
        };
        for layer in route.mount.layers {
            if let Some(answered) = self
                .pass(*layer, &mut flow, &parts.headers, encoding, served)
                .await
            {
                return answered;
            }
        }
        let Flow {
            info,
            user,
            requested_cluster,
            view_served,
            ..
        } = flow;
        if let Some(record) = record {
            record.set_info(&info, requested_cluster.as_deref());
        }
        let user: &User = &user;
        // What discovery and OpenAPI list: a view's resources, or the cluster's.
        let mut view_served = view_served;
        let mut served_in = |cluster: Option<&str>| {
            view_served
                .take()
                .unwrap_or_else(|| ServedResources::of(&self.registry, cluster))
        };
        match info {
            RequestInfo::NonResource { path, .. } if path == "/metrics" && read_only => {
                let text = self.metrics.render(&self.registry).await;
                Response::builder()
                    .status(StatusCode::OK)
                    .header(
                        header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )
                    .body(crate::status::full(text))
                    .unwrap_or_else(|_| Response::new(crate::status::full(Bytes::new())))
            }
            RequestInfo::NonResource { path, .. }
                if read_only
                    && matches!(
                        path.trim_end_matches('/'),
                        "/.well-known/openid-configuration" | "/openid/v1/jwks"
                    ) =>
            {
                self.issuer_discovery(&path, &parts.headers)
            }
            RequestInfo::NonResource { path, cluster, .. }
                if read_only && path.trim_end_matches('/') == "/openapi/v2" =>
            {
                crate::openapi_v2::serve(&served_in(cluster.as_deref()), &parts.headers)
            }
            RequestInfo::NonResource { path, cluster, .. }
                if read_only && (path == "/openapi/v3" || path.starts_with("/openapi/v3/")) =>
            {
                let prefix = requested_cluster
                    .as_ref()
                    .map(|name| format!("/clusters/{name}"))
                    .unwrap_or_default();
                crate::openapi::serve(
                    &served_in(cluster.as_deref()),
                    &prefix,
                    &path["/openapi/v3".len()..],
                    parts.uri.query(),
                    &parts.headers,
                )
            }
            RequestInfo::NonResource { path, cluster, .. } => {
                let served = served_in(cluster.as_deref());
                let aggregated = negotiation::aggregated_discovery_version(&parts.headers);
                match (path.trim_end_matches('/'), aggregated) {
                    ("/api", Some(version)) if read_only => {
                        return crate::aggregated_discovery::response(&served, true, version);
                    }
                    ("/apis", Some(version)) if read_only => {
                        return crate::aggregated_discovery::response(&served, false, version);
                    }
                    _ => {}
                }
                // Only `/api` and `/apis` documents are written in YAML when asked.
                let encoding = match path.starts_with("/api") {
                    true => encoding,
                    false => Encoding::Json,
                };
                let address = parts.uri.authority().map(|a| a.as_str()).or_else(|| {
                    parts
                        .headers
                        .get(header::HOST)
                        .and_then(|h| h.to_str().ok())
                });
                match discovery_document(&served, &path, address).filter(|_| read_only) {
                    Some(document) => encoded(encoding, StatusCode::OK, &document),
                    None => crate::error::ApiError::NoSuchResource.into_response(encoding),
                }
            }
            RequestInfo::Resource(resource) => {
                let body = match read_limited(body, MAX_BODY_BYTES).await {
                    Ok(Some(collected)) => collected,
                    Ok(None) => {
                        return failure_as(
                            encoding,
                            StatusCode::PAYLOAD_TOO_LARGE,
                            "RequestEntityTooLarge",
                            &format!("the request body is too large: limit is {MAX_BODY_BYTES}"),
                        );
                    }
                    Err(error) => {
                        return failure_as(
                            encoding,
                            StatusCode::BAD_REQUEST,
                            "BadRequest",
                            &format!("reading the request body: {error}"),
                        );
                    }
                };
                if resource.verb == "create" && crate::authz::reviews::handles(&resource) {
                    return self
                        .review(&resource, &parts.headers, &body, user)
                        .await
                        .unwrap_or_else(|error| error.into_response(encoding));
                }
                if resource.verb == "create" && is_token_request(&resource) {
                    return self
                        .request_token(&resource, &parts.headers, &body)
                        .await
                        .unwrap_or_else(|error| error.into_response(encoding));
                }
                if let (Some(auditor), Some(record)) = (&self.auditor, record)
                    && auditor.wants_body(record)
                {
                    let content_type = parts
                        .headers
                        .get(header::CONTENT_TYPE)
                        .and_then(|v| v.to_str().ok());
                    record.set_body(&body, content_type);
                }
                // Writes carry who makes them, for admission (a workspace's owner, the
                // requester of a CertificateSigningRequest), and what admission notes.
                let registry = match read_only {
                    true => std::borrow::Cow::Borrowed(&self.registry),
                    false => {
                        let notes = Arc::new(kcp_registry::admission::webhooks::Notes::default());
                        if let Some(record) = record {
                            record.set_notes(Arc::clone(&notes));
                        }
                        std::borrow::Cow::Owned(
                            self.registry
                                .on_behalf_of(self.authz.requester(user))
                                .noting(notes),
                        )
                    }
                };
                crate::handlers::serve(
                    &registry,
                    &resource,
                    parts.uri.query(),
                    &parts.headers,
                    body,
                    negotiated,
                )
                .await
            }
        }
    }
}

/// The mount a request is for, and its view if it is a virtual workspace's.
struct Route {
    mount: &'static crate::mount::Mount,
    view: Option<crate::virtual_workspaces::View>,
    /// The request's audit record, if the server audits.
    record: Option<Arc<crate::audit::Record>>,
}

/// A request on its way through its mount's layers.
struct Flow<'u> {
    /// The request's audit record, if the server audits.
    record: Option<&'u crate::audit::Record>,
    /// The virtual workspace view the request is for, if any.
    view: Option<crate::virtual_workspaces::View>,
    /// What that view serves, once it admitted the request.
    view_served: Option<ServedResources>,
    info: RequestInfo,
    /// Who the request is from, as the layers so far see them.
    user: Cow<'u, User>,
    /// The cluster as the client named it (a service account's own where it named none),
    /// before its path was resolved: the OpenAPI index points back at it.
    requested_cluster: Option<String>,
}

/// The logical cluster (or path, before resolution) a request names.
fn cluster_of(info: &RequestInfo) -> Option<&str> {
    match info {
        RequestInfo::Resource(r) => r.cluster.as_deref(),
        RequestInfo::NonResource { cluster, .. } => cluster.as_deref(),
    }
}

impl Router {
    /// Passes `flow` through `layer`: an answer ends the request.
    async fn pass(
        &self,
        layer: Layer,
        flow: &mut Flow<'_>,
        headers: &http::HeaderMap,
        encoding: Encoding,
        served: &mut bool,
    ) -> Option<Response<Body>> {
        match layer {
            Layer::ServiceAccountCluster => {
                if let Some(origin) = crate::authn::service_account_cluster(&flow.user) {
                    let cluster = match &mut flow.info {
                        RequestInfo::Resource(r) => &mut r.cluster,
                        RequestInfo::NonResource { cluster, .. } => cluster,
                    };
                    if cluster.is_none() {
                        *cluster = Some(origin.clone());
                        flow.requested_cluster = Some(origin);
                    }
                }
            }
            Layer::ResolvePath => {
                if let Err(error) = crate::workspaces::resolve(&self.registry, &mut flow.info).await
                {
                    return Some(error.into_response(encoding));
                }
                if let RequestInfo::Resource(resource) = &flow.info {
                    *served = self.serves(resource);
                }
                if let Some(record) = flow.record {
                    record.set_info(&flow.info, flow.requested_cluster.as_deref());
                }
            }
            Layer::ForeignIdentity => {
                let cluster = cluster_of(&flow.info).unwrap_or("root");
                if let Some(foreign) = TokenAuthenticator::as_seen_in(&flow.user, cluster) {
                    flow.user = Cow::Owned(foreign);
                }
            }
            Layer::Impersonation => match crate::authz::impersonation::requested(headers) {
                Ok(None) => {}
                Ok(Some(wanted)) => {
                    let cluster = cluster_of(&flow.info).unwrap_or("root");
                    match self.authz.impersonate(&flow.user, cluster, &wanted).await {
                        Ok(Ok(acting)) => {
                            if let Some(record) = flow.record {
                                record.set_impersonated(&acting);
                            }
                            flow.user = Cow::Owned(acting)
                        }
                        Ok(Err(refused)) => {
                            let error = kcp_registry::RegistryError::Forbidden {
                                qualified_resource: refused.resource,
                                name: refused.name,
                                message: refused.message,
                                causes: Vec::new(),
                            };
                            return Some(
                                crate::error::ApiError::from(error).into_response(encoding),
                            );
                        }
                        Err(error) => {
                            return Some(
                                crate::error::ApiError::from(error).into_response(encoding),
                            );
                        }
                    }
                }
                Err(error) => {
                    return Some(crate::error::ApiError::from(error).into_response(encoding));
                }
            },
            Layer::HomeWorkspace => {
                if let RequestInfo::Resource(resource) = &flow.info
                    && crate::workspaces::is_home(resource)
                {
                    return Some(
                        crate::workspaces::home(&self.registry, &self.authz, &flow.user, encoding)
                            .await,
                    );
                }
            }
            Layer::VirtualWorkspace => {
                let Some(view) = &flow.view else {
                    return Some(crate::error::ApiError::NoSuchResource.into_response(encoding));
                };
                let info = flow.info.clone();
                match crate::virtual_workspaces::admit(
                    &self.registry,
                    &self.authz,
                    &flow.user,
                    view,
                    info,
                )
                .await
                {
                    Ok(admitted) => {
                        *served = matches!(admitted.info, RequestInfo::Resource(_));
                        flow.info = admitted.info;
                        flow.view_served = Some(admitted.served);
                    }
                    Err(error) => return Some(error.into_response(encoding)),
                }
            }
            Layer::Authorize => match self.authz.authorize(&flow.user, &flow.info).await {
                Ok(Decision::Allow) => {
                    if let Some(record) = flow.record {
                        record.set_decision(true);
                    }
                }
                Ok(Decision::Deny(denial)) => {
                    if let Some(record) = flow.record {
                        record.set_decision(false);
                    }
                    return Some(forbidden(&flow.info, &denial.message, encoding));
                }
                Err(error) => {
                    return Some(crate::error::ApiError::from(error).into_response(encoding));
                }
            },
        }
        None
    }
}

/// How much of an oversized body is read (and dropped) before the 413 is answered, and for how
/// long: a client still sending would otherwise see its HTTP/2 stream reset instead of the
/// answer. Past either bound the answer goes out anyway.
const DRAIN_BYTES: usize = 4 * MAX_BODY_BYTES;
const DRAIN_TIME: std::time::Duration = std::time::Duration::from_secs(5);

/// The whole body if it holds at most `limit` bytes; `None` if it holds more (the rest read
/// and dropped, within bounds).
async fn read_limited<B>(body: B, limit: usize) -> Result<Option<Bytes>, String>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut body = std::pin::pin!(body);
    let mut collected = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| error.into().to_string())?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if collected.len() + data.len() > limit {
            let drain = async {
                let mut drained = 0usize;
                while drained < DRAIN_BYTES
                    && let Some(Ok(frame)) = body.frame().await
                {
                    drained += frame.data_ref().map_or(0, Bytes::len);
                }
            };
            let _ = tokio::time::timeout(DRAIN_TIME, drain).await;
            return Ok(None);
        }
        collected.extend_from_slice(&data);
    }
    Ok(Some(collected.freeze()))
}

/// Whether `request` is a TokenRequest (`serviceaccounts/<name>/token`).
fn is_token_request(request: &ResourceRequest) -> bool {
    request.group.is_empty()
        && request.resource == "serviceaccounts"
        && request.subresource.as_deref() == Some("token")
        && request.name.is_some()
}

impl Router {
    /// Service account issuer discovery, as kube-apiserver serves it: the OpenID Connect
    /// configuration (its `jwks_uri` on the address the client used) and the signing key set.
    fn issuer_discovery(&self, path: &str, headers: &http::HeaderMap) -> Response<Body> {
        let Some(tokens) = self.registry.service_account_tokens() else {
            return crate::error::ApiError::NoSuchResource.into_response(Encoding::Json);
        };
        let document = match path.trim_end_matches('/') {
            "/openid/v1/jwks" => tokens.jwks(),
            _ => {
                let host = headers
                    .get(header::HOST)
                    .and_then(|h| h.to_str().ok())
                    .unwrap_or("localhost");
                tokens.openid_configuration(&format!("https://{host}/openid/v1/jwks"))
            }
        };
        json_response(StatusCode::OK, &document)
    }

    /// Answers a TokenRequest: a new token for the service account, never stored.
    async fn request_token(
        &self,
        request: &ResourceRequest,
        headers: &http::HeaderMap,
        body: &[u8],
    ) -> Result<Response<Body>, crate::error::ApiError> {
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        let token_request = crate::body::decode_object(content_type, body, None)?.value;
        let answer = self
            .registry
            .request_token(
                request.cluster.as_deref().unwrap_or("root"),
                request.namespace.as_deref().unwrap_or_default(),
                request.name.as_deref().unwrap_or_default(),
                token_request,
            )
            .await?;
        Ok(json_response(StatusCode::CREATED, &answer))
    }

    /// Answers the creation of a review (computed, never stored; see [`crate::authz::reviews`]).
    async fn review(
        &self,
        request: &ResourceRequest,
        headers: &http::HeaderMap,
        body: &[u8],
        user: &User,
    ) -> Result<Response<Body>, crate::error::ApiError> {
        let resource = kcp_apis::builtin::in_group_version(&request.group, &request.version)
            .find(|r| r.name == request.resource)
            .ok_or(crate::error::ApiError::NoSuchResource)?;
        let content_type = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        let mut review = crate::body::decode_object(content_type, body, Some(resource))?.value;
        if let Some(object) = review.as_object_mut() {
            object.insert("apiVersion".into(), resource.group_version().into());
            object.insert("kind".into(), resource.kind.to_string().into());
        }
        let answer = crate::authz::reviews::answer(
            &self.authz,
            &self.authn,
            &self.registry,
            user,
            request,
            review,
        )
        .await?;
        Ok(json_response(StatusCode::CREATED, &answer))
    }
}

/// The discovery document at `path`, if there is one.
fn discovery_document(
    served: &ServedResources,
    path: &str,
    address: Option<&str>,
) -> Option<serde_json::Value> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match parts.as_slice() {
        ["api"] => Some(discovery::api_versions(address)),
        ["api", version] => discovery::resource_list(served, "", version),
        ["apis"] => Some(discovery::api_group_list(served)),
        ["apis", group] => discovery::api_group(served, group),
        ["apis", group, version] => discovery::resource_list(served, group, version),
        _ => None,
    }
}

/// Splits `/clusters/<name>/rest` into the logical cluster name and `/rest`. Paths outside
/// `/clusters/` belong to no cluster. The wildcard `*` may come percent-encoded (`%2A`), as
/// clients escape it.
pub fn split_cluster(path: &str) -> (Option<&str>, &str) {
    let Some(after) = path.strip_prefix("/clusters/") else {
        return (None, path);
    };
    let (name, rest) = match after.find('/') {
        Some(slash) => (&after[..slash], &after[slash..]),
        None => (after, "/"),
    };
    if name.eq_ignore_ascii_case("%2A") {
        return (Some("*"), rest);
    }
    (Some(name), rest)
}

/// kube-apiserver's 403 for a request the authorizer refused: `<resource> "<name>" is
/// forbidden: <message>` with the resource in the details, or `forbidden: <message>` for
/// non-resource paths.
fn forbidden(info: &RequestInfo, message: &str, encoding: Encoding) -> Response<Body> {
    match info {
        RequestInfo::Resource(request) => {
            let qualified_resource = if request.group.is_empty() {
                request.resource.clone()
            } else {
                format!("{}.{}", request.resource, request.group)
            };
            crate::error::ApiError::from(kcp_registry::RegistryError::Forbidden {
                qualified_resource,
                name: request.name.clone().unwrap_or_default(),
                message: message.to_string(),
                causes: Vec::new(),
            })
            .into_response(encoding)
        }
        RequestInfo::NonResource { .. } => failure_as(
            encoding,
            StatusCode::FORBIDDEN,
            "Forbidden",
            &format!("forbidden: {message}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use http_body_util::Full;

    use super::*;
    use crate::authn::{User, token_digest};

    fn router() -> Router {
        let mut authn = TokenAuthenticator::default();
        authn.add(
            token_digest("t"),
            User {
                name: "admin".into(),
                groups: vec!["system:masters".into()],
                ..Default::default()
            },
        );
        Router::new(
            authn,
            Registry::new(Arc::new(kcp_storage::MemoryStorage::new())),
        )
    }

    async fn send(
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Vec<u8>,
    ) -> Response<Body> {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        router()
            .handle(request.body(Full::new(Bytes::from(body))).unwrap())
            .await
    }

    async fn get(path: &str, token: Option<&str>) -> Response<Body> {
        send(Method::GET, path, token, Vec::new()).await
    }

    #[tokio::test]
    async fn metrics_count_requests_and_stored_objects() {
        let router = router();
        let get = |path: &str| {
            Request::get(path)
                .header(header::AUTHORIZATION, "Bearer t")
                .body(Full::new(Bytes::new()))
                .unwrap()
        };
        let create = Request::post("/clusters/root/api/v1/namespaces")
            .header(header::AUTHORIZATION, "Bearer t")
            .body(Full::new(Bytes::from_static(
                br#"{"metadata":{"name":"m"}}"#,
            )))
            .unwrap();
        assert_eq!(router.handle(create).await.status(), StatusCode::CREATED);
        assert_eq!(
            router
                .handle(get("/clusters/root/api/v1/namespaces/nope"))
                .await
                .status(),
            StatusCode::NOT_FOUND
        );
        let response = router.handle(get("/metrics")).await;
        assert_eq!(response.status(), StatusCode::OK);
        let text = String::from_utf8(
            response
                .into_body()
                .collect()
                .await
                .unwrap()
                .to_bytes()
                .to_vec(),
        )
        .unwrap();
        assert!(text.contains(r#"apiserver_request_total{verb="CREATE",group="",resource="namespaces",code="201"} 1"#), "{text}");
        assert!(
            text.contains(
                r#"apiserver_request_total{verb="GET",group="",resource="namespaces",code="404"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains("apiserver_request_duration_seconds_bucket"),
            "{text}"
        );
        assert!(
            text.contains(r#"apiserver_storage_objects{resource="namespaces"} 1"#),
            "{text}"
        );
    }

    /// The text of `/metrics`.
    async fn metrics_text(router: &Router) -> String {
        let response = router
            .handle(
                Request::get("/metrics")
                    .header(header::AUTHORIZATION, "Bearer t")
                    .body(Full::new(Bytes::new()))
                    .unwrap(),
            )
            .await;
        let body = response.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8_lossy(&body).into_owned()
    }

    /// The number of `apiserver_request_total` series.
    async fn request_series(router: &Router) -> usize {
        metrics_text(router)
            .await
            .lines()
            .filter(|line| line.starts_with("apiserver_request_total{"))
            .count()
    }

    #[tokio::test]
    async fn made_up_paths_add_no_metric_series() {
        let router = router();
        let send = |i: usize, token: Option<&str>, method: Method| {
            let mut request = Request::builder()
                .method(method)
                .uri(format!("/apis/group{i}.example.com/v1/things{i}"));
            if let Some(token) = token {
                request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
            }
            router.handle(request.body(Full::new(Bytes::new())).unwrap())
        };
        // Every kind of request once, and a scrape, so that the series they make exist.
        request_series(&router).await;
        let in_root = Request::get("/clusters/root/apis/g.example.com/v1/r")
            .header(header::AUTHORIZATION, "Bearer t")
            .body(Full::new(Bytes::new()))
            .unwrap();
        router.handle(in_root).await;
        for i in 0..10 {
            send(i, None, Method::GET).await;
            send(i, Some("wrong"), Method::POST).await;
            send(i, Some("t"), Method::GET).await;
            send(
                i,
                Some("t"),
                Method::from_bytes(format!("M{i}").as_bytes()).unwrap(),
            )
            .await;
        }
        let before = request_series(&router).await;
        for i in 10..2000 {
            assert_eq!(
                send(i, None, Method::GET).await.status(),
                StatusCode::UNAUTHORIZED
            );
        }
        for i in 10..200 {
            send(i, Some("wrong"), Method::POST).await;
            assert_eq!(
                send(i, Some("t"), Method::GET).await.status(),
                StatusCode::NOT_FOUND
            );
            let in_root = Request::get(format!("/clusters/root/apis/g{i}.example.com/v1/r{i}"))
                .header(header::AUTHORIZATION, "Bearer t")
                .body(Full::new(Bytes::new()))
                .unwrap();
            assert_eq!(router.handle(in_root).await.status(), StatusCode::NOT_FOUND);
            send(
                i,
                Some("t"),
                Method::from_bytes(format!("M{i}").as_bytes()).unwrap(),
            )
            .await;
        }
        let after = request_series(&router).await;
        assert_eq!(after, before, "made-up paths made new series");
    }

    #[tokio::test]
    async fn custom_resources_are_labelled_where_they_are_served() {
        let router = crate::test_support::router();
        let crd = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]
            }
        });
        crate::test_support::establish_crd(&router, "root", &crd).await;
        for cluster in ["root", "elsewhere"] {
            let (code, body) = crate::test_support::call(
                &router,
                "GET",
                &format!("/clusters/{cluster}/apis/example.com/v1/namespaces/default/widgets"),
                "",
            )
            .await;
            assert_eq!(code, if cluster == "root" { 200 } else { 404 }, "{body}");
        }
        let text = metrics_text(&router).await;
        assert!(
            text.contains(r#"apiserver_request_total{verb="LIST",group="example.com",resource="widgets",code="200"} 1"#),
            "{text}"
        );
        // A cluster without the CRD does not serve the resource: no name in the labels.
        assert!(
            text.contains(
                r#"apiserver_request_total{verb="LIST",group="",resource="",code="404"} 1"#
            ),
            "{text}"
        );
    }

    /// A router with `config`'s limits; alice and bob may do anything in root (what these tests
    /// measure is admission), master is in `system:masters`.
    async fn limited_router(config: LimitConfig) -> Router {
        let mut authn = TokenAuthenticator::default();
        for (token, name, groups) in [
            ("a", "alice", vec![]),
            ("b", "bob", vec![]),
            ("m", "master", vec!["system:masters".to_string()]),
        ] {
            authn.add(
                token_digest(token),
                User {
                    name: name.into(),
                    groups,
                    ..User::default()
                },
            );
        }
        let registry = Registry::new(Arc::new(kcp_storage::MemoryStorage::new()));
        let bindings = kcp_apis::builtin::rbac("clusterrolebindings");
        let target = kcp_registry::Target {
            cluster: "root",
            resource: bindings,
            namespace: None,
        };
        let grant = serde_json::json!({
            "metadata": {"name": "users"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"},
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "bob"},
            ],
        });
        registry.create(target, grant).await.unwrap();
        Router::new(authn, registry).with_limits(config)
    }

    /// A request whose body never ends, as a client that sends it a byte a minute.
    fn stuck(
        method: Method,
        path: &str,
        token: &str,
    ) -> Request<impl http_body::Body<Data = Bytes, Error = std::convert::Infallible>> {
        Request::builder()
            .method(method)
            .uri(path)
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .body(http_body_util::StreamBody::new(futures::stream::pending::<
                Result<http_body::Frame<Bytes>, std::convert::Infallible>,
            >()))
            .unwrap()
    }

    async fn wait_in_flight(router: &Router, class: Class, count: usize) {
        tokio::time::timeout(std::time::Duration::from_secs(10), async {
            while router.limits.in_flight(class) != count {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("requests in flight");
    }

    fn authed(method: Method, path: &str, token: &str) -> Request<Full<Bytes>> {
        Request::builder()
            .method(method)
            .uri(path)
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .body(Full::new(Bytes::new()))
            .unwrap()
    }

    #[tokio::test]
    async fn one_user_flooding_leaves_room_for_others_and_health_checks() {
        let router = limited_router(LimitConfig {
            max_readonly: 8,
            max_mutating: 8,
            max_watches_per_user: 0,
            request_timeout: std::time::Duration::ZERO,
        })
        .await;
        let path = "/clusters/root/api/v1/namespaces";
        let flood: Vec<_> = (0..2)
            .map(|_| {
                let router = router.clone();
                tokio::spawn(async move { router.handle(stuck(Method::POST, path, "a")).await })
            })
            .collect();
        wait_in_flight(&router, Class::Mutating, 2).await;
        // Alice holds her quarter of the mutating pool: more is 429 with kube's answer.
        let refused = router.handle(stuck(Method::POST, path, "a")).await;
        assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(refused.headers()[header::RETRY_AFTER], "1");
        let body = refused.into_body().collect().await.unwrap().to_bytes();
        let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            status["message"],
            "Too many requests, please try again later."
        );
        // Reads are another pool.
        assert_eq!(
            router.handle(authed(Method::GET, path, "a")).await.status(),
            StatusCode::OK
        );
        // Bob, system:masters and health checks are answered.
        let create = Request::post(path)
            .header(header::AUTHORIZATION, "Bearer b")
            .body(Full::new(Bytes::from_static(
                br#"{"metadata":{"name":"bob"}}"#,
            )))
            .unwrap();
        assert_eq!(router.handle(create).await.status(), StatusCode::CREATED);
        let exempt: Vec<_> = (0..10)
            .map(|_| {
                let router = router.clone();
                tokio::spawn(async move { router.handle(stuck(Method::POST, path, "m")).await })
            })
            .collect();
        assert_eq!(
            router.handle(authed(Method::GET, path, "m")).await.status(),
            StatusCode::OK
        );
        for health in ["/readyz", "/healthz", "/livez"] {
            let request = Request::get(health).body(Full::new(Bytes::new())).unwrap();
            assert_eq!(router.handle(request).await.status(), StatusCode::OK);
        }
        for task in flood.into_iter().chain(exempt) {
            task.abort();
            let _ = task.await;
        }
        // Abandoned requests give their places back.
        wait_in_flight(&router, Class::Mutating, 0).await;
        let create = Request::post(path)
            .header(header::AUTHORIZATION, "Bearer a")
            .body(Full::new(Bytes::from_static(
                br#"{"metadata":{"name":"alice"}}"#,
            )))
            .unwrap();
        assert_eq!(router.handle(create).await.status(), StatusCode::CREATED);
    }

    #[tokio::test]
    async fn a_stuck_request_times_out_with_kubes_status_and_frees_its_place() {
        let router = limited_router(LimitConfig {
            max_readonly: 4,
            max_mutating: 4,
            max_watches_per_user: 0,
            request_timeout: std::time::Duration::from_millis(200),
        })
        .await;
        let path = "/clusters/root/api/v1/namespaces";
        let response = router.handle(stuck(Method::POST, path, "a")).await;
        assert_eq!(response.status(), StatusCode::GATEWAY_TIMEOUT);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            status["message"],
            "Timeout: request did not complete within the allotted timeout"
        );
        assert_eq!(status["reason"], "Timeout");
        assert_eq!(router.limits.in_flight(Class::Mutating), 0);
        // Reads time out as well, and nothing was created.
        assert_eq!(
            router.handle(stuck(Method::GET, path, "a")).await.status(),
            StatusCode::GATEWAY_TIMEOUT
        );
        assert_eq!(router.limits.in_flight(Class::ReadOnly), 0);
        let list = router.handle(authed(Method::GET, path, "a")).await;
        let body = list.into_body().collect().await.unwrap().to_bytes();
        let list: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(list["items"], serde_json::json!([]));
    }

    #[tokio::test]
    async fn watches_are_not_in_the_pools_but_bounded_per_user() {
        let router = limited_router(LimitConfig {
            max_readonly: 1,
            max_mutating: 1,
            max_watches_per_user: 3,
            request_timeout: std::time::Duration::from_secs(30),
        })
        .await;
        let watch = "/clusters/root/api/v1/namespaces?watch=1";
        let mut open = Vec::new();
        for _ in 0..3 {
            let response = router.handle(authed(Method::GET, watch, "a")).await;
            assert_eq!(response.status(), StatusCode::OK);
            open.push(response);
        }
        assert_eq!(router.limits.in_flight(Class::Watch), 3);
        assert_eq!(router.limits.in_flight(Class::ReadOnly), 0);
        assert_eq!(
            router
                .handle(authed(Method::GET, watch, "a"))
                .await
                .status(),
            StatusCode::TOO_MANY_REQUESTS
        );
        // Others may watch, and alice may still read.
        let bobs = router.handle(authed(Method::GET, watch, "b")).await;
        assert_eq!(bobs.status(), StatusCode::OK);
        assert_eq!(
            router
                .handle(authed(Method::GET, "/clusters/root/api/v1/namespaces", "a"))
                .await
                .status(),
            StatusCode::OK
        );
        // A closed watch gives its place back.
        drop(open.pop());
        assert_eq!(router.limits.in_flight(Class::Watch), 3);
        assert_eq!(
            router
                .handle(authed(Method::GET, watch, "a"))
                .await
                .status(),
            StatusCode::OK
        );
    }

    #[test]
    fn cluster_prefixes_are_split_off() {
        assert_eq!(
            split_cluster("/clusters/root:a/api/v1"),
            (Some("root:a"), "/api/v1")
        );
        assert_eq!(split_cluster("/clusters/root"), (Some("root"), "/"));
        assert_eq!(split_cluster("/clusters/%2A/api"), (Some("*"), "/api"));
        assert_eq!(split_cluster("/clusters/*/api"), (Some("*"), "/api"));
        assert_eq!(split_cluster("/version"), (None, "/version"));
    }

    #[tokio::test]
    async fn health_and_version_are_public() {
        for path in [
            "/healthz",
            "/livez",
            "/readyz",
            "/version",
            "/clusters/root/version",
        ] {
            assert_eq!(get(path, None).await.status(), StatusCode::OK, "{path}");
        }
    }

    #[tokio::test]
    async fn everything_else_needs_a_valid_token() {
        assert_eq!(get("/api", None).await.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(
            get("/api", Some("wrong")).await.status(),
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(get("/api", Some("t")).await.status(), StatusCode::OK);
        assert_eq!(
            get(
                "/clusters/root/apis/rbac.authorization.k8s.io/v1",
                Some("t")
            )
            .await
            .status(),
            StatusCode::OK
        );
        assert_eq!(
            get("/apis/apps/v1", Some("t")).await.status(),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            get("/clusters/root/apis/apps/v1/deployments", Some("t"))
                .await
                .status(),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            send(Method::POST, "/healthz", None, Vec::new())
                .await
                .status(),
            StatusCode::UNAUTHORIZED
        );
    }

    #[tokio::test]
    async fn bad_bodies_get_a_status_and_change_nothing() {
        let too_big = vec![b' '; MAX_BODY_BYTES + 1];
        let path = "/clusters/root/api/v1/namespaces";
        assert_eq!(
            send(Method::POST, path, Some("t"), too_big).await.status(),
            StatusCode::PAYLOAD_TOO_LARGE
        );
        assert_eq!(
            send(Method::POST, path, Some("t"), b"{not json".to_vec())
                .await
                .status(),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            send(Method::POST, path, Some("t"), b"[1]".to_vec())
                .await
                .status(),
            StatusCode::BAD_REQUEST
        );
        let list = get(path, Some("t")).await;
        let body = list.into_body().collect().await.unwrap().to_bytes();
        let list: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(list["items"], serde_json::json!([]));
    }
}
