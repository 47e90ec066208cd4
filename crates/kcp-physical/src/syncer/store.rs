//! The syncer's own stores of the synced resources: per resource and side, keyed by the
//! upstream namespace and name, only what the syncer decides with (a few hundred bytes an
//! object, where a whole object in a kube-rs reflector took kilobytes). Writes read the whole
//! object fresh from its server first.
//!
//! A relist fills a new map that replaces the old one at its end (as kube-rs' reflectors do),
//! so a store never looks empty while its side is being listed again.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher;
use serde_json::Value;

use super::assignment::Facts;
use super::transform::synced_digest;
use super::{CLUSTER_LABEL, SYNCED_DIGEST, UPSTREAM_GENERATION, UPSTREAM_NAMESPACE};
use crate::kinds::OWNED_BY_LABEL;

/// An object by its upstream namespace and name.
pub type Key = (String, String);

/// What the syncer keeps of an upstream object.
#[derive(Debug, Clone, PartialEq)]
pub struct Upstream {
    /// Its `kcp.dev/cluster` label.
    pub cluster: Option<String>,
    /// Whether it has a `kcp.dev/owned-by` label (a leaf of a split Deployment).
    pub owned_by: bool,
    /// Being deleted, or made by the server itself: never synced.
    pub ignored: bool,
    /// Whether it is a Deployment that the splitter would spread.
    pub root: bool,
    /// A digest of what is synced of it ([`synced_digest`]).
    pub digest: String,
    /// Its status, as JSON text.
    pub status: Option<Box<str>>,
}

impl Upstream {
    pub fn of(resource: &ApiResource, object: &Value) -> Upstream {
        let labels = &object["metadata"]["labels"];
        let facts = Facts::of(resource, object);
        Upstream {
            cluster: labels[CLUSTER_LABEL].as_str().map(str::to_string),
            owned_by: labels.get(OWNED_BY_LABEL).is_some(),
            ignored: facts.ignored,
            root: facts.root,
            digest: synced_digest(object),
            status: text(&object["status"]),
        }
    }

    /// What [`super::assignment::assignment`] needs of it.
    pub fn facts(&self) -> Facts<'_> {
        Facts {
            cluster: self.cluster.as_deref(),
            root: self.root,
            ignored: self.ignored,
        }
    }

    /// Whether it is a leaf running on `location`.
    pub fn is_leaf_on(&self, location: &str) -> bool {
        self.owned_by && !self.ignored && self.cluster.as_deref() == Some(location)
    }
}

/// What the syncer keeps of a downstream object it wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Downstream {
    pub uid: String,
    /// Its namespace downstream.
    pub namespace: String,
    pub generation: i64,
    /// The upstream generation it was last synced from.
    pub upstream_generation: i64,
    /// The digest of what was last synced.
    pub digest: Option<String>,
    /// Its status, as JSON text.
    pub status: Option<Box<str>>,
}

impl Downstream {
    fn of(object: &Value) -> Downstream {
        let metadata = &object["metadata"];
        let annotations = &metadata["annotations"];
        Downstream {
            uid: metadata["uid"].as_str().unwrap_or_default().to_string(),
            namespace: metadata["namespace"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            generation: metadata["generation"].as_i64().unwrap_or_default(),
            upstream_generation: annotations[UPSTREAM_GENERATION]
                .as_str()
                .and_then(|g| g.parse().ok())
                .unwrap_or_default(),
            digest: annotations[SYNCED_DIGEST].as_str().map(str::to_string),
            status: text(&object["status"]),
        }
    }

    /// Its status, if any.
    pub fn status(&self) -> Value {
        parse(self.status.as_deref())
    }
}

fn text(value: &Value) -> Option<Box<str>> {
    (!value.is_null()).then(|| value.to_string().into_boxed_str())
}

/// JSON text back as a value (null for none).
pub fn parse(text: Option<&str>) -> Value {
    text.and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or(Value::Null)
}

/// One side's item: its key and what is kept.
pub type Item<T> = (Key, T);

/// The item of `object` on the upstream side.
pub fn upstream_item(resource: &ApiResource, object: &DynamicObject) -> Option<Item<Upstream>> {
    let key = (
        object.metadata.namespace.clone()?,
        object.metadata.name.clone()?,
    );
    let value = serde_json::to_value(object).ok()?;
    Some((key, Upstream::of(resource, &value)))
}

/// The item of `object` on the downstream side (keyed by its upstream namespace).
pub fn downstream_item(object: &DynamicObject) -> Option<Item<Downstream>> {
    let namespace = object
        .metadata
        .annotations
        .as_ref()?
        .get(UPSTREAM_NAMESPACE)?
        .clone();
    let key = (namespace, object.metadata.name.clone()?);
    let value = serde_json::to_value(object).ok()?;
    Some((key, Downstream::of(&value)))
}

/// A store of one side of one resource.
pub struct Store<T> {
    inner: Mutex<Inner<T>>,
}

struct Inner<T> {
    live: HashMap<Key, T>,
    /// Being filled by a relist.
    next: Option<HashMap<Key, T>>,
}

impl<T: Clone> Default for Store<T> {
    fn default() -> Self {
        Store {
            inner: Mutex::new(Inner {
                live: HashMap::new(),
                next: None,
            }),
        }
    }
}

impl<T: Clone> Store<T> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner<T>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies a watch event; says which keys it touched (all of them after a relist).
    pub fn apply(&self, event: watcher::Event<Option<Item<T>>>) -> Vec<Key> {
        let mut inner = self.lock();
        match event {
            watcher::Event::Init => {
                inner.next = Some(HashMap::new());
                Vec::new()
            }
            watcher::Event::InitApply(Some((key, item))) => {
                inner.next.get_or_insert_default().insert(key, item);
                Vec::new()
            }
            watcher::Event::InitDone => {
                let next = inner.next.take().unwrap_or_default();
                let mut keys: Vec<Key> = inner.live.keys().cloned().collect();
                keys.extend(next.keys().cloned());
                inner.live = next;
                keys
            }
            watcher::Event::Apply(Some((key, item))) => {
                inner.live.insert(key.clone(), item);
                vec![key]
            }
            watcher::Event::Delete(Some((key, _))) => {
                inner.live.remove(&key);
                vec![key]
            }
            watcher::Event::InitApply(None)
            | watcher::Event::Apply(None)
            | watcher::Event::Delete(None) => Vec::new(),
        }
    }

    pub fn get(&self, key: &Key) -> Option<T> {
        self.lock().live.get(key).cloned()
    }

    /// Every key and item.
    pub fn all(&self) -> Vec<Item<T>> {
        self.lock()
            .live
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The keys in the upstream namespace `namespace`.
    pub fn keys_in(&self, namespace: &str) -> Vec<Key> {
        self.lock()
            .live
            .keys()
            .filter(|(ns, _)| ns == namespace)
            .cloned()
            .collect()
    }

    /// Whether some item in the upstream namespace `namespace` passes `test`.
    pub fn any_in(&self, namespace: &str, test: impl Fn(&T) -> bool) -> bool {
        self.lock()
            .live
            .iter()
            .any(|((ns, _), item)| ns == namespace && test(item))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_relist_replaces_the_store_at_its_end() {
        let store: Store<i32> = Store::default();
        let key = |n: &str| ("default".to_string(), n.to_string());
        store.apply(watcher::Event::Apply(Some((key("a"), 1))));
        store.apply(watcher::Event::Init);
        store.apply(watcher::Event::InitApply(Some((key("b"), 2))));
        assert_eq!(store.get(&key("a")), Some(1), "still there while relisting");
        let touched = store.apply(watcher::Event::InitDone);
        assert_eq!(touched.len(), 2);
        assert_eq!(store.get(&key("a")), None);
        assert_eq!(store.get(&key("b")), Some(2));
        assert_eq!(store.keys_in("default"), [key("b")]);
    }

    #[test]
    fn what_is_kept_of_each_side() {
        let gvk = kube::core::GroupVersionKind::gvk("apps", "v1", "Deployment");
        let deployments = ApiResource::from_gvk_with_plural(&gvk, "deployments");
        let up = json!({
            "metadata": {"name": "web--east", "namespace": "shop", "labels": {"kcp.dev/cluster": "east", "kcp.dev/owned-by": "web"}},
            "spec": {"replicas": 2}, "status": {"replicas": 1},
        });
        let kept = Upstream::of(&deployments, &up);
        assert!(kept.is_leaf_on("east") && !kept.root && !kept.ignored);
        assert_eq!(parse(kept.status.as_deref()), json!({"replicas": 1}));
        assert_eq!(kept.digest, synced_digest(&up));
        let down = super::super::transform(&up, None, "root:team", "east");
        let mut down = down;
        down["metadata"]["uid"] = json!("d1");
        down["metadata"]["generation"] = json!(4);
        let kept = Downstream::of(&down);
        assert_eq!(
            (kept.uid.as_str(), kept.generation, kept.upstream_generation),
            ("d1", 4, 0)
        );
        assert_eq!(kept.digest.as_deref(), Some(synced_digest(&up).as_str()));
        assert_eq!(kept.namespace, "kcp-root-team-shop");
    }
}
