//! The syncer (kcp's 2021 prototype's, push mode and the `syncer` binary): the objects of one
//! workspace that go to one physical cluster ([`assignment`]: labelled `kcp.dev/cluster` with
//! it, or following a namespace placed there or a split Deployment running there) are created
//! and updated downstream, their `.status` copied back up through the status subresource from
//! their home cluster, and removed downstream once deleted or assigned elsewhere upstream.
//!
//! - Downstream namespaces ([`transform::downstream_namespace`]): `kcp-<workspace>-<namespace>`
//!   (hashed when longer than a label), made by the syncer and labelled with the workspace and
//!   the syncer ([`syncer_label`]), so that one physical cluster can serve many workspaces whose
//!   namespaces share names; released (deleted when no other syncer uses it) once nothing of
//!   the upstream namespace is synced there. Only namespaced resources are synced.
//! - What is written down ([`transform`]): the upstream object without its server fields and
//!   status, its labels, and its annotations over the downstream object's own (a controller's
//!   annotations there are kept); marked with the workspace (label [`WORKSPACE_LABEL`]), the
//!   upstream namespace, the upstream generation and a digest of what was synced, so an
//!   object is written again only when its upstream changed, never for the defaults the
//!   downstream server added.
//! - What comes up ([`transform::upstream_status`]): the downstream status, its
//!   `observedGeneration` translated to the upstream generation it stands for.
//! - Nothing is decided before every reflector (both sides, and the namespaces) has listed
//!   once; after each downstream list, leftovers (objects nothing upstream asks for any more,
//!   as a returning cluster has) are removed before anything new is created there.
//! - Writes carry the resourceVersion read: a conflict is retried after the watch brings the
//!   change, never overwritten blindly. Every object on both sides is looked at again every
//!   resync interval and after every relist, so missed events heal and a restarted syncer
//!   converges. The reflectors keep no `managedFields`, and downstream no spec (what is
//!   written down is made from upstream), which halves what 10,000 objects hold.

use std::collections::{HashMap, HashSet};
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::{self, BoxStream, FuturesUnordered, StreamExt};
use kcp_sdk::Queue;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};

pub mod assignment;
pub mod heartbeat;
mod sides;
pub mod transform;

use sides::{Done, Sides, SyncKey};
pub use transform::{downstream_namespace, transform, upstream_status};

/// The label that assigns an object (or a namespace) to a physical cluster (the prototype's).
pub const CLUSTER_LABEL: &str = "kcp.dev/cluster";
/// Downstream: the logical cluster (workspace) an object or namespace was synced from.
pub const WORKSPACE_LABEL: &str = "kcp.io/synced-from";
/// Downstream: the object's namespace upstream.
pub const UPSTREAM_NAMESPACE: &str = "kcp.io/upstream-namespace";
/// Downstream: the upstream generation last synced.
pub const UPSTREAM_GENERATION: &str = "kcp.io/upstream-generation";
/// Downstream: a digest of what was last synced from upstream.
pub const SYNCED_DIGEST: &str = "kcp.io/synced-digest";
/// Downstream: the Cluster (its name, or a digest of a long one) whose syncer wrote an object.
pub const SYNCED_BY_LABEL: &str = "kcp.io/synced-by";
/// Downstream, on namespaces: the prefix of each syncer's label ([`syncer_label`]).
pub const SYNCER_LABEL_PREFIX: &str = "syncer.kcp.io/";

/// The label a syncer for the Cluster `location` puts on the downstream namespaces it uses.
pub fn syncer_label(location: &str) -> String {
    match location.len() <= 63 && !location.contains('.') {
        true => format!("{SYNCER_LABEL_PREFIX}{location}"),
        false => format!(
            "{SYNCER_LABEL_PREFIX}{:016x}",
            transform::digest(location.as_bytes())
        ),
    }
}

/// The value of [`SYNCED_BY_LABEL`] for the Cluster `location`.
pub fn synced_by(location: &str) -> String {
    match location.len() <= 63 {
        true => location.to_string(),
        false => format!("{:016x}", transform::digest(location.as_bytes())),
    }
}

/// Removes from the physical cluster what the syncer of `workspace` for the Cluster `location`
/// synced there (when the Cluster goes): the downstream namespaces only it uses are deleted
/// with everything in them, its label taken off the ones another syncer uses too.
pub async fn forget_downstream(
    remote: &kube::Client,
    workspace: &str,
    location: &str,
) -> anyhow::Result<()> {
    let ours = syncer_label(location);
    let selector = format!("{WORKSPACE_LABEL}={},{ours}", workspace.replace(':', "-"));
    let api: Api<DynamicObject> = Api::all_with(remote.clone(), &namespaces());
    let listed = api
        .list(&kube::api::ListParams::default().labels(&selector))
        .await?;
    for namespace in listed {
        let name = namespace.name_any();
        let shared = namespace
            .labels()
            .keys()
            .any(|k| k.starts_with(SYNCER_LABEL_PREFIX) && *k != ours);
        match shared {
            true => {
                let patch = serde_json::json!({"metadata": {"labels": {ours.clone(): null}}});
                api.patch(
                    &name,
                    &kube::api::PatchParams::default(),
                    &kube::api::Patch::Merge(&patch),
                )
                .await?;
            }
            false => {
                api.delete(&name, &kube::api::DeleteParams::default())
                    .await?;
            }
        }
    }
    Ok(())
}

/// The Namespaces resource.
fn namespaces() -> ApiResource {
    ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&())
}

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
    /// Whether Deployments assigned to no cluster are the deployment splitter's (never synced
    /// themselves; their leaves are).
    pub split_roots: bool,
    /// The Lease renewed in the workspace (pull mode), if any.
    pub heartbeat: Option<heartbeat::Heartbeat>,
    /// Where writes and heartbeats are counted.
    pub metrics: crate::metrics::Metrics,
}

/// A watch event, with what it is of.
type SideEvent = (
    Side,
    usize,
    Result<watcher::Event<DynamicObject>, watcher::Error>,
);

/// What an event came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Side {
    Up,
    Down,
    /// Upstream Namespaces.
    UpNamespaces,
    /// Downstream namespaces this syncer made.
    DownNamespaces,
}

/// One piece of work.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Work {
    Object(SyncKey),
    /// An upstream namespace: its downstream one released if nothing of it is synced.
    Namespace(String),
}

/// Drops what the syncer never reads: `managedFields` on both sides, and downstream the spec.
fn slim(side: Side) -> impl FnMut(&mut DynamicObject) {
    move |object| {
        object.managed_fields_mut().clear();
        if side == Side::Down
            && let Some(fields) = object.data.as_object_mut()
        {
            fields.retain(|k, _| k == "status");
        }
    }
}

/// Reflects `resource` through `client` into a store; events tagged with `side` and `index`.
fn reflect(
    client: &kube::Client,
    resource: &ApiResource,
    config: watcher::Config,
    side: Side,
    index: usize,
) -> (Store<DynamicObject>, BoxStream<'static, SideEvent>) {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    let writer = reflector::store::Writer::new(resource.clone());
    let store = writer.as_reader();
    let events = watcher(api, config).default_backoff().modify(slim(side));
    let events = reflector::reflector(writer, events)
        .map(move |e| (side, index, e))
        .boxed();
    (store, events)
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
    let workspace_label = format!("{WORKSPACE_LABEL}={}", options.workspace.replace(':', "-"));
    let marker = format!(
        "{workspace_label},{SYNCED_BY_LABEL}={}",
        synced_by(&options.location)
    );
    for (index, resource) in options.resources.iter().enumerate() {
        let (store, events) = reflect(
            &upstream,
            resource,
            watcher::Config::default(),
            Side::Up,
            index,
        );
        up.push(store);
        streams.push(events);
        let config = watcher::Config::default().labels(&marker);
        let (store, events) = reflect(&downstream, resource, config, Side::Down, index);
        down.push(store);
        streams.push(events);
    }
    let (up_namespaces, events) = reflect(
        &upstream,
        &namespaces(),
        watcher::Config::default(),
        Side::UpNamespaces,
        0,
    );
    streams.push(events);
    let ours = format!("{workspace_label},{}", syncer_label(&options.location));
    let (down_namespaces, events) = reflect(
        &downstream,
        &namespaces(),
        watcher::Config::default().labels(&ours),
        Side::DownNamespaces,
        0,
    );
    streams.push(events);
    let deployments = options
        .resources
        .iter()
        .position(|r| r.group == "apps" && r.plural == "deployments");
    let sides = Arc::new(Sides {
        upstream,
        downstream,
        options: options.clone(),
        up,
        down,
        up_namespaces,
        down_namespaces,
        known: Mutex::new(HashSet::new()),
        leaves: Mutex::new(HashMap::new()),
        leftovers: Mutex::new(HashSet::new()),
    });
    // The heartbeat beats while this runs.
    let _beating = options.heartbeat.clone().map(|heartbeat| {
        AbortOnDrop(tokio::spawn(heartbeat::beat(
            sides.upstream.clone(),
            heartbeat,
            options.clone(),
        )))
    });
    let mut listed: HashSet<(Side, usize)> = HashSet::new();
    let reflectors = 2 * options.resources.len() + 2;
    let mut namespace_labels: HashMap<String, Option<String>> = HashMap::new();
    let mut events = pin!(stream::select_all(streams));
    let mut stop = pin!(stop);
    let mut queue: Queue<Work> = Queue::new();
    let mut running = FuturesUnordered::new();
    let mut resync = tokio::time::interval(options.resync);
    loop {
        // Nothing is decided before every side has listed once.
        while running.len() < 8 && listed.len() == reflectors {
            let Some(work) = queue.pop() else { break };
            let sides = sides.clone();
            running.push(async move {
                let outcome = match &work {
                    Work::Object(key) => sides.reconcile(key).await,
                    Work::Namespace(namespace) => sides.release_namespace(namespace).await,
                };
                (work, outcome)
            });
        }
        let due = queue.next_due();
        tokio::select! {
            _ = &mut stop => return Ok(()),
            event = events.next() => match event {
                Some((side, index, Ok(event))) => {
                    let first = matches!(event, watcher::Event::InitDone) && listed.insert((side, index));
                    if first && listed.len() == reflectors {
                        // Everything listed: leftovers first, then everything.
                        for index in 0..sides.down.len() {
                            mark_leftovers(&sides, index);
                        }
                        rebuild_leaves(&sides, deployments);
                        everything(&sides, &mut queue);
                        continue;
                    }
                    match side {
                        Side::Up | Side::Down => {
                            if side == Side::Down && matches!(event, watcher::Event::InitDone) {
                                mark_leftovers(&sides, index);
                            }
                            if side == Side::Up && Some(index) == deployments {
                                leaves_changed(&sides, &event, &mut queue, deployments);
                            }
                            let objects: Vec<DynamicObject> = match event {
                                watcher::Event::Apply(o) | watcher::Event::Delete(o) => vec![o],
                                watcher::Event::InitDone => {
                                    let store = match side { Side::Up => &sides.up[index], _ => &sides.down[index] };
                                    store.state().iter().map(|o| (**o).clone()).collect()
                                }
                                _ => Vec::new(),
                            };
                            for object in objects {
                                if let Some(key) = key_of(side, index, &object) {
                                    queue.add(Work::Object(key));
                                }
                            }
                        }
                        Side::UpNamespaces => {
                            let changed: Vec<DynamicObject> = match event {
                                watcher::Event::Apply(o) => vec![o],
                                watcher::Event::Delete(o) => {
                                    namespace_labels.remove(&o.name_any());
                                    queue.add(Work::Namespace(o.name_any()));
                                    Vec::new()
                                }
                                watcher::Event::InitDone => sides.up_namespaces.state().iter().map(|o| (**o).clone()).collect(),
                                _ => Vec::new(),
                            };
                            for namespace in changed {
                                let name = namespace.name_any();
                                let label = namespace.labels().get(CLUSTER_LABEL).cloned();
                                if namespace_labels.get(&name) != Some(&label) {
                                    namespace_labels.insert(name.clone(), label);
                                    in_namespace(&sides, &name, &mut queue);
                                    queue.add(Work::Namespace(name));
                                }
                            }
                        }
                        Side::DownNamespaces => {}
                    }
                }
                Some((side, index, Err(error))) => {
                    let resource = sides.options.resources.get(index).map(|r| r.plural.clone());
                    tracing::info!(?side, ?resource, %error, "watch failed; kube-rs watches again");
                }
                None => return Ok(()),
            },
            _ = resync.tick() => {
                everything(&sides, &mut queue);
            }
            Some((work, outcome)) = running.next(), if !running.is_empty() => {
                match outcome {
                    Ok(done) => {
                        queue.succeeded(&work);
                        match (done, &work) {
                            (Done::Later(after), _) => queue.add_after(work.clone(), after),
                            (Done::Removed, Work::Object(key)) => queue.add_after(Work::Namespace(key.namespace.clone()), Duration::from_secs(1)),
                            _ => {}
                        }
                    }
                    Err(error) => {
                        tracing::info!(?work, error = format!("{error:#}"), "sync failed; retrying");
                        queue.retry(work.clone());
                    }
                }
                queue.done(&work);
            }
            _ = crate::sleep_until(due), if due.is_some() => {}
        }
    }
}

/// A task stopped when this is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Queues every object of both sides and every namespace.
fn everything(sides: &Sides, queue: &mut Queue<Work>) {
    for (side, stores) in [(Side::Up, &sides.up), (Side::Down, &sides.down)] {
        for (index, store) in stores.iter().enumerate() {
            for object in store.state() {
                if let Some(key) = key_of(side, index, &object) {
                    queue.add(Work::Object(key));
                }
            }
        }
    }
    for namespace in sides.up_namespaces.state() {
        queue.add(Work::Namespace(namespace.name_any()));
    }
    for namespace in sides.down_namespaces.state() {
        if let Some(upstream) = namespace.annotations().get(UPSTREAM_NAMESPACE) {
            queue.add(Work::Namespace(upstream.clone()));
        }
    }
    for store in &sides.down {
        for object in store.state() {
            if let Some(upstream) = object.annotations().get(UPSTREAM_NAMESPACE) {
                queue.add(Work::Namespace(upstream.clone()));
            }
        }
    }
}

/// Queues every object of the upstream namespace `namespace`, on both sides.
fn in_namespace(sides: &Sides, namespace: &str, queue: &mut Queue<Work>) {
    let downstream = sides.downstream_namespace(namespace);
    for (side, stores, within) in [
        (Side::Up, &sides.up, namespace),
        (Side::Down, &sides.down, downstream.as_str()),
    ] {
        for (index, store) in stores.iter().enumerate() {
            for object in store.state() {
                if object.metadata.namespace.as_deref() == Some(within)
                    && let Some(key) = key_of(side, index, &object)
                {
                    queue.add(Work::Object(key));
                }
            }
        }
    }
}

/// Adds the downstream objects of resource `index` that nothing upstream asks for to the
/// leftovers removed before anything new is created.
fn mark_leftovers(sides: &Sides, index: usize) {
    let leftovers = sides.leftovers_of(index);
    sides
        .leftovers
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .extend(leftovers);
}

/// The leaves on this cluster, per namespace, from the upstream Deployments.
fn rebuild_leaves(sides: &Sides, deployments: Option<usize>) {
    let mut leaves: HashMap<String, HashSet<String>> = HashMap::new();
    if let Some(index) = deployments {
        for object in sides.up[index].state() {
            let value = serde_json::to_value(&*object).unwrap_or_default();
            if assignment::is_leaf_on(&value, &sides.options.location) {
                leaves
                    .entry(object.namespace().unwrap_or_default())
                    .or_default()
                    .insert(object.name_any());
            }
        }
    }
    *sides.leaves.lock().unwrap_or_else(|e| e.into_inner()) = leaves;
}

/// Keeps the leaves on this cluster up to date with an upstream Deployment's event; a
/// namespace that starts or stops running a leaf here has all its objects looked at again.
fn leaves_changed(
    sides: &Sides,
    event: &watcher::Event<DynamicObject>,
    queue: &mut Queue<Work>,
    deployments: Option<usize>,
) {
    let (object, gone) = match event {
        watcher::Event::Apply(o) => (o, false),
        watcher::Event::Delete(o) => (o, true),
        watcher::Event::InitDone => {
            let before = sides
                .leaves
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            rebuild_leaves(sides, deployments);
            let after = sides
                .leaves
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            let namespaces: HashSet<&String> = before.keys().chain(after.keys()).collect();
            for namespace in namespaces {
                let had = before.get(namespace).is_some_and(|l| !l.is_empty());
                let has = after.get(namespace).is_some_and(|l| !l.is_empty());
                if had != has {
                    in_namespace(sides, namespace, queue);
                }
            }
            return;
        }
        _ => return,
    };
    let namespace = object.namespace().unwrap_or_default();
    let name = object.name_any();
    let leaf = !gone
        && assignment::is_leaf_on(
            &serde_json::to_value(object).unwrap_or_default(),
            &sides.options.location,
        );
    let changed = {
        let mut leaves = sides.leaves.lock().unwrap_or_else(|e| e.into_inner());
        let set = leaves.entry(namespace.clone()).or_default();
        let had = !set.is_empty();
        match leaf {
            true => set.insert(name),
            false => set.remove(&name),
        };
        had == set.is_empty()
    };
    if changed {
        in_namespace(sides, &namespace, queue);
    }
}

/// The upstream identity of an object seen on `side`.
fn key_of(side: Side, resource: usize, object: &DynamicObject) -> Option<SyncKey> {
    let name = object.metadata.name.clone()?;
    let namespace = match side {
        Side::Down => object
            .metadata
            .annotations
            .as_ref()?
            .get(UPSTREAM_NAMESPACE)?
            .clone(),
        _ => object.metadata.namespace.clone()?,
    };
    Some(SyncKey {
        resource,
        namespace,
        name,
    })
}
