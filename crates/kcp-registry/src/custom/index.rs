//! Which custom resources each logical cluster serves: the resources of its Established
//! CustomResourceDefinitions, interned so that identical CRDs in many clusters share one
//! [`Resource`] (and one compiled schema).
//!
//! The index entries of the clusters serving a CRD hold its resources (`Arc`s); requests,
//! watches and controllers get their own handles ([`ResourceRef`]) from [`Registry::resolve`]
//! and friends. When a CRD is deleted or changes its spec in the last cluster serving that
//! spec, and its last request ends, its resources are freed; the interner only holds weak
//! entries.
//!
//! The index is fed three ways: every CRD write through this registry updates it at once (a
//! client that sees its CRD Established can use it at once), the follower the registry starts ([`Registry::start_crd_follower`], from the composition
//! root) applies
//! the writes of other servers on the same store (and the state at start-up), and a request for
//! a resource the index does not know reads that CRD from storage before answering 404.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use kcp_apis::builtin::{Resource, ResourceRef};
use kcp_apis::custom::{Interner, Resources};
use serde_json::Value;

use crate::error::RegistryError;
use crate::store::{Registry, Target};

/// A CRD's served resources in one cluster.
#[derive(Clone)]
struct Served {
    resources: Resources,
    /// Being deleted: its objects can be read and deleted, not created.
    terminating: bool,
    /// The CRD's resourceVersion this state is from (0: unknown).
    revision: u64,
}

/// The served custom resources of every logical cluster.
#[derive(Default)]
pub(crate) struct CustomResourceIndex {
    interner: Interner,
    /// The resources APIBindings bind, interned by the same interner.
    bound: crate::apis::bound::BoundIndex,
    /// cluster → CRD name → served resources.
    clusters: RwLock<HashMap<String, BTreeMap<String, Served>>>,
}

/// A CRD's resourceVersion as a number (0 when it has none).
fn revision_of(crd: &Value) -> u64 {
    crd["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .unwrap_or(0)
}

/// Whether a CRD's condition `kind` is `True`.
pub fn condition_true(crd: &Value, kind: &str) -> bool {
    status_condition_true(&crd["status"], kind)
}

/// Whether the condition `kind` of a CRD's `status` is `True`.
pub fn status_condition_true(status: &Value, kind: &str) -> bool {
    status["conditions"].as_array().is_some_and(|conditions| {
        conditions
            .iter()
            .any(|c| c["type"] == kind && c["status"] == "True")
    })
}

impl CustomResourceIndex {
    /// What `cluster` serves for `crd`: its name, and its resources if it is Established.
    fn serving<'a>(&self, crd: &'a Value) -> Option<(&'a str, Option<Served>)> {
        let name = crd["metadata"]["name"].as_str()?;
        let served = condition_true(crd, "Established").then(|| Served {
            resources: self.interner.resources(&crd["spec"]),
            terminating: crd["metadata"].get("deletionTimestamp").is_some(),
            revision: revision_of(crd),
        });
        Some((name, served))
    }

    /// Records the state of a CRD of `cluster`, unless a newer one is recorded: the follower
    /// of storage may deliver a state older than a write this server already applied (a CRD
    /// created, then Established by a write the index saw at once), and must not take the
    /// newer state back.
    pub(crate) fn observe(&self, cluster: &str, crd: &Value) {
        let Some((name, served)) = self.serving(crd) else {
            return;
        };
        let revision = revision_of(crd);
        let replaced = {
            let mut clusters = self.clusters.write().unwrap_or_else(|e| e.into_inner());
            let known = clusters
                .get(cluster)
                .and_then(|crds| crds.get(name))
                .map_or(0, |served| served.revision);
            if revision != 0 && known > revision {
                return;
            }
            match served {
                Some(served) => clusters
                    .entry(cluster.to_string())
                    .or_default()
                    .insert(name.to_string(), served),
                None => {
                    let removed = clusters.get_mut(cluster).and_then(|crds| crds.remove(name));
                    if clusters.get(cluster).is_some_and(BTreeMap::is_empty) {
                        clusters.remove(cluster);
                    }
                    removed
                }
            }
        };
        // A replaced spec may be the last holder of a big schema: freed outside the lock.
        drop(replaced);
    }

    /// Stops serving a CRD of `cluster`.
    pub(crate) fn forget(&self, cluster: &str, name: &str) {
        let removed = {
            let mut clusters = self.clusters.write().unwrap_or_else(|e| e.into_inner());
            let Some(crds) = clusters.get_mut(cluster) else {
                return;
            };
            let removed = crds.remove(name);
            if crds.is_empty() {
                clusters.remove(cluster);
            }
            removed
        };
        drop(removed);
    }

    /// Replaces the whole index by these CRDs. The new index is built while the old one still
    /// holds its resources, so specs that stay are shared, not built again.
    fn reset(&self, crds: Vec<(String, Value)>) {
        let mut fresh: HashMap<String, BTreeMap<String, Served>> = HashMap::new();
        for (cluster, crd) in &crds {
            if let Some((name, Some(served))) = self.serving(crd) {
                fresh
                    .entry(cluster.clone())
                    .or_default()
                    .insert(name.to_string(), served);
            }
        }
        let old = std::mem::replace(
            &mut *self.clusters.write().unwrap_or_else(|e| e.into_inner()),
            fresh,
        );
        drop(old);
    }

    fn find(&self, cluster: &str, group: &str, version: &str, plural: &str) -> Option<Served> {
        let clusters = self.clusters.read().unwrap_or_else(|e| e.into_inner());
        clusters
            .get(cluster)?
            .get(&kcp_apis::custom::crd_name(plural, group))
            .filter(|served| served.resources.iter().any(|r| r.version == version))
            .cloned()
    }

    /// The custom resource `plural` of `group/version` that `cluster` serves.
    pub(crate) fn find_resource(
        &self,
        cluster: &str,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<ResourceRef> {
        let served = self.find(cluster, group, version, plural)?;
        let found = served.resources.iter().find(|r| r.version == version)?;
        Some(ResourceRef::from(Arc::clone(found)))
    }

    /// The served resource `plural` of `group/version` in whichever cluster serves it first.
    pub(crate) fn find_anywhere(
        &self,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<ResourceRef> {
        let name = kcp_apis::custom::crd_name(plural, group);
        let clusters = self.clusters.read().unwrap_or_else(|e| e.into_inner());
        clusters.values().find_map(|crds| {
            crds.get(&name)?
                .resources
                .iter()
                .find(|r| r.version == version)
                .cloned()
                .map(ResourceRef::from)
        })
    }

    /// Every served custom resource of `cluster`, CRD by CRD in name order.
    pub(crate) fn served(&self, cluster: &str) -> Vec<ResourceRef> {
        let clusters = self.clusters.read().unwrap_or_else(|e| e.into_inner());
        clusters
            .get(cluster)
            .map(|crds| {
                crds.values()
                    .flat_map(|s| s.resources.iter().cloned().map(ResourceRef::from))
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(crate) fn interner(&self) -> &Interner {
        &self.interner
    }

    pub(crate) fn bound(&self) -> &crate::apis::bound::BoundIndex {
        &self.bound
    }

    /// How many distinct CRD specs have resources alive.
    pub(crate) fn live_specs(&self) -> usize {
        self.interner.live()
    }
}

/// The CustomResourceDefinition resource.
pub(crate) fn crds() -> &'static Resource {
    kcp_apis::builtin::in_group_version("apiextensions.k8s.io", "v1")
        .find(|r| r.name == "customresourcedefinitions")
        .expect("the catalogue has customresourcedefinitions")
}

impl Registry {
    /// The resource `plural` of `group/version` in `cluster` ([`Registry::serves`]), reading
    /// its CRD from storage when the index does not know it (yet): the CRD may have been
    /// written by another server moments ago.
    pub async fn resolve(
        &self,
        cluster: &str,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<ResourceRef> {
        if let Some(served) = self.serves(cluster, group, version, plural) {
            return Some(served);
        }
        let target = Target {
            cluster,
            resource: crds(),
            namespace: None,
        };
        let crd = self
            .get(target, &kcp_apis::custom::crd_name(plural, group))
            .await
            .ok()?;
        self.custom_index().observe(cluster, &crd);
        self.custom_index()
            .find_resource(cluster, group, version, plural)
    }

    /// Whether the CRD (or the APIBinding) behind `resource` is being deleted in `cluster`.
    pub(crate) fn crd_terminating(&self, cluster: &str, resource: &Resource) -> bool {
        if !resource.identity().is_empty() {
            return self.binding_terminating(cluster, resource);
        }
        self.custom_index()
            .find(cluster, &resource.group, &resource.version, &resource.name)
            .is_some_and(|served| served.terminating)
    }

    /// How many distinct CRD specs some logical cluster serves (identical CRDs of many
    /// clusters count once); a spec no cluster serves any more is freed once the last request,
    /// watch or controller using its resources lets go.
    pub fn live_custom_resource_specs(&self) -> usize {
        self.custom_index().live_specs()
    }

    /// Starts keeping the index in step with the CRDs and the APIBindings in storage,
    /// including other servers' writes and the state at start-up (see [`CrdFollower`]). Needs
    /// a tokio runtime.
    pub fn start_crd_follower(&self) -> CrdFollower {
        let crds = self.clone();
        let bindings = self.clone();
        CrdFollower {
            tasks: vec![
                tokio::spawn(async move {
                    crds.follow("CustomResourceDefinitions", Registry::follow_crds_once)
                        .await
                }),
                tokio::spawn(async move {
                    bindings
                        .follow("APIBindings", Registry::follow_bindings_once)
                        .await
                }),
            ],
        }
    }

    /// Runs `once` (a list, then a watch, of what an index follows) again and again, starting
    /// over after an error. Runs until cancelled.
    async fn follow<'a, F, Fut>(&'a self, what: &str, once: F)
    where
        F: Fn(&'a Registry) -> Fut,
        Fut: std::future::Future<Output = Result<(), RegistryError>> + 'a,
    {
        loop {
            if let Err(error) = once(self).await {
                tracing::warn!(%error, "following {what}; starting over");
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
    }

    async fn follow_crds_once(&self) -> Result<(), RegistryError> {
        let (objects, revision) = self
            .list_all_clusters(crds(), &(Box::new(|_: &Value| true) as crate::Filter))
            .await?;
        self.custom_index()
            .reset(objects.into_iter().map(|o| (o.cluster, o.object)).collect());
        let mut events = Box::pin(self.watch_all_clusters(crds(), revision).await?);
        while let Some(event) = events.next().await {
            let event = event?;
            let object = &event.event.object;
            if event.event.kind == "DELETED" {
                if let Some(name) = object["metadata"]["name"].as_str() {
                    self.custom_index().forget(&event.cluster, name);
                }
            } else {
                self.custom_index().observe(&event.cluster, object);
            }
        }
        Ok(())
    }

    /// Applies a CRD write of this registry to the index (not in dry-run mode).
    pub(crate) fn observe_crd_write(&self, target: &Target<'_>, object: &Value, deleted: bool) {
        if self.is_dry_run() || *target.resource != *crds() {
            return;
        }
        match (deleted, object["metadata"]["name"].as_str()) {
            (true, Some(name)) => self.custom_index().forget(target.cluster, name),
            (false, _) => self.custom_index().observe(target.cluster, object),
            _ => {}
        }
    }
}

/// The tasks that keep a registry's index of served custom and bound resources in step with
/// storage ([`Registry::start_crd_follower`]); they stop when this handle is stopped or
/// dropped.
pub struct CrdFollower {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl CrdFollower {
    /// Stops following and waits until the tasks are gone.
    pub async fn stop(mut self) {
        for task in std::mem::take(&mut self.tasks) {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for CrdFollower {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn crd(description: &str) -> Value {
        json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                              "schema": {"openAPIV3Schema": {"type": "object", "description": description}}}]
            },
            "status": {"conditions": [{"type": "Established", "status": "True"}]}
        })
    }

    fn widgets(index: &CustomResourceIndex, cluster: &str) -> std::sync::Weak<[Arc<Resource>]> {
        let served = index.find(cluster, "example.com", "v1", "widgets").unwrap();
        Arc::downgrade(&served.resources)
    }

    #[test]
    fn a_reset_shares_the_specs_that_stay_and_frees_the_others() {
        let index = CustomResourceIndex::default();
        index.observe("root", &crd("a"));
        let before = widgets(&index, "root");
        index.reset(vec![
            ("root".to_string(), crd("a")),
            ("root:b".to_string(), crd("a")),
        ]);
        assert!(before.ptr_eq(&widgets(&index, "root")), "not built again");
        assert!(before.ptr_eq(&widgets(&index, "root:b")));
        assert_eq!(index.live_specs(), 1);
        index.reset(vec![("root".to_string(), crd("b"))]);
        assert!(before.upgrade().is_none());
        assert!(
            index
                .find("root:b", "example.com", "v1", "widgets")
                .is_none()
        );
        assert_eq!(index.live_specs(), 1);
        index.forget("root", "widgets.example.com");
        assert_eq!(index.live_specs(), 0);
    }

    #[test]
    fn an_older_state_does_not_take_a_newer_one_back() {
        let index = CustomResourceIndex::default();
        let at = |revision: u64, established: bool| {
            let mut crd = crd("a");
            crd["metadata"]["resourceVersion"] = json!(revision.to_string());
            if !established {
                crd["status"] = json!({});
            }
            crd
        };
        // Established by a write seen at once; the follower then delivers the create.
        index.observe("root", &at(5, true));
        index.observe("root", &at(3, false));
        assert!(index.find("root", "example.com", "v1", "widgets").is_some());
        // A newer state that is not Established is taken.
        index.observe("root", &at(7, false));
        assert!(index.find("root", "example.com", "v1", "widgets").is_none());
        index.observe("root", &at(9, true));
        assert!(index.find("root", "example.com", "v1", "widgets").is_some());
    }
}
