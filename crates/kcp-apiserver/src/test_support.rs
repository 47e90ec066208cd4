//! Helpers for unit tests that drive the whole router: a router over in-memory storage that
//! accepts the token `t`, and a call that returns the status code and the body text.

use http_body_util::BodyExt;
use kcp_registry::Registry;

use crate::authn::{TokenAuthenticator, User, token_digest};
use crate::router::Router;

/// A router over fresh in-memory storage; the bearer token `t` is an admin.
pub(crate) fn router() -> Router {
    let mut authn = TokenAuthenticator::default();
    authn.add(
        token_digest("t"),
        User {
            name: "admin".into(),
            groups: vec!["system:masters".into()],
            ..Default::default()
        },
    );
    let storage = std::sync::Arc::new(kcp_storage::MemoryStorage::new());
    Router::new(authn, Registry::new(storage))
}

/// Sends one request with the admin token and reads the whole answer.
pub(crate) async fn call(router: &Router, method: &str, path: &str, body: &str) -> (u16, String) {
    let request = http::Request::builder()
        .method(method)
        .uri(path)
        .header(http::header::AUTHORIZATION, "Bearer t")
        .body(http_body_util::Full::new(bytes::Bytes::from(
            body.to_string(),
        )))
        .unwrap();
    let response = router.handle(request).await;
    let code = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (code, String::from_utf8_lossy(&bytes).into_owned())
}

/// A GET with the admin token that accepts `accept`, read whole.
pub(crate) async fn get_accepting(router: &Router, path: &str, accept: &str) -> (u16, String) {
    let request = http::Request::get(path)
        .header(http::header::AUTHORIZATION, "Bearer t")
        .header(http::header::ACCEPT, accept)
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let response = router.handle(request).await;
    let code = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (code, String::from_utf8_lossy(&bytes).into_owned())
}

/// Creates the namespace `name` in `cluster` unless it exists.
pub(crate) async fn ensure_namespace(router: &Router, cluster: &str, name: &str) {
    let body = serde_json::json!({"metadata": {"name": name}}).to_string();
    let path = format!("/clusters/{cluster}/api/v1/namespaces");
    let (code, body) = call(router, "POST", &path, &body).await;
    assert!(code == 201 || code == 409, "{body}");
}

/// Creates the CRD `crd` (JSON) in `cluster` and marks it Established, as the CRD controller
/// would, so its resources are served.
pub(crate) async fn establish_crd(router: &Router, cluster: &str, crd: &serde_json::Value) {
    let base =
        format!("/clusters/{cluster}/apis/apiextensions.k8s.io/v1/customresourcedefinitions");
    let (code, body) = call(router, "POST", &base, &crd.to_string()).await;
    assert_eq!(code, 201, "{body}");
    let mut created: serde_json::Value = serde_json::from_str(&body).unwrap();
    created["status"]["conditions"] = serde_json::json!([
        {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": ""},
        {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": ""}
    ]);
    let name = created["metadata"]["name"].as_str().unwrap().to_string();
    let (code, body) = call(
        router,
        "PUT",
        &format!("{base}/{name}/status"),
        &created.to_string(),
    )
    .await;
    assert_eq!(code, 200, "{body}");
}
