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
use kube::runtime::reflector;
use kube::runtime::{WatchStreamExt, watcher};

pub mod assignment;
pub mod heartbeat;
mod sides;
pub mod store;
pub mod transform;

use sides::{Done, Sides, SyncKey};
use store::{Downstream, Store, Upstream};
pub use transform::{downstream_namespace, transform, upstream_status};

pub use crate::kinds::CLUSTER_LABEL;
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

/// A watch event of one side: of a synced resource (what its store keeps), or of namespaces.
enum SideEvent {
    Up(
        usize,
        Result<watcher::Event<Option<store::Item<Upstream>>>, watcher::Error>,
    ),
    Down(
        usize,
        Result<watcher::Event<Option<store::Item<Downstream>>>, watcher::Error>,
    ),
    /// Boxed: a whole Namespace is large.
    Namespaces(
        Side,
        Box<Result<watcher::Event<DynamicObject>, watcher::Error>>,
    ),
}

/// One piece of work.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Work {
    Object(SyncKey),
    /// An upstream namespace: its downstream one released if nothing of it is synced.
    Namespace(String),
}

/// A watch of `resource` through `client`, each object turned into what a store keeps of it
/// at once (the whole object is not kept).
fn watch<T: Send + 'static>(
    client: &kube::Client,
    resource: &ApiResource,
    config: watcher::Config,
    keep: impl Fn(&DynamicObject) -> Option<store::Item<T>> + Send + 'static,
) -> impl futures::Stream<Item = Result<watcher::Event<Option<store::Item<T>>>, watcher::Error>>
+ Send
+ 'static {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), resource);
    watcher(api, config).default_backoff().map(move |event| {
        event.map(|e| match e {
            watcher::Event::Apply(o) => watcher::Event::Apply(keep(&o)),
            watcher::Event::Delete(o) => watcher::Event::Delete(keep(&o)),
            watcher::Event::InitApply(o) => watcher::Event::InitApply(keep(&o)),
            watcher::Event::Init => watcher::Event::Init,
            watcher::Event::InitDone => watcher::Event::InitDone,
        })
    })
}

/// Reflects namespaces through `client` (few: kube-rs' reflector keeps them whole).
fn reflect_namespaces(
    client: &kube::Client,
    config: watcher::Config,
    side: Side,
) -> (
    reflector::Store<DynamicObject>,
    BoxStream<'static, SideEvent>,
) {
    let resource = namespaces();
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let writer = reflector::store::Writer::new(resource);
    let store = writer.as_reader();
    let events = watcher(api, config).default_backoff().modify(|o| {
        o.managed_fields_mut().clear();
    });
    let events = reflector::reflector(writer, events)
        .map(move |e| SideEvent::Namespaces(side, Box::new(e)))
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
    let mut streams: Vec<BoxStream<'static, SideEvent>> = Vec::new();
    // Downstream, what this syncer wrote: from its workspace, for its cluster (another syncer
    // of the same workspace may write into the same physical cluster under another name).
    let workspace_label = format!("{WORKSPACE_LABEL}={}", options.workspace.replace(':', "-"));
    let marker = format!(
        "{workspace_label},{SYNCED_BY_LABEL}={}",
        synced_by(&options.location)
    );
    for (index, resource) in options.resources.iter().enumerate() {
        let kept = resource.clone();
        let events = watch(&upstream, resource, watcher::Config::default(), move |o| {
            store::upstream_item(&kept, o)
        });
        streams.push(events.map(move |e| SideEvent::Up(index, e)).boxed());
        let config = watcher::Config::default().labels(&marker);
        let events = watch(&downstream, resource, config, store::downstream_item);
        streams.push(events.map(move |e| SideEvent::Down(index, e)).boxed());
    }
    let (up_namespaces, events) =
        reflect_namespaces(&upstream, watcher::Config::default(), Side::UpNamespaces);
    streams.push(events);
    let ours = format!("{workspace_label},{}", syncer_label(&options.location));
    let (down_namespaces, events) = reflect_namespaces(
        &downstream,
        watcher::Config::default().labels(&ours),
        Side::DownNamespaces,
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
        up: options.resources.iter().map(|_| Store::default()).collect(),
        down: options.resources.iter().map(|_| Store::default()).collect(),
        up_namespaces,
        down_namespaces,
        known: Mutex::new(HashSet::new()),
        leaves: Mutex::new(HashMap::new()),
        leftovers: Mutex::new(HashSet::new()),
    });
    // The heartbeat beats while this runs.
    let _beating = options.heartbeat.clone().map(|heartbeat| {
        crate::AbortOnDrop(tokio::spawn(heartbeat::beat(
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
            event = events.next() => {
                let Some(event) = event else { return Ok(()) };
                let (side, index, done) = match &event {
                    SideEvent::Up(index, Ok(e)) => (Side::Up, *index, matches!(e, watcher::Event::InitDone)),
                    SideEvent::Down(index, Ok(e)) => (Side::Down, *index, matches!(e, watcher::Event::InitDone)),
                    SideEvent::Namespaces(side, e) => match &**e {
                        Ok(e) => (*side, 0, matches!(e, watcher::Event::InitDone)),
                        Err(error) => {
                            tracing::info!(?side, %error, "watch of namespaces failed; kube-rs watches again");
                            continue;
                        }
                    },
                    SideEvent::Up(index, Err(error)) | SideEvent::Down(index, Err(error)) => {
                        let resource = &sides.options.resources[*index].plural;
                        tracing::info!(resource, %error, "watch failed; kube-rs watches again");
                        continue;
                    }
                };
                match event {
                    SideEvent::Up(index, Ok(event)) => {
                        let touched = sides.up[index].apply(event);
                        if Some(index) == deployments {
                            leaves_changed(&sides, index, &touched, &mut queue);
                        }
                        for (namespace, name) in touched {
                            queue.add(Work::Object(SyncKey { resource: index, namespace, name }));
                        }
                    }
                    SideEvent::Down(index, Ok(event)) => {
                        let touched = sides.down[index].apply(event);
                        if done {
                            mark_leftovers(&sides, index);
                        }
                        for (namespace, name) in touched {
                            queue.add(Work::Object(SyncKey { resource: index, namespace, name }));
                        }
                    }
                    SideEvent::Namespaces(Side::UpNamespaces, event) => {
                        let Ok(event) = *event else { continue };
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
                    SideEvent::Namespaces(..) | SideEvent::Up(_, Err(_)) | SideEvent::Down(_, Err(_)) => {}
                }
                if done && listed.insert((side, index)) && listed.len() == reflectors {
                    // Everything listed: leftovers first, then everything.
                    for index in 0..sides.down.len() {
                        mark_leftovers(&sides, index);
                    }
                    rebuild_leaves(&sides, deployments);
                    everything(&sides, &mut queue);
                }
            }
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

/// Queues every object of both sides and every namespace.
fn everything(sides: &Sides, queue: &mut Queue<Work>) {
    let mut namespaces: HashSet<String> = HashSet::new();
    for (index, (up, down)) in sides.up.iter().zip(&sides.down).enumerate() {
        let keys = up
            .all()
            .into_iter()
            .map(|(k, _)| k)
            .chain(down.all().into_iter().map(|(k, _)| k));
        for (namespace, name) in keys {
            namespaces.insert(namespace.clone());
            queue.add(Work::Object(SyncKey {
                resource: index,
                namespace,
                name,
            }));
        }
    }
    namespaces.extend(sides.up_namespaces.state().iter().map(|n| n.name_any()));
    for namespace in sides.down_namespaces.state() {
        if let Some(upstream) = namespace.annotations().get(UPSTREAM_NAMESPACE) {
            namespaces.insert(upstream.clone());
        }
    }
    for namespace in namespaces {
        queue.add(Work::Namespace(namespace));
    }
}

/// Queues every object of the upstream namespace `namespace`, on both sides.
fn in_namespace(sides: &Sides, namespace: &str, queue: &mut Queue<Work>) {
    for (index, (up, down)) in sides.up.iter().zip(&sides.down).enumerate() {
        for (namespace, name) in up
            .keys_in(namespace)
            .into_iter()
            .chain(down.keys_in(namespace))
        {
            queue.add(Work::Object(SyncKey {
                resource: index,
                namespace,
                name,
            }));
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
fn leaves_now(sides: &Sides, deployments: usize) -> HashMap<String, HashSet<String>> {
    let mut leaves: HashMap<String, HashSet<String>> = HashMap::new();
    for ((namespace, name), object) in sides.up[deployments].all() {
        if object.is_leaf_on(&sides.options.location) {
            leaves.entry(namespace).or_default().insert(name);
        }
    }
    leaves
}

/// Rebuilds the leaves on this cluster.
fn rebuild_leaves(sides: &Sides, deployments: Option<usize>) {
    let leaves = deployments
        .map(|d| leaves_now(sides, d))
        .unwrap_or_default();
    *sides.leaves.lock().unwrap_or_else(|e| e.into_inner()) = leaves;
}

/// Keeps the leaves on this cluster up to date after the upstream Deployments `touched`
/// changed; a namespace that starts or stops running a leaf here has all its objects looked at
/// again.
fn leaves_changed(
    sides: &Sides,
    deployments: usize,
    touched: &[store::Key],
    queue: &mut Queue<Work>,
) {
    let mut flipped = Vec::new();
    {
        let mut leaves = sides.leaves.lock().unwrap_or_else(|e| e.into_inner());
        for key in touched {
            let (namespace, name) = key;
            let leaf = sides.up[deployments]
                .get(key)
                .is_some_and(|o| o.is_leaf_on(&sides.options.location));
            let set = leaves.entry(namespace.clone()).or_default();
            let had = !set.is_empty();
            match leaf {
                true => set.insert(name.clone()),
                false => set.remove(name),
            };
            if had == set.is_empty() {
                flipped.push(namespace.clone());
            }
        }
    }
    flipped.sort();
    flipped.dedup();
    for namespace in flipped {
        in_namespace(sides, &namespace, queue);
    }
}
