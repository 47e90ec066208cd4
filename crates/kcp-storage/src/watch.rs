//! Watch fan-out shared by the backends that commit locally (in-memory, embedded).
//!
//! A backend publishes every committed batch of events to a [`WatchHub`] once; each watcher
//! filters the shared batches by its key range. A watcher first replays history from the
//! backend's [`EventSource`] and then follows the live feed. A watcher that falls behind the
//! hub's buffer re-reads the gap from the event source instead of losing events, and ends with
//! [`StorageError::Compacted`] only if that history is gone.
//!
//! Ordering argument: a watcher subscribes before it reads the current revision, and a backend
//! publishes only after the revision is visible, so every revision is either replayed from the
//! source or received from the feed (or both; duplicates are dropped by revision).

use std::sync::Arc;

use tokio::sync::broadcast;

use crate::{Event, KeyRange, Result, Revision, StorageError, WatchRequest, WatchStream};

/// Most events one replay step reads from the event source before yielding them.
const REPLAY_CHUNK: usize = 1024;

/// Read access to committed history, for replaying a watch.
pub trait EventSource: Send + Sync + 'static {
    /// Events in `range` with revisions from `from` on, through `to`, in order: complete
    /// revisions only, stopping after the revision at which `limit` events were reached.
    fn events(
        &self,
        range: &KeyRange,
        from: Revision,
        to: Revision,
        limit: usize,
    ) -> Result<Vec<Event>>;

    /// The revision of the last visible write.
    fn current_revision(&self) -> Revision;

    /// History before this revision is gone.
    fn compacted_revision(&self) -> Revision;
}

/// Fans committed event batches out to watchers.
#[derive(Debug, Clone)]
pub struct WatchHub {
    sender: broadcast::Sender<Arc<[Event]>>,
}

impl WatchHub {
    /// A hub that buffers up to `capacity` batches for slow watchers before they must re-read.
    pub fn new(capacity: usize) -> Self {
        let (sender, _) = broadcast::channel(capacity.max(1));
        WatchHub { sender }
    }

    /// Publishes one committed batch, in revision order. Call only after the batch's revisions
    /// are visible to [`EventSource::current_revision`] and reads.
    pub fn publish(&self, events: Vec<Event>) {
        if !events.is_empty() {
            // No receivers is fine: nobody is watching.
            let _ = self.sender.send(events.into());
        }
    }

    /// Starts a watch: replays history from the source, then follows published batches.
    pub fn watch(
        &self,
        source: Arc<dyn EventSource>,
        request: WatchRequest,
    ) -> Result<WatchStream> {
        let mut feed = self.sender.subscribe();
        let current = source.current_revision();
        let mut next = match request.start_revision {
            0 => current + 1,
            start => start,
        };
        let compacted = source.compacted_revision();
        if next < compacted {
            return Err(StorageError::Compacted {
                requested: next,
                compacted,
            });
        }
        let range = request.range;
        Ok(Box::pin(async_stream::stream! {
            // Catch up to the revision seen at subscription time, then follow the feed.
            let mut caught_up_to = current;
            loop {
                while next <= caught_up_to {
                    let chunk = match read_chunk(&source, &range, next, caught_up_to).await {
                        Ok(chunk) => chunk,
                        Err(error) => {
                            yield Err(error);
                            return;
                        }
                    };
                    next = match chunk.last() {
                        Some(last) if chunk.len() >= REPLAY_CHUNK => last.revision() + 1,
                        _ => caught_up_to + 1,
                    };
                    for event in chunk {
                        yield Ok(event);
                    }
                }
                match feed.recv().await {
                    Ok(batch) => {
                        for event in batch.iter() {
                            if event.revision() >= next && range.contains(&event.kv.key) {
                                yield Ok(event.clone());
                            }
                        }
                        if let Some(last) = batch.last() {
                            next = next.max(last.revision() + 1);
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        caught_up_to = source.current_revision();
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        }))
    }
}

/// Reads one chunk of events in `range` with revisions in `[from, to]` from the source, off the
/// async threads since sources may do blocking I/O.
async fn read_chunk(
    source: &Arc<dyn EventSource>,
    range: &KeyRange,
    from: Revision,
    to: Revision,
) -> Result<Vec<Event>> {
    let source = Arc::clone(source);
    let range = range.clone();
    tokio::task::spawn_blocking(move || source.events(&range, from, to, REPLAY_CHUNK))
        .await
        .map_err(|e| StorageError::Internal(format!("watch replay task failed: {e}")))?
}
