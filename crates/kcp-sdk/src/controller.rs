//! A controller over one wildcard watch: every object of a kind in every logical cluster.

use std::fmt::{Debug, Display};
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use crate::queue::Queue;
use crate::store::{Changed, ClusterKey, ClusterStore, Reflector};

/// What a reconcile asks for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Look at the object again after this long, changed or not.
    Requeue(Duration),
    /// Look at it again when it changes.
    AwaitChange,
}

/// Reconciles every object a wildcard watch sees (an [`Api::all`] over
/// [`crate::ClusterConfig::wildcard`]): keys are [`ClusterKey`]s, so the same name in two
/// workspaces is two objects; a key is reconciled by one task at a time; a failed reconcile
/// is retried after a delay that doubles per failure (50 ms up to a minute). The watch lists
/// again whenever kube-rs's watcher does (a 410, a restart of the server), and every object
/// listed is reconciled again.
pub struct Controller<K: Resource + Clone> {
    api: Api<K>,
    config: watcher::Config,
    concurrency: usize,
    store: ClusterStore<K>,
}

impl<K> Controller<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    /// A controller of what `api` (a wildcard one) watches.
    pub fn new(api: Api<K>) -> Self {
        Controller {
            api,
            config: watcher::Config::default(),
            concurrency: 16,
            store: ClusterStore::default(),
        }
    }

    /// Watches with `config` (label and field selectors, ...).
    pub fn with_config(mut self, config: watcher::Config) -> Self {
        self.config = config;
        self
    }

    /// Reconciles at most `concurrency` keys at once.
    pub fn with_concurrency(mut self, concurrency: usize) -> Self {
        self.concurrency = concurrency.max(1);
        self
    }

    /// The controller's cache of what it watches.
    pub fn store(&self) -> ClusterStore<K> {
        self.store.clone()
    }

    /// Runs until `stop` completes, calling `reconcile` with each object and its key.
    pub async fn run<F, Fut, E>(self, reconcile: F, stop: impl Future<Output = ()>)
    where
        F: Fn(Arc<K>, ClusterKey) -> Fut,
        Fut: Future<Output = Result<Action, E>>,
        E: Display,
    {
        let mut reflector = Reflector::new(self.store.clone());
        let mut events = pin!(watcher(self.api, self.config).default_backoff());
        let mut stop = pin!(stop);
        let mut queue: Queue<ClusterKey> = Queue::new();
        let mut running = FuturesUnordered::new();
        loop {
            while running.len() < self.concurrency {
                let Some(key) = queue.pop() else { break };
                match self.store.get(&key) {
                    Some(object) => {
                        let reconciled = reconcile(object, key.clone());
                        running.push(async move { (key, reconciled.await) });
                    }
                    // Gone since it was queued: nothing to reconcile.
                    None => {
                        queue.succeeded(&key);
                        queue.done(&key);
                    }
                }
            }
            let due = queue.next_due();
            tokio::select! {
                _ = &mut stop => return,
                event = events.next() => match event {
                    Some(Ok(event)) => match reflector.apply(event) {
                        Changed::Keys(keys) => keys.into_iter().for_each(|key| queue.add(key)),
                        Changed::Relisted { present, .. } => {
                            present.into_iter().for_each(|key| queue.add(key));
                        }
                        Changed::Nothing => {}
                    },
                    Some(Err(error)) => tracing::info!(%error, "watch failed; kube-rs watches again"),
                    None => return,
                },
                Some((key, outcome)) = running.next(), if !running.is_empty() => {
                    match outcome {
                        Ok(Action::AwaitChange) => queue.succeeded(&key),
                        Ok(Action::Requeue(after)) => {
                            queue.succeeded(&key);
                            queue.add_after(key.clone(), after);
                        }
                        Err(error) => {
                            tracing::warn!(%key, %error, "reconcile failed; retrying");
                            queue.retry(key.clone());
                        }
                    }
                    queue.done(&key);
                }
                _ = sleep_until(due), if due.is_some() => {}
            }
        }
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}
