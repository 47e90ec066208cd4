//! The feed the garbage collector reads: objects of every kind (built-in, kcp's, custom) in
//! every logical cluster, as one list and one watch over the whole store.
//!
//! Only objects that take part in ownership are decoded: those whose stored bytes mention
//! `ownerReferences` or one of the garbage collector's finalizers (a byte search; a false
//! match only costs a decode). Of any other write the feed says where it happened, so that a
//! reader can notice references removed; of a delete, the uid the object had, so that a
//! reader can find its dependents. What the reader keeps is then proportional to the objects
//! with owners, not to the store.

use futures::{Stream, StreamExt};
use kcp_apis::builtin::{Resource, ResourceRef};
use kcp_storage::{Event, EventKind, KeyValue, WatchRequest};
use serde::Deserialize;
use serde_json::Value;

use crate::delete_options::{FOREGROUND_FINALIZER, ORPHAN_FINALIZER};
use crate::error::RegistryError;
use crate::store::{Registry, decode};

/// Every object key begins with it.
const OBJECTS: &[u8] = b"/registry/";

/// Where an object is stored: its logical cluster, resource and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Location {
    pub cluster: String,
    /// The API group, empty for the core group.
    pub group: String,
    /// The resource's plural name as stored (with `:<identity>` for a bound resource).
    pub resource: String,
    /// Empty for a cluster-scoped object.
    pub namespace: String,
    pub name: String,
}

impl Location {
    /// The location a storage key names (`/registry/<group>/<resource>/<cluster>/[<ns>/]<name>`);
    /// `None` for a key of another shape.
    pub fn of_key(key: &[u8]) -> Option<Location> {
        let key = std::str::from_utf8(key.strip_prefix(OBJECTS)?).ok()?;
        let parts: Vec<&str> = key.split('/').collect();
        let (group, resource, cluster, namespace, name) = match parts[..] {
            [group, resource, cluster, name] => (group, resource, cluster, "", name),
            [group, resource, cluster, namespace, name] => {
                (group, resource, cluster, namespace, name)
            }
            _ => return None,
        };
        if [group, resource, cluster, name]
            .iter()
            .any(|p| p.is_empty())
        {
            return None;
        }
        Some(Location {
            cluster: cluster.to_string(),
            group: if group == "core" { "" } else { group }.to_string(),
            resource: resource.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
    }

    /// The resource's plural name without the identity of a bound resource.
    pub fn plural(&self) -> &str {
        self.resource
            .split_once(':')
            .map_or(&self.resource, |(plural, _)| plural)
    }
}

/// A change the ownership feed reports.
#[derive(Debug, Clone, PartialEq)]
pub enum OwnershipEvent {
    /// An object was created or changed; `object` only when it takes part in ownership.
    Written {
        location: Location,
        object: Option<Value>,
    },
    /// An object is gone; its uid, when the store still had its last state.
    Deleted {
        location: Location,
        uid: Option<String>,
    },
}

/// Whether stored bytes may be an object with owners or with a garbage collector's
/// finalizer.
fn takes_part(bytes: &[u8]) -> bool {
    [
        b"\"ownerReferences\"".as_slice(),
        FOREGROUND_FINALIZER.as_bytes(),
        ORPHAN_FINALIZER.as_bytes(),
    ]
    .iter()
    .any(|needle| memchr::memmem::find(bytes, needle).is_some())
}

/// The uid of stored bytes, read without building the object.
fn uid_of(bytes: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Object {
        metadata: Metadata,
    }
    #[derive(Deserialize)]
    struct Metadata {
        uid: Option<String>,
    }
    serde_json::from_slice::<Object>(bytes).ok()?.metadata.uid
}

/// The object of a key-value if it takes part in ownership; `None` if it does not, or does
/// not decode (not an object of ours).
fn participant(kv: &KeyValue) -> Option<Value> {
    if !takes_part(&kv.value) {
        return None;
    }
    decode(kv).ok()
}

impl Registry {
    /// Every object in the store that takes part in ownership, with where it is, read page by
    /// page from one snapshot, and that snapshot's revision (to watch from).
    pub async fn list_ownership(&self) -> Result<(Vec<(Location, Value)>, u64), RegistryError> {
        let mut found = Vec::new();
        let revision = self
            .each_page(OBJECTS, |kv| {
                if let Some(object) = participant(kv)
                    && let Some(location) = Location::of_key(&kv.key)
                {
                    found.push((location, object));
                }
                Ok(())
            })
            .await?;
        Ok((found, revision))
    }

    /// Every change in the store after `revision`, as the ownership feed reports it.
    pub async fn watch_ownership(
        &self,
        revision: u64,
    ) -> Result<
        impl Stream<Item = Result<OwnershipEvent, RegistryError>> + Send + 'static,
        RegistryError,
    > {
        let request = WatchRequest::prefix(OBJECTS, revision.saturating_add(1));
        let events = self.storage().watch(request).await?;
        Ok(events.filter_map(|event| {
            std::future::ready(match event {
                Ok(event) => ownership_event(&event).map(Ok),
                Err(error) => Some(Err(error.into())),
            })
        }))
    }
}

impl Registry {
    /// The resource that serves `kind` of `api_version`'s group in `cluster` (any version:
    /// the store keeps one object for all), what an owner reference names.
    pub fn resolve_kind(
        &self,
        cluster: &str,
        api_version: &str,
        kind: &str,
    ) -> Option<ResourceRef> {
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        self.resolve_by(cluster, group, |r| r.kind == kind)
    }

    /// The resource `plural` of `group` in `cluster` (any version).
    pub fn resolve_plural(&self, cluster: &str, group: &str, plural: &str) -> Option<ResourceRef> {
        self.resolve_by(cluster, group, |r| r.name == plural)
    }

    /// The resource whose objects are stored at `location`.
    pub fn resolve_location(&self, location: &Location) -> Option<ResourceRef> {
        self.resolve_plural(&location.cluster, &location.group, location.plural())
    }

    fn resolve_by(
        &self,
        cluster: &str,
        group: &str,
        matches: impl Fn(&Resource) -> bool,
    ) -> Option<ResourceRef> {
        self.serves_in_group(cluster, group, matches)
    }
}

impl Registry {
    /// Where every object deleted from the store after `revision` was.
    pub async fn watch_deletions(
        &self,
        revision: u64,
    ) -> Result<impl Stream<Item = Result<Location, RegistryError>> + Send + 'static, RegistryError>
    {
        let request = WatchRequest::prefix(OBJECTS, revision.saturating_add(1));
        let events = self.storage().watch(request).await?;
        Ok(events.filter_map(|event| {
            std::future::ready(match event {
                Ok(event) if event.kind == EventKind::Delete => {
                    Location::of_key(&event.kv.key).map(Ok)
                }
                Ok(_) => None,
                Err(error) => Some(Err(error.into())),
            })
        }))
    }
}

fn ownership_event(event: &Event) -> Option<OwnershipEvent> {
    let location = Location::of_key(&event.kv.key)?;
    Some(match event.kind {
        EventKind::Put => OwnershipEvent::Written {
            location,
            object: participant(&event.kv),
        },
        EventKind::Delete => OwnershipEvent::Deleted {
            location,
            uid: event.prev.as_ref().and_then(|prev| uid_of(&prev.value)),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_name_their_location() {
        let namespaced = Location::of_key(b"/registry/core/configmaps/root:a/ns/cm").unwrap();
        assert_eq!(
            namespaced,
            Location {
                cluster: "root:a".into(),
                group: "".into(),
                resource: "configmaps".into(),
                namespace: "ns".into(),
                name: "cm".into(),
            }
        );
        let cluster_scoped = Location::of_key(b"/registry/example.com/widgets:abc/c1/w").unwrap();
        assert_eq!(cluster_scoped.namespace, "");
        assert_eq!(cluster_scoped.group, "example.com");
        assert_eq!(cluster_scoped.plural(), "widgets");
        assert_eq!(Location::of_key(b"/registry/core/configmaps/c"), None);
        assert_eq!(Location::of_key(b"/other/core/configmaps/c/n"), None);
        assert_eq!(Location::of_key(b"/registry/core//c/n"), None);
    }

    #[test]
    fn only_objects_with_owners_or_collector_finalizers_take_part() {
        assert!(takes_part(
            br#"{"metadata":{"ownerReferences":[{"uid":"u"}]}}"#
        ));
        assert!(takes_part(br#"{"metadata":{"finalizers":["orphan"]}}"#));
        assert!(takes_part(
            br#"{"metadata":{"finalizers":["foregroundDeletion"]}}"#
        ));
        assert!(!takes_part(br#"{"metadata":{"name":"plain"}}"#));
        assert_eq!(
            uid_of(br#"{"metadata":{"ownerReferences":[{"uid":"o"}],"uid":"u"}}"#).as_deref(),
            Some("u")
        );
    }
}
