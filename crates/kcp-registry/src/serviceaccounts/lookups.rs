//! The reads a service account token's authentication needs (its account's uid, its Secret's
//! uid and token), kept between requests until a write to their object
//! ([`crate::followed::Followed`] over ServiceAccounts and Secrets).

use std::sync::Arc;

use base64::Engine;
use kcp_apis::builtin::{Resource, core};
use serde_json::Value;

use crate::error::RegistryError;
use crate::followed::Followed;
use crate::store::{Registry, Target};
use crate::wildcard::ClusterEvent;

/// An object: its logical cluster, resource (`serviceaccounts` or `secrets`), namespace, name.
pub(crate) type ObjectKey = (String, &'static str, String, String);

/// What authentication needs of an object, or `None` when it does not exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) uid: String,
    /// A Secret's `data.token`, decoded.
    pub(crate) token: Option<Vec<u8>>,
}

/// The kept lookups of one registry (clones share them).
#[derive(Clone)]
pub(crate) struct Lookups(Arc<Followed<ObjectKey, Option<Seen>>>);

impl Default for Lookups {
    fn default() -> Lookups {
        let resources = vec![core("serviceaccounts"), core("secrets")];
        Lookups(Arc::new(Followed::new(
            "service account",
            resources,
            key_of,
        )))
    }
}

fn key_of(resource: &'static Resource, event: &ClusterEvent) -> ObjectKey {
    let object = &event.event.object;
    (
        event.cluster.clone(),
        resource.name.as_ref(),
        text(object, "namespace"),
        text(object, "name"),
    )
}

impl Lookups {
    /// The object `key`, from what is kept or else from storage through `registry`.
    pub(crate) async fn seen(
        &self,
        registry: &Registry,
        key: ObjectKey,
    ) -> Result<Option<Seen>, RegistryError> {
        self.0.get(registry, &key, || read(registry, &key)).await
    }
}

fn text(object: &Value, field: &str) -> String {
    object["metadata"][field]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn read(registry: &Registry, key: &ObjectKey) -> Result<Option<Seen>, RegistryError> {
    let (cluster, resource, namespace, name) = key;
    let target = Target {
        cluster,
        resource: core(resource),
        namespace: Some(namespace),
    };
    let object = match registry.get(target, name).await {
        Ok(object) => object,
        Err(RegistryError::NotFound { .. }) => return Ok(None),
        Err(error) => return Err(error),
    };
    let token = object["data"]["token"]
        .as_str()
        .and_then(|data| base64::engine::general_purpose::STANDARD.decode(data).ok());
    Ok(Some(Seen {
        uid: text(&object, "uid"),
        token,
    }))
}
