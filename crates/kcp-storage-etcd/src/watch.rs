//! Watches on etcd's Watch service that survive broken connections.
//!
//! Each [`Storage::watch`](kcp_storage::Storage::watch) opens its own bidirectional stream with
//! one etcd watch on it, always with `prev_kv` and never with `fragment`, so etcd delivers whole
//! revisions per response. The stream remembers the revision after the last one it delivered;
//! when the connection breaks (member killed, connection reset, stream ended) it reopens a watch
//! from exactly there, with capped exponential backoff and on any member, so no event is lost or
//! repeated. If that revision has been compacted meanwhile, the stream yields
//! [`StorageError::Compacted`] and ends.
//!
//! This module owns the watch protocol and resumption; it must not know connection handling
//! (see `client`) or the KV calls beyond asking for revisions.

use std::sync::Arc;
use std::time::Duration;

use kcp_storage::{Result, Revision, StorageError, WatchRequest, WatchStream};

use crate::client::WatchConnection;
use crate::convert::{from_wire, to_wire};
use crate::error::{Failure, classify, describe, is_unavailable};
use crate::proto;
use crate::storage::Shared;

const BACKOFF_START: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Starts a watch. The start revision is made explicit first (0 becomes current + 1) and checked
/// against compaction, so a compacted start fails here rather than in the stream; then the watch
/// is created and confirmed before the stream is returned.
pub(crate) async fn watch(shared: Arc<Shared>, request: WatchRequest) -> Result<WatchStream> {
    let (key, range_end) = shared.keys.range(&request.range);
    let start = match request.start_revision {
        0 => shared.current_revision().await? + 1,
        start => {
            shared.check_not_compacted(start).await?;
            start
        }
    };
    let target = Target { key, range_end };
    let connection = match shared.client.watch(target.create(start)).await {
        Ok(connection) => connection,
        Err(status) => return Err(watch_error(&shared, status, start).await),
    };
    Ok(Box::pin(resuming(shared, target, start, connection)))
}

/// The etcd key range a watch covers.
struct Target {
    key: Vec<u8>,
    range_end: Vec<u8>,
}

impl Target {
    fn create(&self, start: Revision) -> proto::WatchCreateRequest {
        proto::WatchCreateRequest {
            key: self.key.clone(),
            range_end: self.range_end.clone(),
            start_revision: to_wire(start),
            prev_kv: true,
            ..Default::default()
        }
    }
}

async fn watch_error(shared: &Shared, status: tonic::Status, start: Revision) -> StorageError {
    match classify(&status) {
        Failure::Compacted => shared.revision_error(status, start).await,
        _ => crate::error::to_storage_error(&status),
    }
}

/// Capped exponential backoff between reconnection attempts.
struct Backoff {
    next: Duration,
}

impl Backoff {
    fn new() -> Self {
        Backoff {
            next: BACKOFF_START,
        }
    }

    fn reset(&mut self) {
        self.next = BACKOFF_START;
    }

    async fn wait(&mut self) {
        tokio::time::sleep(self.next).await;
        self.next = (self.next * 2).min(BACKOFF_MAX);
    }
}

/// The events of `target` from `next` on, reading `connection` and reconnecting when it breaks.
fn resuming(
    shared: Arc<Shared>,
    target: Target,
    mut next: Revision,
    connection: WatchConnection,
) -> impl futures::Stream<Item = Result<kcp_storage::Event>> + Send {
    async_stream::stream! {
        let mut connection = Some(connection);
        let mut backoff = Backoff::new();
        let mut failed_attempts = 0u32;
        loop {
            let mut current = match connection.take() {
                Some(current) => current,
                None => match shared.client.watch(target.create(next)).await {
                    Ok(current) => {
                        tracing::info!(member = %current.member, next, failed_attempts, "etcd watch resumed");
                        failed_attempts = 0;
                        current
                    }
                    Err(status) if is_unavailable(&status) => {
                        // One warning per outage; the retries after it are routine.
                        if failed_attempts == 0 {
                            tracing::warn!(next, error = %describe(&status), "etcd watch cannot resume yet; retrying");
                        } else {
                            tracing::debug!(next, error = %describe(&status), "etcd watch cannot resume yet; retrying");
                        }
                        failed_attempts += 1;
                        backoff.wait().await;
                        continue;
                    }
                    Err(status) => {
                        yield Err(watch_error(&shared, status, next).await);
                        return;
                    }
                },
            };
            // Read until the stream breaks; every complete response is delivered in full before
            // the next one is read, so `next` is always a revision boundary.
            let cause = loop {
                let response = match current.responses.message().await {
                    Ok(Some(response)) => response,
                    Ok(None) => break "etcd ended the watch stream".to_string(),
                    Err(status) => break describe(&status),
                };
                backoff.reset();
                if response.canceled {
                    if response.compact_revision > 0 {
                        yield Err(StorageError::Compacted {
                            requested: next,
                            compacted: from_wire(response.compact_revision),
                        });
                    } else {
                        yield Err(StorageError::Internal(format!(
                            "etcd canceled the watch: {}",
                            response.cancel_reason
                        )));
                    }
                    return;
                }
                let mut last = None;
                for event in response.events {
                    match shared.keys.event(event) {
                        // Events before `next` were delivered already (never sent by etcd for a
                        // watch started at `next`; the check keeps resumption exact regardless).
                        Ok(event) if event.revision() < next => {}
                        Ok(event) => {
                            last = Some(event.revision());
                            yield Ok(event);
                        }
                        Err(error) => {
                            yield Err(error);
                            return;
                        }
                    }
                }
                if let Some(last) = last {
                    next = last + 1;
                }
            };
            tracing::warn!(member = %current.member, next, cause = %cause, "etcd watch broke; resuming");
            drop(current);
            // Waiting even before the first attempt keeps a member that accepts and at once drops
            // watches from being hammered; the backoff restarts whenever a response arrives.
            backoff.wait().await;
        }
    }
}
