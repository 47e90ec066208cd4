//! The syncer (kcp's 2021 prototype's, push mode and the `syncer` binary): the objects of one
//! workspace assigned to one physical cluster (label `kcp.dev/cluster=<cluster>`) are created and
//! updated downstream, their `.status` copied back up through the status subresource, and
//! removed downstream once deleted or assigned elsewhere upstream.
//!
//! - Downstream namespaces ([`downstream_namespace`]): `kcp-<workspace>-<namespace>` (hashed when
//!   longer than a label), made by the syncer and labelled with the workspace, so that one
//!   physical cluster can serve many workspaces whose namespaces share names. Only namespaced
//!   resources are synced.
//! - What is written down ([`transform`]): the upstream object without its server fields and
//!   status, its labels, and its annotations over the downstream object's own (a controller's
//!   annotations there are kept); marked with the workspace (label [`WORKSPACE_LABEL`]), the
//!   upstream namespace, the upstream generation and a digest of what was synced, so an
//!   object is written again only when its upstream changed, never for the defaults the
//!   downstream server added.
//! - What comes up ([`upstream_status`]): the downstream status, its `observedGeneration`
//!   translated to the upstream generation it stands for.
//! - Writes carry the resourceVersion read: a conflict is retried after the watch brings the
//!   change, never overwritten blindly. Every object on both sides is looked at again every
//!   resync interval and after every relist, so missed events heal and a restarted syncer
//!   converges (objects downstream whose upstream is gone are removed).

use std::collections::HashSet;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::{self, BoxStream, FuturesUnordered, StreamExt};
use http::Method;
use kcp_sdk::Queue;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

use crate::requests::{self, Answer};

/// The label that assigns an object to a physical cluster (the prototype's).
pub const CLUSTER_LABEL: &str = "kcp.dev/cluster";
/// Downstream: the logical cluster (workspace) an object or namespace was synced from.
pub const WORKSPACE_LABEL: &str = "kcp.io/synced-from";
/// Downstream: the object's namespace upstream.
pub const UPSTREAM_NAMESPACE: &str = "kcp.io/upstream-namespace";
/// Downstream: the upstream generation last synced.
pub const UPSTREAM_GENERATION: &str = "kcp.io/upstream-generation";
/// Downstream: a digest of what was last synced from upstream.
pub const SYNCED_DIGEST: &str = "kcp.io/synced-digest";

/// What one syncer does.
#[derive(Debug, Clone)]
pub struct SyncerOptions {
    /// The logical cluster synced from.
    pub workspace: String,
    /// The Cluster's name: objects labelled `kcp.dev/cluster=<location>` are synced.
    pub location: String,
    /// The (namespaced) resources synced.
    pub resources: Vec<ApiResource>,
    /// How often everything is looked at again.
    pub resync: Duration,
}

/// One object, by its upstream identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct SyncKey {
    resource: usize,
    namespace: String,
    name: String,
}

/// A stable 64-bit FNV-1a digest (names and digests must not change between builds).
fn digest(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The downstream namespace of `namespace` in `workspace`: `kcp-<workspace>-<namespace>`, or
/// `kcp-<digest>` when that is longer than a namespace name may be.
pub fn downstream_namespace(workspace: &str, namespace: &str) -> String {
    let name = format!("kcp-{}-{namespace}", workspace.replace(':', "-"));
    match name.len() <= 63 {
        true => name,
        false => format!(
            "kcp-{:016x}",
            digest(format!("{workspace}/{namespace}").as_bytes())
        ),
    }
}

/// The upstream fields that are synced: everything but the server's metadata and the status.
fn synced_fields(upstream: &Value) -> Value {
    let mut fields = upstream.clone();
    if let Some(object) = fields.as_object_mut() {
        object.remove("status");
        object.remove("metadata");
    }
    json!({
        "fields": fields,
        "labels": upstream["metadata"]["labels"],
        "annotations": upstream_annotations(upstream),
    })
}

/// The upstream annotations that go down (not kcp's own).
fn upstream_annotations(upstream: &Value) -> serde_json::Map<String, Value> {
    upstream["metadata"]["annotations"]
        .as_object()
        .map(|a| {
            a.iter()
                .filter(|(k, _)| !k.starts_with("kcp.io/"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// The downstream object for `upstream`, written over `existing` (its own annotations and
/// server fields kept) or new.
pub fn transform(upstream: &Value, existing: Option<&Value>, workspace: &str) -> Value {
    let namespace = upstream["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default();
    let synced = synced_fields(upstream);
    let sum = format!("{:016x}", digest(synced.to_string().as_bytes()));
    let mut object = match existing {
        Some(existing) => existing.clone(),
        None => json!({"metadata": {"name": upstream["metadata"]["name"]}}),
    };
    if let (Some(object), Some(fields)) = (object.as_object_mut(), synced["fields"].as_object()) {
        object.retain(|k, _| k == "metadata" || k == "status");
        for (key, value) in fields {
            object.insert(key.clone(), value.clone());
        }
    }
    let metadata = &mut object["metadata"];
    metadata["namespace"] = json!(downstream_namespace(workspace, namespace));
    let mut labels = upstream["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    labels.insert(WORKSPACE_LABEL.into(), json!(workspace.replace(':', "-")));
    metadata["labels"] = Value::Object(labels);
    let mut annotations = metadata["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    annotations.extend(upstream_annotations(upstream));
    annotations.insert(UPSTREAM_NAMESPACE.into(), json!(namespace));
    annotations.insert(SYNCED_DIGEST.into(), json!(sum));
    let generation = upstream["metadata"]["generation"]
        .as_i64()
        .unwrap_or_default();
    annotations.insert(UPSTREAM_GENERATION.into(), json!(generation.to_string()));
    metadata["annotations"] = Value::Object(annotations);
    object
}

/// Whether `downstream` holds what `upstream` asks for now.
fn in_sync(upstream: &Value, downstream: &Value) -> bool {
    let sum = format!(
        "{:016x}",
        digest(synced_fields(upstream).to_string().as_bytes())
    );
    downstream["metadata"]["annotations"][SYNCED_DIGEST] == sum.as_str()
}

/// The status for upstream from `downstream`'s: its `observedGeneration` (if any) becomes the
/// upstream generation it stands for, or one less while the downstream controller has not
/// caught up.
pub fn upstream_status(downstream: &Value) -> Value {
    let mut status = downstream["status"].clone();
    if let Some(observed) = status.get("observedGeneration").and_then(Value::as_i64) {
        let generation = downstream["metadata"]["generation"]
            .as_i64()
            .unwrap_or_default();
        let upstream: i64 = downstream["metadata"]["annotations"][UPSTREAM_GENERATION]
            .as_str()
            .and_then(|g| g.parse().ok())
            .unwrap_or_default();
        status["observedGeneration"] = json!(match observed >= generation {
            true => upstream,
            false => upstream - 1,
        });
    }
    status
}

/// What reconciles share.
struct Sides {
    upstream: kube::Client,
    downstream: kube::Client,
    options: SyncerOptions,
    up: Vec<Store<DynamicObject>>,
    down: Vec<Store<DynamicObject>>,
    /// Downstream namespaces known to exist.
    namespaces: Mutex<HashSet<String>>,
}

impl Sides {
    fn up(&self, key: &SyncKey) -> Option<Value> {
        let reference =
            ObjectRef::new_with(&key.name, self.options.resources[key.resource].clone())
                .within(&key.namespace);
        self.up[key.resource]
            .get(&reference)
            .and_then(|o| serde_json::to_value(&*o).ok())
    }

    fn down(&self, key: &SyncKey) -> Option<Value> {
        let namespace = downstream_namespace(&self.options.workspace, &key.namespace);
        let reference =
            ObjectRef::new_with(&key.name, self.options.resources[key.resource].clone())
                .within(&namespace);
        self.down[key.resource]
            .get(&reference)
            .and_then(|o| serde_json::to_value(&*o).ok())
    }

    async fn ensure_namespace(&self, name: &str) -> anyhow::Result<()> {
        if self
            .namespaces
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(name)
        {
            return Ok(());
        }
        let namespace = json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {WORKSPACE_LABEL: self.options.workspace.replace(':', "-")}},
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
            Answer::Ok(_) | Answer::AlreadyExists => {}
            _ => anyhow::bail!("could not create namespace {name} downstream"),
        }
        self.namespaces
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(name.to_string());
        Ok(())
    }

    async fn reconcile(&self, key: &SyncKey) -> anyhow::Result<()> {
        let resource = &self.options.resources[key.resource];
        let up = self.up(key).filter(|up| {
            up["metadata"]["labels"][CLUSTER_LABEL] == self.options.location.as_str()
                && up["metadata"]["deletionTimestamp"].is_null()
        });
        let down = self.down(key);
        let namespace = downstream_namespace(&self.options.workspace, &key.namespace);
        let Some(up) = up else {
            if let Some(down) = down {
                let path = requests::path(resource, Some(&namespace), &key.name);
                let uid = down["metadata"]["uid"].clone();
                let options = json!({"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}, "propagationPolicy": "Background"});
                match requests::send(
                    &self.downstream,
                    Method::DELETE,
                    &path,
                    Some(&options),
                    "application/json",
                )
                .await?
                {
                    Answer::Ok(_) | Answer::NotFound | Answer::Conflict => {}
                    _ => anyhow::bail!("could not delete {path} downstream"),
                }
            }
            return Ok(());
        };
        match &down {
            None => {
                self.ensure_namespace(&namespace).await?;
                let body = transform(&up, None, &self.options.workspace);
                let path = requests::collection(resource, Some(&namespace));
                match requests::send(
                    &self.downstream,
                    Method::POST,
                    &path,
                    Some(&body),
                    "application/json",
                )
                .await?
                {
                    Answer::Ok(_) | Answer::AlreadyExists => {}
                    Answer::NotFound => {
                        // The namespace went meanwhile: made again on the retry.
                        self.namespaces
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .remove(&namespace);
                        anyhow::bail!("namespace {namespace} is gone downstream");
                    }
                    Answer::Invalid(message) => {
                        anyhow::bail!("downstream refused {path}: {message}")
                    }
                    Answer::Conflict => anyhow::bail!("conflict creating {path} downstream"),
                }
            }
            Some(down) if !in_sync(&up, down) => {
                let body = transform(&up, Some(down), &self.options.workspace);
                let path = requests::path(resource, Some(&namespace), &key.name);
                requests::write(&self.downstream, Method::PUT, &path, &body).await?;
            }
            Some(down) => {
                let status = upstream_status(down);
                if !status.is_null() && up["status"] != status {
                    let mut updated = up.clone();
                    updated["status"] = status;
                    if let Some(annotations) = updated["metadata"]["annotations"].as_object_mut() {
                        annotations.remove("kcp.io/cluster");
                    }
                    let path = format!(
                        "{}/status",
                        requests::path(resource, Some(&key.namespace), &key.name)
                    );
                    requests::write(&self.upstream, Method::PUT, &path, &updated).await?;
                }
            }
        }
        Ok(())
    }
}

/// A watch event, with the side and the resource it is of.
type SideEvent = (
    Side,
    usize,
    Result<watcher::Event<DynamicObject>, watcher::Error>,
);

/// Which side an event came from.
#[derive(Debug, Clone, Copy)]
enum Side {
    Up,
    Down,
}

/// Syncs until `stop` completes: `upstream` is a client of the workspace, `downstream` of the
/// physical cluster.
pub async fn run(
    upstream: kube::Client,
    downstream: kube::Client,
    options: SyncerOptions,
    stop: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let mut up = Vec::new();
    let mut down = Vec::new();
    let mut streams: Vec<BoxStream<'static, SideEvent>> = Vec::new();
    // Downstream, what this syncer wrote: from its workspace, for its cluster (another syncer
    // of the same workspace may write into the same physical cluster under another name).
    let marker = format!(
        "{WORKSPACE_LABEL}={},{CLUSTER_LABEL}={}",
        options.workspace.replace(':', "-"),
        options.location
    );
    for (index, resource) in options.resources.iter().enumerate() {
        for side in [Side::Up, Side::Down] {
            let (client, config) = match side {
                Side::Up => (upstream.clone(), watcher::Config::default()),
                Side::Down => (
                    downstream.clone(),
                    watcher::Config::default().labels(&marker),
                ),
            };
            let api: Api<DynamicObject> = Api::all_with(client, resource);
            let writer = reflector::store::Writer::new(resource.clone());
            match side {
                Side::Up => up.push(writer.as_reader()),
                Side::Down => down.push(writer.as_reader()),
            }
            let events = reflector::reflector(writer, watcher(api, config).default_backoff());
            streams.push(events.map(move |e| (side, index, e)).boxed());
        }
    }
    let sides = Arc::new(Sides {
        upstream,
        downstream,
        options: options.clone(),
        up,
        down,
        namespaces: Mutex::new(HashSet::new()),
    });
    let mut events = pin!(stream::select_all(streams));
    let mut stop = pin!(stop);
    let mut queue: Queue<SyncKey> = Queue::new();
    let mut running = FuturesUnordered::new();
    let mut resync = tokio::time::interval(options.resync);
    loop {
        while running.len() < 8 {
            let Some(key) = queue.pop() else { break };
            let sides = sides.clone();
            running.push(async move {
                let outcome = sides.reconcile(&key).await;
                (key, outcome)
            });
        }
        let due = queue.next_due();
        tokio::select! {
            _ = &mut stop => return Ok(()),
            event = events.next() => match event {
                Some((side, index, Ok(event))) => {
                    let objects: Vec<DynamicObject> = match event {
                        watcher::Event::Apply(o) | watcher::Event::Delete(o) => vec![o],
                        watcher::Event::InitDone => {
                            let store = match side { Side::Up => &sides.up[index], Side::Down => &sides.down[index] };
                            store.state().iter().map(|o| (**o).clone()).collect()
                        }
                        _ => Vec::new(),
                    };
                    for object in objects {
                        if let Some(key) = key_of(side, index, &object) {
                            queue.add(key);
                        }
                    }
                }
                Some((side, index, Err(error))) => {
                    tracing::info!(?side, resource = sides.options.resources[index].plural, %error, "watch failed; kube-rs watches again");
                }
                None => return Ok(()),
            },
            _ = resync.tick() => {
                for (index, store) in sides.up.iter().enumerate() {
                    for object in store.state() {
                        if let Some(key) = key_of(Side::Up, index, &object) {
                            queue.add(key);
                        }
                    }
                }
                for (index, store) in sides.down.iter().enumerate() {
                    for object in store.state() {
                        if let Some(key) = key_of(Side::Down, index, &object) {
                            queue.add(key);
                        }
                    }
                }
            }
            Some((key, outcome)) = running.next(), if !running.is_empty() => {
                match outcome {
                    Ok(()) => queue.succeeded(&key),
                    Err(error) => {
                        tracing::info!(?key, error = format!("{error:#}"), "sync failed; retrying");
                        queue.retry(key.clone());
                    }
                }
                queue.done(&key);
            }
            _ = crate::sleep_until(due), if due.is_some() => {}
        }
    }
}

/// The upstream identity of an object seen on `side`.
fn key_of(side: Side, resource: usize, object: &DynamicObject) -> Option<SyncKey> {
    let name = object.metadata.name.clone()?;
    let namespace = match side {
        Side::Up => object.metadata.namespace.clone()?,
        Side::Down => object
            .metadata
            .annotations
            .as_ref()?
            .get(UPSTREAM_NAMESPACE)?
            .clone(),
    };
    Some(SyncKey {
        resource,
        namespace,
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {
                "name": "web", "namespace": "default", "uid": "u1", "resourceVersion": "7", "generation": 3,
                "labels": {"kcp.dev/cluster": "east", "app": "web"},
                "annotations": {"kcp.io/cluster": "root:team", "note": "kept"},
                "managedFields": [{"manager": "kubectl"}],
            },
            "spec": {"replicas": 2},
            "status": {"replicas": 1},
        })
    }

    #[test]
    fn downstream_namespaces_are_the_workspaces_own() {
        assert_eq!(
            downstream_namespace("root:team", "default"),
            "kcp-root-team-default"
        );
        let long = downstream_namespace(&"a".repeat(40), &"b".repeat(40));
        assert!(long.len() <= 63 && long.starts_with("kcp-"), "{long}");
        assert_eq!(long, downstream_namespace(&"a".repeat(40), &"b".repeat(40)));
        assert_ne!(long, downstream_namespace(&"a".repeat(40), &"c".repeat(40)));
    }

    #[test]
    fn what_goes_down_leaves_the_server_fields_and_keeps_downstream_annotations() {
        let created = transform(&deployment(), None, "root:team");
        assert_eq!(created["metadata"]["namespace"], "kcp-root-team-default");
        assert_eq!(created["spec"], json!({"replicas": 2}));
        assert!(created.get("status").is_none());
        assert!(
            created["metadata"].get("uid").is_none()
                && created["metadata"].get("managedFields").is_none()
        );
        assert_eq!(created["metadata"]["labels"][WORKSPACE_LABEL], "root-team");
        assert_eq!(created["metadata"]["annotations"]["note"], "kept");
        assert!(
            created["metadata"]["annotations"]
                .get("kcp.io/cluster")
                .is_none()
        );
        assert_eq!(created["metadata"]["annotations"][UPSTREAM_GENERATION], "3");
        assert!(in_sync(&deployment(), &created));

        // The downstream server's defaults and a controller's annotation stay; a change upstream
        // is written over them.
        let mut existing = created.clone();
        existing["metadata"]["uid"] = json!("d1");
        existing["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = json!("1");
        existing["spec"]["strategy"] = json!({"type": "RollingUpdate"});
        existing["status"] = json!({"replicas": 2});
        assert!(in_sync(&deployment(), &existing));
        let mut changed = deployment();
        changed["spec"]["replicas"] = json!(5);
        assert!(!in_sync(&changed, &existing));
        let updated = transform(&changed, Some(&existing), "root:team");
        assert_eq!(updated["spec"], json!({"replicas": 5}));
        assert_eq!(updated["metadata"]["uid"], "d1");
        assert_eq!(
            updated["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
            "1"
        );
        assert_eq!(updated["status"], json!({"replicas": 2}));
    }

    #[test]
    fn the_observed_generation_goes_up_as_the_upstream_one() {
        let mut down = transform(&deployment(), None, "root:team");
        down["metadata"]["generation"] = json!(1);
        down["status"] = json!({"observedGeneration": 1, "availableReplicas": 2});
        assert_eq!(
            upstream_status(&down),
            json!({"observedGeneration": 3, "availableReplicas": 2})
        );
        down["metadata"]["generation"] = json!(2);
        assert_eq!(upstream_status(&down)["observedGeneration"], 2);
    }
}
