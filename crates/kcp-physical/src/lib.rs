//! kcp's transparent multi-cluster layer, as the seed documents and kcp's 2021 prototype
//! describe it, on kube-rs and the project's SDK (it talks to kcp over its API, in `kcp start` as
//! through the `cluster-controller` binary):
//!
//! - [`puller`]: CRDs of a physical cluster's resources, from its discovery and OpenAPI
//!   (`crd-puller`, `kubectl kcp crd pull`).
//! - [`clusters`]: the cluster-controller's part per `Cluster`: its kubeconfig (inline or from a
//!   Secret), an importer task per cluster ([`importer`]: every poll interval, the configured
//!   resources' schemas as `APIResourceImport`s owned by the Cluster), and the Cluster's status
//!   (`Ready` with reasons, `syncedResources`).
//! - [`negotiation`]: one `NegotiatedAPIResource` per resource and workspace, the least common
//!   denominator of its imports (through `kcp_apimachinery::schema::compat`), or the CRD a user
//!   applied by hand, which wins and is enforced; imports marked `Compatible` and `Available`;
//!   published ones become the workspace's CRDs ([`publish`]).
//! - [`syncer`]: objects labelled `kcp.dev/cluster=<cluster>` synced down to it, their status
//!   up; run per Cluster in push mode, or by the `syncer` binary.
//! - [`splitter`]: Deployments assigned to no cluster split into one leaf per Ready cluster;
//!   run per workspace with Clusters, or by the `deployment-splitter` binary.
//! - [`scheduler`]: each namespace of a workspace with Clusters placed on one of them (what is
//!   in it follows, see [`syncer::assignment`]).
//! - [`pull`]: pull mode, the syncer installed into each cluster, its heartbeat a Lease.
//! - [`placement`]: each Cluster's standing (schedulable, cordoned, drained, or lost) for both.
//!
//! [`run`] drives both on one work queue fed by three wildcard watches (Clusters, imports,
//! negotiated resources).
//!
//! Must not know: the server's crates (HTTP through kube-rs only).

use std::collections::HashMap;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use kcp_sdk::{ClusterConfig, ClusterKey, ClusterStore, Queue};
use kube::api::{Api, DynamicObject};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use tokio::sync::mpsc;

pub mod clusters;
pub mod events;
pub mod importer;
pub mod kinds;
pub mod metrics;
pub mod negotiation;
pub mod placement;
pub mod publish;
pub mod pull;
pub mod puller;
mod requests;
pub mod scheduler;
pub mod splitter;
pub mod syncer;

use kinds::Gvr;

/// How the cluster-controller runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The resources imported from every cluster (`deployments.apps`, `pods`, `widgets.example.com`).
    pub resources: Vec<String>,
    /// Whether negotiated resources are published as CRDs as soon as they are made.
    pub auto_publish: bool,
    /// How often each cluster's schemas are imported again, and negotiations looked at again.
    pub poll_interval: Duration,
    /// How each Cluster's objects reach it.
    pub syncer_mode: SyncerMode,
    /// The image of the syncer installed in pull mode.
    pub syncer_image: String,
    /// Where the syncers run here and the heartbeats read count.
    pub metrics: metrics::Metrics,
    /// Whether Deployments assigned to no cluster are split across the workspace's clusters.
    pub split_deployments: bool,
    /// Whether each namespace is placed on one of the workspace's clusters.
    pub schedule_namespaces: bool,
    /// How long a Cluster may stay unreachable before its share of split Deployments moves to
    /// the others (as pods tolerate an unreachable node).
    pub unreachable_grace: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            resources: [
                "deployments.apps",
                "pods",
                "services",
                "configmaps",
                "secrets",
            ]
            .map(String::from)
            .to_vec(),
            auto_publish: true,
            poll_interval: Duration::from_secs(60),
            syncer_mode: SyncerMode::Push,
            syncer_image: format!("kcp-rs/syncer:{}", env!("CARGO_PKG_VERSION")),
            metrics: metrics::Metrics::default(),
            split_deployments: true,
            schedule_namespaces: true,
            unreachable_grace: Duration::from_secs(300),
        }
    }
}

/// How the objects assigned to a Cluster reach it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncerMode {
    /// A syncer run by the cluster-controller.
    Push,
    /// A syncer the cluster-controller installs into the cluster ([`pull`]); the Cluster is
    /// Ready while its heartbeat is fresh.
    Pull,
    /// Someone else runs the syncer (the `syncer` binary).
    None,
}

/// One piece of work: a Cluster, or a resource's negotiation in a workspace.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Work {
    Cluster(ClusterKey),
    Negotiation { workspace: String, gvr: Gvr },
}

/// A syncer run here: the resources it syncs (`plural.group`), and its task.
pub type RunningSyncer = (Vec<String>, tokio::task::JoinHandle<()>);

/// What the reconciles share.
pub struct Shared {
    pub config: ClusterConfig,
    pub options: Options,
    pub clusters: ClusterStore<DynamicObject>,
    pub imports: ClusterStore<DynamicObject>,
    pub negotiated: ClusterStore<DynamicObject>,
    /// The importer of each Cluster.
    pub importers: Mutex<HashMap<ClusterKey, importer::Importer>>,
    /// Where importers say that a pass ended (their Cluster's status follows).
    pub passes: mpsc::UnboundedSender<ClusterKey>,
    /// The syncer of each Cluster (push mode), with the resources it syncs.
    pub syncers: Mutex<HashMap<ClusterKey, RunningSyncer>>,
    /// What was last installed in each Cluster (pull mode): its fingerprint.
    pub installed: Mutex<HashMap<ClusterKey, String>>,
    /// The deployment splitter of each workspace with Clusters.
    pub splitters: Mutex<HashMap<String, tokio::task::JoinHandle<()>>>,
    /// The namespace scheduler of each workspace with Clusters.
    pub schedulers: Mutex<HashMap<String, tokio::task::JoinHandle<()>>>,
}

impl Shared {
    /// The import objects (as JSON) of `workspace`.
    pub fn imports_in(&self, workspace: &str) -> Vec<Value> {
        in_workspace(&self.imports, workspace)
    }

    /// Whether some Cluster of `workspace` has not finished its first import yet (no `Ready`
    /// condition, or `Unknown`): negotiation waits for it before it first publishes, so that
    /// clusters registered together negotiate together.
    pub fn connecting(&self, workspace: &str) -> bool {
        in_workspace(&self.clusters, workspace)
            .iter()
            .any(|cluster| {
                cluster["metadata"]["deletionTimestamp"].is_null()
                    && kinds::condition(cluster, "Ready").is_none_or(|c| c["status"] == "Unknown")
            })
    }
}

pub(crate) fn in_workspace(store: &ClusterStore<DynamicObject>, workspace: &str) -> Vec<Value> {
    let mut objects: Vec<Value> = store
        .state()
        .into_iter()
        .filter(|o| {
            o.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(kcp_sdk::CLUSTER_ANNOTATION))
                .is_some_and(|c| c == workspace)
        })
        .filter_map(|o| serde_json::to_value(&*o).ok())
        .collect();
    objects.sort_by(|a, b| {
        let key = |o: &Value| {
            (
                o["metadata"]["creationTimestamp"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        };
        key(a).cmp(&key(b))
    });
    objects
}

/// What the controller watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watched {
    Clusters,
    Imports,
    Negotiated,
}

/// The work a change of a watched object brings: its Cluster's; an import's or negotiated
/// resource's negotiation, and an import's Cluster (whose status lists it).
fn work_of(watched: Watched, object: &DynamicObject) -> Vec<Work> {
    let Some(key) = ClusterKey::of(object) else {
        return Vec::new();
    };
    if watched == Watched::Clusters {
        return vec![Work::Cluster(key)];
    }
    let spec = &object.data["spec"];
    let mut work = Vec::new();
    if let Some(gvr) = Gvr::of_spec(spec) {
        work.push(Work::Negotiation {
            workspace: key.cluster.clone(),
            gvr,
        });
    }
    if watched == Watched::Imports
        && let Some(location) = spec["location"].as_str()
    {
        work.push(Work::Cluster(ClusterKey {
            cluster: key.cluster,
            namespace: String::new(),
            name: location.to_string(),
        }));
    }
    work
}

/// Runs the cluster-controller and the negotiation until `stop` completes.
pub async fn run(
    config: ClusterConfig,
    options: Options,
    stop: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let wildcard = config.wildcard()?;
    let watch = |resource: kube::api::ApiResource| {
        let api: Api<DynamicObject> = Api::all_with(wildcard.clone(), &resource);
        kcp_sdk::reflect(watcher(api, watcher::Config::default()).default_backoff())
    };
    let (clusters, cluster_events) = watch(kinds::clusters());
    let (imports, import_events) = watch(kinds::imports());
    let (negotiated, negotiated_events) = watch(kinds::negotiated());
    let (passes, mut passed) = mpsc::unbounded_channel();
    let shared = Arc::new(Shared {
        config,
        options,
        clusters,
        imports,
        negotiated,
        importers: Mutex::new(HashMap::new()),
        passes,
        syncers: Mutex::new(HashMap::new()),
        installed: Mutex::new(HashMap::new()),
        splitters: Mutex::new(HashMap::new()),
        schedulers: Mutex::new(HashMap::new()),
    });
    let mut events = pin!(futures::stream::select(
        cluster_events.map(|e| (Watched::Clusters, e)),
        futures::stream::select(
            import_events.map(|e| (Watched::Imports, e)),
            negotiated_events.map(|e| (Watched::Negotiated, e)),
        ),
    ));
    let mut stop = pin!(stop);
    let mut queue: Queue<Work> = Queue::new();
    let mut running = FuturesUnordered::new();
    let result = loop {
        while running.len() < 8 {
            let Some(work) = queue.pop() else { break };
            let shared = shared.clone();
            running.push(async move {
                let outcome = match &work {
                    Work::Cluster(key) => clusters::reconcile(&shared, key).await,
                    Work::Negotiation { workspace, gvr } => {
                        negotiation::reconcile(&shared, workspace, gvr).await
                    }
                };
                (work, outcome)
            });
        }
        let due = queue.next_due();
        tokio::select! {
            _ = &mut stop => break Ok(()),
            event = events.next() => match event {
                Some((watched, Ok(event))) => {
                    let store = match watched {
                        Watched::Clusters => &shared.clusters,
                        Watched::Imports => &shared.imports,
                        Watched::Negotiated => &shared.negotiated,
                    };
                    for object in touched(store, event) {
                        work_of(watched, &object).into_iter().for_each(|w| queue.add(w));
                    }
                }
                Some((watched, Err(error))) => {
                    tracing::info!(?watched, %error, "watch failed; kube-rs watches again");
                }
                None => break Ok(()),
            },
            Some(key) = passed.recv() => queue.add(Work::Cluster(key)),
            Some((work, outcome)) = running.next(), if !running.is_empty() => {
                match outcome {
                    Ok(Some(after)) => {
                        queue.succeeded(&work);
                        queue.add_after(work.clone(), after);
                    }
                    Ok(None) => queue.succeeded(&work),
                    Err(error) => {
                        tracing::warn!(?work, error = format!("{error:#}"), "reconcile failed; retrying");
                        queue.retry(work.clone());
                    }
                }
                queue.done(&work);
            }
            _ = sleep_until(due), if due.is_some() => {}
        }
    };
    for (_, importer) in shared
        .importers
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain()
    {
        importer.stop();
    }
    for (_, (_, syncer)) in shared
        .syncers
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .drain()
    {
        syncer.abort();
    }
    for tasks in [&shared.splitters, &shared.schedulers] {
        for (_, task) in tasks.lock().unwrap_or_else(|e| e.into_inner()).drain() {
            task.abort();
        }
    }
    result
}

/// The objects a watch event is about (all of them after a relist: whatever went away during
/// a broken watch is looked at through the ones that stayed and the periodic passes).
fn touched(
    store: &ClusterStore<DynamicObject>,
    event: watcher::Event<DynamicObject>,
) -> Vec<DynamicObject> {
    match event {
        watcher::Event::Apply(object) | watcher::Event::Delete(object) => vec![object],
        watcher::Event::InitDone => store.state().iter().map(|o| (**o).clone()).collect(),
        watcher::Event::Init | watcher::Event::InitApply(_) => Vec::new(),
    }
}

/// A task stopped when this is dropped.
pub struct AbortOnDrop(pub tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Sleeps until `at` (a work queue's next due key), or forever when nothing is due.
pub(crate) async fn sleep_until(at: Option<tokio::time::Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}
