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

use crate::custom::convert::Presentation;
use crate::error::RegistryError;
use crate::list::Filter;
use crate::store::{Registry, Target};
use crate::watch_cache::SharedEvent;

/// One watch event.
#[derive(Clone)]
pub struct WatchEvent {
    /// ADDED, MODIFIED or DELETED.
    pub kind: &'static str,
    /// The object as JSON, encoded once for every watcher that receives it.
    pub encoded: Bytes,
    /// The revision of the change (the object's resourceVersion).
    pub revision: u64,
    object: EventObject,
}

/// Where a watch event's object comes from.
#[derive(Clone)]
enum EventObject {
    Decoded(Arc<Value>),
    /// The watch cache's event: decoded only if a watcher asks ([`WatchEvent::object`]).
    Shared(Arc<SharedEvent>),
}

impl std::fmt::Debug for WatchEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WatchEvent")
            .field("kind", &self.kind)
            .field("revision", &self.revision)
            .field("encoded", &String::from_utf8_lossy(&self.encoded))
            .finish()
    }
}

impl WatchEvent {
    /// A watch cache event as a watcher sees it.
    pub(crate) fn shared(kind: &'static str, event: Arc<SharedEvent>) -> WatchEvent {
        WatchEvent {
            kind,
            encoded: event.encoded.clone(),
            revision: event.revision,
            object: EventObject::Shared(event),
        }
    }

    /// The object, decoded. A watcher that sends JSON never needs it: decoding is left to
    /// those that do (Tables, conversions), once for all of them while the event is recent.
    pub fn object(&self) -> Result<Arc<Value>, RegistryError> {
        match &self.object {
            EventObject::Decoded(object) => Ok(Arc::clone(object)),
            EventObject::Shared(event) => event.object(),
        }
    }
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
    /// defaulted, encoded again only if that changed it). Not decoded at all when presenting
    /// it would change nothing ([`Presentation`]).
    async fn present_event(
        &self,
        resource: &kcp_apis::builtin::Resource,
        event: WatchEvent,
    ) -> Result<WatchEvent, RegistryError> {
        if Presentation::of(resource).as_stored(&event.encoded) {
            return Ok(event);
        }
        let object = event.object()?;
        let presented = self
            .present_all(resource, vec![Value::clone(&object)])
            .await?
            .pop();
        match presented {
            Some(presented) if presented != *object => Ok(WatchEvent {
                encoded: Bytes::from(kcp_apis::messages::to_json(&presented)),
                object: EventObject::Decoded(Arc::new(presented)),
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
                        Ok(shared) => SharedEvent::translate(&Arc::new(shared), filter.as_ref()),
                        Err(error) => Some(Err(error)),
                    },
                    Err(error) => Some(Err(error.into())),
                };
                std::future::ready(translated)
            })
            .boxed())
    }
}
