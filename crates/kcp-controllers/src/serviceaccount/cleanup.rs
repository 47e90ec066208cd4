//! A service account that was deleted: its token Secrets go too (also those of an account
//! deleted and created again, whose uid they no longer name).

use kcp_registry::serviceaccounts::{NAME_ANNOTATION, UID_ANNOTATION};
use kcp_registry::{ListOptions, Registry, RegistryError};

use super::{is_token_secret, secrets, service_accounts};
use crate::driver::{Key, Outcome};

/// Reconciles the service account `key` after its deletion.
pub async fn reconcile(registry: &Registry, key: &Key) -> Result<Outcome, RegistryError> {
    let current_uid = match registry.get(service_accounts(key), &key.name).await {
        Ok(account) => account["metadata"]["uid"].as_str().map(str::to_string),
        Err(RegistryError::NotFound { .. }) => None,
        Err(error) => return Err(error),
    };
    let listed = registry.list(secrets(key), ListOptions::default()).await?;
    for secret in &listed.items {
        let annotations = &secret["metadata"]["annotations"];
        let orphaned = is_token_secret(secret)
            && annotations[NAME_ANNOTATION] == key.name.as_str()
            && match &current_uid {
                None => true,
                Some(uid) => annotations[UID_ANNOTATION]
                    .as_str()
                    .is_some_and(|recorded| recorded != uid),
            };
        if !orphaned {
            continue;
        }
        let name = secret["metadata"]["name"].as_str().unwrap_or_default();
        match registry.delete(secrets(key), name).await {
            Ok(_) | Err(RegistryError::NotFound { .. }) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(Outcome::Finished)
}
