//! The loop every controller runs: list its resource across all logical clusters, queue the
//! `(cluster, name)` of each object it cares about, follow one cross-cluster watch, and run a
//! few reconciles at once, each retried with backoff on error (events for a key that backs off
//! do not cut its backoff short, see [`crate::queue`]) or again after a delay when it asks to. A broken watch (compaction, storage restart) is followed by a fresh list. A
//! controller may also follow a second resource whose events map to keys of its own objects
//! (the workspace controller follows LogicalClusters to their Workspaces).
//!
//! A controller's list runs beside its reconciles, as an informer's relist does beside its
//! workers: the keys it finds reach the queue as they are read. A list after a broken watch
//! at a million workspaces reads for seconds, or minutes on a cold disk; while it was awaited
//! alone, the reconciles under way stood still (deleting a million workspaces stopped for
//! minutes each time the logical cluster controller's watch fell behind a compaction).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{FuturesUnordered, Stream, StreamExt};
use kcp_apis::builtin::Resource;
use kcp_registry::{ClusterEvent, Registry, RegistryError, Summary, Watched};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::queue::WorkQueue;

/// How many objects a controller reconciles at once, unless it says otherwise. A reconcile spends most of its time waiting for
/// durable writes, and the store commits every write queued at once in one fsync: many
/// reconciles in flight share the commits, where a few would each wait for their own (with 8,
/// workspaces became Ready at about 200/s while clients created them at 600-800/s).
pub(crate) const WORKERS: usize = 64;
/// The wait before listing again after the watch broke.
const RESYNC_DELAY: Duration = Duration::from_secs(1);

/// An object in a logical cluster (`namespace` empty for cluster-scoped objects).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key {
    pub cluster: String,
    pub namespace: String,
    pub name: String,
}

impl Key {
    /// The key of `object` in `cluster`.
    pub fn of(cluster: String, object: &Value) -> Key {
        Key::summarized(cluster, &Summary::of_value(object))
    }

    /// The key of the object `summary` sums up, in `cluster`.
    pub fn summarized(cluster: String, summary: &Summary<'_>) -> Key {
        Key {
            cluster,
            namespace: summary.namespace.to_string(),
            name: summary.name.to_string(),
        }
    }
}

/// What a reconcile achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing (more) to do for this object until it changes.
    Finished,
    /// Look again after this long (something it waits for is not done yet).
    Again(Duration),
    /// Look again once this many events of the resources it also follows ([`Also`]) came for
    /// the key, or after `at_most`, whichever is first: for a reconcile that waits for many
    /// objects to go, each of which would otherwise bring it back.
    AfterEvents { events: usize, at_most: Duration },
}

/// What woke the controller: an event of its own resource, or the key an event of the
/// resource it also follows maps to.
enum Trigger {
    Own(ClusterEvent),
    /// The key, and whether the event was a deletion (what the key waited for may be gone: it
    /// goes ahead of the queue).
    Key(Option<Key>, bool),
}

/// A watch across all logical clusters, as a controller follows it.
pub(crate) type Watch<T> = Pin<Box<dyn Stream<Item = Result<T, RegistryError>> + Send>>;

type Events = Watch<Trigger>;
/// A list under way, which ends in the watch from its revision.
pub(crate) type ListUnderWay<T> =
    Pin<Box<dyn Future<Output = Result<Watch<T>, RegistryError>> + Send>>;
pub(crate) type Reconciled = Pin<Box<dyn Future<Output = Result<Outcome, RegistryError>> + Send>>;

/// One controller: its resource, which objects it cares about, and its reconcile.
pub(crate) struct Controller {
    pub name: &'static str,
    pub resource: &'static Resource,
    /// Whether the new state of an object in a watch event needs a reconcile.
    pub wants: fn(&Value) -> bool,
    /// What a list (at start, after a broken watch) queues.
    pub listed: Listing,
    /// Whether a DELETED event needs a reconcile of its key.
    pub deletions: bool,
    pub reconcile: fn(Registry, Key) -> Reconciled,
    /// How many objects are reconciled at once (usually [`WORKERS`]).
    pub workers: usize,
    /// Other resources to watch (no list: the own list covers every object).
    pub also: Vec<Also>,
}

/// What a controller's list queues.
pub(crate) enum Listing {
    /// The listed objects this accepts, judged from their summary: a list reads no more of each
    /// object (at start-up it reads every object of the resource in every cluster). It may
    /// take more than `wants` (a list after a start or a broken watch may have to look at what
    /// no event would bring); the reconcile sorts out the rest.
    Summaries(fn(&Summary) -> bool),
    /// Nothing: only events bring work, so there is no list, and the watch starts at the
    /// store's current revision.
    Nothing,
}

/// Other events that concern the controller's objects.
pub(crate) struct Also {
    pub source: Source,
    /// The key of the controller's object an object of the source in a cluster concerns.
    pub key: fn(&str, &Value) -> Option<Key>,
    /// Which events of the source matter (with `Deletions` the others are not even decoded).
    pub watched: Watched,
}

/// Where the events of an [`Also`] come from.
pub(crate) enum Source {
    /// A resource in every logical cluster.
    Resource(&'static Resource),
    /// Every object of every resource in the store, deletions only (`watched` is ignored): the
    /// key function sees the object's name and namespace only (`{"metadata": {...}}`).
    AnyDeletion,
}

impl Controller {
    /// Lists (sending the keys it queues to `listed`), then watches from the list's revision.
    async fn list_and_watch(
        self: Arc<Self>,
        registry: Registry,
        listed: mpsc::UnboundedSender<Key>,
    ) -> Result<Events, RegistryError> {
        let revision = match self.listed {
            Listing::Summaries(accepts) => {
                registry
                    .summarize_all_clusters(self.resource, |cluster, summary| {
                        if accepts(summary) {
                            // The receiver lives as long as the controller's loop.
                            let _ = listed.send(Key::summarized(cluster.to_string(), summary));
                        }
                    })
                    .await?
            }
            Listing::Nothing => registry.current_revision().await?,
        };
        let own = registry
            .watch_all_clusters(self.resource, revision)
            .await?
            .map(|event| event.map(Trigger::Own));
        let mut streams: Vec<Events> = vec![Box::pin(own)];
        for also in &self.also {
            let key = also.key;
            match also.source {
                Source::Resource(resource) => {
                    let other = registry
                        .watch_all_clusters_of(resource, revision, also.watched)
                        .await?
                        .map(move |event| {
                            event.map(|e| {
                                let gone = e.event.kind == "DELETED";
                                Trigger::Key(key(&e.cluster, &e.event.object), gone)
                            })
                        });
                    streams.push(Box::pin(other));
                }
                Source::AnyDeletion => {
                    let other = registry.watch_deletions(revision).await?.map(move |gone| {
                        gone.map(|gone| {
                            let object = serde_json::json!({"metadata": {
                                "namespace": gone.namespace, "name": gone.name,
                            }});
                            Trigger::Key(key(&gone.cluster, &object), true)
                        })
                    });
                    streams.push(Box::pin(other));
                }
            }
        }
        Ok(Box::pin(futures::stream::select_all(streams)))
    }

    /// Runs the controller until `stop` turns true.
    pub async fn run(self, registry: Registry, context: crate::Context) {
        let this = Arc::new(self);
        let mut stop = context.stop;
        let metrics = context.metrics.queue(this.name);
        let mut queue: WorkQueue<Key> = WorkQueue::new().with_metrics(metrics.clone());
        let mut watch = Relisting::new(this.name);
        let (found, mut listed) = mpsc::unbounded_channel();
        let mut in_flight = FuturesUnordered::new();
        loop {
            if watch.due() {
                let list = Arc::clone(&this).list_and_watch(registry.clone(), found.clone());
                watch.begin(Box::pin(list));
            }
            while in_flight.len() < this.workers {
                let Some(key) = queue.next() else { break };
                let reconciled = (this.reconcile)(registry.clone(), key.clone());
                let timed = metrics.timed(reconciled);
                in_flight.push(async move { (key, timed.await) });
            }
            let wake_at = [queue.next_deadline(), watch.resync_at()]
                .into_iter()
                .flatten()
                .min();
            tokio::select! {
                _ = stop.wait_for(|stopped| *stopped) => return,
                Some(key) = listed.recv() => {
                    queue.add(key);
                    while let Ok(key) = listed.try_recv() {
                        queue.add(key);
                    }
                }
                event = watch.next() => match event {
                    Some(Trigger::Key(Some(key), true)) => queue.nudge_first(key),
                    Some(Trigger::Key(Some(key), false)) => queue.nudge(key),
                    Some(Trigger::Own(ClusterEvent { cluster, event })) => {
                        let wanted = if event.kind == "DELETED" {
                            this.deletions
                        } else {
                            (this.wants)(&event.object)
                        };
                        if wanted {
                            queue.add(Key::of(cluster, &event.object));
                        }
                    }
                    // A key nobody keeps, or the watch broke (listed again in time).
                    Some(Trigger::Key(None, _)) | None => {}
                },
                Some((key, outcome)) = in_flight.next(), if !in_flight.is_empty() => {
                    match outcome {
                        Ok(Outcome::Finished) => queue.forget(&key),
                        Ok(Outcome::Again(delay)) => {
                            queue.forget(&key);
                            queue.add_after(key.clone(), delay);
                        }
                        Ok(Outcome::AfterEvents { events, at_most }) => {
                            queue.forget(&key);
                            queue.add_after_events(key.clone(), events, at_most);
                        }
                        Err(error) => {
                            tracing::warn!(controller = this.name, cluster = %key.cluster, name = %key.name, %error, "retrying");
                            // Before `done`: what the failed reconcile's own writes queued
                            // waits for the backoff too.
                            queue.add_rate_limited(key.clone());
                        }
                    }
                    queue.done(&key);
                }
                _ = sleep_until(wake_at), if wake_at.is_some() => {}
            }
        }
    }
}

/// A controller's watch, and when to list again: at once at first, then [`RESYNC_DELAY`]
/// after a list failed or the watch broke (a broken watch means a fresh list). The list runs
/// either alone ([`Relisting::list_if_due`]) or beside the rest of the controller's loop
/// ([`Relisting::begin`], then [`Relisting::next`] drives it).
pub(crate) struct Relisting<T> {
    controller: &'static str,
    events: Option<Watch<T>>,
    listing: Option<ListUnderWay<T>>,
    resync_at: Option<tokio::time::Instant>,
}

/// What [`Relisting::list_if_due`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Listed {
    /// Listed (or failed, or was not due): go on.
    GoOn,
    /// The controllers stopped while it listed.
    Stopped,
}

impl<T> Relisting<T> {
    pub(crate) fn new(controller: &'static str) -> Self {
        Relisting {
            controller,
            events: None,
            listing: None,
            resync_at: Some(tokio::time::Instant::now()),
        }
    }

    /// Whether a list is due: no watch, no list under way, and its time has come.
    pub(crate) fn due(&self) -> bool {
        self.events.is_none()
            && self.listing.is_none()
            && self
                .resync_at
                .is_some_and(|at| at <= tokio::time::Instant::now())
    }

    /// Starts `list` (a list, then the watch from its revision); [`Relisting::next`] drives it
    /// and then follows its watch.
    pub(crate) fn begin(&mut self, list: ListUnderWay<T>) {
        self.listing = Some(list);
        self.resync_at = None;
    }

    /// Runs `list` (a list, then the watch from its revision) if there is no watch and the
    /// time to list has come. A list under way ends when `stop` turns true: a list of the
    /// whole store at start-up (seconds at a million workspaces) does not hold up shutdown.
    pub(crate) async fn list_if_due(
        &mut self,
        stop: &mut tokio::sync::watch::Receiver<bool>,
        list: impl Future<Output = Result<Watch<T>, RegistryError>>,
    ) -> Listed {
        if !self.due() {
            return Listed::GoOn;
        }
        let listed = tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => return Listed::Stopped,
            listed = list => listed,
        };
        self.listed(listed);
        Listed::GoOn
    }

    /// Takes the outcome of a list: its watch, or a list again after [`RESYNC_DELAY`].
    fn listed(&mut self, listed: Result<Watch<T>, RegistryError>) {
        match listed {
            Ok(stream) => {
                self.events = Some(stream);
                self.resync_at = None;
            }
            Err(error) => {
                tracing::warn!(controller = self.controller, %error, "listing failed");
                self.resync_at = Some(tokio::time::Instant::now() + RESYNC_DELAY);
            }
        }
    }

    /// When to list again, while there is no watch.
    pub(crate) fn resync_at(&self) -> Option<tokio::time::Instant> {
        self.resync_at
    }

    /// The next event of the watch, once the list under way (if any) has ended; never while
    /// there is neither. `None` when the list failed, or the watch broke or ended: the next
    /// list is then due after [`RESYNC_DELAY`].
    pub(crate) async fn next(&mut self) -> Option<T> {
        if let Some(listing) = &mut self.listing {
            let listed = listing.await;
            self.listing = None;
            let failed = listed.is_err();
            self.listed(listed);
            if failed {
                return None;
            }
        }
        let Some(events) = &mut self.events else {
            return std::future::pending().await;
        };
        match events.next().await {
            Some(Ok(event)) => return Some(event),
            Some(Err(error)) => {
                tracing::info!(controller = self.controller, %error, "watch broke; listing again");
            }
            None => {}
        }
        self.events = None;
        self.resync_at = Some(tokio::time::Instant::now() + RESYNC_DELAY);
        None
    }
}

/// Sleeps until `at`, or forever without one.
pub(crate) async fn sleep_until(at: Option<tokio::time::Instant>) {
    if let Some(at) = at {
        tokio::time::sleep_until(at).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use kcp_registry::Target;
    use kcp_storage::{
        GetResponse, MemoryStorage, RangeRequest, RangeResponse, Result as StorageResult, Revision,
        Storage, StorageError, Txn, TxnResponse, WatchRequest, WatchStream,
    };
    use serde_json::json;
    use tokio::sync::watch;

    use super::*;

    /// Reconciles of [`failing`] so far.
    static ATTEMPTS: AtomicUsize = AtomicUsize::new(0);
    /// After this many attempts [`failing`] gives up failing, so that a controller without
    /// backoff ends its storm (in no time at all: paused time only moves when all is idle).
    const STORM: usize = 40;

    fn namespaces() -> &'static Resource {
        kcp_apis::builtin::RESOURCES
            .iter()
            .find(|r| r.group.is_empty() && r.name == "namespaces")
            .expect("the catalogue has namespaces")
    }

    /// Writes to its object (as a controller recording why it failed would), then fails.
    fn failing(registry: Registry, key: Key) -> Reconciled {
        Box::pin(async move {
            let attempt = ATTEMPTS.fetch_add(1, Ordering::SeqCst) + 1;
            if attempt > STORM {
                return Ok(Outcome::Finished);
            }
            let target = Target {
                cluster: &key.cluster,
                resource: namespaces(),
                namespace: None,
            };
            registry
                .patch(target, &key.name, &move |current: &Value| {
                    let mut next = current.clone();
                    kcp_apimachinery::object::set(
                        &mut next,
                        &["metadata", "labels", "attempt"],
                        json!(attempt.to_string()),
                    )
                    .map_err(|e| RegistryError::Internal(e.to_string()))?;
                    Ok(next)
                })
                .await?;
            Err(RegistryError::Internal(
                "this reconcile always fails".into(),
            ))
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_reconcile_backs_off_although_its_own_writes_queue_it_again() {
        let registry = Registry::new(Arc::new(MemoryStorage::new()));
        let target = Target {
            cluster: "c",
            resource: namespaces(),
            namespace: None,
        };
        registry
            .create(target, json!({"metadata": {"name": "n"}}))
            .await
            .unwrap();
        let (stop, stopped) = watch::channel(false);
        let controller = Controller {
            name: "failing",
            resource: namespaces(),
            wants: |_| true,
            listed: Listing::Summaries(|_| true),
            deletions: false,
            reconcile: failing,
            workers: WORKERS,
            also: Vec::new(),
        };
        let context = crate::Context {
            stop: stopped,
            metrics: crate::ControllerMetrics::default(),
        };
        let task = tokio::spawn(controller.run(registry, context));
        tokio::time::sleep(Duration::from_secs(5)).await;
        let attempts = ATTEMPTS.load(Ordering::SeqCst);
        stop.send(true).unwrap();
        task.await.unwrap();
        // 100 ms, doubling: attempts at 0, 0.1, 0.3, 0.7, 1.5 and 3.1 s.
        assert!(
            (4..=8).contains(&attempts),
            "{attempts} attempts in five seconds"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_list_under_way_ends_when_the_controllers_stop() {
        let (stopping, mut stop) = watch::channel(false);
        let mut relisting: Relisting<u32> = Relisting::new("test");
        let endless = std::future::pending::<Result<Watch<u32>, RegistryError>>();
        let listed = tokio::spawn(async move { relisting.list_if_due(&mut stop, endless).await });
        tokio::time::sleep(Duration::from_secs(60)).await;
        stopping.send(true).expect("the controller listens");
        let ended = tokio::time::timeout(Duration::from_secs(1), listed).await;
        assert_eq!(
            ended.expect("the list ended").expect("the list"),
            Listed::Stopped
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_broken_watch_is_listed_again_after_the_delay() {
        let (_stopping, mut stop) = watch::channel(false);
        let mut relisting: Relisting<u32> = Relisting::new("test");
        let lists = AtomicUsize::new(0);
        // Counted when it runs, not when it is made.
        let list = || async {
            lists.fetch_add(1, Ordering::SeqCst);
            let watch: Watch<u32> = Box::pin(futures::stream::iter([
                Ok(7),
                Err(RegistryError::Internal("gone".into())),
            ]));
            Ok(watch)
        };
        assert_eq!(relisting.list_if_due(&mut stop, list()).await, Listed::GoOn);
        assert_eq!(relisting.next().await, Some(7));
        assert_eq!(relisting.next().await, None, "the watch broke");
        let due = relisting.resync_at().expect("a list is due");
        // Not before its time: the list is not run.
        relisting.list_if_due(&mut stop, list()).await;
        assert_eq!(lists.load(Ordering::SeqCst), 1);
        tokio::time::sleep_until(due).await;
        relisting.list_if_due(&mut stop, list()).await;
        assert_eq!(lists.load(Ordering::SeqCst), 2);
        assert_eq!(relisting.resync_at(), None);
    }

    /// A store whose ranges wait while `lists_open` is false, and whose watches all end with
    /// an error (as one that fell behind a compaction does) when `breaks` changes.
    struct Gated {
        inner: MemoryStorage,
        lists_open: watch::Sender<bool>,
        breaks: watch::Sender<u32>,
    }

    #[async_trait::async_trait]
    impl Storage for Gated {
        async fn get(&self, key: &[u8], revision: Revision) -> StorageResult<GetResponse> {
            self.inner.get(key, revision).await
        }

        async fn range(&self, request: RangeRequest) -> StorageResult<RangeResponse> {
            let mut open = self.lists_open.subscribe();
            let _ = open.wait_for(|open| *open).await;
            self.inner.range(request).await
        }

        async fn txn(&self, txn: Txn) -> StorageResult<TxnResponse> {
            self.inner.txn(txn).await
        }

        async fn watch(&self, request: WatchRequest) -> StorageResult<WatchStream> {
            let events = self.inner.watch(request).await?;
            let mut breaks = self.breaks.subscribe();
            let broken = async move {
                let _ = breaks.changed().await;
            };
            let gone = futures::stream::once(async {
                Err(StorageError::Compacted {
                    requested: 1,
                    compacted: 2,
                })
            });
            Ok(Box::pin(events.take_until(broken).chain(gone)))
        }

        async fn compact(&self, revision: Revision) -> StorageResult<()> {
            self.inner.compact(revision).await
        }

        async fn current_revision(&self) -> StorageResult<Revision> {
            self.inner.current_revision().await
        }
    }

    /// Names [`ticking`] was given, in order.
    static TICKED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

    /// Comes back to its object every 100 ms.
    fn ticking(_: Registry, key: Key) -> Reconciled {
        TICKED.lock().unwrap().push(key.name);
        Box::pin(async { Ok(Outcome::Again(Duration::from_millis(100))) })
    }

    fn ticks() -> usize {
        TICKED.lock().unwrap().len()
    }

    #[tokio::test(start_paused = true)]
    async fn reconciles_go_on_while_a_broken_watch_is_listed_again() {
        let storage = Arc::new(Gated {
            inner: MemoryStorage::new(),
            lists_open: watch::channel(true).0,
            breaks: watch::channel(0).0,
        });
        let registry = Registry::new(storage.clone());
        let create = |name: &'static str| {
            let registry = registry.clone();
            async move {
                let target = Target {
                    cluster: "c",
                    resource: namespaces(),
                    namespace: None,
                };
                let object = json!({"metadata": {"name": name}});
                registry.create(target, object).await.unwrap();
            }
        };
        create("first").await;
        let (stop, stopped) = watch::channel(false);
        let controller = Controller {
            name: "ticking",
            resource: namespaces(),
            wants: |_| true,
            listed: Listing::Summaries(|_| true),
            deletions: false,
            reconcile: ticking,
            workers: WORKERS,
            also: Vec::new(),
        };
        let context = crate::Context {
            stop: stopped,
            metrics: crate::ControllerMetrics::default(),
        };
        let task = tokio::spawn(controller.run(registry.clone(), context));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(ticks() >= 5, "{} reconciles in a second", ticks());

        // The watch breaks, and the list it calls for (after `RESYNC_DELAY`) cannot read.
        storage.lists_open.send_replace(false);
        storage.breaks.send_replace(1);
        tokio::time::sleep(RESYNC_DELAY + Duration::from_millis(500)).await;
        let before = ticks();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let during = ticks() - before;
        assert!(
            during >= 10,
            "{during} reconciles in the two seconds the list waited"
        );

        // Once it can read, the list ends and the watch from its revision follows.
        storage.lists_open.send_replace(true);
        tokio::time::sleep(Duration::from_secs(2)).await;
        create("later").await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(TICKED.lock().unwrap().iter().any(|name| name == "later"));
        stop.send(true).unwrap();
        task.await.unwrap();
    }

    /// Keys [`recording`] was given.
    static RECONCILED: std::sync::Mutex<Vec<Key>> = std::sync::Mutex::new(Vec::new());

    fn recording(_: Registry, key: Key) -> Reconciled {
        RECONCILED.lock().unwrap().push(key);
        Box::pin(async { Ok(Outcome::Finished) })
    }

    fn reconciled() -> Vec<String> {
        let mut keys: Vec<_> = RECONCILED.lock().unwrap().drain(..).collect();
        keys.sort_by_key(|k| (k.cluster.clone(), k.name.clone()));
        let path = |k: Key| format!("{}/{}/{}", k.cluster, k.namespace, k.name);
        keys.into_iter().map(path).collect()
    }

    #[tokio::test(start_paused = true)]
    async fn a_list_queues_what_the_summaries_accept_and_listing_nothing_waits_for_events() {
        let registry = Registry::new(Arc::new(MemoryStorage::new()));
        let config_maps = kcp_apis::builtin::core("configmaps");
        let create = |cluster: &'static str, name: &'static str| {
            let registry = registry.clone();
            async move {
                let target = Target {
                    cluster,
                    resource: config_maps,
                    namespace: Some("ns"),
                };
                registry
                    .create(target, json!({"metadata": {"name": name}}))
                    .await
                    .unwrap();
            }
        };
        for cluster in ["c1", "c2"] {
            let target = Target {
                cluster,
                resource: namespaces(),
                namespace: None,
            };
            registry
                .create(target, json!({"metadata": {"name": "ns"}}))
                .await
                .unwrap();
        }
        create("c1", "wanted-a").await;
        create("c1", "other").await;
        create("c2", "wanted-b").await;
        let controller = |listed| Controller {
            name: "recording",
            resource: config_maps,
            wants: |_| true,
            listed,
            deletions: false,
            reconcile: recording,
            workers: WORKERS,
            also: Vec::new(),
        };
        let run = |controller: Controller| {
            let (stop, stopped) = watch::channel(false);
            let context = crate::Context {
                stop: stopped,
                metrics: crate::ControllerMetrics::default(),
            };
            (
                stop,
                tokio::spawn(controller.run(registry.clone(), context)),
            )
        };

        let accepts: fn(&Summary) -> bool = |summary| summary.name.starts_with("wanted");
        let (stop, task) = run(controller(Listing::Summaries(accepts)));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(reconciled(), ["c1/ns/wanted-a", "c2/ns/wanted-b"]);
        stop.send(true).unwrap();
        task.await.unwrap();

        let (stop, task) = run(controller(Listing::Nothing));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(reconciled(), Vec::<String>::new(), "nothing listed");
        create("c2", "later").await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert_eq!(reconciled(), ["c2/ns/later"], "events still come");
        stop.send(true).unwrap();
        task.await.unwrap();
    }
}
