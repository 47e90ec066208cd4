//! The watch cache: one storage watch per resource for every logical cluster at once, whose
//! events are decoded and JSON-encoded once and then fanned out to every watcher of that
//! resource, whatever its cluster, namespace or selector.
//!
//! Each resource has a hub, started by its first watcher at that watcher's revision and stopped
//! when its last watcher goes. The hub keeps its recent events in one log, bounded by count
//! ([`BUFFER`]) and by size ([`HUB_BYTES`] for each hub, [`CACHE_BYTES`] for all hubs of a
//! registry, counted from the events' encoded sizes), so neither many watchers nor big objects
//! can grow it: every watcher reads the same log at its own position (nothing is queued per
//! watcher), waking when the hub publishes. A watcher starting at or after the log's window
//! joins without a storage watch of its own; older starts fall back to a direct storage watch
//! (see [`crate::watch`]). A watcher that falls behind the window ends with 410 Expired and the
//! client lists again, as with kube-apiserver's watch cache.
//!
//! There is no per-cluster state: thousands of clusters share the hubs of the resources they
//! watch.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use kcp_storage::{Event, EventKind, Storage, WatchRequest};
use serde_json::Value;
use tokio::sync::Notify;
use tokio::task::AbortHandle;

use crate::error::RegistryError;
use crate::list::Filter;
use crate::meta;
use crate::store::decode;
use crate::watch::WatchEvent;

/// Events each hub keeps for late joiners and watchers that are behind.
const BUFFER: usize = 1024;
/// Approximate memory the events kept by one hub may take.
const HUB_BYTES: usize = 32 * 1024 * 1024;
/// Approximate memory the events kept by all hubs of a registry may take.
const CACHE_BYTES: usize = 256 * 1024 * 1024;

/// One storage event, decoded and encoded once.
pub(crate) struct SharedEvent {
    pub key: Bytes,
    pub revision: u64,
    /// Whether it is a delete.
    pub deleted: bool,
    /// What watchers receive: the new state of a put, the last state of a delete (carrying the
    /// delete's revision).
    pub object: Arc<Value>,
    /// `object` as JSON.
    pub encoded: Bytes,
    /// The state before a put (`None` for a create), to tell selector transitions.
    pub prev: Option<Value>,
    /// About what this event takes in memory: its key, the object decoded and encoded, and the
    /// previous state decoded (a decoded value takes about twice its JSON).
    pub bytes: usize,
}

impl SharedEvent {
    pub(crate) fn from_storage(event: &Event) -> Result<SharedEvent, RegistryError> {
        let prev = event.prev.as_ref().map(decode).transpose()?;
        let (object, prev, deleted) = match event.kind {
            EventKind::Put => (decode(&event.kv)?, prev, false),
            EventKind::Delete => {
                let mut last = prev.ok_or_else(|| {
                    RegistryError::Internal("a delete event without the deleted value".into())
                })?;
                meta::set_resource_version(&mut last, event.kv.mod_revision);
                (last, None, true)
            }
        };
        let encoded = Bytes::from(kcp_apis::messages::to_json(&object));
        let prev_bytes = match (&prev, &event.prev) {
            (Some(_), Some(stored)) => stored.value.len(),
            _ => 0,
        };
        Ok(SharedEvent {
            bytes: event.kv.key.len() + 3 * encoded.len() + 2 * prev_bytes,
            key: event.kv.key.clone(),
            revision: event.kv.mod_revision,
            deleted,
            object: Arc::new(object),
            encoded,
            prev,
        })
    }

    /// What a watcher with `filter` sees of this event, as kube-apiserver's watch cache: an
    /// object that stops matching is DELETED, one that starts matching ADDED.
    pub(crate) fn translate(&self, filter: Option<&Filter>) -> Option<WatchEvent> {
        let matches = |object: &Value| filter.is_none_or(|accept| accept(object));
        let kind = if self.deleted {
            if !matches(&self.object) {
                return None;
            }
            "DELETED"
        } else {
            let was = self.prev.as_ref().is_some_and(matches);
            match (was, matches(&self.object)) {
                (false, true) => "ADDED",
                (true, true) => "MODIFIED",
                (true, false) => "DELETED",
                (false, false) => return None,
            }
        };
        Some(WatchEvent {
            kind,
            object: Arc::clone(&self.object),
            encoded: self.encoded.clone(),
            revision: self.revision,
        })
    }
}

struct HubState {
    /// Recent events in revision order.
    log: VecDeque<Arc<SharedEvent>>,
    /// What `log` takes, as [`SharedEvent::bytes`] counts it.
    bytes: usize,
    /// Every event after this revision is in `log` (or still to come).
    complete_after: u64,
    alive: bool,
    watchers: usize,
}

struct Hub {
    state: Mutex<HubState>,
    /// Woken when an event is published or the hub stops.
    published: Notify,
    /// What the logs of all hubs of the cache take.
    cache_bytes: Arc<AtomicUsize>,
    /// The task feeding the hub from storage.
    feeding: Mutex<Option<AbortHandle>>,
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, HubState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a watcher at `revision`, if the log still reaches back to it.
    fn join(&self, revision: u64) -> bool {
        let mut state = self.lock();
        if !state.alive || revision < state.complete_after {
            return false;
        }
        state.watchers += 1;
        true
    }

    fn publish(&self, event: SharedEvent) {
        let event = Arc::new(event);
        {
            let mut state = self.lock();
            state.bytes += event.bytes;
            self.cache_bytes.fetch_add(event.bytes, Ordering::Relaxed);
            state.log.push_back(event);
            // The newest event always stays, whatever its size, so every watcher can see it.
            while state.log.len() > 1
                && (state.log.len() > BUFFER
                    || state.bytes > HUB_BYTES
                    || self.cache_bytes.load(Ordering::Relaxed) > CACHE_BYTES)
            {
                let Some(oldest) = state.log.pop_front() else {
                    break;
                };
                state.bytes -= oldest.bytes;
                self.cache_bytes.fetch_sub(oldest.bytes, Ordering::Relaxed);
                state.complete_after = oldest.revision;
            }
        }
        self.published.notify_waiters();
    }

    /// Stops the hub: its log is given back, its watchers end.
    fn stop(&self) {
        {
            let mut state = self.lock();
            if !state.alive {
                return;
            }
            state.alive = false;
            self.cache_bytes.fetch_sub(state.bytes, Ordering::Relaxed);
            state.bytes = 0;
            state.log.clear();
        }
        if let Some(feeding) = self
            .feeding
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            feeding.abort();
        }
        self.published.notify_waiters();
    }
}

/// The hubs of one store, one per resource prefix, shared by every clone of the registry.
#[derive(Default)]
pub(crate) struct WatchCache {
    hubs: Arc<Mutex<HashMap<Vec<u8>, Arc<Hub>>>>,
    bytes: Arc<AtomicUsize>,
}

/// A watcher's position in its hub's log.
struct Watcher {
    hub: Arc<Hub>,
    hubs: Arc<Mutex<HashMap<Vec<u8>, Arc<Hub>>>>,
    resource_prefix: Vec<u8>,
    last: u64,
    prefix: Vec<u8>,
    filter: Option<Filter>,
}

impl WatchCache {
    fn hub(&self, resource_prefix: &[u8]) -> Option<Arc<Hub>> {
        let hubs = self.hubs.lock().unwrap_or_else(|e| e.into_inner());
        hubs.get(resource_prefix)
            .filter(|hub| hub.lock().alive)
            .cloned()
    }

    /// Starts the hub of a resource at `revision`.
    async fn start(
        &self,
        storage: &Arc<dyn Storage>,
        resource_prefix: &[u8],
        revision: u64,
    ) -> Result<Arc<Hub>, RegistryError> {
        let events = storage
            .watch(WatchRequest::prefix(
                resource_prefix.to_vec(),
                revision.saturating_add(1),
            ))
            .await?;
        let hub = Arc::new(Hub {
            state: Mutex::new(HubState {
                log: VecDeque::new(),
                bytes: 0,
                complete_after: revision,
                alive: true,
                watchers: 0,
            }),
            published: Notify::new(),
            cache_bytes: Arc::clone(&self.bytes),
            feeding: Mutex::new(None),
        });
        {
            let mut hubs = self.hubs.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(existing) = hubs.get(resource_prefix).filter(|h| h.lock().alive) {
                // Another watcher started it meanwhile; ours is dropped with its storage watch.
                return Ok(Arc::clone(existing));
            }
            hubs.insert(resource_prefix.to_vec(), Arc::clone(&hub));
        }
        let feeding = Arc::clone(&hub);
        let task = tokio::spawn(async move {
            let mut events = events;
            while let Some(next) = events.next().await {
                match next
                    .map_err(RegistryError::from)
                    .and_then(|e| SharedEvent::from_storage(&e))
                {
                    Ok(event) => feeding.publish(event),
                    Err(_) => break,
                }
            }
            // Watchers see the hub stop and end; the next watcher starts a new hub.
            feeding.stop();
        });
        *hub.feeding.lock().unwrap_or_else(|e| e.into_inner()) = Some(task.abort_handle());
        if !hub.lock().alive {
            task.abort();
        }
        Ok(hub)
    }

    /// Every change under `prefix` after `revision`, from the resource's hub; gives the filter
    /// back if the hub cannot serve that revision.
    pub(crate) async fn watch(
        &self,
        storage: &Arc<dyn Storage>,
        resource_prefix: &[u8],
        prefix: Vec<u8>,
        revision: u64,
        filter: Option<Filter>,
    ) -> Result<
        Result<
            impl Stream<Item = Result<WatchEvent, RegistryError>> + Send + 'static,
            Option<Filter>,
        >,
        RegistryError,
    > {
        let hub = match self.hub(resource_prefix) {
            Some(hub) => hub,
            None => self.start(storage, resource_prefix, revision).await?,
        };
        if !hub.join(revision) {
            return Ok(Err(filter));
        }
        let watcher = Watcher {
            hub,
            hubs: Arc::clone(&self.hubs),
            resource_prefix: resource_prefix.to_vec(),
            last: revision,
            prefix,
            filter,
        };
        Ok(Ok(futures::stream::unfold(
            watcher,
            |mut watcher| async move {
                let item = watcher.next().await?;
                Some((item, watcher))
            },
        )))
    }

    /// How many hubs are running (for tests).
    #[cfg(test)]
    fn running(&self) -> usize {
        let hubs = self.hubs.lock().unwrap_or_else(|e| e.into_inner());
        hubs.values().filter(|hub| hub.lock().alive).count()
    }
}

impl Watcher {
    /// The next event of the log after `last`, `Err` if the log no longer reaches back to it,
    /// `Ok(None)` if there is none yet.
    fn read(&self) -> Result<Option<Arc<SharedEvent>>, Option<RegistryError>> {
        let state = self.hub.lock();
        if !state.alive {
            return Err(None);
        }
        if self.last < state.complete_after {
            return Err(Some(RegistryError::Expired(format!(
                "too old resource version: {}",
                self.last
            ))));
        }
        let next = state
            .log
            .partition_point(|event| event.revision <= self.last);
        Ok(state.log.get(next).cloned())
    }

    /// The next event this watcher sees; `None` when the hub is gone.
    async fn next(&mut self) -> Option<Result<WatchEvent, RegistryError>> {
        loop {
            let published = self.hub.published.notified();
            tokio::pin!(published);
            // Registered before looking, so a publish in between is not missed.
            published.as_mut().enable();
            let event = match self.read() {
                Ok(Some(event)) => event,
                Ok(None) => {
                    published.await;
                    continue;
                }
                Err(expired) => return expired.map(Err),
            };
            // Registry writes touch one key per revision, so reading after the last revision
            // seen neither misses nor repeats an event.
            self.last = event.revision;
            if !event.key.starts_with(&self.prefix) {
                continue;
            }
            if let Some(translated) = event.translate(self.filter.as_ref()) {
                return Some(Ok(translated));
            }
        }
    }
}

impl Drop for Watcher {
    /// The last watcher of a hub stops it and takes it out of the cache.
    fn drop(&mut self) {
        let last = {
            let mut state = self.hub.lock();
            state.watchers = state.watchers.saturating_sub(1);
            state.watchers == 0
        };
        if !last {
            return;
        }
        let mut hubs = self.hubs.lock().unwrap_or_else(|e| e.into_inner());
        // A watcher may have joined meanwhile; one that joins after this finds the hub stopped
        // and watches storage directly.
        if self.hub.lock().watchers == 0 {
            if hubs
                .get(&self.resource_prefix)
                .is_some_and(|hub| Arc::ptr_eq(hub, &self.hub))
            {
                hubs.remove(&self.resource_prefix);
            }
            drop(hubs);
            self.hub.stop();
        }
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use kcp_storage::{MemoryStorage, Storage};

    use super::*;

    const RESOURCE: &[u8] = b"/registry/example.com/blobs/";

    async fn put(storage: &Arc<dyn Storage>, name: &str, size: usize) -> u64 {
        let key = [RESOURCE, b"c/", name.as_bytes()].concat();
        let value = serde_json::json!({"metadata": {"name": name}, "data": "x".repeat(size)});
        let value = Bytes::from(serde_json::to_vec(&value).unwrap());
        storage.create(&key, value).await.unwrap().mod_revision
    }

    fn memory() -> Arc<dyn Storage> {
        Arc::new(MemoryStorage::new())
    }

    #[tokio::test]
    async fn the_log_is_bounded_by_size_and_a_watcher_behind_it_expires() {
        let storage = memory();
        let cache = WatchCache::default();
        let start = storage.current_revision().await.unwrap();
        let watch = |revision| cache.watch(&storage, RESOURCE, RESOURCE.to_vec(), revision, None);
        let Ok(behind) = watch(start).await.unwrap() else {
            panic!("the first watcher starts the hub")
        };
        let mut behind = Box::pin(behind);
        // 64 events of 2 MiB: four times what one hub may keep.
        let mut last = start;
        for i in 0..64 {
            last = put(&storage, &format!("b{i}"), 2 * 1024 * 1024).await;
        }
        let mut caught_up = Box::pin(match watch(last).await.unwrap() {
            Ok(stream) => stream,
            Err(_) => panic!("a watcher at the newest revision joins"),
        });
        // Wait until the hub has published everything.
        let last_key = put(&storage, "last", 10).await;
        let event = caught_up.next().await.unwrap().unwrap();
        assert_eq!(event.revision, last_key);
        let hub = cache.hub(RESOURCE).unwrap();
        let kept = hub.lock().bytes;
        assert!(kept <= HUB_BYTES, "the hub keeps {kept} bytes");
        assert!(cache.bytes.load(Ordering::Relaxed) <= HUB_BYTES);
        match behind.next().await {
            Some(Err(RegistryError::Expired(_))) => {}
            other => panic!("a watcher behind the log expires: {other:?}"),
        }
        // A start older than the log is served from storage instead.
        assert!(watch(start).await.unwrap().is_err());
    }

    #[tokio::test]
    async fn the_last_watcher_stops_its_hub() {
        let storage = memory();
        let cache = WatchCache::default();
        let start = storage.current_revision().await.unwrap();
        let first = cache
            .watch(&storage, RESOURCE, RESOURCE.to_vec(), start, None)
            .await
            .unwrap();
        let second = cache
            .watch(&storage, RESOURCE, RESOURCE.to_vec(), start, None)
            .await
            .unwrap();
        put(&storage, "a", 1000).await;
        assert_eq!(cache.running(), 1);
        drop(first);
        assert_eq!(cache.running(), 1);
        let mut second = Box::pin(second.ok().unwrap());
        assert!(second.next().await.unwrap().is_ok());
        drop(second);
        assert_eq!(cache.running(), 0);
        assert_eq!(cache.bytes.load(Ordering::Relaxed), 0);
        // A new watcher starts a new hub and sees new events.
        let revision = storage.current_revision().await.unwrap();
        let mut third = Box::pin(
            cache
                .watch(&storage, RESOURCE, RESOURCE.to_vec(), revision, None)
                .await
                .unwrap()
                .ok()
                .unwrap(),
        );
        let created = put(&storage, "b", 10).await;
        assert_eq!(third.next().await.unwrap().unwrap().revision, created);
    }
}
