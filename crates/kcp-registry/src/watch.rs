//! Watches: storage events of a collection turned into Kubernetes watch events.
//!
//! A put that created the key is ADDED, any other put MODIFIED, a delete DELETED (carrying the
//! last state, with the delete's revision). With a filter, an object that stops matching arrives
//! as DELETED and one that starts matching as ADDED, as kube-apiserver's watch cache does.
//!
//! Watches are served by the resource's hub in [`crate::watch_cache`], which encodes each event
//! once for all its watchers; a start older than the hub's window reads storage directly.

use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use kcp_storage::WatchRequest;
use serde_json::Value;

use crate::error::RegistryError;
use crate::list::Filter;
use crate::store::{Registry, Target};
use crate::watch_cache::SharedEvent;

/// One watch event.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchEvent {
    /// ADDED, MODIFIED or DELETED.
    pub kind: &'static str,
    pub object: Arc<Value>,
    /// `object` as JSON, encoded once for every watcher that receives it.
    pub encoded: Bytes,
    /// The revision of the change (the object's resourceVersion).
    pub revision: u64,
}

impl Registry {
    /// Every change in the collection after `resource_version`.
    pub async fn watch(
        &self,
        target: Target<'_>,
        resource_version: u64,
        filter: Option<Filter>,
    ) -> Result<BoxStream<'static, Result<WatchEvent, RegistryError>>, RegistryError> {
        let events = self
            .watch_stored(target, resource_version, target.narrow(filter))
            .await?;
        if target.resource.custom.is_none() || target.as_stored() {
            return Ok(events);
        }
        let registry = self.clone();
        // The stream outlives the request's borrow: it holds its own copy (sharing the custom
        // resource's schema, kept alive as long as the watch runs).
        let resource = Arc::new(target.resource.clone());
        Ok(events
            .then(move |event| {
                let registry = registry.clone();
                let resource = Arc::clone(&resource);
                async move { registry.present_event(&resource, event?).await }
            })
            .boxed())
    }

    /// A watch event of a custom resource as `resource`'s version serves it (converted and
    /// defaulted, encoded again only if that changed it).
    async fn present_event(
        &self,
        resource: &kcp_apis::builtin::Resource,
        event: WatchEvent,
    ) -> Result<WatchEvent, RegistryError> {
        let defaults = resource
            .custom()
            .is_some_and(|custom| custom.defaults.is_some());
        if !defaults && event.object["apiVersion"] == resource.group_version().as_str() {
            return Ok(event);
        }
        let object = Value::clone(&event.object);
        let presented = self.present_all(resource, vec![object]).await?.pop();
        match presented {
            Some(presented) if presented != *event.object => Ok(WatchEvent {
                encoded: Bytes::from(kcp_apis::messages::to_json(&presented)),
                object: Arc::new(presented),
                ..event
            }),
            _ => Ok(event),
        }
    }

    /// The watch of stored objects, as storage keeps them.
    async fn watch_stored(
        &self,
        target: Target<'_>,
        resource_version: u64,
        filter: Option<Filter>,
    ) -> Result<BoxStream<'static, Result<WatchEvent, RegistryError>>, RegistryError> {
        let prefix = target.collection_prefix();
        let order = target.key_order();
        let resource_prefix = target.resource_prefix();
        let filter = match self
            .store()
            .watch_cache()
            .watch(
                self.store().shared_storage(),
                &resource_prefix,
                order,
                prefix.clone(),
                resource_version,
                filter,
            )
            .await?
        {
            Ok(events) => return Ok(events.boxed()),
            Err(filter) => filter,
        };
        let request = WatchRequest::prefix(prefix, resource_version.saturating_add(1));
        let events = self.storage().watch(request).await?;
        Ok(events
            .filter_map(move |event| {
                let translated = match event {
                    Ok(event) => match SharedEvent::from_storage(&event, order) {
                        Ok(shared) => shared.translate(filter.as_ref()).map(Ok),
                        Err(error) => Some(Err(error)),
                    },
                    Err(error) => Some(Err(error.into())),
                };
                std::future::ready(translated)
            })
            .boxed())
    }
}
