//! YAML in and out (`application/yaml`): request bodies become the same JSON values the
//! registry works on, and response documents are written as YAML when the client negotiated it
//! ([`encode`], used by [`crate::status::encoded`]). YAML
//! follows YAML 1.1 scalars as Kubernetes' `sigs.k8s.io/yaml` does (`on` is `true`); keys come
//! out sorted, as Kubernetes writes them.
//!
//! Decoding stops at [`MAX_DEPTH`] levels (also serde-saphyr's own depth budget, so its
//! recursion is bounded), keeps serde-saphyr's budgets against alias and anchor bombs, and
//! reports repeated keys (the last one wins) instead of refusing them, for `fieldValidation`.

use kcp_apimachinery::json::{BodyError, Checked, Decoded, MAX_DEPTH, depth_message};
use serde_json::Value;

/// The object in a YAML request body and the keys it repeated.
pub fn decode(body: &[u8]) -> Result<Decoded, BodyError> {
    let text = std::str::from_utf8(body).map_err(|e| BodyError::Syntax(e.to_string()))?;
    let mut options = serde_saphyr::Options::default();
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::PassThrough;
    let mut budget = options.budget.take().unwrap_or_default();
    budget.max_depth = MAX_DEPTH + 1;
    budget.flow_nesting_limit = MAX_DEPTH + 1;
    options.budget = Some(budget);
    match serde_saphyr::from_str_with_options::<Checked>(text, options) {
        Ok(Checked(decoded)) => Ok(decoded),
        Err(error) => {
            let message = error.to_string();
            if message.contains(&depth_message()) {
                Err(BodyError::TooDeep)
            } else {
                Err(BodyError::Syntax(message))
            }
        }
    }
}

/// A JSON value as a YAML document.
pub fn encode(value: &Value) -> Option<String> {
    serde_saphyr::to_string(value).ok()
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
        .unwrap()
        .value;
        assert_eq!(
            object,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "a", "labels": {"x": "1"}},
                   "data": {"n": "42", "list": "line\n"}})
        );
    }

    #[test]
    fn aliases_cannot_blow_up_and_depth_stops_at_the_limit() {
        // A billion laughs: each level refers to the previous one ten times.
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..12 {
            bomb.push_str(&format!(
                "a{i}: &a{i} [{}]\n",
                vec![format!("*a{}", i - 1); 10].join(", ")
            ));
        }
        assert!(decode(bomb.as_bytes()).is_err());
        let mut nested = String::from("v");
        for _ in 0..MAX_DEPTH {
            nested = format!("[{nested}]");
        }
        assert!(decode(format!("a: {nested}").as_bytes()).is_err());
        assert!(decode(nested.as_bytes()).is_ok());
    }

    #[test]
    fn malformed_yaml_is_a_bad_request() {
        for bad in [&b"a: [1, 2\n"[..], b"a: b: c\n", b"\xff\xfe"] {
            assert!(matches!(decode(bad), Err(BodyError::Syntax(_))));
        }
    }

    #[test]
    fn values_survive_a_round_trip() {
        let value = json!({"kind": "ConfigMap", "data": {"t": "true", "n": "1", "e": "", "multi": "a\nb\n",
                            "colon": "a: b", "yes": "yes", "on": "on"},
                           "metadata": {"name": "x", "generation": 3, "annotations": {}},
                           "list": [1, "two", null, false]});
        let yaml = encode(&value).unwrap();
        assert_eq!(decode(yaml.as_bytes()).unwrap().value, value, "{yaml}");
    }

    #[tokio::test]
    async fn documents_are_written_in_yaml_directly() {
        use http_body_util::BodyExt;
        let response = crate::status::encoded(
            crate::negotiation::Encoding::Yaml,
            http::StatusCode::NOT_FOUND,
            &json!({"kind": "Status", "code": 404}),
        );
        assert_eq!(response.status(), http::StatusCode::NOT_FOUND);
        assert_eq!(
            response.headers()[http::header::CONTENT_TYPE],
            "application/yaml"
        );
        let body = response.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8(body.to_vec()).unwrap();
        assert!(text.contains("kind: Status"), "{text}");
    }
}
