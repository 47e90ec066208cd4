//! The client side of CRD conversion webhooks: [`HttpsConversionWebhooks`] posts an
//! `apiextensions.k8s.io` ConversionReview (v1, or v1beta1 if the CRD only accepts that) to the
//! webhook's `clientConfig.url` over HTTPS (HTTP/1.1, as kube-apiserver talks to webhooks),
//! trusting the CRD's `caBundle` (the system's roots without one), and answers the converted
//! objects after checking the review's uid and result. The whole call, connection included, is
//! bounded by a timeout (30 s, kube-apiserver's default for webhooks).
//!
//! The registry checks the converted objects themselves and words the failure
//! (`conversion webhook for <gvk> failed: <reason>`); the reasons here read like
//! kube-apiserver's (`Post "<url>": ...`, `expected response.uid=...`).

use std::time::Duration;

use futures::future::BoxFuture;
use kcp_apis::custom::Webhook;
use kcp_registry::custom::WebhookConverter;
use serde_json::{Value, json};

use crate::webhook_client::{Endpoint, WebhookClients, go_quote};

/// kube-apiserver's default timeout for webhook calls.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// The ConversionReview versions this server sends, in the order it prefers them.
const REVIEW_VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// Calls conversion webhooks over HTTPS.
#[derive(Debug, Clone)]
pub struct HttpsConversionWebhooks {
    timeout: Duration,
    clients: WebhookClients,
}

impl Default for HttpsConversionWebhooks {
    fn default() -> Self {
        HttpsConversionWebhooks {
            timeout: DEFAULT_TIMEOUT,
            clients: WebhookClients::default(),
        }
    }
}

impl HttpsConversionWebhooks {
    /// Webhooks whose calls give up after `timeout`.
    pub fn with_timeout(timeout: Duration) -> Self {
        HttpsConversionWebhooks {
            timeout,
            clients: WebhookClients::default(),
        }
    }
}

impl WebhookConverter for HttpsConversionWebhooks {
    fn convert<'a>(
        &'a self,
        webhook: &'a Webhook,
        objects: Vec<Value>,
        desired_api_version: &'a str,
    ) -> BoxFuture<'a, Result<Vec<Value>, String>> {
        Box::pin(async move {
            let Some(url) = webhook.url.as_deref() else {
                return Err("the webhook has no clientConfig.url".into());
            };
            let review_version = REVIEW_VERSIONS
                .into_iter()
                .find(|v| webhook.review_versions.iter().any(|w| w == v))
                .ok_or("no supported conversion review versions")?;
            let uid = uuid::Uuid::new_v4().to_string();
            let review = json!({
                "apiVersion": format!("apiextensions.k8s.io/{review_version}"),
                "kind": "ConversionReview",
                "request": {"uid": uid, "desiredAPIVersion": desired_api_version, "objects": objects},
            });
            let body = serde_json::to_vec(&review).map_err(|e| e.to_string())?;
            let endpoint = Endpoint {
                url: url.to_string(),
                ca_bundle: webhook.ca_bundle.clone(),
                ..Endpoint::default()
            };
            let call = self.clients.post(&endpoint, body, "ConversionReview");
            let answer = match tokio::time::timeout(self.timeout, call).await {
                Ok(answer) => answer.map_err(|e| format!("Post {}: {e}", go_quote(url)))?,
                Err(_) => {
                    return Err(format!("Post {}: context deadline exceeded", go_quote(url)));
                }
            };
            converted_objects(review_version, &uid, answer)
        })
    }
}

/// The converted objects of a webhook's ConversionReview, checked as kube-apiserver checks
/// them: the review's group version and kind (v1), a response with the request's uid (v1) and
/// a `Success` result.
fn converted_objects(review_version: &str, uid: &str, review: Value) -> Result<Vec<Value>, String> {
    if review_version == "v1" {
        let expected = "apiextensions.k8s.io/v1, Kind=ConversionReview";
        let got = format!(
            "{}, Kind={}",
            review["apiVersion"].as_str().unwrap_or_default(),
            review["kind"].as_str().unwrap_or_default()
        );
        if got != expected {
            return Err(format!(
                "expected webhook response of {expected}, got {got}"
            ));
        }
    }
    let response = review
        .get("response")
        .filter(|r| r.is_object())
        .ok_or("no response provided")?;
    let answered_uid = response["uid"].as_str().unwrap_or_default();
    if review_version == "v1" && answered_uid != uid {
        return Err(format!(
            "expected response.uid={}, got {}",
            go_quote(uid),
            go_quote(answered_uid)
        ));
    }
    let result = &response["result"];
    let status = result["status"].as_str().unwrap_or_default();
    if status != "Success" {
        return match result["message"].as_str().filter(|m| !m.is_empty()) {
            Some(message) => Err(message.to_string()),
            None => Err(format!(
                "response.result.status was '{status}', not 'Success'"
            )),
        };
    }
    Ok(response["convertedObjects"]
        .as_array()
        .cloned()
        .unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn review(uid: &str, result: Value, objects: Value) -> Value {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
               "response": {"uid": uid, "result": result, "convertedObjects": objects}})
    }

    #[test]
    fn a_successful_review_answers_its_objects() {
        let answer = review("u", json!({"status": "Success"}), json!([{"a": 1}]));
        assert_eq!(
            converted_objects("v1", "u", answer),
            Ok(vec![json!({"a": 1})])
        );
    }

    #[test]
    fn reviews_are_refused_as_kube_apiserver_refuses_them() {
        let check = |answer: Value| converted_objects("v1", "u", answer).unwrap_err();
        assert_eq!(
            check(review("x", json!({"status": "Success"}), json!([]))),
            r#"expected response.uid="u", got "x""#
        );
        assert_eq!(
            check(review(
                "u",
                json!({"status": "Failure", "message": "no way"}),
                json!([])
            )),
            "no way"
        );
        assert_eq!(
            check(review("u", json!({"status": "Failure"}), json!([]))),
            "response.result.status was 'Failure', not 'Success'"
        );
        assert_eq!(
            check(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview"})),
            "no response provided"
        );
        assert_eq!(
            check(json!({"apiVersion": "v1", "kind": "Status"})),
            "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got v1, Kind=Status"
        );
        // v1beta1 reviews are not held to the uid or the envelope.
        let old = json!({"response": {"uid": "x", "result": {"status": "Success"}, "convertedObjects": []}});
        assert_eq!(converted_objects("v1beta1", "u", old), Ok(vec![]));
    }

    #[tokio::test]
    async fn a_webhook_that_is_down_is_a_dial_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let webhook = Webhook {
            url: Some(format!("https://127.0.0.1:{port}/convert")),
            ca_bundle: None,
            review_versions: vec!["v1".into()],
        };
        let error = HttpsConversionWebhooks::default()
            .convert(&webhook, vec![json!({})], "example.com/v2")
            .await
            .unwrap_err();
        assert!(
            error.starts_with(&format!(
                "Post \"https://127.0.0.1:{port}/convert\": dial tcp 127.0.0.1:{port}: "
            )),
            "{error}"
        );
    }

    #[tokio::test]
    async fn only_known_review_versions_are_sent() {
        let webhook = Webhook {
            url: Some("https://127.0.0.1:1/convert".into()),
            ca_bundle: None,
            review_versions: vec!["v2".into()],
        };
        let error = HttpsConversionWebhooks::default()
            .convert(&webhook, vec![json!({})], "example.com/v2")
            .await
            .unwrap_err();
        assert_eq!(error, "no supported conversion review versions");
    }
}
