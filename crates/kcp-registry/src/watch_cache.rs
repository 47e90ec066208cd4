//! The watch cache: one storage watch per resource for every logical cluster at once, whose
//! events are decoded and JSON-encoded once and then fanned out to every watcher of that
//! resource, whatever its cluster, namespace or selector.
//!
//! Each resource has a hub, started by its first watcher at that watcher's revision. The hub
//! keeps the last [`BUFFER`] events, so a watcher starting at or after the hub's window joins
//! without a storage watch of its own; older starts fall back to a direct storage watch (see
//! [`crate::watch`]). A watcher that falls too far behind the broadcast catches up from the
//! buffer, or ends with 410 Expired when the buffer no longer reaches back to it, and the
//! client lists again, as with kube-apiserver's watch cache.
//!
//! There is no per-cluster state: thousands of clusters share the hubs of the resources they
//! watch.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use futures::{Stream, StreamExt};
use kcp_storage::{Event, EventKind, Storage, WatchRequest};
use serde_json::Value;
use tokio::sync::broadcast;

use crate::error::RegistryError;
use crate::list::Filter;
use crate::meta;
use crate::store::decode;
use crate::watch::WatchEvent;

/// Events each hub keeps for late joiners and lagging watchers.
const BUFFER: usize = 1024;
/// Events in flight to each watcher before it counts as lagging.
const CHANNEL: usize = 256;

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
        let encoded = Bytes::from(serde_json::to_vec(&object).unwrap_or_default());
        Ok(SharedEvent {
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

/// The buffered events a watcher replays, and its receiver for the ones after them.
type Joined = (
    VecDeque<Arc<SharedEvent>>,
    broadcast::Receiver<Arc<SharedEvent>>,
);

struct HubState {
    buffer: VecDeque<Arc<SharedEvent>>,
    /// Every event after this revision is in `buffer` (or still to come).
    complete_after: u64,
    sender: broadcast::Sender<Arc<SharedEvent>>,
    alive: bool,
}

struct Hub {
    state: Mutex<HubState>,
}

impl Hub {
    fn lock(&self) -> MutexGuard<'_, HubState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The buffered events after `revision` and a receiver for the ones after them, or `None`
    /// if the buffer no longer reaches back to `revision`.
    fn join(&self, revision: u64) -> Option<Joined> {
        let state = self.lock();
        if !state.alive || revision < state.complete_after {
            return None;
        }
        let replay = state
            .buffer
            .iter()
            .filter(|e| e.revision > revision)
            .cloned()
            .collect();
        Some((replay, state.sender.subscribe()))
    }

    fn publish(&self, event: SharedEvent) {
        let event = Arc::new(event);
        let mut state = self.lock();
        if state.buffer.len() == BUFFER
            && let Some(oldest) = state.buffer.pop_front()
        {
            state.complete_after = oldest.revision;
        }
        state.buffer.push_back(Arc::clone(&event));
        let _ = state.sender.send(event);
    }
}

/// The hubs of one store, one per resource prefix, shared by every clone of the registry.
#[derive(Default)]
pub(crate) struct WatchCache {
    hubs: Mutex<HashMap<Vec<u8>, Arc<Hub>>>,
}

/// A watcher's position: pending replayed events, then the live receiver.
struct Watcher {
    hub: Arc<Hub>,
    replay: VecDeque<Arc<SharedEvent>>,
    receiver: broadcast::Receiver<Arc<SharedEvent>>,
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
            .watch(WatchRequest::prefix(resource_prefix.to_vec(), revision + 1))
            .await?;
        let (sender, _) = broadcast::channel(CHANNEL);
        let hub = Arc::new(Hub {
            state: Mutex::new(HubState {
                buffer: VecDeque::new(),
                complete_after: revision,
                sender,
                alive: true,
            }),
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
        tokio::spawn(async move {
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
            // Watchers see their channel close and end; the next watcher starts a new hub.
            let mut state = feeding.lock();
            state.alive = false;
            let (closed, _) = broadcast::channel(1);
            state.sender = closed;
        });
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
        let Some((replay, receiver)) = hub.join(revision) else {
            return Ok(Err(filter));
        };
        let watcher = Watcher {
            hub,
            replay,
            receiver,
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
}

impl Watcher {
    /// The next event this watcher sees; `None` when the hub is gone.
    async fn next(&mut self) -> Option<Result<WatchEvent, RegistryError>> {
        loop {
            let event = match self.replay.pop_front() {
                Some(event) => event,
                None => match self.receiver.recv().await {
                    Ok(event) => event,
                    Err(broadcast::error::RecvError::Lagged(_)) => match self.hub.join(self.last) {
                        Some((replay, receiver)) => {
                            self.replay = replay;
                            self.receiver = receiver;
                            continue;
                        }
                        None => {
                            return Some(Err(RegistryError::Expired(format!(
                                "too old resource version: {}",
                                self.last
                            ))));
                        }
                    },
                    Err(broadcast::error::RecvError::Closed) => return None,
                },
            };
            // Registry writes touch one key per revision, so a watcher that rejoins after its
            // last revision neither misses nor repeats an event.
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
