//! YAML in and out (`application/yaml`): request bodies become the same JSON values the
//! registry works on, and JSON responses are re-encoded when the client negotiated YAML. YAML
//! follows YAML 1.1 scalars as Kubernetes' `sigs.k8s.io/yaml` does (`on` is `true`); keys come
//! out sorted, as Kubernetes writes them.

use bytes::Bytes;
use http::{HeaderValue, Response, header};
use http_body::Body as _;
use http_body_util::BodyExt;
use kcp_registry::RegistryError;
use serde_json::Value;

use crate::status::{Body, full};

/// The object in a YAML request body; malformed YAML is a 400.
pub fn decode(body: &[u8]) -> Result<Value, RegistryError> {
    let text = std::str::from_utf8(body)
        .map_err(|e| RegistryError::BadRequest(format!("error converting YAML to JSON: {e}")))?;
    serde_saphyr::from_str::<Value>(text)
        .map_err(|e| RegistryError::BadRequest(format!("error converting YAML to JSON: {e}")))
}

/// A JSON value as a YAML document.
pub fn encode(value: &Value) -> Option<String> {
    serde_saphyr::to_string(value).ok()
}

/// Re-encodes a whole (not streamed) `application/json` response as YAML; anything else is
/// returned as it is.
pub async fn json_response_to_yaml(response: Response<Body>) -> Response<Body> {
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().map(str::trim) == Some("application/json"));
    if !is_json || response.body().size_hint().exact().is_none() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes: Bytes = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(never) => match never {},
    };
    let Some(yaml) = serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|value| encode(&value))
    else {
        return Response::from_parts(parts, full(bytes));
    };
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/yaml"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, full(yaml))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yaml_bodies_decode_to_json() {
        let object = decode(
            b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels: {x: \"1\"}\ndata:\n  n: \"42\"\n  list: |\n    line\n",
        )
        .unwrap();
        assert_eq!(
            object,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "a", "labels": {"x": "1"}},
                   "data": {"n": "42", "list": "line\n"}})
        );
    }

    #[test]
    fn malformed_yaml_is_a_bad_request() {
        for bad in [&b"a: [1, 2\n"[..], b"a: b: c\n", b"\xff\xfe"] {
            assert!(matches!(decode(bad), Err(RegistryError::BadRequest(_))));
        }
    }

    #[test]
    fn values_survive_a_round_trip() {
        let value = json!({"kind": "ConfigMap", "data": {"t": "true", "n": "1", "e": "", "multi": "a\nb\n",
                            "colon": "a: b", "yes": "yes", "on": "on"},
                           "metadata": {"name": "x", "generation": 3, "annotations": {}},
                           "list": [1, "two", null, false]});
        let yaml = encode(&value).unwrap();
        assert_eq!(decode(yaml.as_bytes()).unwrap(), value, "{yaml}");
    }

    #[tokio::test]
    async fn json_responses_become_yaml() {
        let response = crate::status::json_response(
            http::StatusCode::NOT_FOUND,
            &json!({"kind": "Status", "code": 404}),
        );
        let response = json_response_to_yaml(response).await;
        assert_eq!(response.status(), http::StatusCode::NOT_FOUND);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/yaml");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8(body.to_vec()).unwrap();
        assert!(text.contains("kind: Status"), "{text}");
    }
}
