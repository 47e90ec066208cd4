//! One token Secret: filled with its service account's legacy token, or deleted when that
//! account does not exist (or is another one by now).

use base64::Engine;
use kcp_registry::serviceaccounts::{NAME_ANNOTATION, TokenSubject, UID_ANNOTATION};
use kcp_registry::{Registry, RegistryError};
use serde_json::{Value, json};

use super::{secrets, service_accounts};
use crate::driver::{Key, Outcome};

/// Reconciles the token Secret `key`.
pub async fn reconcile(registry: &Registry, key: &Key) -> Result<Outcome, RegistryError> {
    let Some(tokens) = registry.service_account_tokens() else {
        return Ok(Outcome::Finished);
    };
    let secret = match registry.get(secrets(key), &key.name).await {
        Ok(secret) => secret,
        Err(RegistryError::NotFound { .. }) => return Ok(Outcome::Finished),
        Err(error) => return Err(error),
    };
    let annotations = &secret["metadata"]["annotations"];
    let account_name = annotations[NAME_ANNOTATION].as_str().unwrap_or_default();
    let account = match registry.get(service_accounts(key), account_name).await {
        Ok(account) => Some(account),
        Err(RegistryError::NotFound { .. }) => None,
        Err(error) => return Err(error),
    };
    let account_uid = account
        .as_ref()
        .and_then(|a| a["metadata"]["uid"].as_str())
        .unwrap_or_default();
    let recorded_uid = annotations[UID_ANNOTATION].as_str();
    if account.is_none() || recorded_uid.is_some_and(|uid| uid != account_uid) {
        delete(registry, key).await?;
        return Ok(Outcome::Finished);
    }
    if recorded_uid.is_some() && secret["data"]["token"].is_string() {
        return Ok(Outcome::Finished);
    }
    let subject = TokenSubject {
        cluster: key.cluster.clone(),
        namespace: key.namespace.clone(),
        name: account_name.to_string(),
        uid: account_uid.to_string(),
    };
    let token = tokens
        .issue_legacy(&subject, &key.name)
        .map_err(RegistryError::Internal)?;
    let encode = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let mut filled = secret.clone();
    filled["metadata"]["annotations"][UID_ANNOTATION] = json!(account_uid);
    if !filled["data"].is_object() {
        filled["data"] = json!({});
    }
    filled["data"]["token"] = json!(encode(token.as_bytes()));
    filled["data"]["namespace"] = json!(encode(key.namespace.as_bytes()));
    filled["data"]["ca.crt"] = json!(encode(tokens.root_ca_pem()));
    match registry.update(secrets(key), &key.name, filled).await {
        Ok(_) => Ok(Outcome::Finished),
        // Changed meanwhile: its own event brings it back.
        Err(RegistryError::Conflict { .. } | RegistryError::NotFound { .. }) => {
            Ok(Outcome::Finished)
        }
        Err(error) => Err(error),
    }
}

async fn delete(registry: &Registry, key: &Key) -> Result<(), RegistryError> {
    match registry.delete(secrets(key), &key.name).await {
        Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
        Err(error) => Err(error),
    }
}

/// Whether the token Secret `secret` still needs this controller: it holds no token yet, or
/// names no service account uid.
pub fn unfilled(secret: &Value) -> bool {
    !secret["data"]["token"].is_string()
        || !secret["metadata"]["annotations"][UID_ANNOTATION].is_string()
}
