//! The authorization webhook (`--authorization-webhook-config-file`), last in kcp's chain: a
//! request RBAC did not allow (and no hard denial, like required groups, refused) is sent as a
//! SubjectAccessReview (`authorization.k8s.io/v1beta1` by default, or `v1`) to the webhook,
//! with kcp's extra `authorization.kcp.io/cluster-name` naming the logical cluster. Its
//! `status.allowed` allows; anything else (a denial, no opinion, a failure) refuses, with the
//! webhook's reason. Answers are cached by the review they answer: allowed ones for 5 minutes,
//! the others for 30 seconds (kube-apiserver's defaults).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kcp_apimachinery::rbac::{Target, UserInfo};
use serde_json::{Value, json};

use crate::webhook_client::{Endpoint, WebhookClients, go_quote};

/// The extra key naming the logical cluster, as kcp adds it for webhooks.
pub const CLUSTER_NAME_EXTRA: &str = "authorization.kcp.io/cluster-name";
const ALLOWED_TTL: Duration = Duration::from_secs(300);
const DENIED_TTL: Duration = Duration::from_secs(30);
const MAX_CACHED: usize = 10_000;
const TIMEOUT: Duration = Duration::from_secs(30);

/// What the webhook said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Allowed,
    /// Denied or no opinion, with the webhook's reason (or the failure).
    Refused(String),
}

/// An authorization webhook and its cache.
#[derive(Debug)]
pub struct AuthorizationWebhook {
    endpoint: Endpoint,
    clients: WebhookClients,
    version: String,
    cache: Mutex<HashMap<String, (Instant, Answer)>>,
}

impl AuthorizationWebhook {
    /// A webhook at `endpoint` sent SubjectAccessReviews of `version` (`v1` or `v1beta1`).
    pub fn new(endpoint: Endpoint, version: &str) -> Result<AuthorizationWebhook, String> {
        if !matches!(version, "v1" | "v1beta1") {
            return Err(format!(
                "unsupported authorization webhook version {version:?}: v1 or v1beta1"
            ));
        }
        Ok(AuthorizationWebhook {
            endpoint,
            clients: WebhookClients::default(),
            version: version.to_string(),
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// Asks whether `subject` may do `verb` on `target` in the logical cluster `cluster`.
    pub async fn decide(
        &self,
        subject: &UserInfo,
        cluster: &str,
        verb: &str,
        target: Target<'_>,
    ) -> Answer {
        let spec = review_spec(subject, cluster, verb, target, &self.version);
        let key = spec.to_string();
        {
            let cache = self.cache.lock().unwrap();
            if let Some((until, answer)) = cache.get(&key)
                && *until > Instant::now()
            {
                return answer.clone();
            }
        }
        let answer = self.ask(spec).await.unwrap_or_else(|error| {
            tracing::warn!(%error, "the authorization webhook failed");
            Answer::Refused(error)
        });
        let ttl = match answer {
            Answer::Allowed => ALLOWED_TTL,
            Answer::Refused(_) => DENIED_TTL,
        };
        let mut cache = self.cache.lock().unwrap();
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        cache.insert(key, (Instant::now() + ttl, answer.clone()));
        answer
    }

    async fn ask(&self, spec: Value) -> Result<Answer, String> {
        let review = json!({
            "apiVersion": format!("authorization.k8s.io/{}", self.version),
            "kind": "SubjectAccessReview",
            "spec": spec,
        });
        let body = serde_json::to_vec(&review).map_err(|e| e.to_string())?;
        let url = &self.endpoint.url;
        let answer = tokio::time::timeout(
            TIMEOUT,
            self.clients
                .post(&self.endpoint, body, "SubjectAccessReview"),
        )
        .await
        .map_err(|_| format!("Post {}: context deadline exceeded", go_quote(url)))?
        .map_err(|e| format!("Post {}: {e}", go_quote(url)))?;
        let status = &answer["status"];
        Ok(
            match status["allowed"] == true && status["denied"] != true {
                true => Answer::Allowed,
                false => Answer::Refused(status["reason"].as_str().unwrap_or_default().to_string()),
            },
        )
    }
}

/// The review's spec, as kube-apiserver writes it (v1beta1 names the groups `group`).
fn review_spec(
    subject: &UserInfo,
    cluster: &str,
    verb: &str,
    target: Target<'_>,
    version: &str,
) -> Value {
    let mut extra = subject.extra.clone();
    extra.insert(CLUSTER_NAME_EXTRA.to_string(), vec![cluster.to_string()]);
    let groups_key = match version {
        "v1beta1" => "group",
        _ => "groups",
    };
    let mut spec = json!({"user": subject.name, groups_key: subject.groups, "extra": extra});
    match target {
        Target::Resource {
            api_group,
            resource,
            subresource,
            name,
            namespace,
        } => {
            let mut attributes = json!({"verb": verb, "group": api_group, "resource": resource});
            for (key, value) in [
                ("namespace", namespace),
                ("subresource", subresource),
                ("name", name),
            ] {
                if !value.is_empty() {
                    attributes[key] = json!(value);
                }
            }
            spec["resourceAttributes"] = attributes;
        }
        Target::NonResource { path } => {
            spec["nonResourceAttributes"] = json!({"path": path, "verb": verb});
        }
    }
    spec
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reviews_name_the_cluster_and_the_attributes() {
        let subject = UserInfo {
            name: "ann".into(),
            groups: vec!["g".into()],
            ..UserInfo::default()
        };
        let target = Target::Resource {
            api_group: "",
            resource: "configmaps",
            subresource: "",
            name: "x",
            namespace: "team",
        };
        let spec = review_spec(&subject, "c1", "get", target, "v1");
        assert_eq!(
            spec,
            json!({
                "user": "ann",
                "groups": ["g"],
                "extra": {CLUSTER_NAME_EXTRA: ["c1"]},
                "resourceAttributes": {"verb": "get", "group": "", "resource": "configmaps", "namespace": "team", "name": "x"},
            })
        );
        let spec = review_spec(
            &subject,
            "c1",
            "get",
            Target::NonResource { path: "/healthz" },
            "v1beta1",
        );
        assert_eq!(spec["group"], json!(["g"]));
        assert_eq!(
            spec["nonResourceAttributes"],
            json!({"path": "/healthz", "verb": "get"})
        );
    }
}
