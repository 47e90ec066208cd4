//! The syncer's reconciles over what both sides' stores hold ([`super::store`]): one object
//! (create, update, delete downstream; status up from its home), each write made from the
//! whole objects read fresh, and one downstream namespace (released once nothing of its
//! upstream namespace is synced here any more).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use http::Method;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::reflector::{self, ObjectRef};
use serde_json::json;

use super::assignment::{self, Assignment, NamespaceView};
use super::store::{self, Downstream, Store, Upstream};
use super::transform::{downstream_namespace, status_for_upstream, transform};
use super::{CLUSTER_LABEL, SyncerOptions, UPSTREAM_NAMESPACE, WORKSPACE_LABEL, syncer_label};
use crate::requests::{self, Answer};

/// One object, by its upstream identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SyncKey {
    pub resource: usize,
    pub namespace: String,
    pub name: String,
}

/// How a reconcile ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Done {
    /// Nothing more to do.
    Settled,
    /// The object was removed downstream (its namespace may be empty now).
    Removed,
    /// To be looked at again after a while (a creation waits for leftovers to go).
    Later(Duration),
}

/// What reconciles share.
pub struct Sides {
    pub upstream: kube::Client,
    pub downstream: kube::Client,
    pub options: SyncerOptions,
    pub up: Vec<Store<Upstream>>,
    pub down: Vec<Store<Downstream>>,
    /// Upstream Namespaces (their `kcp.dev/cluster` label).
    pub up_namespaces: reflector::Store<DynamicObject>,
    /// Downstream namespaces this syncer made.
    pub down_namespaces: reflector::Store<DynamicObject>,
    /// Downstream namespaces known to exist with this syncer's label.
    pub known: Mutex<HashSet<String>>,
    /// Per upstream namespace, the leaves of split Deployments running on this cluster.
    pub leaves: Mutex<HashMap<String, HashSet<String>>>,
    /// Downstream objects to remove before anything new is created there.
    pub leftovers: Mutex<HashSet<SyncKey>>,
}

fn locked<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Sides {
    fn resource(&self, key: &SyncKey) -> &ApiResource {
        &self.options.resources[key.resource]
    }

    pub fn downstream_namespace(&self, namespace: &str) -> String {
        downstream_namespace(&self.options.workspace, namespace)
    }

    fn store_key(key: &SyncKey) -> store::Key {
        (key.namespace.clone(), key.name.clone())
    }

    pub fn up(&self, key: &SyncKey) -> Option<Upstream> {
        self.up[key.resource].get(&Self::store_key(key))
    }

    pub fn down(&self, key: &SyncKey) -> Option<Downstream> {
        self.down[key.resource].get(&Self::store_key(key))
    }

    /// The cluster the upstream namespace `name` is labelled with.
    fn namespace_cluster(&self, name: &str) -> Option<String> {
        let namespace = self
            .up_namespaces
            .get(&ObjectRef::new_with(name, super::namespaces()))?;
        namespace
            .metadata
            .labels
            .as_ref()?
            .get(CLUSTER_LABEL)
            .cloned()
    }

    /// How the upstream `object` of resource `resource` is synced here, if at all.
    pub fn assigned(&self, namespace: &str, object: &Upstream) -> Option<Assignment> {
        let cluster = self.namespace_cluster(namespace);
        let runs_leaf_here = locked(&self.leaves)
            .get(namespace)
            .is_some_and(|l| !l.is_empty());
        assignment::assignment(
            object.facts(),
            &self.options.location,
            self.options.split_roots,
            NamespaceView {
                cluster: cluster.as_deref(),
                runs_leaf_here,
            },
        )
    }

    /// The keys of the downstream objects of resource `index` that nothing upstream asks for.
    pub fn leftovers_of(&self, index: usize) -> Vec<SyncKey> {
        self.down[index]
            .all()
            .into_iter()
            .map(|((namespace, name), _)| SyncKey {
                resource: index,
                namespace,
                name,
            })
            .filter(|key| {
                self.up(key)
                    .is_none_or(|up| self.assigned(&key.namespace, &up).is_none())
            })
            .collect()
    }

    async fn ensure_namespace(&self, name: &str, upstream: &str) -> anyhow::Result<()> {
        if locked(&self.known).contains(name) {
            return Ok(());
        }
        let ours = syncer_label(&self.options.location);
        let namespace = json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": name,
                "labels": {
                    WORKSPACE_LABEL: self.options.workspace.replace(':', "-"),
                    ours.clone(): "true",
                },
                "annotations": {UPSTREAM_NAMESPACE: upstream},
            },
        });
        match requests::send(
            &self.downstream,
            Method::POST,
            "/api/v1/namespaces",
            Some(&namespace),
            "application/json",
        )
        .await?
        {
            Answer::Ok(_) => {}
            // Another syncer's (of the same workspace into the same cluster): ours too now.
            Answer::AlreadyExists => {
                let patch = json!({"metadata": {"labels": {ours: "true"}}});
                requests::send(
                    &self.downstream,
                    Method::PATCH,
                    &format!("/api/v1/namespaces/{name}"),
                    Some(&patch),
                    "application/merge-patch+json",
                )
                .await?;
            }
            _ => anyhow::bail!("could not create namespace {name} downstream"),
        }
        locked(&self.known).insert(name.to_string());
        Ok(())
    }

    /// Counts a write of `operation` for `key` that began at `started`.
    fn count(&self, key: &SyncKey, operation: &'static str, started: Instant) {
        let resource = self.resource(key);
        let name = match resource.group.as_str() {
            "" => resource.plural.clone(),
            group => format!("{}.{group}", resource.plural),
        };
        self.options.metrics.synced(
            &self.options.workspace,
            &self.options.location,
            &name,
            operation,
            started.elapsed(),
        );
    }

    /// Syncs one object.
    pub async fn reconcile(&self, key: &SyncKey) -> anyhow::Result<Done> {
        let started = Instant::now();
        let resource = self.resource(key).clone();
        let up = self.up(key);
        let assigned = up.as_ref().and_then(|up| self.assigned(&key.namespace, up));
        let down = self.down(key);
        let namespace = self.downstream_namespace(&key.namespace);
        let (Some(up), Some(assigned)) = (up, assigned) else {
            let removed = match down {
                Some(down) => {
                    let path = requests::path(&resource, Some(&down.namespace), &key.name);
                    let options = json!({"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": down.uid}, "propagationPolicy": "Background"});
                    match requests::send(
                        &self.downstream,
                        Method::DELETE,
                        &path,
                        Some(&options),
                        "application/json",
                    )
                    .await?
                    {
                        Answer::Ok(_) | Answer::NotFound | Answer::Conflict => true,
                        _ => anyhow::bail!("could not delete {path} downstream"),
                    }
                }
                None => false,
            };
            locked(&self.leftovers).remove(key);
            if removed {
                self.count(key, "delete", started);
            }
            return Ok(if removed {
                Done::Removed
            } else {
                Done::Settled
            });
        };
        // Asked for again since it was counted a leftover: not one any more.
        locked(&self.leftovers).remove(key);
        let up_path = requests::path(&resource, Some(&key.namespace), &key.name);
        let down_path = requests::path(&resource, Some(&namespace), &key.name);
        match &down {
            None => {
                if !locked(&self.leftovers).is_empty() {
                    return Ok(Done::Later(Duration::from_millis(200)));
                }
                // Gone meanwhile: its deletion is on its way.
                let Some(full) = requests::get(&self.upstream, &up_path).await? else {
                    return Ok(Done::Settled);
                };
                self.ensure_namespace(&namespace, &key.namespace).await?;
                let body = transform(&full, None, &self.options.workspace, &self.options.location);
                let path = requests::collection(&resource, Some(&namespace));
                match requests::send(
                    &self.downstream,
                    Method::POST,
                    &path,
                    Some(&body),
                    "application/json",
                )
                .await?
                {
                    Answer::Ok(_) | Answer::AlreadyExists => self.count(key, "create", started),
                    Answer::NotFound => {
                        // The namespace went meanwhile: made again on the retry.
                        locked(&self.known).remove(&namespace);
                        anyhow::bail!("namespace {namespace} is gone downstream");
                    }
                    Answer::Invalid(message) => {
                        anyhow::bail!("downstream refused {path}: {message}")
                    }
                    Answer::Conflict => anyhow::bail!("conflict creating {path} downstream"),
                }
            }
            Some(down) if down.digest.as_deref() != Some(up.digest.as_str()) => {
                let Some(full) = requests::get(&self.upstream, &up_path).await? else {
                    return Ok(Done::Settled);
                };
                let Some(existing) = requests::get(&self.downstream, &down_path).await? else {
                    // Gone downstream meanwhile: the watch brings its deletion.
                    return Ok(Done::Later(Duration::from_millis(200)));
                };
                let body = transform(
                    &full,
                    Some(&existing),
                    &self.options.workspace,
                    &self.options.location,
                );
                requests::write(&self.downstream, Method::PUT, &down_path, &body).await?;
                self.count(key, "update", started);
            }
            Some(down) if assigned == Assignment::Home => {
                let status =
                    status_for_upstream(down.status(), down.generation, down.upstream_generation);
                if !status.is_null() && store::parse(up.status.as_deref()) != status {
                    let Some(mut updated) = requests::get(&self.upstream, &up_path).await? else {
                        return Ok(Done::Settled);
                    };
                    updated["status"] = status;
                    if let Some(annotations) = updated["metadata"]["annotations"].as_object_mut() {
                        annotations.remove("kcp.io/cluster");
                    }
                    let path = format!("{up_path}/status");
                    requests::write(&self.upstream, Method::PUT, &path, &updated).await?;
                    self.count(key, "status", started);
                }
            }
            Some(_) => {}
        }
        Ok(Done::Settled)
    }

    /// Releases the downstream namespace of the upstream `namespace` once nothing of it is
    /// synced here: this syncer's label removed, the namespace deleted when no other syncer's
    /// is left on it.
    pub async fn release_namespace(&self, namespace: &str) -> anyhow::Result<Done> {
        let wanted = self.up.iter().any(|store| {
            store.any_in(namespace, |object| {
                self.assigned(namespace, object).is_some()
            })
        });
        let name = self.downstream_namespace(namespace);
        let remaining = self
            .down
            .iter()
            .any(|store| store.any_in(namespace, |_| true));
        if wanted || remaining {
            return Ok(Done::Settled);
        }
        let Some(found) = self
            .down_namespaces
            .get(&ObjectRef::new_with(&name, super::namespaces()))
        else {
            return Ok(Done::Settled);
        };
        if found.metadata.deletion_timestamp.is_some() {
            return Ok(Done::Settled);
        }
        locked(&self.known).remove(&name);
        let ours = syncer_label(&self.options.location);
        let others = found
            .metadata
            .labels
            .iter()
            .flatten()
            .any(|(k, _)| k.starts_with(super::SYNCER_LABEL_PREFIX) && *k != ours);
        let path = format!("/api/v1/namespaces/{name}");
        match others {
            true => {
                let patch = json!({"metadata": {"labels": {ours: null}}});
                requests::send(
                    &self.downstream,
                    Method::PATCH,
                    &path,
                    Some(&patch),
                    "application/merge-patch+json",
                )
                .await?;
            }
            false => {
                let options = json!({"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": found.metadata.uid}});
                requests::send(
                    &self.downstream,
                    Method::DELETE,
                    &path,
                    Some(&options),
                    "application/json",
                )
                .await?;
            }
        }
        tracing::info!(namespace = name, "released downstream namespace");
        Ok(Done::Settled)
    }
}
