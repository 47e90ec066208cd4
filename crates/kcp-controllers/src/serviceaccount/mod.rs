//! The service account token controller, as Kubernetes' TokensController: Secrets of type
//! `kubernetes.io/service-account-token` get their service account's token, and go when their
//! service account does.
//!
//! Two loops serve every logical cluster ([`crate::driver`]):
//! - [`token_secret`] fills each token Secret (`data.token`, `data.namespace`, `data.ca.crt`,
//!   annotation `kubernetes.io/service-account.uid`) and deletes one whose service account does
//!   not exist or has another uid;
//! - [`cleanup`] deletes the token Secrets of a service account that was deleted (or deleted
//!   and created again, with a new uid).

pub mod cleanup;
pub mod token_secret;

use kcp_apis::builtin::core;
use kcp_registry::serviceaccounts::TOKEN_SECRET_TYPE;
use kcp_registry::{Registry, Summary, Target};
use serde_json::Value;

use crate::Context;
use crate::driver::{Controller, Key, Listing};

pub(crate) fn secrets<'a>(key: &'a Key) -> Target<'a> {
    Target {
        cluster: &key.cluster,
        resource: core("secrets"),
        namespace: Some(&key.namespace),
    }
}

pub(crate) fn service_accounts<'a>(key: &'a Key) -> Target<'a> {
    Target {
        cluster: &key.cluster,
        resource: core("serviceaccounts"),
        namespace: Some(&key.namespace),
    }
}

fn is_token_secret(secret: &Value) -> bool {
    is_token(&Summary::of_value(secret))
}

fn is_token(secret: &Summary) -> bool {
    secret.type_.as_deref() == Some(TOKEN_SECRET_TYPE)
}

/// Runs both loops until `stop` turns true.
pub async fn run(registry: Registry, context: Context) {
    let secrets = Controller {
        name: "serviceaccount-token-secret",
        resource: core("secrets"),
        wants: |secret| is_token_secret(secret) && token_secret::unfilled(secret),
        listed: Listing::Summaries(is_token),
        deletions: false,
        reconcile: |registry, key: Key| {
            Box::pin(async move { token_secret::reconcile(&registry, &key).await })
        },
        workers: crate::driver::WORKERS,
        also: Vec::new(),
    };
    let accounts = Controller {
        name: "serviceaccount-token-cleanup",
        resource: core("serviceaccounts"),
        wants: |_| false,
        listed: Listing::Nothing,
        deletions: true,
        reconcile: |registry, key: Key| {
            Box::pin(async move { cleanup::reconcile(&registry, &key).await })
        },
        workers: crate::driver::WORKERS,
        also: Vec::new(),
    };
    tokio::join!(
        secrets.run(registry.clone(), context.clone()),
        accounts.run(registry, context)
    );
}
