//! Reads across every logical cluster: one list and one watch of a resource for all clusters,
//! each object paired with the cluster its key names. This is what lets one controller task
//! serve thousands of clusters instead of one task per cluster.

use futures::{Stream, StreamExt};
use kcp_apis::builtin::Resource;
use kcp_storage::keys::ResourceKeys;
use kcp_storage::{Event, EventKind, RangeRequest, WatchRequest};
use serde_json::Value;

use crate::error::RegistryError;
use crate::list::Filter;
use crate::store::{Registry, decode};
use crate::watch::WatchEvent;
use crate::watch_cache::SharedEvent;

/// Keys read per storage page of a cross-cluster list.
const PAGE: usize = 1000;

/// An object of a cross-cluster list, with its logical cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterObject {
    pub cluster: String,
    pub object: Value,
}

/// Which events a cross-cluster watch delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watched {
    /// Every change.
    All,
    /// Deletes only (the last state of the object).
    Deletions,
}

/// A watch event of a cross-cluster watch, with the object's logical cluster. Its
/// `event.encoded` is empty: these watches serve controllers and caches, which read the
/// object, so their events are decoded once and never encoded.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterEvent {
    pub cluster: String,
    pub event: WatchEvent,
}

/// The logical cluster in a key under `prefix` (`<prefix><cluster>/...`).
fn cluster_of(prefix: &[u8], key: &[u8]) -> Option<String> {
    let rest = key.strip_prefix(prefix)?;
    let end = rest.iter().position(|b| *b == b'/')?;
    String::from_utf8(rest[..end].to_vec()).ok()
}

impl Registry {
    /// Every object of `resource` in every logical cluster that `filter` accepts, read page by
    /// page from one snapshot, and that snapshot's revision (to watch from).
    pub async fn list_all_clusters(
        &self,
        resource: &Resource,
        filter: &Filter,
    ) -> Result<(Vec<ClusterObject>, u64), RegistryError> {
        let prefix = ResourceKeys::new(&resource.group, &resource.name).all_clusters();
        // Through the whole collection: no count of what is past each page.
        let mut request = RangeRequest::prefix(prefix.clone())
            .with_limit(PAGE)
            .without_count();
        let mut objects = Vec::new();
        loop {
            let page = self.storage().range(request.clone()).await?;
            for kv in &page.kvs {
                let object = decode(kv)?;
                if let Some(cluster) = cluster_of(&prefix, &kv.key).filter(|_| filter(&object)) {
                    objects.push(ClusterObject { cluster, object });
                }
            }
            match request.next_page(&page) {
                Some(next) => request = next,
                None => return Ok((objects, page.revision)),
            }
        }
    }

    /// Every change of `resource` in every logical cluster after `resource_version`.
    pub async fn watch_all_clusters(
        &self,
        resource: &Resource,
        resource_version: u64,
    ) -> Result<
        impl Stream<Item = Result<ClusterEvent, RegistryError>> + Send + 'static,
        RegistryError,
    > {
        self.watch_all_clusters_of(resource, resource_version, Watched::All)
            .await
    }

    /// [`Registry::watch_all_clusters`] of the events `watched` names. With
    /// [`Watched::Deletions`] the other events are dropped before they are decoded, so a
    /// controller that only cares what goes pays nothing while objects are written.
    pub async fn watch_all_clusters_of(
        &self,
        resource: &Resource,
        resource_version: u64,
        watched: Watched,
    ) -> Result<
        impl Stream<Item = Result<ClusterEvent, RegistryError>> + Send + 'static,
        RegistryError,
    > {
        let prefix = ResourceKeys::new(&resource.group, &resource.name).all_clusters();
        let request = WatchRequest::prefix(prefix.clone(), resource_version.saturating_add(1));
        let events = self.storage().watch(request).await?;
        Ok(events.filter_map(move |event| {
            let translated = match event {
                Ok(event) if watched == Watched::Deletions && event.kind != EventKind::Delete => {
                    None
                }
                Ok(event) => cluster_event(&prefix, &event),
                Err(error) => Some(Err(error.into())),
            };
            std::future::ready(translated)
        }))
    }
}

/// A storage event under `prefix` as a cross-cluster watch delivers it (`None` for a key
/// without a cluster).
fn cluster_event(prefix: &[u8], event: &Event) -> Option<Result<ClusterEvent, RegistryError>> {
    match SharedEvent::decoded_only(event) {
        Ok(decoded) => cluster_of(prefix, &event.kv.key).map(|cluster| {
            Ok(ClusterEvent {
                cluster,
                event: decoded,
            })
        }),
        Err(error) => Some(Err(error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusters_are_read_from_keys() {
        let prefix = b"/registry/core/namespaces/";
        assert_eq!(
            cluster_of(prefix, b"/registry/core/namespaces/root:a/ns").as_deref(),
            Some("root:a")
        );
        assert_eq!(cluster_of(prefix, b"/registry/core/namespaces/x"), None);
        assert_eq!(cluster_of(prefix, b"/registry/core/secrets/root/ns"), None);
    }
}
