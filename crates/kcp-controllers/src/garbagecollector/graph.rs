//! What the garbage collector knows between events: the objects that have owners, who their
//! owners are, and which objects wait on one of its finalizers. Every entry is about an object
//! with owner references or being deleted with `orphan` or `foregroundDeletion`; a workspace
//! without them costs nothing here. Owners are known by their logical cluster and uid, so an
//! owner in another logical cluster never matches.

use std::collections::{HashMap, HashSet};

use kcp_registry::delete_options::{FOREGROUND_FINALIZER, ORPHAN_FINALIZER};
use kcp_registry::ownership::{Location, OwnershipEvent};
use kcp_registry::room::GiveBackRoom;
use serde_json::Value;

/// An owner as a dependent's `metadata.ownerReferences` names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnerRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
    /// `blockOwnerDeletion`: a foreground deletion of the owner waits for this dependent.
    pub blocking: bool,
}

impl OwnerRef {
    /// The owner references of `object` that name an owner completely (others never match).
    pub(crate) fn all_of(object: &Value) -> Vec<OwnerRef> {
        let Some(references) = object["metadata"]["ownerReferences"].as_array() else {
            return Vec::new();
        };
        references
            .iter()
            .filter_map(|reference| {
                let field = |name: &str| {
                    reference[name]
                        .as_str()
                        .filter(|v| !v.is_empty())
                        .map(str::to_string)
                };
                Some(OwnerRef {
                    api_version: field("apiVersion")?,
                    kind: field("kind")?,
                    name: field("name")?,
                    uid: field("uid")?,
                    blocking: reference["blockOwnerDeletion"] == Value::Bool(true),
                })
            })
            .collect()
    }
}

/// An object with owners.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Node {
    uid: String,
    owners: Vec<OwnerRef>,
}

/// An owner in a logical cluster: `(cluster, uid)`.
type OwnerId = (String, String);

/// What an event asks the collector to do.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Work {
    /// See whether the dependent's owners are gone, or wait for it, and act.
    Dependent(Location),
    /// Serve the `orphan` or `foregroundDeletion` finalizer of an object being deleted.
    Finalizer(Location),
}

/// The ownership graph.
#[derive(Default)]
pub(crate) struct Graph {
    /// Objects with owner references.
    nodes: HashMap<Location, Node>,
    /// Each owner's dependents.
    dependents: HashMap<OwnerId, HashSet<Location>>,
    /// Objects being deleted with one of the collector's finalizers, and their uid.
    finalizing: HashMap<Location, String>,
    /// Those of them deleted in the foreground (waiting for their dependents).
    foreground: HashSet<Location>,
    finalizing_by_uid: HashMap<OwnerId, Location>,
}

/// A dependent of an owner, as an owner's finalizer needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dependent {
    pub location: Location,
    /// Whether its reference to the owner has `blockOwnerDeletion`.
    pub blocking: bool,
}

impl Graph {
    /// Forgets everything (before a fresh list).
    pub(crate) fn clear(&mut self) {
        *self = Graph::default();
    }

    /// Takes in a listed object; answers the work it needs.
    pub(crate) fn listed(&mut self, location: Location, object: &Value) -> Vec<Work> {
        self.apply(OwnershipEvent::Written {
            location,
            object: Some(object.clone()),
        })
    }

    /// Takes in a change; answers the work it needs.
    pub(crate) fn apply(&mut self, event: OwnershipEvent) -> Vec<Work> {
        let mut work = Vec::new();
        match event {
            OwnershipEvent::Written { location, object } => {
                let object = object.unwrap_or(Value::Null);
                let uid = object["metadata"]["uid"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let owners = OwnerRef::all_of(&object);
                if owners.is_empty() {
                    self.remove_node(&location, &mut work);
                } else {
                    self.set_node(location.clone(), uid.clone(), owners, &mut work);
                }
                let deleting = object["metadata"]["deletionTimestamp"].is_string();
                let finalizers = object["metadata"]["finalizers"].as_array();
                let has = |name: &str| finalizers.is_some_and(|f| f.iter().any(|v| v == name));
                if deleting && (has(ORPHAN_FINALIZER) || has(FOREGROUND_FINALIZER)) {
                    self.set_finalizing(location.clone(), uid, has(FOREGROUND_FINALIZER));
                    work.push(Work::Finalizer(location));
                } else {
                    self.remove_finalizing(&location);
                }
            }
            OwnershipEvent::Deleted { location, uid } => {
                self.remove_node(&location, &mut work);
                self.remove_finalizing(&location);
                match uid {
                    Some(uid) => {
                        let id = (location.cluster.clone(), uid);
                        if let Some(dependents) = self.dependents.get(&id) {
                            work.extend(dependents.iter().cloned().map(Work::Dependent));
                        }
                    }
                    // The store lost the object's last state: every dependent naming an owner
                    // of that name in that cluster looks again.
                    None => work.extend(
                        self.nodes
                            .iter()
                            .filter(|(dependent, node)| {
                                dependent.cluster == location.cluster
                                    && node.owners.iter().any(|o| o.name == location.name)
                            })
                            .map(|(dependent, _)| Work::Dependent(dependent.clone())),
                    ),
                }
            }
        }
        work
    }

    fn set_node(
        &mut self,
        location: Location,
        uid: String,
        owners: Vec<OwnerRef>,
        work: &mut Vec<Work>,
    ) {
        let next = Node { uid, owners };
        if self.nodes.get(&location) == Some(&next) {
            return;
        }
        self.remove_node(&location, work);
        for owner in &next.owners {
            self.dependents
                .entry((location.cluster.clone(), owner.uid.clone()))
                .or_default()
                .insert(location.clone());
        }
        self.nodes.insert(location.clone(), next);
        work.push(Work::Dependent(location));
    }

    /// Forgets a dependent; its owners waiting for their dependents look again.
    fn remove_node(&mut self, location: &Location, work: &mut Vec<Work>) {
        let Some(node) = self.nodes.remove(location) else {
            return;
        };
        self.nodes.give_back_room();
        for owner in node.owners {
            let id = (location.cluster.clone(), owner.uid);
            if let Some(dependents) = self.dependents.get_mut(&id) {
                dependents.remove(location);
                if dependents.is_empty() {
                    self.dependents.remove(&id);
                    self.dependents.give_back_room();
                }
            }
            if let Some(owner) = self.finalizing_by_uid.get(&id) {
                work.push(Work::Finalizer(owner.clone()));
            }
        }
    }

    fn set_finalizing(&mut self, location: Location, uid: String, foreground: bool) {
        self.remove_finalizing(&location);
        if foreground {
            self.foreground.insert(location.clone());
        }
        self.finalizing_by_uid
            .insert((location.cluster.clone(), uid.clone()), location.clone());
        self.finalizing.insert(location, uid);
    }

    fn remove_finalizing(&mut self, location: &Location) {
        if self.foreground.remove(location) {
            self.foreground.give_back_room();
        }
        if let Some(uid) = self.finalizing.remove(location) {
            self.finalizing_by_uid
                .remove(&(location.cluster.clone(), uid));
            self.finalizing.give_back_room();
            self.finalizing_by_uid.give_back_room();
        }
    }

    /// The dependents of the owner `uid` in `cluster`.
    pub(crate) fn dependents_of(&self, cluster: &str, uid: &str) -> Vec<Dependent> {
        let id = (cluster.to_string(), uid.to_string());
        let Some(dependents) = self.dependents.get(&id) else {
            return Vec::new();
        };
        dependents
            .iter()
            .map(|location| Dependent {
                location: location.clone(),
                blocking: self
                    .nodes
                    .get(location)
                    .is_some_and(|node| node.owners.iter().any(|o| o.uid == uid && o.blocking)),
            })
            .collect()
    }

    /// The uid of the object at `location` if it has dependents or is being finalized.
    pub(crate) fn uid_at(&self, location: &Location) -> Option<&str> {
        self.finalizing
            .get(location)
            .map(String::as_str)
            .or_else(|| self.nodes.get(location).map(|node| node.uid.as_str()))
    }

    /// Whether one of the dependents of the owner `uid` in `cluster` is itself being deleted in
    /// the foreground (waiting for its own dependents): a possible ownership cycle.
    pub(crate) fn a_dependent_waits(&self, cluster: &str, uid: &str) -> bool {
        let id = (cluster.to_string(), uid.to_string());
        self.dependents
            .get(&id)
            .is_some_and(|dependents| dependents.iter().any(|d| self.foreground.contains(d)))
    }

    /// Whether the object `uid` in `cluster` has dependents.
    pub(crate) fn has_dependents(&self, cluster: &str, uid: &str) -> bool {
        self.dependents
            .contains_key(&(cluster.to_string(), uid.to_string()))
    }

    /// How many objects with owners the graph holds.
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn at(cluster: &str, name: &str) -> Location {
        Location {
            cluster: cluster.into(),
            group: String::new(),
            resource: "configmaps".into(),
            namespace: "ns".into(),
            name: name.into(),
        }
    }

    fn owned_by(uid: &str, owner_uid: &str, blocking: bool) -> Value {
        json!({"metadata": {"uid": uid, "ownerReferences": [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_uid,
            "blockOwnerDeletion": blocking,
        }]}})
    }

    fn written(location: Location, object: Value) -> OwnershipEvent {
        OwnershipEvent::Written {
            location,
            object: Some(object),
        }
    }

    #[test]
    fn an_owner_gone_sends_its_dependents_to_be_checked_in_its_cluster_only() {
        let mut graph = Graph::default();
        let work = graph.apply(written(at("a", "d1"), owned_by("d1", "o", false)));
        assert_eq!(work, vec![Work::Dependent(at("a", "d1"))]);
        // The same uid in another cluster is another owner.
        graph.apply(written(at("b", "d2"), owned_by("d2", "o", false)));
        // Written again unchanged: nothing to do.
        assert!(
            graph
                .apply(written(at("a", "d1"), owned_by("d1", "o", false)))
                .is_empty()
        );
        let work = graph.apply(OwnershipEvent::Deleted {
            location: at("a", "owner"),
            uid: Some("o".into()),
        });
        assert_eq!(work, vec![Work::Dependent(at("a", "d1"))]);
        assert_eq!(graph.len(), 2);
    }

    #[test]
    fn a_finalizing_owner_looks_again_when_a_dependent_goes() {
        let mut graph = Graph::default();
        graph.apply(written(at("a", "d"), owned_by("d", "o", true)));
        let deleting = json!({"metadata": {
            "uid": "o", "deletionTimestamp": "2026-01-01T00:00:00Z",
            "finalizers": ["foregroundDeletion"],
        }});
        assert_eq!(
            graph.apply(written(at("a", "owner"), deleting)),
            vec![Work::Finalizer(at("a", "owner"))]
        );
        assert_eq!(
            graph.dependents_of("a", "o"),
            vec![Dependent {
                location: at("a", "d"),
                blocking: true
            }]
        );
        let work = graph.apply(OwnershipEvent::Deleted {
            location: at("a", "d"),
            uid: Some("d".into()),
        });
        assert_eq!(work, vec![Work::Finalizer(at("a", "owner"))]);
        assert!(graph.dependents_of("a", "o").is_empty());
        assert_eq!(graph.len(), 0);
        // Its finalizer served, the owner is no longer waited on.
        graph.apply(OwnershipEvent::Written {
            location: at("a", "owner"),
            object: None,
        });
        assert_eq!(graph.uid_at(&at("a", "owner")), None);
    }

    #[test]
    fn references_removed_leave_the_graph() {
        let mut graph = Graph::default();
        graph.apply(written(at("a", "d"), owned_by("d", "o", false)));
        assert!(graph.has_dependents("a", "o"));
        graph.apply(OwnershipEvent::Written {
            location: at("a", "d"),
            object: None,
        });
        assert!(!graph.has_dependents("a", "o"));
        assert_eq!(graph.len(), 0);
    }

    #[test]
    fn an_owner_whose_last_state_was_lost_is_matched_by_name() {
        let mut graph = Graph::default();
        graph.apply(written(at("a", "d"), owned_by("d", "o", false)));
        let work = graph.apply(OwnershipEvent::Deleted {
            location: at("a", "owner"),
            uid: None,
        });
        assert_eq!(work, vec![Work::Dependent(at("a", "d"))]);
        let elsewhere = graph.apply(OwnershipEvent::Deleted {
            location: at("b", "owner"),
            uid: None,
        });
        assert!(elsewhere.is_empty());
    }

    #[test]
    fn incomplete_references_name_no_owner() {
        let object = json!({"metadata": {"ownerReferences": [
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "x"},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "y", "uid": "u"},
        ]}});
        let owners = OwnerRef::all_of(&object);
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].uid, "u");
    }
}
