//! Whole responses: an API document encoded as the client negotiated (JSON or YAML, each
//! written directly from the value), `meta.k8s.io/v1 Status` failures, and plain text. Errors
//! become a `Status` in one place, [`crate::error::ApiError`].

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use serde_json::json;

use crate::negotiation::Encoding;

/// The response body type of every handler: whole bodies, or streams for watches.
pub type Body = UnsyncBoxBody<Bytes, std::convert::Infallible>;

/// A body of these bytes.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

/// A failure Status with `reason` and `message`, as kube-apiserver writes it, in JSON.
pub fn failure(code: StatusCode, reason: &str, message: &str) -> Response<Body> {
    json_response(code, &failure_status(code, reason, message))
}

/// [`failure`] in the negotiated encoding.
pub fn failure_as(
    encoding: Encoding,
    code: StatusCode,
    reason: &str,
    message: &str,
) -> Response<Body> {
    encoded(encoding, code, &failure_status(code, reason, message))
}

pub(crate) fn failure_status(code: StatusCode, reason: &str, message: &str) -> serde_json::Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code.as_u16(),
    })
}

/// A JSON response.
pub fn json_response(code: StatusCode, value: &serde_json::Value) -> Response<Body> {
    encoded(Encoding::Json, code, value)
}

/// A document in `encoding`, serialized once from the value. A value YAML cannot write (none
/// the server produces) goes out as JSON rather than not at all.
pub fn encoded(encoding: Encoding, code: StatusCode, value: &serde_json::Value) -> Response<Body> {
    let (content_type, body) = match encoding {
        Encoding::Yaml => match crate::yaml::encode(value) {
            Some(text) => ("application/yaml", text.into_bytes()),
            None => ("application/json", json_bytes(value)),
        },
        Encoding::Json => return encoded_json(code, json_bytes(value)),
    };
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, content_type)
        .body(full(body))
        .unwrap_or_else(|_| Response::new(full(Bytes::new())))
}

/// A JSON document already encoded (with its final newline), as [`encoded`] answers one.
pub fn encoded_json(code: StatusCode, body: Vec<u8>) -> Response<Body> {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "application/json")
        .body(full(body))
        .unwrap_or_else(|_| Response::new(full(Bytes::new())))
}

pub(crate) fn json_bytes(value: &serde_json::Value) -> Vec<u8> {
    // Built-in kinds in Kubernetes' key order; everything else sorted.
    let mut body = kcp_apis::messages::to_json(value);
    body.push(b'\n');
    body
}

/// A plain-text response, as the health endpoints answer.
pub fn text_response(code: StatusCode, text: &'static str) -> Response<Body> {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .header("X-Content-Type-Options", "nosniff")
        .body(full(Bytes::from_static(text.as_bytes())))
        .unwrap_or_else(|_| Response::new(full(Bytes::new())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn failure_is_a_kubernetes_status() {
        let response = failure(
            StatusCode::NOT_FOUND,
            "NotFound",
            "the server could not find the requested resource",
        );
        assert_eq!(response.status(), StatusCode::NOT_FOUND);
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(value["kind"], "Status");
        assert_eq!(value["reason"], "NotFound");
        assert_eq!(value["code"], 404);
    }
}
