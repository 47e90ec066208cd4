//! Routing: which requests need a user, and who answers them.
//!
//! Health checks and `/version` answer anyone, as kube-apiserver's `system:public-info-viewer`
//! allows. Everything else needs an authenticated user: discovery documents, then resource
//! requests (handed to [`crate::handlers`]); other paths answer 404 with Kubernetes' message.
//! Whole API responses are re-encoded as YAML when the client negotiated it and gzip-compressed
//! when large ([`crate::yaml`], [`crate::compression`]).

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use kcp_registry::Registry;

use std::sync::Arc;
use std::time::Instant;

use crate::authn::TokenAuthenticator;
use crate::discovery;
use crate::metrics::Metrics;
use crate::negotiation;
use crate::request_info::{self, RequestInfo};
use crate::served::Served;
use crate::status::{Body, failure, json_response, text_response};

/// Request bodies above this size answer 413, as kube-apiserver's limit.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Answers requests; shared by every connection.
#[derive(Clone)]
pub struct Router {
    authn: TokenAuthenticator,
    registry: Registry,
    metrics: Arc<Metrics>,
}

impl Router {
    pub fn new(authn: TokenAuthenticator, registry: Registry) -> Self {
        Router {
            authn,
            registry,
            metrics: Arc::new(Metrics::new()),
        }
    }

    /// Answers one request and records it in the metrics. Never fails: every error is a
    /// `Status` response.
    pub async fn handle<B>(&self, request: Request<B>) -> Response<Body>
    where
        B: http_body::Body<Data = Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let started = Instant::now();
        let info = request_info::parse(
            request.method(),
            request.uri().path(),
            request.uri().query(),
        );
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
        let answer = if verb == "watch" {
            negotiation::Answer::Watch
        } else {
            negotiation::Answer::Object
        };
        let yaml = api_response
            && negotiation::response_encoding(request.headers(), answer)
                == Some(negotiation::Encoding::Yaml);
        let gzip = crate::compression::accepts_gzip(request.headers());
        let mut response = self.answer(request, info).await;
        if yaml {
            response = crate::yaml::json_response_to_yaml(response).await;
        }
        let response = crate::compression::maybe_gzip(response, gzip).await;
        self.metrics.observe(
            &verb,
            &group,
            &resource,
            response.status().as_u16(),
            started.elapsed(),
        );
        response
    }

    async fn answer<B>(&self, request: Request<B>, mut info: RequestInfo) -> Response<Body>
    where
        B: http_body::Body<Data = Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (parts, body) = request.into_parts();
        let read_only = matches!(parts.method, Method::GET | Method::HEAD);
        if let RequestInfo::NonResource { path, .. } = &info {
            match path.as_str() {
                "/healthz" | "/livez" | "/readyz" if read_only => {
                    return text_response(StatusCode::OK, "ok");
                }
                "/version" | "/version/" if read_only => {
                    return json_response(StatusCode::OK, &crate::version::info());
                }
                _ => {}
            }
        }
        let authorization = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let Some(user) = self.authn.authenticate(authorization) else {
            return failure(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
        };
        // The OpenAPI index points back at the path the client used.
        let requested_cluster = match &info {
            RequestInfo::Resource(r) => r.cluster.clone(),
            RequestInfo::NonResource { cluster, .. } => cluster.clone(),
        };
        if let Err(not_found) = crate::workspaces::resolve(&self.registry, &mut info).await {
            return not_found;
        }
        if let RequestInfo::Resource(resource) = &info
            && crate::workspaces::is_home(resource)
        {
            return crate::workspaces::home(&self.registry, &user.name).await;
        }
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
            RequestInfo::NonResource { path, cluster, .. }
                if read_only && (path == "/openapi/v3" || path.starts_with("/openapi/v3/")) =>
            {
                let prefix = requested_cluster
                    .as_ref()
                    .map(|name| format!("/clusters/{name}"))
                    .unwrap_or_default();
                crate::openapi::serve(
                    &Served::of(&self.registry, cluster.as_deref()),
                    &prefix,
                    &path["/openapi/v3".len()..],
                    parts.uri.query(),
                    &parts.headers,
                )
            }
            RequestInfo::NonResource { path, cluster, .. } => {
                let served = Served::of(&self.registry, cluster.as_deref());
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
                match discovery_document(&served, &path).filter(|_| read_only) {
                    Some(document) => json_response(StatusCode::OK, &document),
                    None => failure(
                        StatusCode::NOT_FOUND,
                        "NotFound",
                        "the server could not find the requested resource",
                    ),
                }
            }
            RequestInfo::Resource(resource) => {
                let body = match Limited::new(body, MAX_BODY_BYTES).collect().await {
                    Ok(collected) => collected.to_bytes(),
                    Err(error)
                        if error
                            .downcast_ref::<http_body_util::LengthLimitError>()
                            .is_some() =>
                    {
                        return failure(
                            StatusCode::PAYLOAD_TOO_LARGE,
                            "RequestEntityTooLarge",
                            &format!("the request body is too large: limit is {MAX_BODY_BYTES}"),
                        );
                    }
                    Err(error) => {
                        return failure(
                            StatusCode::BAD_REQUEST,
                            "BadRequest",
                            &format!("reading the request body: {error}"),
                        );
                    }
                };
                crate::handlers::serve(
                    &self.registry,
                    &resource,
                    parts.uri.query(),
                    &parts.headers,
                    body,
                )
                .await
            }
        }
    }
}

/// The discovery document at `path`, if there is one.
fn discovery_document(served: &Served, path: &str) -> Option<serde_json::Value> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match parts.as_slice() {
        ["api"] => Some(discovery::api_versions()),
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
                groups: vec![],
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
