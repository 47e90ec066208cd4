//! Watches: storage events of a collection turned into Kubernetes watch events.
//!
//! A put that created the key is ADDED, any other put MODIFIED, a delete DELETED (carrying the
//! last state, with the delete's revision). With a filter, an object that stops matching arrives
//! as DELETED and one that starts matching as ADDED, as kube-apiserver's watch cache does.

use futures::{Stream, StreamExt};
use kcp_storage::{Event, EventKind, WatchRequest};
use serde_json::Value;

use crate::error::RegistryError;
use crate::list::Filter;
use crate::meta;
use crate::store::{Registry, Target, decode};

/// One watch event.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchEvent {
    /// ADDED, MODIFIED or DELETED.
    pub kind: &'static str,
    pub object: Value,
}

impl Registry {
    /// Every change in the collection after `resource_version`.
    pub async fn watch(
        &self,
        target: Target<'_>,
        resource_version: u64,
        filter: Option<Filter>,
    ) -> Result<impl Stream<Item = Result<WatchEvent, RegistryError>> + Send + 'static, RegistryError>
    {
        let request = WatchRequest::prefix(target.collection_prefix(), resource_version + 1);
        let events = self.storage().watch(request).await?;
        Ok(events.filter_map(move |event| {
            let translated = match event {
                Ok(event) => translate(&event, filter.as_ref()).transpose(),
                Err(error) => Some(Err(error.into())),
            };
            std::future::ready(translated)
        }))
    }
}

fn matches(filter: Option<&Filter>, object: &Value) -> bool {
    filter.is_none_or(|accept| accept(object))
}

pub(crate) fn translate(
    event: &Event,
    filter: Option<&Filter>,
) -> Result<Option<WatchEvent>, RegistryError> {
    let prev = event.prev.as_ref().map(decode).transpose()?;
    let was = prev.as_ref().is_some_and(|p| matches(filter, p));
    match event.kind {
        EventKind::Put => {
            let object = decode(&event.kv)?;
            let is = matches(filter, &object);
            let kind = match (was, is) {
                (false, true) => "ADDED",
                (true, true) => "MODIFIED",
                (true, false) => "DELETED",
                (false, false) => return Ok(None),
            };
            Ok(Some(WatchEvent { kind, object }))
        }
        EventKind::Delete => {
            let Some(mut object) = prev.filter(|_| was) else {
                return Ok(None);
            };
            meta::set_resource_version(&mut object, event.kv.mod_revision);
            Ok(Some(WatchEvent {
                kind: "DELETED",
                object,
            }))
        }
    }
}
