//! Routing: which requests need a user, and who answers them.
//!
//! Health checks and `/version` answer anyone, as kube-apiserver's `system:public-info-viewer`
//! allows. Everything else needs an authenticated user: discovery documents, then resource
//! requests (handed to [`crate::handlers`]); other paths answer 404 with Kubernetes' message.

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Limited};
use kcp_registry::Registry;

use crate::authn::TokenAuthenticator;
use crate::discovery;
use crate::request_info::{self, RequestInfo};
use crate::status::{Body, failure, json_response, text_response};

/// Request bodies above this size answer 413, as kube-apiserver's limit.
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// Answers requests; shared by every connection.
#[derive(Clone)]
pub struct Router {
    authn: TokenAuthenticator,
    registry: Registry,
}

impl Router {
    pub fn new(authn: TokenAuthenticator, registry: Registry) -> Self {
        Router { authn, registry }
    }

    /// Answers one request. Never fails: every error is a `Status` response.
    pub async fn handle<B>(&self, request: Request<B>) -> Response<Body>
    where
        B: http_body::Body<Data = Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let (parts, body) = request.into_parts();
        let info = request_info::parse(&parts.method, parts.uri.path(), parts.uri.query());
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
        if self.authn.authenticate(authorization).is_none() {
            return failure(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
        }
        match info {
            RequestInfo::NonResource { path, .. } => {
                match discovery_document(&path).filter(|_| read_only) {
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
fn discovery_document(path: &str) -> Option<serde_json::Value> {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match parts.as_slice() {
        ["api"] => Some(discovery::api_versions()),
        ["api", version] => discovery::resource_list("", version),
        ["apis"] => Some(discovery::api_group_list()),
        ["apis", group] => discovery::api_group(group),
        ["apis", group, version] => discovery::resource_list(group, version),
        _ => None,
    }
}

/// Splits `/clusters/<name>/rest` into the logical cluster name and `/rest`. Paths outside
/// `/clusters/` belong to no cluster.
pub fn split_cluster(path: &str) -> (Option<&str>, &str) {
    let Some(after) = path.strip_prefix("/clusters/") else {
        return (None, path);
    };
    match after.find('/') {
        Some(slash) => (Some(&after[..slash]), &after[slash..]),
        None => (Some(after), "/"),
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

    #[test]
    fn cluster_prefixes_are_split_off() {
        assert_eq!(
            split_cluster("/clusters/root:a/api/v1"),
            (Some("root:a"), "/api/v1")
        );
        assert_eq!(split_cluster("/clusters/root"), (Some("root"), "/"));
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
