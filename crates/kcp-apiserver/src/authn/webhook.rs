//! The token webhook authenticator (`--authentication-token-webhook-config-file`), as
//! kube-apiserver's: a bearer token no other authenticator accepts is sent in a TokenReview
//! (`authentication.k8s.io/v1beta1` by default, or `v1`) to the webhook the kubeconfig-format
//! file names; `status.authenticated` with `status.user` is the user. Answers are cached by the
//! token's digest: accepted ones for the cache TTL (2 minutes by default), refused ones and
//! failures for 10 seconds. A failing webhook authenticates no one (401).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{User, token_digest};
use crate::webhook_client::{Endpoint, WebhookClients, go_quote};

/// How long a refusal (or a failure) is remembered.
const REFUSED_TTL: Duration = Duration::from_secs(10);
/// Cached answers at most; the cache starts over when full.
const MAX_CACHED: usize = 10_000;
/// The time a call may take (kube-apiserver's webhook timeout).
const TIMEOUT: Duration = Duration::from_secs(30);

/// Remembered answers, by token digest: until when, and the user (none: refused).
type Cache = HashMap<[u8; 32], (Instant, Option<User>)>;

/// A token webhook and its cache.
#[derive(Debug)]
pub struct TokenWebhook {
    endpoint: Endpoint,
    clients: WebhookClients,
    version: String,
    audiences: Vec<String>,
    ttl: Duration,
    cache: Mutex<Cache>,
}

impl TokenWebhook {
    /// A webhook at `endpoint` sent TokenReviews of `version` (`v1` or `v1beta1`) naming
    /// `audiences`, whose accepted tokens are cached for `ttl`.
    pub fn new(
        endpoint: Endpoint,
        version: &str,
        audiences: Vec<String>,
        ttl: Duration,
    ) -> Result<TokenWebhook, String> {
        if !matches!(version, "v1" | "v1beta1") {
            return Err(format!(
                "unsupported authentication webhook version {version:?}: v1 or v1beta1"
            ));
        }
        Ok(TokenWebhook {
            endpoint,
            clients: WebhookClients::default(),
            version: version.to_string(),
            audiences,
            ttl,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// The user the webhook says `token` is, if it says so.
    pub async fn authenticate(&self, token: &str) -> Option<User> {
        let digest = token_digest(token);
        {
            let cache = self.cache.lock().unwrap();
            if let Some((until, user)) = cache.get(&digest)
                && *until > Instant::now()
            {
                return user.clone();
            }
        }
        let answer = self.ask(token).await;
        let user = match answer {
            Ok(user) => user,
            Err(error) => {
                tracing::warn!(%error, "the token webhook failed");
                None
            }
        };
        let ttl = if user.is_some() {
            self.ttl
        } else {
            REFUSED_TTL
        };
        let mut cache = self.cache.lock().unwrap();
        if cache.len() >= MAX_CACHED {
            cache.clear();
        }
        cache.insert(digest, (Instant::now() + ttl, user.clone()));
        user
    }

    async fn ask(&self, token: &str) -> Result<Option<User>, String> {
        let mut spec = json!({"token": token});
        if !self.audiences.is_empty() {
            spec["audiences"] = json!(self.audiences);
        }
        let review = json!({
            "apiVersion": format!("authentication.k8s.io/{}", self.version),
            "kind": "TokenReview",
            "spec": spec,
        });
        let body = serde_json::to_vec(&review).map_err(|e| e.to_string())?;
        let url = &self.endpoint.url;
        let answer = tokio::time::timeout(
            TIMEOUT,
            self.clients.post(&self.endpoint, body, "TokenReview"),
        )
        .await
        .map_err(|_| format!("Post {}: context deadline exceeded", go_quote(url)))?
        .map_err(|e| format!("Post {}: {e}", go_quote(url)))?;
        Ok(user_of_review(&answer))
    }
}

/// The user of an answered TokenReview, if it authenticated one.
fn user_of_review(review: &Value) -> Option<User> {
    let status = &review["status"];
    if status["authenticated"] != true {
        return None;
    }
    let user = &status["user"];
    let name = user["username"].as_str().filter(|n| !n.is_empty())?;
    let strings = |value: &Value| -> Vec<String> {
        value
            .as_array()
            .map(|list| {
                list.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut groups = strings(&user["groups"]);
    if !groups.iter().any(|g| g == super::AUTHENTICATED) {
        groups.push(super::AUTHENTICATED.to_string());
    }
    let extra = user["extra"]
        .as_object()
        .map(|extra| {
            extra
                .iter()
                .map(|(key, values)| (key.clone(), strings(values)))
                .collect()
        })
        .unwrap_or_default();
    Some(User {
        name: name.to_string(),
        uid: user["uid"].as_str().unwrap_or_default().to_string(),
        groups,
        extra,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answered_reviews_name_their_user() {
        let review = json!({"status": {"authenticated": true, "user": {
            "username": "hooked", "uid": "42", "groups": ["g"], "extra": {"k": ["v"]}}}});
        let user = user_of_review(&review).unwrap();
        assert_eq!(user.name, "hooked");
        assert_eq!(user.uid, "42");
        assert_eq!(user.groups, ["g", "system:authenticated"]);
        assert_eq!(user.extra["k"], ["v"]);
        assert_eq!(
            user_of_review(&json!({"status": {"authenticated": false}})),
            None
        );
        assert_eq!(
            user_of_review(&json!({"status": {"authenticated": true, "user": {}}})),
            None
        );
        assert!(TokenWebhook::new(Endpoint::default(), "v2", vec![], REFUSED_TTL).is_err());
    }

    #[tokio::test]
    async fn a_webhook_that_is_down_authenticates_no_one_and_is_asked_again_later() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let endpoint = Endpoint {
            url: format!("https://127.0.0.1:{port}/authn"),
            ..Endpoint::default()
        };
        let webhook = TokenWebhook::new(endpoint, "v1", vec![], Duration::from_secs(60)).unwrap();
        assert_eq!(webhook.authenticate("t").await, None);
        let cache = webhook.cache.lock().unwrap();
        let (until, user) = &cache[&token_digest("t")];
        assert_eq!(*user, None);
        assert!(*until <= Instant::now() + REFUSED_TTL);
    }
}
