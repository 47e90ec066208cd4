//! `meta.k8s.io/v1 Status` responses: the one place errors become HTTP.

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full};
use serde_json::json;

/// The response body type of every handler: whole bodies, or streams for watches.
pub type Body = UnsyncBoxBody<Bytes, std::convert::Infallible>;

/// A body of these bytes.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed_unsync()
}

/// A failure Status with `reason` and `message`, as kube-apiserver writes it.
pub fn failure(code: StatusCode, reason: &str, message: &str) -> Response<Body> {
    json_response(code, &failure_status(code, reason, message))
}

fn failure_status(code: StatusCode, reason: &str, message: &str) -> serde_json::Value {
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
    let mut body = serde_json::to_vec(value).unwrap_or_default();
    body.push(b'\n');
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "application/json")
        .body(full(body))
        .unwrap_or_else(|_| Response::new(full(Bytes::new())))
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

/// The one mapping from registry errors to `Status` responses.
pub fn from_registry_error(error: &kcp_registry::RegistryError) -> Response<Body> {
    let (code, status) = registry_error_status(error);
    json_response(code, &status)
}

/// The HTTP code and `Status` object of a registry error (also sent inside watch ERROR events).
pub fn registry_error_status(
    error: &kcp_registry::RegistryError,
) -> (StatusCode, serde_json::Value) {
    use kcp_registry::RegistryError as E;
    let message = error.to_string();
    let (code, reason) = match error {
        E::NotFound { .. } => (StatusCode::NOT_FOUND, "NotFound"),
        E::AlreadyExists { .. } => (StatusCode::CONFLICT, "AlreadyExists"),
        E::Conflict { .. } => (StatusCode::CONFLICT, "Conflict"),
        E::Invalid { .. } | E::Unprocessable(_) => (StatusCode::UNPROCESSABLE_ENTITY, "Invalid"),
        E::Forbidden { .. } => (StatusCode::FORBIDDEN, "Forbidden"),
        E::BadRequest(_) => (StatusCode::BAD_REQUEST, "BadRequest"),
        E::MethodNotAllowed(_) => (StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed"),
        E::RequestEntityTooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "RequestEntityTooLarge"),
        E::UnsupportedMediaType(_) => (StatusCode::UNSUPPORTED_MEDIA_TYPE, "UnsupportedMediaType"),
        E::Expired(_) => (StatusCode::GONE, "Expired"),
        E::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable"),
        E::TooLargeResourceVersion { .. } => (StatusCode::GATEWAY_TIMEOUT, "Timeout"),
        E::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "InternalError"),
    };
    let mut status = failure_status(code, reason, &message);
    match error {
        E::NotFound {
            qualified_resource,
            name,
        }
        | E::AlreadyExists {
            qualified_resource,
            name,
        }
        | E::Conflict {
            qualified_resource,
            name,
            ..
        } => {
            let (kind, group) = qualified_resource
                .split_once('.')
                .unwrap_or((qualified_resource, ""));
            status["details"] = json!({"name": name, "group": group, "kind": kind});
        }
        E::Invalid {
            kind,
            group,
            name,
            causes,
        } => {
            let causes: Vec<_> = causes
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect();
            status["details"] =
                json!({"name": name, "group": group, "kind": kind, "causes": causes});
        }
        E::TooLargeResourceVersion { .. } => {
            status["details"] = json!({
                "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                "retryAfterSeconds": 1,
            });
        }
        E::Forbidden {
            qualified_resource,
            name,
            causes,
            ..
        } => {
            let (kind, group) = qualified_resource
                .split_once('.')
                .unwrap_or((qualified_resource, ""));
            status["details"] = json!({"name": name, "group": group, "kind": kind});
            if !causes.is_empty() {
                status["details"]["causes"] = causes
                    .iter()
                    .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                    .collect();
            }
        }
        _ => {}
    }
    (code, status)
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
