//! The watch cache: one storage watch per resource for every logical cluster at once, whose
//! events are JSON-encoded once and then fanned out to every watcher of that resource,
//! whatever its cluster, namespace or selector. An event is decoded only for watchers that
//! need the object (selectors, Tables, conversions); the newest events keep what they decoded
//! for the others ([`HOT_EVENTS`]).
//!
//! Each resource has a hub, started by its first watcher at that watcher's revision and stopped
//! when its last watcher goes. The hub keeps its recent events in one log, bounded by count
//! ([`MAX_EVENTS`]), by size ([`HUB_BYTES`] for each hub, [`CACHE_BYTES`] for all hubs of a
//! registry, counted from the events' JSON) and by age ([`FRESH_FOR`], as
//! kube-apiserver sizes its window by how fresh the events are, up to its own upper bound of
//! events), so neither many watchers nor big objects can grow it, and a burst long past does
//! not stay in memory: every watcher reads
//! the same log at its own position (nothing is queued per watcher), waking when the hub
//! publishes. A watcher starting at or after the log's window joins without a storage watch of
//! its own; older starts fall back to a direct storage watch (see [`crate::watch`]). A watcher
//! that falls behind the window ends with 410 Expired and the client lists again, as with
//! kube-apiserver's watch cache.
//!
//! Watchers are indexed by the logical cluster they watch: besides the log, the hub keeps each
//! cluster's events in a log of its own (the same events, shared), and a publish wakes only the
//! watchers of the event's cluster and the wildcard watchers (`/clusters/*`), not every watcher
//! of the resource. A cluster's watcher reads its cluster's log, so events of other clusters
//! neither wake it nor push it out of the window. Thousands of clusters share the hubs of the
//! resources they watch; a cluster takes room in a hub only while it has watchers there or
//! events in the log.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use kcp_apimachinery::json::KeyOrder;
use kcp_storage::{Event, EventKind, KeyValue, Storage, WatchRequest};
use serde_json::Value;
use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::error::RegistryError;
use crate::list::Filter;
use crate::room::GiveBackRoom;
use crate::store::{decode, json_answer};
use crate::watch::WatchEvent;
use crate::wildcard::DecodedEvent;

/// Events each hub keeps for late joiners and watchers that are behind, at most: kube-apiserver's
/// upper bound for its watch cache. The sizes and the age bound it first for most resources;
/// with a bound of 1,024 events, a watch of every workspace fell out of the window and listed
/// everything again about every 20 s while 200,000 workspaces were being deleted (every 100 s at
/// a million, each list taking 42 s), which slowed the deletion to about 25 removals a second.
pub(crate) const MAX_EVENTS: usize = 100 * 1024;
/// Approximate memory the events kept by one hub may take. While 200,000 workspaces were
/// deleted (about 1,300 events a second of 3 KB each), 32 MiB kept 8 s of events: a watch of
/// every workspace that relisted took longer than that, fell out of the window again at once,
/// and relisted without end, a third of the server's work.
const HUB_BYTES: usize = 128 * 1024 * 1024;
/// Approximate memory the events kept by all hubs of a registry may take.
const CACHE_BYTES: usize = 256 * 1024 * 1024;
/// Events older than this leave the log even when it has room (kube-apiserver's watch cache
/// shrinks its window to the events of its `eventFreshDuration`, 75 s). A window kept forever
/// held the last thousand events of every resource: after 10,000 workspaces were deleted,
/// 20 MB of deletions nobody would read again. Watchers from further back watch storage.
const FRESH_FOR: Duration = Duration::from_secs(75);
/// How often a hub without new events lets its stale ones go.
const TRIM_EVERY: Duration = Duration::from_secs(5);
/// The newest events of a hub keep what watchers decoded of them (for selectors, Tables and
/// conversions), so each is decoded once for all: at most this many of them,
const HOT_EVENTS: usize = 1024;
/// of at most this much JSON,
const HOT_BYTES: usize = 8 * 1024 * 1024;
/// and none older than this. Older events keep only their JSON, and a watcher that needs one
/// decoded (one that fell behind) decodes it for itself. A decoded object takes several times
/// its JSON, in many small allocations: kept for the whole window, they made the window of a
/// burst of 10,000 workspace deletions the bulk of the server's peak, and of what the
/// allocator kept afterwards.
const HOT_FOR: Duration = Duration::from_secs(5);
/// What an event takes besides its key and JSON (its parts and its places in the logs).
const EVENT_OVERHEAD: usize = 256;

/// One storage event, encoded once for all watchers, decoded only for those that need it.
pub(crate) struct SharedEvent {
    pub key: Bytes,
    pub revision: u64,
    /// Whether it is a delete.
    pub deleted: bool,
    /// What watchers receive, as JSON: the new state of a put, the last state of a delete
    /// (carrying the delete's revision); spliced from the stored bytes where they allow it.
    pub encoded: Bytes,
    /// The stored state before a put (`None` for a create), to tell selector transitions.
    prev_stored: Option<KeyValue>,
    /// What watchers decoded of it, kept while the event is hot ([`HOT_EVENTS`]).
    decoded: Mutex<Decoded>,
    /// About what this event takes in memory while it is not hot: its key, its JSON, the
    /// previous state stored and its parts.
    pub bytes: usize,
    /// When it came from storage.
    arrived: Instant,
}

/// What watchers decoded of an event.
#[derive(Default)]
struct Decoded {
    /// Nothing decoded is kept any more: the event left the hot ones.
    cooled: bool,
    object: Option<Arc<Value>>,
    /// The state before a put (`Some(None)`: a create, or one that does not decode).
    prev: Option<Option<Arc<Value>>>,
}

/// The stored state a watcher receives for `event`: the new value of a put, the last value of a
/// delete carrying the delete's revision.
fn delivered_state(event: &Event) -> Result<KeyValue, RegistryError> {
    match event.kind {
        EventKind::Put => Ok(event.kv.clone()),
        EventKind::Delete => {
            let prev = event.prev.as_ref().ok_or_else(|| {
                RegistryError::Internal("a delete event without the deleted value".into())
            })?;
            Ok(KeyValue {
                mod_revision: event.kv.mod_revision,
                ..prev.clone()
            })
        }
    }
}

impl SharedEvent {
    /// The event `event` delivers, decoded and encoded once; the stored objects' keys are in
    /// `order` (their resource's).
    pub(crate) fn from_storage(
        event: &Event,
        order: KeyOrder,
    ) -> Result<SharedEvent, RegistryError> {
        let delivered = delivered_state(event)?;
        let deleted = event.kind == EventKind::Delete;
        let prev_stored = if deleted { None } else { event.prev.clone() };
        let mut decoded = Decoded::default();
        let encoded = match json_answer(&delivered, order) {
            Some(spliced) => Bytes::from(spliced),
            None => {
                let object = decode(&delivered)?;
                let encoded = Bytes::from(kcp_apis::messages::to_json(&object));
                decoded.object = Some(Arc::new(object));
                encoded
            }
        };
        let prev_bytes = prev_stored
            .as_ref()
            .map_or(0, |kv| kv.key.len() + kv.value.len());
        Ok(SharedEvent {
            bytes: event.kv.key.len() + encoded.len() + prev_bytes + EVENT_OVERHEAD,
            key: event.kv.key.clone(),
            revision: event.kv.mod_revision,
            deleted,
            encoded,
            prev_stored,
            decoded: Mutex::new(decoded),
            arrived: Instant::now(),
        })
    }

    /// A storage event as a watcher without a selector that reads only the object sees it
    /// (ADDED, MODIFIED or DELETED with the last state), not encoded: the cross-cluster watches
    /// of controllers and caches ([`crate::wildcard`]) decode each event once and encode none.
    pub(crate) fn decoded_only(event: &Event) -> Result<DecodedEvent, RegistryError> {
        let kind = match (event.kind, &event.prev) {
            (EventKind::Delete, _) => "DELETED",
            (EventKind::Put, Some(_)) => "MODIFIED",
            (EventKind::Put, None) => "ADDED",
        };
        Ok(DecodedEvent {
            kind,
            object: Arc::new(decode(&delivered_state(event)?)?),
            revision: event.kv.mod_revision,
        })
    }

    fn lock_decoded(&self) -> MutexGuard<'_, Decoded> {
        self.decoded.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// What `slot` of [`Decoded`] holds, or else `decode`'s answer, kept there unless the event
    /// has cooled. Decoding runs without the lock.
    fn decoded<T: Clone, E>(
        &self,
        slot: fn(&mut Decoded) -> &mut Option<T>,
        decode: impl FnOnce() -> Result<T, E>,
    ) -> Result<T, E> {
        if let Some(kept) = slot(&mut self.lock_decoded()) {
            return Ok(kept.clone());
        }
        let value = decode()?;
        let mut decoded = self.lock_decoded();
        if decoded.cooled {
            return Ok(value);
        }
        Ok(slot(&mut decoded).get_or_insert(value).clone())
    }

    /// The object watchers receive, decoded from its JSON unless a watcher did so while the
    /// event was hot.
    pub(crate) fn object(&self) -> Result<Arc<Value>, RegistryError> {
        self.decoded(
            |decoded| &mut decoded.object,
            || {
                kcp_apimachinery::json::decode_stored(&self.encoded)
                    .map(Arc::new)
                    .map_err(|e| RegistryError::Internal(format!("a watch event is not JSON: {e}")))
            },
        )
    }

    /// The state before a put (one that does not decode counts as none), decoded as
    /// [`SharedEvent::object`] is.
    fn prev(&self) -> Option<Arc<Value>> {
        let decode_prev = || {
            let prev = self.prev_stored.as_ref().and_then(|kv| decode(kv).ok());
            Ok::<_, std::convert::Infallible>(prev.map(Arc::new))
        };
        let Ok(prev) = self.decoded(|decoded| &mut decoded.prev, decode_prev);
        prev
    }

    /// Lets what watchers decoded of it go: from now on each decodes for itself.
    fn cool(&self) {
        *self.lock_decoded() = Decoded {
            cooled: true,
            ..Decoded::default()
        };
    }

    /// What a watcher with `filter` sees of `event`, as kube-apiserver's watch cache: an
    /// object that stops matching is DELETED, one that starts matching ADDED.
    pub(crate) fn translate(
        event: &Arc<SharedEvent>,
        filter: Option<&Filter>,
    ) -> Option<Result<WatchEvent, RegistryError>> {
        match event.kind_for(filter) {
            Ok(kind) => kind.map(|kind| Ok(WatchEvent::shared(kind, Arc::clone(event)))),
            Err(error) => Some(Err(error)),
        }
    }

    /// The kind of event a watcher with `filter` sees, if it sees one. Without a filter,
    /// nothing is decoded.
    fn kind_for(&self, filter: Option<&Filter>) -> Result<Option<&'static str>, RegistryError> {
        let Some(accept) = filter else {
            return Ok(Some(match (self.deleted, &self.prev_stored) {
                (true, _) => "DELETED",
                (false, Some(_)) => "MODIFIED",
                (false, None) => "ADDED",
            }));
        };
        let now = accept(&*self.object()?);
        if self.deleted {
            return Ok(now.then_some("DELETED"));
        }
        let was = self.prev().is_some_and(|prev| accept(&prev));
        Ok(match (was, now) {
            (false, true) => Some("ADDED"),
            (true, true) => Some("MODIFIED"),
            (true, false) => Some("DELETED"),
            (false, false) => None,
        })
    }
}

struct HubState {
    /// Recent events in revision order.
    log: VecDeque<Arc<SharedEvent>>,
    /// The clusters with watchers or with events in `log`, by name.
    clusters: HashMap<Vec<u8>, ClusterLog>,
    /// What `log` takes, as [`SharedEvent::bytes`] counts it.
    bytes: usize,
    /// How many of the newest events in `log` are hot (keep what watchers decoded of them).
    hot: usize,
    /// The JSON of the hot events.
    hot_bytes: usize,
    /// Every event after this revision is in `log` (or still to come).
    complete_after: u64,
    alive: bool,
    watchers: usize,
}

/// One logical cluster's part of a hub.
struct ClusterLog {
    /// The cluster's events of the hub's log, in revision order.
    events: VecDeque<Arc<SharedEvent>>,
    /// Every event of the cluster after this revision is in `events` (or still to come).
    complete_after: u64,
    watchers: usize,
    /// Woken when an event of the cluster is published or the hub stops.
    published: Arc<Notify>,
}

impl ClusterLog {
    fn new(complete_after: u64) -> ClusterLog {
        ClusterLog {
            events: VecDeque::new(),
            complete_after,
            watchers: 0,
            published: Arc::new(Notify::new()),
        }
    }
}

struct Hub {
    state: Mutex<HubState>,
    /// Woken when any event is published or the hub stops (wildcard watchers).
    published: Arc<Notify>,
    /// The length of the resource's key prefix: a key's cluster is the segment after it.
    prefix_len: usize,
    /// What the logs of all hubs of the cache take.
    cache_bytes: Arc<AtomicUsize>,
    /// Events the log keeps, at most.
    max_events: usize,
    /// What the log may take, at most ([`HUB_BYTES`]).
    max_bytes: usize,
    /// The task feeding the hub from storage.
    feeding: Mutex<Option<AbortHandle>>,
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, HubState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The logical cluster of a key of the resource.
    fn cluster_of<'k>(&self, key: &'k [u8]) -> &'k [u8] {
        let rest = key.get(self.prefix_len..).unwrap_or_default();
        rest.split(|byte| *byte == b'/').next().unwrap_or_default()
    }

    /// Registers a watcher of `cluster` (`None`: every cluster) at `revision`, if the log still
    /// reaches back to it; answers what wakes the watcher.
    fn join(&self, revision: u64, cluster: Option<&[u8]>) -> Option<Arc<Notify>> {
        let mut state = self.lock();
        if !state.alive {
            return None;
        }
        let Some(cluster) = cluster else {
            if revision < state.complete_after {
                return None;
            }
            state.watchers += 1;
            return Some(Arc::clone(&self.published));
        };
        let complete_after = state.complete_after;
        let known = state
            .clusters
            .get(cluster)
            .map_or(complete_after, |log| log.complete_after);
        if revision < known {
            return None;
        }
        let log = state
            .clusters
            .entry(cluster.to_vec())
            .or_insert_with(|| ClusterLog::new(complete_after));
        log.watchers += 1;
        let published = Arc::clone(&log.published);
        state.watchers += 1;
        Some(published)
    }

    fn publish(&self, event: SharedEvent) {
        let event = Arc::new(event);
        let cluster_published = {
            let mut state = self.lock();
            state.bytes += event.bytes;
            self.cache_bytes.fetch_add(event.bytes, Ordering::Relaxed);
            let complete_after = state.complete_after;
            let cluster = self.cluster_of(&event.key);
            let log = match state.clusters.get_mut(cluster) {
                Some(log) => log,
                None => state
                    .clusters
                    .entry(cluster.to_vec())
                    .or_insert_with(|| ClusterLog::new(complete_after)),
            };
            log.events.push_back(Arc::clone(&event));
            let published = Arc::clone(&log.published);
            state.hot += 1;
            state.hot_bytes += event.encoded.len();
            state.log.push_back(event);
            self.trim(&mut state);
            published
        };
        cluster_published.notify_waiters();
        self.published.notify_waiters();
    }

    /// Lets the oldest events go while the log is over its count or sizes, or they are older
    /// than [`FRESH_FOR`]. The newest event stays whatever its size, so every watcher can see
    /// it, but not once it is stale: a quiet resource's last event, kept for good, held the
    /// memory around it (the allocator's page it was made in, among a burst's short-lived
    /// blocks) long after the burst, for each of the hundred-odd resources with a hub.
    fn trim(&self, state: &mut HubState) {
        let stale_before = Instant::now().checked_sub(FRESH_FOR);
        while !state.log.is_empty() {
            let stale = state
                .log
                .front()
                .zip(stale_before)
                .is_some_and(|(oldest, before)| oldest.arrived < before);
            let over = state.log.len() > 1
                && (state.log.len() > self.max_events
                    || state.bytes > self.max_bytes
                    || self.cache_bytes.load(Ordering::Relaxed) > CACHE_BYTES);
            if !(over || stale) {
                break;
            }
            let Some(oldest) = state.log.pop_front() else {
                break;
            };
            if state.hot > state.log.len() {
                state.hot -= 1;
                state.hot_bytes -= oldest.encoded.len();
            }
            oldest.cool();
            state.bytes -= oldest.bytes;
            self.cache_bytes.fetch_sub(oldest.bytes, Ordering::Relaxed);
            state.complete_after = oldest.revision;
            let cluster = self.cluster_of(&oldest.key);
            if let Some(log) = state.clusters.get_mut(cluster) {
                // The oldest event of the log is the oldest of its cluster's.
                log.events.pop_front();
                log.events.give_back_room();
                log.complete_after = oldest.revision;
                if log.events.is_empty() && log.watchers == 0 {
                    state.clusters.remove(cluster);
                    state.clusters.give_back_room();
                }
            }
        }
        // A burst (a hundred thousand workspaces deleted) grew the log's room to hold it.
        state.log.give_back_room();
        Self::cool(state);
    }

    /// Cools the oldest hot events while there are too many, too big or too old
    /// ([`HOT_EVENTS`]).
    fn cool(state: &mut HubState) {
        let stale_before = Instant::now().checked_sub(HOT_FOR);
        while state.hot > 0 {
            let Some(oldest_hot) = state.log.get(state.log.len() - state.hot) else {
                break;
            };
            let stale = stale_before.is_some_and(|before| oldest_hot.arrived < before);
            if state.hot <= HOT_EVENTS && state.hot_bytes <= HOT_BYTES && !stale {
                break;
            }
            oldest_hot.cool();
            state.hot -= 1;
            state.hot_bytes -= oldest_hot.encoded.len();
        }
    }

    /// Lets stale events go when none came to do it (see [`Hub::trim`]).
    fn trim_stale(&self) {
        let mut state = self.lock();
        if state.alive {
            self.trim(&mut state);
        }
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
            state.hot = 0;
            state.hot_bytes = 0;
            state.log.clear();
            for log in state.clusters.values_mut() {
                log.events.clear();
                log.published.notify_waiters();
            }
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
pub(crate) struct WatchCache {
    hubs: Arc<Mutex<HashMap<Vec<u8>, Arc<Hub>>>>,
    bytes: Arc<AtomicUsize>,
    /// Events each hub's log keeps, at most ([`MAX_EVENTS`]).
    max_events: usize,
    /// What each hub's log may take, at most ([`HUB_BYTES`]).
    max_bytes: usize,
}

impl Default for WatchCache {
    fn default() -> Self {
        WatchCache::keeping(MAX_EVENTS)
    }
}

/// A watcher's position in its hub's log, or in its cluster's.
struct Watcher {
    hub: Arc<Hub>,
    /// The cluster it watches (`None`: every cluster).
    cluster: Option<Vec<u8>>,
    /// What wakes it: its cluster's publishes, or every publish.
    published: Arc<Notify>,
    hubs: Arc<Mutex<HashMap<Vec<u8>, Arc<Hub>>>>,
    resource_prefix: Vec<u8>,
    last: u64,
    prefix: Vec<u8>,
    filter: Option<Filter>,
}

impl WatchCache {
    /// A cache whose hubs keep at most `max_events` events each (tests overflow a small one).
    pub(crate) fn keeping(max_events: usize) -> WatchCache {
        WatchCache {
            hubs: Arc::default(),
            bytes: Arc::default(),
            max_events: max_events.max(1),
            max_bytes: HUB_BYTES,
        }
    }

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
        order: KeyOrder,
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
                clusters: HashMap::new(),
                bytes: 0,
                hot: 0,
                hot_bytes: 0,
                complete_after: revision,
                alive: true,
                watchers: 0,
            }),
            published: Arc::new(Notify::new()),
            prefix_len: resource_prefix.len(),
            cache_bytes: Arc::clone(&self.bytes),
            max_events: self.max_events,
            max_bytes: self.max_bytes,
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
            let mut trimming = tokio::time::interval(TRIM_EVERY);
            trimming.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                let next = tokio::select! {
                    next = events.next() => next,
                    _ = trimming.tick() => {
                        feeding.trim_stale();
                        continue;
                    }
                };
                let Some(next) = next else {
                    break;
                };
                match next
                    .map_err(RegistryError::from)
                    .and_then(|e| SharedEvent::from_storage(&e, order))
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
        order: KeyOrder,
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
            None => {
                self.start(storage, resource_prefix, order, revision)
                    .await?
            }
        };
        // A watch of one cluster (its prefix goes past the resource's) reads that cluster's log.
        let cluster =
            (prefix.len() > resource_prefix.len()).then(|| hub.cluster_of(&prefix).to_vec());
        let Some(published) = hub.join(revision, cluster.as_deref()) else {
            return Ok(Err(filter));
        };
        let watcher = Watcher {
            hub,
            cluster,
            published,
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
        let (log, complete_after) = match &self.cluster {
            None => (&state.log, state.complete_after),
            Some(cluster) => match state.clusters.get(cluster) {
                Some(log) => (&log.events, log.complete_after),
                None => return Err(None),
            },
        };
        if self.last < complete_after {
            return Err(Some(RegistryError::Expired(format!(
                "too old resource version: {}",
                self.last
            ))));
        }
        let next = log.partition_point(|event| event.revision <= self.last);
        Ok(log.get(next).cloned())
    }

    /// The next event this watcher sees; `None` when the hub is gone.
    async fn next(&mut self) -> Option<Result<WatchEvent, RegistryError>> {
        loop {
            let published = self.published.notified();
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
            if let Some(translated) = SharedEvent::translate(&event, self.filter.as_ref()) {
                return Some(translated);
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
            if let Some(cluster) = &self.cluster
                && let Some(log) = state.clusters.get_mut(cluster)
            {
                log.watchers = log.watchers.saturating_sub(1);
                if log.watchers == 0 && log.events.is_empty() {
                    state.clusters.remove(cluster);
                    state.clusters.give_back_room();
                }
            }
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

    type Watched = futures::stream::BoxStream<'static, Result<WatchEvent, RegistryError>>;

    impl WatchCache {
        /// Every change of the test resource under `prefix` after `revision`, unfiltered.
        async fn watch_from(
            &self,
            storage: &Arc<dyn Storage>,
            prefix: Vec<u8>,
            revision: u64,
        ) -> Result<Result<Watched, Option<Filter>>, RegistryError> {
            let watched = self
                .watch(
                    storage,
                    RESOURCE,
                    KeyOrder::Kubernetes,
                    prefix,
                    revision,
                    None,
                )
                .await?;
            Ok(watched.map(StreamExt::boxed))
        }
    }

    fn stored(name: &str, label: &str, revision: u64) -> KeyValue {
        let object = serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "n", "labels": {"app": label}, "uid": "u"},
            "data": {"k": "v"},
        });
        KeyValue {
            key: Bytes::from(format!("/registry/core/configmaps/c/n/{name}")),
            value: Bytes::from(kcp_apis::messages::to_json(&object)),
            create_revision: 1,
            mod_revision: revision,
            version: 1,
        }
    }

    #[test]
    fn events_are_encoded_as_decoding_and_encoding_would_and_transitions_use_the_previous_state() {
        let selector: Filter =
            Box::new(|object: &Value| object["metadata"]["labels"]["app"] == "a");
        let update = Event {
            kind: EventKind::Put,
            kv: stored("x", "b", 7),
            prev: Some(stored("x", "a", 5)),
        };
        let event = Arc::new(SharedEvent::from_storage(&update, KeyOrder::Kubernetes).unwrap());
        let kind = |event: &Arc<SharedEvent>, filter: Option<&Filter>| {
            SharedEvent::translate(event, filter).map(|e| e.unwrap().kind)
        };
        let decoded = decode(&update.kv).unwrap();
        let unencoded = SharedEvent::decoded_only(&update).unwrap();
        assert_eq!(
            (unencoded.kind, &*unencoded.object),
            ("MODIFIED", &decoded),
            "what a cross-cluster watch sees"
        );
        assert_eq!(*event.object().unwrap(), decoded);
        assert_eq!(event.encoded, kcp_apis::messages::to_json(&decoded));
        // No selector: an update. With one: the object left it.
        assert_eq!(kind(&event, None), Some("MODIFIED"));
        assert_eq!(kind(&event, Some(&selector)), Some("DELETED"));
        // Cooled, it decodes the same again, and tells the same transitions.
        event.cool();
        assert_eq!(*event.object().unwrap(), decoded);
        assert_eq!(kind(&event, Some(&selector)), Some("DELETED"));
        let other: Filter = Box::new(|object: &Value| object["metadata"]["labels"]["app"] == "c");
        assert_eq!(kind(&event, Some(&other)), None, "neither before nor after");

        let delete = Event {
            kind: EventKind::Delete,
            kv: KeyValue {
                value: Bytes::new(),
                ..stored("x", "a", 9)
            },
            prev: Some(stored("x", "a", 7)),
        };
        let event = Arc::new(SharedEvent::from_storage(&delete, KeyOrder::Kubernetes).unwrap());
        let last = decode(&stored("x", "a", 9)).unwrap();
        let unencoded = SharedEvent::decoded_only(&delete).unwrap();
        assert_eq!((unencoded.kind, &*unencoded.object), ("DELETED", &last));
        assert_eq!(
            *event.object().unwrap(),
            last,
            "the last state at the delete's revision"
        );
        assert_eq!(event.encoded, kcp_apis::messages::to_json(&last));
        assert_eq!(kind(&event, Some(&selector)), Some("DELETED"));
        assert_eq!(kind(&event, Some(&other)), None);

        let create = Event {
            kind: EventKind::Put,
            kv: stored("y", "a", 10),
            prev: None,
        };
        let event = Arc::new(SharedEvent::from_storage(&create, KeyOrder::Kubernetes).unwrap());
        assert_eq!(SharedEvent::decoded_only(&create).unwrap().kind, "ADDED");
        assert_eq!(kind(&event, Some(&selector)), Some("ADDED"));
        assert_eq!(kind(&event, None), Some("ADDED"));
    }

    #[tokio::test]
    async fn the_log_is_bounded_by_size_and_a_watcher_behind_it_expires() {
        let storage = memory();
        let cache = WatchCache {
            max_bytes: 32 * 1024 * 1024,
            ..WatchCache::default()
        };
        let start = storage.current_revision().await.unwrap();
        let watch = |revision| cache.watch_from(&storage, RESOURCE.to_vec(), revision);
        let Ok(behind) = watch(start).await.unwrap() else {
            panic!("the first watcher starts the hub")
        };
        let mut behind = Box::pin(behind);
        // 64 events of 2 MiB: four times what one hub may keep here.
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
        assert!(kept <= cache.max_bytes, "the hub keeps {kept} bytes");
        assert!(cache.bytes.load(Ordering::Relaxed) <= cache.max_bytes);
        match behind.next().await {
            Some(Err(RegistryError::Expired(_))) => {}
            other => panic!("a watcher behind the log expires: {other:?}"),
        }
        // A start older than the log is served from storage instead.
        assert!(watch(start).await.unwrap().is_err());
    }

    #[tokio::test]
    async fn a_burst_of_thousands_of_small_events_stays_in_the_window() {
        let storage = memory();
        let cache = WatchCache::default();
        let start = storage.current_revision().await.unwrap();
        let watch = |revision| cache.watch_from(&storage, RESOURCE.to_vec(), revision);
        let mut behind = Box::pin(watch(start).await.unwrap().ok().unwrap());
        // More than the 1,024 events the log once kept: a watcher that has read none of them
        // is still inside the window and gets them all (a smaller count lets the oldest go:
        // `other_clusters_events_do_not_push_a_watcher_out_of_the_window`).
        let mut last = start;
        for i in 0..3000 {
            last = put(&storage, &format!("k{i}"), 10).await;
        }
        // Wait until the hub has published them all, as a watcher at the newest revision sees.
        let mut caught_up = Box::pin(watch(last).await.unwrap().ok().unwrap());
        let marker = put(&storage, "marker", 10).await;
        assert_eq!(caught_up.next().await.unwrap().unwrap().revision, marker);
        for i in 0..3000 {
            let event = behind.next().await.unwrap().unwrap();
            assert_eq!(event.object().unwrap()["metadata"]["name"], format!("k{i}"));
        }
    }

    /// Which events of `hub`'s log keep a decoded object, oldest first.
    fn keeping_decoded(hub: &Hub) -> Vec<bool> {
        let state = hub.lock();
        let events = state.log.iter();
        events.map(|e| e.lock_decoded().object.is_some()).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn only_the_newest_events_keep_what_watchers_decoded() {
        let storage = memory();
        let cache = WatchCache::default();
        let start = storage.current_revision().await.unwrap();
        let tens: Filter = Box::new(|object: &Value| {
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            name.ends_with('0')
        });
        let filtered = cache
            .watch(
                &storage,
                RESOURCE,
                KeyOrder::Kubernetes,
                RESOURCE.to_vec(),
                start,
                Some(tens),
            )
            .await
            .unwrap();
        let mut filtered = Box::pin(filtered.ok().unwrap());
        // The last event is one the selector accepts (k1120), so the watcher reads them all.
        let total = HOT_EVENTS + 97;
        for i in 0..total {
            put(&storage, &format!("k{i}"), 10).await;
        }
        let hub = cache.hub(RESOURCE).unwrap();
        while hub.lock().log.len() < total {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        // The selector decodes every event; what it sees is the same, cooled or not.
        for i in (0..total).filter(|i| i % 10 == 0) {
            let event = filtered.next().await.unwrap().unwrap();
            assert_eq!(event.object().unwrap()["metadata"]["name"], format!("k{i}"));
        }
        let kept = keeping_decoded(&hub);
        assert_eq!(kept.len(), total);
        assert!(!kept[..97].iter().any(|kept| *kept), "the oldest let go");
        assert!(kept[97..].iter().all(|kept| *kept), "the newest keep them");

        // Within the window, but long enough past, none keeps them.
        tokio::time::sleep(HOT_FOR + 2 * TRIM_EVERY).await;
        assert_eq!(hub.lock().log.len(), total);
        assert!(!keeping_decoded(&hub).iter().any(|kept| *kept));
        let state = hub.lock();
        assert_eq!((state.hot, state.hot_bytes), (0, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn events_long_past_leave_the_log_and_older_starts_watch_storage() {
        let storage = memory();
        let cache = WatchCache::default();
        let start = storage.current_revision().await.unwrap();
        let watch = |revision| cache.watch_from(&storage, RESOURCE.to_vec(), revision);
        let mut watcher = Box::pin(watch(start).await.unwrap().ok().unwrap());
        let mut newest = start;
        for i in 0..10 {
            newest = put(&storage, &format!("s{i}"), 10).await;
        }
        for _ in 0..10 {
            watcher.next().await.unwrap().unwrap();
        }
        let hub = cache.hub(RESOURCE).unwrap();
        assert_eq!(hub.lock().log.len(), 10);
        assert!(
            watch(start).await.unwrap().is_ok(),
            "a start before fresh events joins the hub"
        );

        tokio::time::sleep(FRESH_FOR + 2 * TRIM_EVERY).await;
        assert_eq!(
            hub.lock().log.len(),
            0,
            "stale events stayed in the log, the newest too"
        );
        assert!(
            watch(start).await.unwrap().is_err(),
            "a start before the stale events joined the hub"
        );
        assert!(
            watch(newest).await.unwrap().is_ok(),
            "a start at the newest event, gone from the log, did not join the hub"
        );
        // A watcher that had read everything goes on.
        let next = put(&storage, "after", 10).await;
        assert_eq!(watcher.next().await.unwrap().unwrap().revision, next);
    }

    /// A watcher of [`RESOURCE`] from `revision` that joined its hub.
    async fn joined(cache: &WatchCache, storage: &Arc<dyn Storage>, revision: u64) -> Watched {
        cache
            .watch_from(storage, RESOURCE.to_vec(), revision)
            .await
            .unwrap()
            .ok()
            .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_gives_its_room_back_once_it_left_the_log() {
        let storage = memory();
        let cache = WatchCache::default();
        let start = storage.current_revision().await.unwrap();
        let mut watcher = joined(&cache, &storage, start).await;
        const BURST: usize = 5000;
        for i in 0..BURST {
            put(&storage, &format!("b{i}"), 10).await;
        }
        for _ in 0..BURST {
            watcher.next().await.unwrap().unwrap();
        }
        let hub = cache.hub(RESOURCE).unwrap();
        assert!(hub.lock().log.capacity() >= BURST);
        tokio::time::sleep(FRESH_FOR + 2 * TRIM_EVERY).await;
        let state = hub.lock();
        assert_eq!(state.log.len(), 0);
        assert!(
            state.log.capacity() < 64,
            "the log kept room for {}",
            state.log.capacity()
        );
    }

    async fn put_in(storage: &Arc<dyn Storage>, cluster: &str, name: &str) -> u64 {
        let key = [RESOURCE, cluster.as_bytes(), b"/", name.as_bytes()].concat();
        let value = serde_json::json!({"metadata": {"name": name}});
        let value = Bytes::from(serde_json::to_vec(&value).unwrap());
        storage.create(&key, value).await.unwrap().mod_revision
    }

    fn cluster_prefix(cluster: &str) -> Vec<u8> {
        [RESOURCE, cluster.as_bytes(), b"/"].concat()
    }

    #[tokio::test]
    async fn other_clusters_events_do_not_push_a_watcher_out_of_the_window() {
        const KEPT: usize = 1024;
        let storage = memory();
        let cache = WatchCache::keeping(KEPT);
        let start = storage.current_revision().await.unwrap();
        let mut quiet = Box::pin(
            cache
                .watch_from(&storage, cluster_prefix("quiet"), start)
                .await
                .unwrap()
                .ok()
                .unwrap(),
        );
        let mut busy = Box::pin(
            cache
                .watch_from(&storage, cluster_prefix("busy"), start)
                .await
                .unwrap()
                .ok()
                .unwrap(),
        );
        // Three times what the log keeps, all in another cluster.
        for i in 0..3 * KEPT {
            put_in(&storage, "busy", &format!("b{i}")).await;
        }
        let created = put_in(&storage, "quiet", "q").await;
        let event = quiet.next().await.unwrap().unwrap();
        assert_eq!((event.kind, event.revision), ("ADDED", created));
        // The busy cluster's watcher, which did not read, is behind its own cluster's window.
        match busy.next().await {
            Some(Err(RegistryError::Expired(_))) => {}
            other => panic!("a watcher behind its cluster's log expires: {other:?}"),
        }
        drop(busy);
        // A new watcher of the quiet cluster joins from its start: its log reaches back there.
        assert!(
            cache
                .watch_from(&storage, cluster_prefix("quiet"), start)
                .await
                .unwrap()
                .is_ok()
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_watchers_in_many_clusters_get_each_event_once() {
        const CLUSTERS: usize = 50;
        const PER_CLUSTER: usize = 4;
        const EVENTS: usize = 600;
        let storage = memory();
        let cache = WatchCache::default();
        let start = storage.current_revision().await.unwrap();
        let mut readers = Vec::new();
        let watchers = (0..CLUSTERS)
            .flat_map(|c| (0..PER_CLUSTER).map(move |_| Some(format!("c{c}"))))
            .chain([None, None]);
        for cluster in watchers {
            let prefix = cluster.as_deref().map_or(RESOURCE.to_vec(), cluster_prefix);
            let stream = cache
                .watch_from(&storage, prefix, start)
                .await
                .unwrap()
                .ok()
                .unwrap();
            let expected = match &cluster {
                Some(cluster) => (0..EVENTS)
                    .filter(|i| format!("c{}", i % CLUSTERS) == *cluster)
                    .count(),
                None => EVENTS,
            };
            readers.push(tokio::spawn(async move {
                let mut stream = Box::pin(stream);
                let mut seen = Vec::new();
                while seen.len() < expected {
                    let event = stream.next().await.unwrap().unwrap();
                    let object = event.object().unwrap();
                    seen.push((event.revision, object["metadata"]["name"].clone()));
                }
                (cluster, seen)
            }));
        }
        let mut written = Vec::new();
        for i in 0..EVENTS {
            let cluster = format!("c{}", i % CLUSTERS);
            let revision = put_in(&storage, &cluster, &format!("o{i}")).await;
            written.push((cluster, revision, serde_json::json!(format!("o{i}"))));
        }
        for reader in readers {
            let (cluster, seen) = tokio::time::timeout(std::time::Duration::from_secs(30), reader)
                .await
                .expect("every watcher gets its events")
                .unwrap();
            let expected: Vec<_> = written
                .iter()
                .filter(|(c, _, _)| cluster.as_ref().is_none_or(|cluster| c == cluster))
                .map(|(_, revision, name)| (*revision, name.clone()))
                .collect();
            assert_eq!(seen, expected, "{cluster:?}");
        }
    }

    #[tokio::test]
    async fn the_last_watcher_stops_its_hub() {
        let storage = memory();
        let cache = WatchCache::default();
        let start = storage.current_revision().await.unwrap();
        let first = cache
            .watch_from(&storage, RESOURCE.to_vec(), start)
            .await
            .unwrap();
        let second = cache
            .watch_from(&storage, RESOURCE.to_vec(), start)
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
        let mut third = joined(&cache, &storage, revision).await;
        let created = put(&storage, "b", 10).await;
        assert_eq!(third.next().await.unwrap().unwrap().revision, created);
    }
}
