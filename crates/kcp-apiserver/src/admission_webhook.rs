//! The client side of admission webhooks: [`HttpsAdmissionWebhooks`] posts the
//! AdmissionReviews the registry builds (`kcp_registry::admission::webhooks`) over pooled
//! HTTPS connections ([`WebhookClients`]), within each webhook's timeout, and words failures
//! as kube-apiserver does after `failed to call webhook: ` (`Post "<url>": ...`,
//! `context deadline exceeded`).

use futures::future::BoxFuture;
use kcp_registry::admission::webhooks::{WebhookCall, WebhookCaller};
use serde_json::Value;

use crate::webhook_client::{Endpoint, WebhookClients, go_quote};

/// Calls admission webhooks over HTTPS, reusing connections.
#[derive(Debug, Clone, Default)]
pub struct HttpsAdmissionWebhooks {
    clients: WebhookClients,
}

impl WebhookCaller for HttpsAdmissionWebhooks {
    fn post<'a>(&'a self, call: WebhookCall<'a>) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(async move {
            let endpoint = Endpoint {
                url: call.url.clone(),
                ca_bundle: call.ca_bundle.map(<[u8]>::to_vec),
                server_name: call.server_name.clone(),
                ..Endpoint::default()
            };
            let url = go_quote(&call.url);
            let posted = self.clients.post(&endpoint, call.body, "AdmissionReview");
            match tokio::time::timeout(call.timeout, posted).await {
                Ok(answer) => answer.map_err(|e| format!("Post {url}: {e}")),
                Err(_) => Err(format!("Post {url}: context deadline exceeded")),
            }
        })
    }
}
