//! The reads a service account token's authentication needs (its account's uid, its Secret's
//! uid and token), kept between requests: a value is read once and dropped as soon as a write
//! to its object is seen. A follower watches ServiceAccounts and Secrets across all logical
//! clusters for that, started by the first lookup. A value is kept only when read while the
//! follower was watching, and no write to its object arrived during the read; while the
//! follower is not watching (before it starts, between a failed watch and the next) every
//! lookup reads storage.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use crate::error::RegistryError;
use crate::store::{Registry, Target};

/// An object: its logical cluster, resource (`serviceaccounts` or `secrets`), namespace, name.
pub(crate) type ObjectKey = (String, &'static str, String, String);

/// What authentication needs of an object, or `None` when it does not exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) uid: String,
    /// A Secret's `data.token`, decoded.
    pub(crate) token: Option<Vec<u8>>,
}

#[derive(Default)]
struct State {
    seen: HashMap<ObjectKey, Option<Seen>>,
    building: HashMap<ObjectKey, usize>,
    changed_while_building: HashSet<ObjectKey>,
    /// Whether the follower is watching now; `epoch` counts its (re)starts.
    watching: bool,
    epoch: u64,
}

/// The kept lookups of one registry.
#[derive(Default)]
pub(crate) struct Lookups {
    state: Mutex<State>,
    follower: OnceLock<tokio::task::JoinHandle<()>>,
}

const RESOURCES: [&str; 2] = ["serviceaccounts", "secrets"];

fn core(resource: &str) -> &'static kcp_apis::builtin::Resource {
    kcp_apis::builtin::in_group_version("", "v1")
        .find(|r| r.name == resource)
        .expect("a core resource")
}

impl Lookups {
    /// The object `key`, from what is kept or else from storage through `registry`.
    pub(crate) async fn seen(
        self: &Arc<Self>,
        registry: &Registry,
        key: ObjectKey,
    ) -> Result<Option<Seen>, RegistryError> {
        self.follower.get_or_init(|| self.follow(registry.clone()));
        let epoch = {
            let mut state = self.state.lock().unwrap();
            if let Some(seen) = state.seen.get(&key) {
                return Ok(seen.clone());
            }
            *state.building.entry(key.clone()).or_default() += 1;
            state.watching.then_some(state.epoch)
        };
        let read = read(registry, &key).await;
        let mut state = self.state.lock().unwrap();
        let changed = state.changed_while_building.contains(&key);
        match state.building.get_mut(&key) {
            Some(count) if *count > 1 => *count -= 1,
            _ => {
                state.building.remove(&key);
                state.changed_while_building.remove(&key);
            }
        }
        let seen = read?;
        let trusted = epoch.is_some_and(|e| state.watching && state.epoch == e);
        if trusted && !changed {
            state.seen.insert(key, seen.clone());
        }
        Ok(seen)
    }

    fn follow(self: &Arc<Self>, registry: Registry) -> tokio::task::JoinHandle<()> {
        let lookups = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                if let Err(error) = lookups.follow_once(&registry).await {
                    tracing::warn!(%error, "service account follower lost track; following again");
                }
                {
                    let mut state = lookups.state.lock().unwrap();
                    state.watching = false;
                    state.seen.clear();
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    }

    async fn follow_once(&self, registry: &Registry) -> Result<(), RegistryError> {
        let start = registry.current_revision().await?;
        let mut watches = Vec::new();
        for resource in RESOURCES {
            let name: &'static str = resource;
            let events = registry
                .watch_all_clusters(core(resource), start)
                .await?
                .map(move |event| event.map(|e| (name, e)));
            watches.push(events.boxed());
        }
        {
            let mut state = self.state.lock().unwrap();
            state.seen.clear();
            state.watching = true;
            state.epoch += 1;
        }
        let mut events = futures::stream::select_all(watches);
        while let Some(event) = events.next().await {
            let (resource, event) = event?;
            let object = &event.event.object;
            let key = (
                event.cluster,
                resource,
                text(object, "namespace"),
                text(object, "name"),
            );
            let mut state = self.state.lock().unwrap();
            state.seen.remove(&key);
            if state.building.contains_key(&key) {
                state.changed_while_building.insert(key);
            }
        }
        Err(RegistryError::Internal(
            "the service account watch ended".into(),
        ))
    }
}

fn text(object: &Value, field: &str) -> String {
    object["metadata"][field]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

async fn read(registry: &Registry, key: &ObjectKey) -> Result<Option<Seen>, RegistryError> {
    let (cluster, resource, namespace, name) = key;
    let target = Target {
        cluster,
        resource: core(resource),
        namespace: Some(namespace),
    };
    let object = match registry.get(target, name).await {
        Ok(object) => object,
        Err(RegistryError::NotFound { .. }) => return Ok(None),
        Err(error) => return Err(error),
    };
    use base64::Engine;
    let token = object["data"]["token"]
        .as_str()
        .and_then(|data| base64::engine::general_purpose::STANDARD.decode(data).ok());
    Ok(Some(Seen {
        uid: text(&object, "uid"),
        token,
    }))
}
