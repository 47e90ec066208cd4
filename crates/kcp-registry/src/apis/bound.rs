//! The resources each logical cluster's APIBindings bind: the `served` layer between kcp's
//! own kinds and the cluster's CRDs (kcp's order: system CRDs, then bound ones, then local
//! ones).
//!
//! A binding serves what its `status.boundResources` names: each an APIResourceSchema of the
//! export's logical cluster (`status.apiExportClusterName`), checked by UID, served like a CRD
//! of that spec under the export's identity hash (`Resource::identity`), so its objects are
//! stored under `<resource>:<identity>`, apart from a local CRD's and another export's.
//! Resources are interned by spec and identity: the thousand consumers of one export share one
//! set.
//!
//! Fed like the CRD index: the binding controller applies what it writes at once
//! ([`Registry::observe_binding`]), and the follower started with the CRD one
//! ([`Registry::start_crd_follower`]) applies every binding in storage, other servers' writes
//! included.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, RwLock};

use futures::StreamExt;
use kcp_apimachinery::object::text;
use kcp_apis::builtin::{Resource, ResourceRef};
use kcp_apis::custom::{Interner, Resources};
use serde::Deserialize;
use serde_json::Value;

use crate::error::RegistryError;
use crate::store::{Registry, Target};

/// One binding's resources in one cluster.
#[derive(Clone)]
struct Bound {
    resources: Vec<Resources>,
    /// The export's logical cluster and name.
    export: (String, String),
    /// The claims it accepted: group, resource and selector.
    accepted: Vec<(String, String, Value)>,
    /// Being deleted: its objects can be read and deleted, not created.
    terminating: bool,
    /// The binding's resourceVersion this state is from (0: unknown).
    revision: u64,
}

/// The bound resources of every logical cluster: cluster → binding name → resources.
#[derive(Default)]
pub(crate) struct BoundIndex {
    clusters: RwLock<HashMap<String, BTreeMap<String, Bound>>>,
    /// The resources of each schema a binding serves, by (export cluster, schema name, UID,
    /// identity), held weakly: schemas never change (a new one has another UID), so a
    /// binding's resources come from here without reading its schema, whichever of a million
    /// bindings of one export is read at start-up.
    schemas: std::sync::Mutex<HashMap<SchemaKey, std::sync::Weak<[Arc<Resource>]>>>,
    /// The bindings (cluster, name) of each export (its cluster and name), kept with
    /// `clusters` (under its lock): whether an export is bound is asked on every binding's
    /// change, and its view asks which bindings accepted a claim on every request.
    exports: std::sync::Mutex<ExportBindings>,
}

/// What the index reads of an APIBinding (at start-up, of every binding in the store: a part,
/// never the whole objects).
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct BindingPart {
    metadata: PartMeta,
    spec: PartSpec,
    status: PartStatus,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct PartMeta {
    name: String,
    #[serde(rename = "resourceVersion")]
    resource_version: String,
    #[serde(rename = "deletionTimestamp")]
    deletion_timestamp: Option<Value>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct PartSpec {
    reference: Value,
    #[serde(rename = "permissionClaims")]
    permission_claims: Vec<Value>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct PartStatus {
    #[serde(rename = "apiExportClusterName")]
    export_cluster: String,
    #[serde(rename = "boundResources")]
    bound_resources: Vec<Value>,
}

type SchemaKey = (String, String, String, String);

/// Each export's (cluster, name) bindings, by their (cluster, name).
type ExportBindings = HashMap<(String, String), BTreeSet<(String, String)>>;

impl BoundIndex {
    fn set(&self, cluster: &str, name: &str, bound: Option<Bound>) {
        let replaced = {
            let mut clusters = self.clusters.write().unwrap_or_else(|e| e.into_inner());
            let known_entry = clusters
                .get(cluster)
                .and_then(|bindings| bindings.get(name));
            let known = known_entry.map_or(0, |bound| bound.revision);
            let revision = bound.as_ref().map_or(0, |b| b.revision);
            if revision != 0 && known > revision {
                return;
            }
            // At the same revision, what binds wins: the binding controller observes the
            // status it is about to write (at the revision it read), and the follower's view
            // of the stored object at that revision must not undo it before the write's own
            // event comes (an endpoint slice reconciled meanwhile would miss its URL).
            let binds = |b: Option<&Bound>| b.is_some_and(|b| !b.export.0.is_empty());
            if revision != 0 && known == revision && binds(known_entry) && !binds(bound.as_ref()) {
                return;
            }
            let mut exports = self.exports.lock().unwrap_or_else(|e| e.into_inner());
            let location = (cluster.to_string(), name.to_string());
            if let Some(old) = clusters.get(cluster).and_then(|b| b.get(name)) {
                unlist(&mut exports, &old.export, &location);
            }
            if let Some(new) = bound.as_ref().filter(|b| !b.export.0.is_empty()) {
                exports
                    .entry(new.export.clone())
                    .or_default()
                    .insert(location);
            }
            drop(exports);
            // A binding that binds no resources (an export of claims alone) is kept too: it
            // makes its cluster part of the export's view.
            match bound {
                Some(bound) if !bound.export.0.is_empty() => clusters
                    .entry(cluster.to_string())
                    .or_default()
                    .insert(name.to_string(), bound),
                _ => {
                    let removed = clusters.get_mut(cluster).and_then(|b| b.remove(name));
                    if clusters.get(cluster).is_some_and(BTreeMap::is_empty) {
                        clusters.remove(cluster);
                    }
                    removed
                }
            }
        };
        drop(replaced);
    }

    fn reset(&self, fresh: HashMap<String, BTreeMap<String, Bound>>) {
        let mut counts: ExportBindings = HashMap::new();
        for (cluster, bindings) in &fresh {
            for (name, bound) in bindings {
                counts
                    .entry(bound.export.clone())
                    .or_default()
                    .insert((cluster.clone(), name.clone()));
            }
        }
        let mut clusters = self.clusters.write().unwrap_or_else(|e| e.into_inner());
        let old = std::mem::replace(&mut *clusters, fresh);
        *self.exports.lock().unwrap_or_else(|e| e.into_inner()) = counts;
        drop(clusters);
        drop(old);
    }

    /// The first bound resource of `cluster` that `matches`, and whether its binding is being
    /// deleted.
    fn find(
        &self,
        cluster: &str,
        matches: impl Fn(&Resource) -> bool,
    ) -> Option<(ResourceRef, bool)> {
        let clusters = self.clusters.read().unwrap_or_else(|e| e.into_inner());
        clusters.get(cluster)?.values().find_map(|bound| {
            bound
                .resources
                .iter()
                .flat_map(|set| set.iter())
                .find(|r| matches(r))
                .map(|r| (ResourceRef::from(r.clone()), bound.terminating))
        })
    }

    /// A bound resource of any cluster that `matches`.
    fn find_anywhere(&self, matches: impl Fn(&Resource) -> bool) -> Option<ResourceRef> {
        let clusters = self.clusters.read().unwrap_or_else(|e| e.into_inner());
        clusters
            .values()
            .flat_map(|b| b.values())
            .find_map(|bound| {
                bound
                    .resources
                    .iter()
                    .flat_map(|set| set.iter())
                    .find(|r| matches(r))
                    .map(|r| ResourceRef::from(r.clone()))
            })
    }

    /// The clusters whose binding to the export `name` of `cluster` accepted a claim on
    /// `resource` of `group`, each with the claim's selector.
    fn accepted(
        &self,
        cluster: &str,
        name: &str,
        group: &str,
        resource: &str,
    ) -> Vec<(String, Value)> {
        let clusters = self.clusters.read().unwrap_or_else(|e| e.into_inner());
        let exports = self.exports.lock().unwrap_or_else(|e| e.into_inner());
        let Some(bindings) = exports.get(&(cluster.to_string(), name.to_string())) else {
            return Vec::new();
        };
        bindings
            .iter()
            .filter_map(|(at, binding)| {
                let bound = clusters.get(at)?.get(binding)?;
                let (_, _, selector) = bound
                    .accepted
                    .iter()
                    .find(|(g, r, _)| g == group && r == resource)?;
                Some((at.clone(), selector.clone()))
            })
            .collect()
    }

    /// Whether some cluster binds the export `name` of `cluster`.
    fn binds(&self, cluster: &str, name: &str) -> bool {
        let exports = self.exports.lock().unwrap_or_else(|e| e.into_inner());
        exports.contains_key(&(cluster.to_string(), name.to_string()))
    }

    /// Every bound resource of `cluster`, binding by binding in name order.
    fn served(&self, cluster: &str) -> Vec<ResourceRef> {
        let clusters = self.clusters.read().unwrap_or_else(|e| e.into_inner());
        clusters
            .get(cluster)
            .map(|bindings| {
                bindings
                    .values()
                    .flat_map(|b| b.resources.iter().flat_map(|set| set.iter()))
                    .map(|r| ResourceRef::from(r.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Takes the binding at `location` off `export`'s list.
fn unlist(exports: &mut ExportBindings, export: &(String, String), location: &(String, String)) {
    if let Some(bindings) = exports.get_mut(export) {
        bindings.remove(location);
        if bindings.is_empty() {
            exports.remove(export);
        }
    }
}

/// `plural` split into the resource and the identity of `<resource>:<identity>`.
pub fn split_identity(plural: &str) -> (&str, &str) {
    plural.split_once(':').unwrap_or((plural, ""))
}

impl Registry {
    fn bound_index(&self) -> &BoundIndex {
        self.custom_index().bound()
    }

    /// The bound resource `plural` of `group/version` in `cluster`; in the wildcard cluster
    /// only when `plural` names its identity (`<resource>:<identityHash>`, as kcp requires).
    pub(crate) fn bound_resource(
        &self,
        cluster: &str,
        group: &str,
        version: &str,
        plural: &str,
    ) -> Option<ResourceRef> {
        if cluster == crate::ALL_CLUSTERS {
            let (name, identity) = split_identity(plural);
            if identity.is_empty() {
                return None;
            }
            return self.bound_index().find_anywhere(|r| {
                r.group == group
                    && r.version == version
                    && r.name == name
                    && r.identity() == identity
            });
        }
        self.bound_index()
            .find(cluster, |r| {
                r.group == group && r.version == version && r.name == plural
            })
            .map(|(resource, _)| resource)
    }

    /// The first bound resource of `cluster` that `matches`.
    pub(crate) fn bound_matching(
        &self,
        cluster: &str,
        matches: impl Fn(&Resource) -> bool,
    ) -> Option<ResourceRef> {
        self.bound_index()
            .find(cluster, matches)
            .map(|(resource, _)| resource)
    }

    /// A bound resource of some cluster named `plural` of `group/version`, whatever its
    /// identity (metadata-only wildcard requests).
    pub fn bound_anywhere(&self, group: &str, version: &str, plural: &str) -> Option<ResourceRef> {
        self.bound_index()
            .find_anywhere(|r| r.group == group && r.version == version && r.name == plural)
    }

    /// Every version of the bound resource `plural` of `group` served under `identity`, as
    /// some cluster's binding serves it (empty when no cluster binds it).
    pub fn bound_with_identity(
        &self,
        group: &str,
        plural: &str,
        identity: &str,
    ) -> Vec<ResourceRef> {
        let clusters = self
            .bound_index()
            .clusters
            .read()
            .unwrap_or_else(|e| e.into_inner());
        clusters
            .values()
            .flat_map(|b| b.values())
            .flat_map(|bound| bound.resources.iter())
            .find(|set| {
                set.iter()
                    .any(|r| r.group == group && r.name == plural && r.identity() == identity)
            })
            .map(|set| {
                set.iter()
                    .filter(|r| r.group == group && r.name == plural)
                    .map(|r| ResourceRef::from(r.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Every resource `cluster`'s APIBindings bind.
    pub fn bound_resources(&self, cluster: &str) -> Vec<ResourceRef> {
        self.bound_index().served(cluster)
    }

    /// The APIExport (its logical cluster and name) whose binding in `cluster` binds `resource`
    /// of `group`, if one does.
    pub fn bound_export(
        &self,
        cluster: &str,
        group: &str,
        resource: &str,
    ) -> Option<(String, String)> {
        let clusters = self
            .bound_index()
            .clusters
            .read()
            .unwrap_or_else(|e| e.into_inner());
        clusters.get(cluster)?.values().find_map(|bound| {
            bound
                .resources
                .iter()
                .flat_map(|set| set.iter())
                .any(|r| r.group == group && r.name == resource)
                .then(|| bound.export.clone())
        })
    }

    /// The logical clusters whose APIBinding to the APIExport `name` of `cluster` accepted its
    /// claim on `resource` of `group`, each with the claim's selector (`{matchAll: true}`, or
    /// labels and expressions).
    pub fn accepted_claims(
        &self,
        cluster: &str,
        name: &str,
        group: &str,
        resource: &str,
    ) -> Vec<(String, Value)> {
        self.bound_index().accepted(cluster, name, group, resource)
    }

    /// Whether an APIBinding of some logical cluster binds the APIExport `name` of `cluster`.
    pub fn export_is_bound(&self, cluster: &str, name: &str) -> bool {
        self.bound_index().binds(cluster, name)
    }

    /// Whether the binding behind the bound `resource` of `cluster` is being deleted.
    pub(crate) fn binding_terminating(&self, cluster: &str, resource: &Resource) -> bool {
        !resource.identity().is_empty()
            && self
                .bound_index()
                .find(cluster, |r| {
                    r.group == resource.group
                        && r.version == resource.version
                        && r.name == resource.name
                        && r.identity() == resource.identity()
                })
                .is_some_and(|(_, terminating)| terminating)
    }

    /// Serves what the APIBinding `binding` of `cluster` binds now (nothing once it is gone or
    /// binds nothing), unless a newer state is known.
    pub async fn observe_binding(
        &self,
        cluster: &str,
        binding: &Value,
    ) -> Result<(), RegistryError> {
        let part = BindingPart::deserialize(binding).unwrap_or_default();
        let name = part.metadata.name.clone();
        let revision = part.metadata.resource_version.parse().unwrap_or(0);
        let bound = self.bound_of(part, revision).await?;
        self.bound_index().set(cluster, &name, Some(bound));
        Ok(())
    }

    /// Stops serving what the APIBinding `name` of `cluster` binds.
    pub fn forget_binding(&self, cluster: &str, name: &str) {
        self.bound_index().set(cluster, name, None);
    }

    /// What `binding` binds, read from its export's schemas.
    async fn bound_of(&self, binding: BindingPart, revision: u64) -> Result<Bound, RegistryError> {
        let export_cluster = binding.status.export_cluster;
        let mut resources = Vec::new();
        for entry in &binding.status.bound_resources {
            let schema = &entry["schema"];
            let found = self
                .schema_resources(
                    &export_cluster,
                    text(schema, "name"),
                    Some(text(schema, "UID")),
                    text(schema, "identityHash"),
                )
                .await?;
            resources.extend(found);
        }
        let accepted = binding
            .spec
            .permission_claims
            .iter()
            .filter(|claim| claim["state"] == "Accepted")
            .map(|claim| {
                (
                    text(claim, "group").to_string(),
                    text(claim, "resource").to_string(),
                    claim["selector"].clone(),
                )
            })
            .collect();
        Ok(Bound {
            resources,
            export: (
                export_cluster,
                text(&binding.spec.reference["export"], "name").to_string(),
            ),
            accepted,
            terminating: binding.metadata.deletion_timestamp.is_some(),
            revision,
        })
    }

    /// The resources of the APIResourceSchema `name` of `cluster` (of that UID, if given),
    /// served under `identity`; `None` when there is no such schema.
    async fn schema_resources(
        &self,
        cluster: &str,
        name: &str,
        uid: Option<&str>,
        identity: &str,
    ) -> Result<Option<Resources>, RegistryError> {
        let key = |uid: &str| {
            (
                cluster.to_string(),
                name.to_string(),
                uid.to_string(),
                identity.to_string(),
            )
        };
        let cached = uid.and_then(|uid| {
            let schemas = self
                .bound_index()
                .schemas
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            schemas.get(&key(uid)).and_then(std::sync::Weak::upgrade)
        });
        if let Some(cached) = cached {
            return Ok(Some(cached));
        }
        let target = Target {
            cluster,
            resource: kcp_apis::system::api_resource_schemas(),
            namespace: None,
        };
        let schema = match self.get(target, name).await {
            Ok(schema) => schema,
            // Deleted since: nothing to serve.
            Err(RegistryError::NotFound { .. }) => return Ok(None),
            Err(other) => return Err(other),
        };
        if uid.is_some_and(|uid| uid != text(&schema["metadata"], "uid")) {
            return Ok(None);
        }
        let spec = super::schemas::crd_spec(&schema["spec"]);
        let resources = self.interner().resources_with_identity(&spec, identity);
        let mut schemas = self
            .bound_index()
            .schemas
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if schemas.len() >= 64 {
            schemas.retain(|_, weak| weak.strong_count() > 0);
        }
        schemas.insert(
            key(text(&schema["metadata"], "uid")),
            Arc::downgrade(&resources),
        );
        Ok(Some(resources))
    }

    /// Every resource the APIExport `export` of `cluster` exports (its CRD-stored resources'
    /// schemas), served under its identity: what its virtual workspace serves.
    pub async fn export_resources(
        &self,
        cluster: &str,
        export: &Value,
    ) -> Result<Vec<ResourceRef>, RegistryError> {
        let identity = text(&export["status"], "identityHash");
        let mut all = Vec::new();
        for resource in export["spec"]["resources"].as_array().into_iter().flatten() {
            if resource["storage"].get("crd").is_none() {
                continue;
            }
            if let Some(found) = self
                .schema_resources(cluster, text(resource, "schema"), None, identity)
                .await?
            {
                all.extend(found.iter().cloned().map(ResourceRef::from));
            }
        }
        Ok(all)
    }

    fn interner(&self) -> &Interner {
        self.custom_index().interner()
    }

    /// Keeps the bound index in step with the APIBindings in storage: lists every binding of
    /// every cluster, then follows their changes. Returns on an error.
    pub(crate) async fn follow_bindings_once(&self) -> Result<(), RegistryError> {
        let resource = kcp_apis::system::api_bindings();
        // Each binding's part, page by page, only of bindings some export's binding made.
        let prefix = crate::store::resource_keys(resource).all_clusters();
        let mut parts: Vec<(String, BindingPart, u64)> = Vec::new();
        let revision = self
            .each_page(&prefix, |kv| {
                let part: BindingPart = crate::summary::decode_part(&kv.value)?;
                if let Some(cluster) = crate::store::cluster_of_key(&kv.key)
                    && !part.status.export_cluster.is_empty()
                {
                    parts.push((cluster.to_string(), part, kv.mod_revision));
                }
                Ok(())
            })
            .await?;
        let mut fresh: HashMap<String, BTreeMap<String, Bound>> = HashMap::new();
        for (cluster, part, at) in parts {
            let name = part.metadata.name.clone();
            let bound = self.bound_of(part, at).await?;
            fresh.entry(cluster).or_default().insert(name, bound);
        }
        self.bound_index().reset(fresh);
        let mut events = Box::pin(self.watch_all_clusters(resource, revision).await?);
        while let Some(event) = events.next().await {
            let event = event?;
            let object = &event.event.object;
            if event.event.kind == "DELETED" {
                self.forget_binding(&event.cluster, text(&object["metadata"], "name"));
            } else {
                self.observe_binding(&event.cluster, object).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(export: &str, revision: u64) -> Bound {
        Bound {
            resources: Vec::new(),
            export: match export {
                "" => (String::new(), String::new()),
                name => ("provider".to_string(), name.to_string()),
            },
            accepted: Vec::new(),
            terminating: false,
            revision,
        }
    }

    #[test]
    fn the_stored_state_at_the_same_revision_does_not_undo_an_observed_binding() {
        let index = BoundIndex::default();
        // The controller observes the status it is about to write, at the revision it read.
        index.set("c", "b", Some(bound("widgets", 7)));
        assert!(index.binds("provider", "widgets"));
        // The follower's view of the stored object at that revision binds nothing yet.
        index.set("c", "b", Some(bound("", 7)));
        assert!(index.binds("provider", "widgets"));
        // A newer stored state does, and so does forgetting the binding.
        index.set("c", "b", Some(bound("", 8)));
        assert!(!index.binds("provider", "widgets"));
        index.set("c", "b", Some(bound("widgets", 9)));
        index.set("c", "b", None);
        assert!(!index.binds("provider", "widgets"));
    }
}
