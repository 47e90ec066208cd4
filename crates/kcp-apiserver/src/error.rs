//! The API server's errors and the one place they become a `meta.k8s.io/v1 Status`: what the
//! registry refuses ([`RegistryError`], which knows nothing of HTTP) and what only HTTP can
//! refuse (a body in a media type the server does not read, an answer in none the client
//! accepts, a path nothing serves).

use http::{Response, StatusCode};
use kcp_registry::RegistryError;
use serde_json::{Value, json};

use crate::negotiation::Encoding;
use crate::status::{Body, encoded, failure_status};

/// Go's `http.NotFound` body.
const PAGE_NOT_FOUND: &str = "404 page not found\n";

/// Why a request failed.
#[derive(Debug, Clone)]
pub enum ApiError {
    /// The registry refused the request.
    Registry(RegistryError),
    /// 415: a body in a media type the server does not read.
    UnsupportedMediaType(String),
    /// 404 `the server could not find the requested resource`: no such path or resource.
    NoSuchResource,
    /// 404 as Go's `http.NotFound` writes it, in plain text (`404 page not found`): what kcp
    /// answers a wildcard request for a bound resource without its right identity.
    PageNotFound,
    /// 405: a verb this resource or subresource does not serve.
    MethodNotAllowed(String),
    /// 403 with this message alone (a virtual workspace's refusals, which name no resource).
    Forbidden(String),
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiError::Registry(error) => error.fmt(f),
            ApiError::UnsupportedMediaType(message)
            | ApiError::MethodNotAllowed(message)
            | ApiError::Forbidden(message) => f.write_str(message),
            ApiError::NoSuchResource => {
                f.write_str("the server could not find the requested resource")
            }
            ApiError::PageNotFound => f.write_str(PAGE_NOT_FOUND.trim_end()),
        }
    }
}

impl std::error::Error for ApiError {}

impl From<RegistryError> for ApiError {
    fn from(error: RegistryError) -> ApiError {
        ApiError::Registry(error)
    }
}

impl ApiError {
    /// The response, in the negotiated encoding.
    pub fn into_response(self, encoding: Encoding) -> Response<Body> {
        if let ApiError::PageNotFound = self {
            return crate::status::text_response(StatusCode::NOT_FOUND, PAGE_NOT_FOUND);
        }
        let (code, status) = self.status();
        encoded(encoding, code, &status)
    }

    /// The HTTP code and `Status` object (also sent inside watch ERROR events).
    pub fn status(&self) -> (StatusCode, Value) {
        match self {
            ApiError::Registry(error) => registry_status(error),
            ApiError::UnsupportedMediaType(message) => {
                let code = StatusCode::UNSUPPORTED_MEDIA_TYPE;
                (code, failure_status(code, "UnsupportedMediaType", message))
            }
            ApiError::NoSuchResource | ApiError::PageNotFound => {
                let code = StatusCode::NOT_FOUND;
                let message = "the server could not find the requested resource";
                (code, failure_status(code, "NotFound", message))
            }
            ApiError::MethodNotAllowed(message) => {
                let code = StatusCode::METHOD_NOT_ALLOWED;
                (code, failure_status(code, "MethodNotAllowed", message))
            }
            ApiError::Forbidden(message) => {
                let code = StatusCode::FORBIDDEN;
                (code, failure_status(code, "Forbidden", message))
            }
        }
    }
}

/// The HTTP code and `Status` of a registry error.
pub fn registry_status(error: &RegistryError) -> (StatusCode, Value) {
    use RegistryError as E;
    if let E::Refused {
        code,
        reason,
        message,
        details,
    } = error
    {
        let code = StatusCode::from_u16(*code)
            .ok()
            .filter(|c| c.as_u16() >= 400)
            .unwrap_or(StatusCode::BAD_REQUEST);
        let mut status = failure_status(code, reason, message);
        if reason.is_empty()
            && let Some(fields) = status.as_object_mut()
        {
            fields.remove("reason");
        }
        if let Some(details) = details.as_ref().filter(|d| d.is_object()) {
            status["details"] = details.clone();
        }
        return (code, status);
    }
    let message = error.to_string();
    let (code, reason) = match error {
        E::NotFound { .. } => (StatusCode::NOT_FOUND, "NotFound"),
        E::AlreadyExists { .. } => (StatusCode::CONFLICT, "AlreadyExists"),
        E::Conflict { .. } | E::ApplyConflict { .. } => (StatusCode::CONFLICT, "Conflict"),
        E::Invalid { .. } | E::Unprocessable(_) => (StatusCode::UNPROCESSABLE_ENTITY, "Invalid"),
        E::Forbidden { .. } => (StatusCode::FORBIDDEN, "Forbidden"),
        E::BadRequest(_) => (StatusCode::BAD_REQUEST, "BadRequest"),
        E::MethodNotAllowed(_) => (StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed"),
        E::RequestEntityTooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "RequestEntityTooLarge"),
        E::Expired(_) | E::ContinueExpired { .. } => (StatusCode::GONE, "Expired"),
        E::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable"),
        E::TooLargeResourceVersion { .. } => (StatusCode::GATEWAY_TIMEOUT, "Timeout"),
        E::Internal(_) => (StatusCode::INTERNAL_SERVER_ERROR, "InternalError"),
        E::Refused { .. } => (StatusCode::BAD_REQUEST, "BadRequest"),
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
        E::ApplyConflict { causes, .. } => {
            let causes: Vec<_> = causes
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect();
            status["details"] = json!({ "causes": causes });
        }
        E::ContinueExpired { continue_token } => {
            status["metadata"] = json!({ "continue": continue_token });
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
    omit_empty_details(&mut status);
    (code, status)
}

/// A Status's details without the empty strings Go's `omitempty` leaves out (the group of a
/// core resource, the name of a collection), in the details and in each cause.
pub(crate) fn omit_empty_details(status: &mut Value) {
    let empty = |value: &Value| value.as_str() == Some("");
    if let Some(details) = status.get_mut("details").and_then(Value::as_object_mut) {
        details.retain(|_, value| !empty(value));
        for cause in details
            .get_mut("causes")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
            .filter_map(Value::as_object_mut)
        {
            cause.retain(|_, value| !empty(value));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_errors_keep_their_reason_and_details() {
        let error = ApiError::from(RegistryError::NotFound {
            qualified_resource: "widgets.example.com".into(),
            name: "w".into(),
        });
        let (code, status) = error.status();
        assert_eq!(code, StatusCode::NOT_FOUND);
        assert_eq!(status["reason"], "NotFound");
        assert_eq!(
            status["details"],
            json!({"name": "w", "group": "example.com", "kind": "widgets"})
        );
        let (code, status) = ApiError::UnsupportedMediaType("no".into()).status();
        assert_eq!(code, StatusCode::UNSUPPORTED_MEDIA_TYPE);
        assert_eq!(status["reason"], "UnsupportedMediaType");
    }

    #[test]
    fn an_expired_continue_token_offers_the_rest_in_the_status_metadata() {
        let error = ApiError::from(RegistryError::ContinueExpired {
            continue_token: "rest".into(),
        });
        let (code, status) = error.status();
        assert_eq!(code, StatusCode::GONE);
        assert_eq!(status["reason"], "Expired");
        assert_eq!(status["metadata"], json!({"continue": "rest"}));
        let (_, plain) = ApiError::from(RegistryError::Expired("old".into())).status();
        assert_eq!(plain["metadata"], json!({}));
    }
}
