//! Reads across every logical cluster: one list and one watch of a resource for all clusters,
//! each object paired with the cluster its key names. This is what lets one controller task
//! serve thousands of clusters instead of one task per cluster.

use std::sync::Arc;

use futures::{Stream, StreamExt};
use kcp_apis::builtin::Resource;
use kcp_storage::{Event, EventKind, KeyValue, RangeRequest, WatchRequest};
use serde_json::Value;

use crate::error::RegistryError;
use crate::list::Filter;
use crate::store::{Registry, decode};
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

/// A watch event of a cross-cluster watch, with the object's logical cluster. These watches
/// serve controllers and caches, which read the object, so their events are decoded once and
/// never encoded.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterEvent {
    pub cluster: String,
    pub event: DecodedEvent,
}

/// A watch event decoded and not encoded.
#[derive(Debug, Clone, PartialEq)]
pub struct DecodedEvent {
    /// ADDED, MODIFIED or DELETED.
    pub kind: &'static str,
    pub object: Arc<Value>,
    /// The revision of the change (the object's resourceVersion).
    pub revision: u64,
}

/// The logical cluster in a key under `prefix` (`<prefix><cluster>/...`).
pub(crate) fn cluster_of<'k>(prefix: &[u8], key: &'k [u8]) -> Option<&'k str> {
    let rest = key.strip_prefix(prefix)?;
    let end = rest.iter().position(|b| *b == b'/')?;
    std::str::from_utf8(&rest[..end]).ok()
}

impl Registry {
    /// Every object of `resource` in every logical cluster that `filter` accepts, read page by
    /// page from one snapshot, and that snapshot's revision (to watch from).
    pub async fn list_all_clusters(
        &self,
        resource: &Resource,
        filter: &Filter,
    ) -> Result<(Vec<ClusterObject>, u64), RegistryError> {
        let prefix = crate::store::resource_keys(resource).all_clusters();
        let mut objects = Vec::new();
        let revision = self
            .each_page(&prefix, |kv| {
                let object = decode(kv)?;
                if let Some(cluster) = cluster_of(&prefix, &kv.key).filter(|_| filter(&object)) {
                    let cluster = cluster.to_string();
                    objects.push(ClusterObject { cluster, object });
                }
                Ok(())
            })
            .await?;
        Ok((objects, revision))
    }

    /// Hands every key-value under `prefix` to `take`, read [`PAGE`] at a time from one
    /// snapshot (no count of what is past each page), and returns that snapshot's revision.
    /// Reading the embedded store does not wait, so between two pages the task gives up its
    /// turn: a list of a million objects would otherwise hold its worker, and every request
    /// queued on it, for seconds.
    pub(crate) async fn each_page(
        &self,
        prefix: &[u8],
        mut take: impl FnMut(&KeyValue) -> Result<(), RegistryError>,
    ) -> Result<u64, RegistryError> {
        let mut request = RangeRequest::prefix(prefix.to_vec())
            .with_limit(PAGE)
            .without_count();
        loop {
            let page = self.storage().range(request.clone()).await?;
            page.kvs.iter().try_for_each(&mut take)?;
            match request.next_page(&page) {
                Some(next) => request = next,
                None => return Ok(page.revision),
            }
            tokio::task::yield_now().await;
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
        let prefix = crate::store::resource_keys(resource).all_clusters();
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
                cluster: cluster.to_string(),
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
            cluster_of(prefix, b"/registry/core/namespaces/root:a/ns"),
            Some("root:a")
        );
        assert_eq!(cluster_of(prefix, b"/registry/core/namespaces/x"), None);
        assert_eq!(cluster_of(prefix, b"/registry/core/secrets/root/ns"), None);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_list_of_many_pages_lets_other_tasks_run_between_its_pages() {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

        use kcp_storage::{MemoryStorage, Storage};

        let namespaces = kcp_apis::builtin::RESOURCES
            .iter()
            .find(|r| r.group.is_empty() && r.name == "namespaces")
            .expect("the catalogue has namespaces");
        let storage = Arc::new(MemoryStorage::new());
        let keys = kcp_storage::keys::ResourceKeys::new("", "namespaces");
        let total = 2 * PAGE + 1;
        for i in 0..total {
            let name = format!("ns-{i:05}");
            let object = serde_json::json!({
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name},
            });
            storage
                .create(
                    &keys.object(&format!("c{}", i % 7), None, &name),
                    object.to_string().into(),
                )
                .await
                .expect("create");
        }
        let registry = Registry::new(storage);
        // The other task runs only when the list gives up its turn (one thread).
        let other_ran = Arc::new(AtomicBool::new(false));
        let other = tokio::spawn({
            let other_ran = other_ran.clone();
            async move { other_ran.store(true, Ordering::SeqCst) }
        });
        let seen_after_other = Arc::new(AtomicUsize::new(0));
        let filter: Filter = Box::new({
            let (other_ran, seen_after_other) = (other_ran.clone(), seen_after_other.clone());
            move |_| {
                if other_ran.load(Ordering::SeqCst) {
                    seen_after_other.fetch_add(1, Ordering::SeqCst);
                }
                true
            }
        });
        let (listed, _) = registry
            .list_all_clusters(namespaces, &filter)
            .await
            .expect("list");
        other.await.expect("the other task");
        assert_eq!(listed.len(), total);
        // The first page is read before the first turn is given up; the rest after.
        assert_eq!(seen_after_other.load(Ordering::SeqCst), total - PAGE);
    }
}
