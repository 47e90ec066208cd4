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
            groups: vec![],
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
