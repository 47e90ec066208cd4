//! Routing: which requests need a user, and who answers them.
//!
//! Health checks and `/version` answer anyone, as kube-apiserver's `system:public-info-viewer`
//! allows. Everything else needs an authenticated user; paths the server does not serve yet answer
//! 404 with Kubernetes' own message.

use http::{Method, Request, Response, StatusCode, header};

use crate::authn::TokenAuthenticator;
use crate::discovery;
use crate::status::{Body, failure, json_response, text_response};

/// Answers requests; shared by every connection.
#[derive(Debug, Clone)]
pub struct Router {
    authn: TokenAuthenticator,
}

impl Router {
    pub fn new(authn: TokenAuthenticator) -> Self {
        Router { authn }
    }

    /// Answers one request. Never fails: every error is a `Status` response.
    pub fn handle<B>(&self, request: &Request<B>) -> Response<Body> {
        let (_cluster, path) = split_cluster(request.uri().path());
        let read_only = matches!(*request.method(), Method::GET | Method::HEAD);
        match path {
            "/healthz" | "/livez" | "/readyz" if read_only => {
                return text_response(StatusCode::OK, "ok");
            }
            "/version" | "/version/" if read_only => {
                return json_response(StatusCode::OK, &crate::version::info());
            }
            _ => {}
        }
        let authorization = request
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        if self.authn.authenticate(authorization).is_none() {
            return failure(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
        }
        if read_only && let Some(document) = discovery_document(path) {
            return json_response(StatusCode::OK, &document);
        }
        failure(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        )
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
        Router::new(authn)
    }

    fn get(path: &str, token: Option<&str>) -> Response<Body> {
        let mut request = Request::get(path);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        router().handle(&request.body(()).unwrap())
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

    #[test]
    fn health_and_version_are_public() {
        for path in [
            "/healthz",
            "/livez",
            "/readyz",
            "/version",
            "/clusters/root/version",
        ] {
            assert_eq!(get(path, None).status(), StatusCode::OK, "{path}");
        }
    }

    #[test]
    fn everything_else_needs_a_valid_token() {
        assert_eq!(get("/api", None).status(), StatusCode::UNAUTHORIZED);
        assert_eq!(
            get("/api", Some("wrong")).status(),
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(get("/api", Some("t")).status(), StatusCode::OK);
        assert_eq!(
            get(
                "/clusters/root/apis/rbac.authorization.k8s.io/v1",
                Some("t")
            )
            .status(),
            StatusCode::OK
        );
        assert_eq!(
            get("/apis/apps/v1", Some("t")).status(),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            get("/api/v1/namespaces", Some("t")).status(),
            StatusCode::NOT_FOUND
        );
        let post = Request::post("/healthz").body(()).unwrap();
        assert_eq!(router().handle(&post).status(), StatusCode::UNAUTHORIZED);
    }
}
