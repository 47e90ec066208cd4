//! The namespace deletion controller: empties terminating namespaces and finalizes them.
//!
//! One task serves every logical cluster. It lists the terminating namespaces of all clusters,
//! then follows one watch of namespaces across all clusters, and queues `(cluster, name)` of
//! each namespace that carries a deletionTimestamp. A few reconciles run at once
//! ([`reconcile`]): delete the namespace's content, come back after a second while finalizers
//! hold some of it (as kube's controller does), then remove `kubernetes` from
//! `spec.finalizers`, which removes the namespace. A broken watch (compaction, storage
//! restart) is followed by a fresh list.

mod reconcile;

use std::pin::Pin;
use std::time::Duration;

use futures::stream::{FuturesUnordered, Stream, StreamExt};
use kcp_registry::{ClusterEvent, Filter, Registry, RegistryError};
use serde_json::Value;
use tokio::sync::watch;

use crate::queue::WorkQueue;
pub use reconcile::{Outcome, reconcile};

/// How many namespaces are reconciled at once.
const WORKERS: usize = 8;
/// The wait before listing again after the watch broke.
const RESYNC_DELAY: Duration = Duration::from_secs(1);
/// The wait before looking again at a namespace whose content finalizers still hold.
const CONTENT_REMAINING_DELAY: Duration = Duration::from_secs(1);

/// A namespace in a logical cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub cluster: String,
    pub name: String,
}

type Events = Pin<Box<dyn Stream<Item = Result<ClusterEvent, RegistryError>> + Send>>;

fn namespaces() -> &'static kcp_apis::builtin::Resource {
    kcp_apis::builtin::in_group_version("", "v1")
        .find(|r| r.name == "namespaces")
        .expect("the catalogue has namespaces")
}

fn deleting(namespace: &Value) -> bool {
    namespace["metadata"]["deletionTimestamp"].is_string()
}

/// Lists the terminating namespaces of every cluster into `queue` and watches from there.
async fn list_and_watch(
    registry: &Registry,
    queue: &mut WorkQueue<Key>,
) -> Result<Events, RegistryError> {
    let filter: Filter = Box::new(deleting);
    let (terminating, revision) = registry.list_all_clusters(namespaces(), &filter).await?;
    for found in terminating {
        let name = found.object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        queue.add(Key {
            cluster: found.cluster,
            name,
        });
    }
    Ok(Box::pin(
        registry.watch_all_clusters(namespaces(), revision).await?,
    ))
}

/// Runs the controller until `stop` turns true.
pub async fn run(registry: Registry, mut stop: watch::Receiver<bool>) {
    let mut queue = WorkQueue::new();
    let mut events: Option<Events> = None;
    let mut resync_at = Some(tokio::time::Instant::now());
    let mut in_flight = FuturesUnordered::new();
    loop {
        if events.is_none() && resync_at.is_some_and(|at| at <= tokio::time::Instant::now()) {
            match list_and_watch(&registry, &mut queue).await {
                Ok(stream) => {
                    events = Some(stream);
                    resync_at = None;
                }
                Err(error) => {
                    tracing::warn!(%error, "namespace controller: listing namespaces failed");
                    resync_at = Some(tokio::time::Instant::now() + RESYNC_DELAY);
                }
            }
        }
        while in_flight.len() < WORKERS {
            let Some(key) = queue.next() else { break };
            let registry = registry.clone();
            in_flight.push(async move {
                let outcome = reconcile(&registry, &key.cluster, &key.name).await;
                (key, outcome)
            });
        }
        let wake_at = [queue.next_deadline(), resync_at]
            .into_iter()
            .flatten()
            .min();
        tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => return,
            event = next_event(&mut events) => match event {
                Some(Ok(ClusterEvent { cluster, event })) => {
                    if event.kind != "DELETED" && deleting(&event.object) {
                        let name = event.object["metadata"]["name"].as_str().unwrap_or_default();
                        queue.add(Key { cluster, name: name.to_string() });
                    }
                }
                Some(Err(error)) => {
                    tracing::info!(%error, "namespace controller: watch broke; listing again");
                    events = None;
                    resync_at = Some(tokio::time::Instant::now() + RESYNC_DELAY);
                }
                None => {
                    events = None;
                    resync_at = Some(tokio::time::Instant::now() + RESYNC_DELAY);
                }
            },
            Some((key, outcome)) = in_flight.next(), if !in_flight.is_empty() => {
                queue.done(&key);
                match outcome {
                    Ok(Outcome::Finished) => queue.forget(&key),
                    Ok(Outcome::ContentRemaining) => {
                        queue.forget(&key);
                        queue.add_after(key, CONTENT_REMAINING_DELAY);
                    }
                    Err(error) => {
                        tracing::warn!(cluster = %key.cluster, namespace = %key.name, %error, "namespace controller: retrying");
                        queue.add_rate_limited(key);
                    }
                }
            }
            _ = sleep_until(wake_at), if wake_at.is_some() => {}
        }
    }
}

/// The next watch event, or never while there is no watch.
async fn next_event(events: &mut Option<Events>) -> Option<Result<ClusterEvent, RegistryError>> {
    match events {
        Some(stream) => stream.next().await,
        None => std::future::pending().await,
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}
