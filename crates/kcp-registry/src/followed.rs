//! Values read from storage and kept until a write to what they were read from: a follower
//! watches a few resources across all logical clusters (started by the first read) and drops
//! the value each event concerns. A value is kept only when read while the follower was
//! watching and no event of its key arrived during the read (it may predate the event); while
//! the follower is not watching (before it starts, between a failed watch and the next) every
//! read goes to storage. Authorization keeps each cluster's RBAC policy this way, service
//! account authentication its lookups.

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use kcp_apis::builtin::Resource;

use crate::RegistryError;
use crate::room::GiveBackRoom;
use crate::store::Registry;
use crate::wildcard::ClusterEvent;

/// Which kept value an event of `resource` concerns.
pub type KeyOf<K> = fn(&'static Resource, &ClusterEvent) -> K;

struct State<K, V> {
    kept: HashMap<K, V>,
    /// Reads under way, per key.
    reading: HashMap<K, usize>,
    /// Keys with a read under way that an event of theirs arrived during.
    changed_while_reading: HashSet<K>,
    /// Whether the follower is watching now; `epoch` counts its (re)starts.
    watching: bool,
    epoch: u64,
}

/// Values kept until their objects change.
pub struct Followed<K, V> {
    /// What the follower says in its log.
    name: &'static str,
    resources: Vec<&'static Resource>,
    key_of: KeyOf<K>,
    state: Mutex<State<K, V>>,
    follower: OnceLock<tokio::task::JoinHandle<()>>,
}

impl<K, V> Followed<K, V>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Clone + Send + 'static,
{
    /// Values dropped on events of `resources`, by the key `key_of` gives.
    pub fn new(name: &'static str, resources: Vec<&'static Resource>, key_of: KeyOf<K>) -> Self {
        Followed {
            name,
            resources,
            key_of,
            state: Mutex::new(State {
                kept: HashMap::new(),
                reading: HashMap::new(),
                changed_while_reading: HashSet::new(),
                watching: false,
                epoch: 0,
            }),
            follower: OnceLock::new(),
        }
    }

    /// The value of `key`: kept, or else read by `read` (and kept if it may be). A kept value
    /// is found without allocating a key.
    pub async fn get<Q, F, Fut>(
        self: &Arc<Self>,
        registry: &Registry,
        key: &Q,
        read: F,
    ) -> Result<V, RegistryError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<V, RegistryError>>,
    {
        self.follower.get_or_init(|| self.follow(registry.clone()));
        let epoch = {
            let mut state = self.state.lock().unwrap();
            if let Some(kept) = state.kept.get(key) {
                return Ok(kept.clone());
            }
            *state.reading.entry(key.to_owned()).or_default() += 1;
            state.watching.then_some(state.epoch)
        };
        let value = read().await;
        let mut state = self.state.lock().unwrap();
        let changed = state.changed_while_reading.contains(key);
        match state.reading.get_mut(key) {
            Some(count) if *count > 1 => *count -= 1,
            _ => {
                state.reading.remove(key);
                state.reading.give_back_room();
                state.changed_while_reading.remove(key);
                state.changed_while_reading.give_back_room();
            }
        }
        let value = value?;
        let trusted = epoch.is_some_and(|e| state.watching && state.epoch == e);
        if trusted && !changed {
            state.kept.insert(key.to_owned(), value.clone());
        }
        Ok(value)
    }

    fn follow(self: &Arc<Self>, registry: Registry) -> tokio::task::JoinHandle<()> {
        let followed = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                if let Err(error) = followed.follow_once(&registry).await {
                    tracing::warn!(follower = followed.name, %error, "lost track; following again");
                }
                {
                    let mut state = followed.state.lock().unwrap();
                    state.watching = false;
                    state.kept.clear();
                }
                // Not a busy loop when storage is unavailable.
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    }

    async fn follow_once(&self, registry: &Registry) -> Result<(), RegistryError> {
        let start = registry.current_revision().await?;
        let mut watches = Vec::new();
        for &resource in &self.resources {
            let events = registry
                .watch_all_clusters(resource, start)
                .await?
                .map(move |event| event.map(|e| (resource, e)));
            watches.push(events.boxed());
        }
        {
            let mut state = self.state.lock().unwrap();
            state.kept.clear();
            state.watching = true;
            state.epoch += 1;
        }
        let mut events = futures::stream::select_all(watches);
        while let Some(event) = events.next().await {
            let (resource, event) = event?;
            let key = (self.key_of)(resource, &event);
            let mut state = self.state.lock().unwrap();
            state.kept.remove(&key);
            state.kept.give_back_room();
            if state.reading.contains_key(&key) {
                state.changed_while_reading.insert(key);
            }
        }
        Err(RegistryError::Internal(format!(
            "the {} watch ended",
            self.name
        )))
    }
}
