//! A cache of a wildcard watch, keyed by logical cluster, namespace and name.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, RwLock};

use futures::{Stream, StreamExt};
use kube::Resource;
use kube::runtime::watcher;

/// The annotation kcp puts on every object it serves: the object's logical cluster.
pub const CLUSTER_ANNOTATION: &str = "kcp.io/cluster";

/// An object across workspaces: its logical cluster, namespace (empty for cluster-scoped
/// objects) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterKey {
    pub cluster: String,
    pub namespace: String,
    pub name: String,
}

impl ClusterKey {
    /// The key of `object`, as a wildcard watch delivers it; `None` without the cluster
    /// annotation or a name.
    pub fn of<K: Resource>(object: &K) -> Option<ClusterKey> {
        let meta = object.meta();
        Some(ClusterKey {
            cluster: meta.annotations.as_ref()?.get(CLUSTER_ANNOTATION)?.clone(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone()?,
        })
    }
}

impl fmt::Display for ClusterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{}|{}", self.cluster, self.name)
        } else {
            write!(f, "{}|{}/{}", self.cluster, self.namespace, self.name)
        }
    }
}

/// The objects a wildcard watch has seen, by [`ClusterKey`]. Cloning shares it.
pub struct ClusterStore<K> {
    objects: Arc<RwLock<HashMap<ClusterKey, Arc<K>>>>,
}

impl<K> Clone for ClusterStore<K> {
    fn clone(&self) -> Self {
        ClusterStore {
            objects: Arc::clone(&self.objects),
        }
    }
}

impl<K> Default for ClusterStore<K> {
    fn default() -> Self {
        ClusterStore {
            objects: Arc::default(),
        }
    }
}

impl<K> ClusterStore<K> {
    /// The object at `key`, if the watch has it.
    pub fn get(&self, key: &ClusterKey) -> Option<Arc<K>> {
        self.read().get(key).cloned()
    }

    /// Every object, in no particular order.
    pub fn state(&self) -> Vec<Arc<K>> {
        self.read().values().cloned().collect()
    }

    /// How many objects the store holds.
    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<ClusterKey, Arc<K>>> {
        self.objects.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<ClusterKey, Arc<K>>> {
        self.objects.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// What a watch event changed in a store, for a caller that acts on changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changed {
    /// These keys were written or deleted.
    Keys(Vec<ClusterKey>),
    /// A list replaced everything: these keys are all there is now, these others are gone.
    Relisted {
        present: Vec<ClusterKey>,
        gone: Vec<ClusterKey>,
    },
    /// Nothing yet (a list under way).
    Nothing,
}

/// Applies watcher events to a store, as kube-rs's reflector does but keyed by logical cluster.
pub(crate) struct Reflector<K> {
    store: ClusterStore<K>,
    /// Objects of a list under way (kube-rs's `Init` … `InitDone`).
    listing: Option<HashMap<ClusterKey, Arc<K>>>,
}

impl<K: Resource> Reflector<K> {
    pub(crate) fn new(store: ClusterStore<K>) -> Self {
        Reflector {
            store,
            listing: None,
        }
    }

    pub(crate) fn apply(&mut self, event: watcher::Event<K>) -> Changed {
        match event {
            watcher::Event::Apply(object) => match ClusterKey::of(&object) {
                Some(key) => {
                    self.store.write().insert(key.clone(), Arc::new(object));
                    Changed::Keys(vec![key])
                }
                None => Changed::Nothing,
            },
            watcher::Event::Delete(object) => match ClusterKey::of(&object) {
                Some(key) => {
                    self.store.write().remove(&key);
                    Changed::Keys(vec![key])
                }
                None => Changed::Nothing,
            },
            watcher::Event::Init => {
                self.listing = Some(HashMap::new());
                Changed::Nothing
            }
            watcher::Event::InitApply(object) => {
                if let (Some(listing), Some(key)) = (self.listing.as_mut(), ClusterKey::of(&object))
                {
                    listing.insert(key, Arc::new(object));
                }
                Changed::Nothing
            }
            watcher::Event::InitDone => {
                let listed = self.listing.take().unwrap_or_default();
                let mut objects = self.store.write();
                let gone: Vec<ClusterKey> = objects
                    .keys()
                    .filter(|key| !listed.contains_key(*key))
                    .cloned()
                    .collect();
                let present = listed.keys().cloned().collect();
                *objects = listed;
                Changed::Relisted { present, gone }
            }
        }
    }
}

/// A store fed by `events` (a kube-rs watcher over a wildcard client), and the stream of those
/// events, which must be polled for the store to follow. The store is rebuilt whole on every
/// list the watcher makes (first, and after a 410 or a lost connection).
pub fn reflect<K, S>(
    events: S,
) -> (
    ClusterStore<K>,
    impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
)
where
    K: Resource + Clone,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
{
    let store = ClusterStore::default();
    let mut reflector = Reflector::new(store.clone());
    let stream = events.map(move |event| {
        if let Ok(event) = &event {
            reflector.apply(event.clone());
        }
        event
    });
    (store, stream)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    use super::*;

    fn configmap(cluster: &str, name: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                annotations: Some([(CLUSTER_ANNOTATION.to_string(), cluster.to_string())].into()),
                ..ObjectMeta::default()
            },
            ..ConfigMap::default()
        }
    }

    fn key(cluster: &str, name: &str) -> ClusterKey {
        ClusterKey {
            cluster: cluster.into(),
            namespace: "default".into(),
            name: name.into(),
        }
    }

    #[test]
    fn the_same_name_in_two_clusters_is_two_objects_and_a_relist_replaces_all() {
        let store = ClusterStore::default();
        let mut reflector = Reflector::new(store.clone());
        reflector.apply(watcher::Event::Apply(configmap("a", "app")));
        reflector.apply(watcher::Event::Apply(configmap("b", "app")));
        assert_eq!(store.len(), 2);
        assert!(store.get(&key("a", "app")).is_some());
        // A relist (after a 410): only what it lists stays.
        assert_eq!(reflector.apply(watcher::Event::Init), Changed::Nothing);
        reflector.apply(watcher::Event::InitApply(configmap("b", "app")));
        reflector.apply(watcher::Event::InitApply(configmap("c", "new")));
        assert_eq!(
            store.len(),
            2,
            "the old state serves until the list is done"
        );
        let changed = reflector.apply(watcher::Event::InitDone);
        let Changed::Relisted { mut present, gone } = changed else {
            panic!("{changed:?}");
        };
        present.sort();
        assert_eq!(present, vec![key("b", "app"), key("c", "new")]);
        assert_eq!(gone, vec![key("a", "app")]);
        assert!(store.get(&key("a", "app")).is_none());
        reflector.apply(watcher::Event::Delete(configmap("b", "app")));
        assert_eq!(store.len(), 1);
        assert_eq!(key("b", "app").to_string(), "b|default/app");
    }
}
