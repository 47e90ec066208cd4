//! The garbage collector: objects whose owners are gone go too, in every logical cluster, for
//! every kind (built-in, kcp's, custom), as Kubernetes' collector does it.
//!
//! One task serves every logical cluster. It reads the store's ownership feed
//! ([`kcp_registry::ownership`]): one list, then one watch of everything, of which only objects
//! with owner references or one of the collector's finalizers are decoded. It keeps the
//! ownership [`graph`] (memory in proportion to objects with owners, none per workspace) and a
//! work queue of two kinds of steps, run a few at a time with backoff on error:
//! - [`dependent`]: a dependent whose owner went (or that was just written) is deleted when
//!   none of its owners is left, or loses the references to owners that are gone;
//! - [`finalizer`]: an owner deleted with propagation `Orphan` or `Foreground` has its
//!   dependents orphaned or deleted first, then its finalizer removed.
//!
//! The propagation policy itself is the registry's (`DeleteOptions`): a delete sets the
//! `orphan` or `foregroundDeletion` finalizer, or neither (background: the owner goes at once
//! and its dependents follow here).

mod dependent;
mod finalizer;
mod graph;

use std::pin::Pin;

use futures::stream::{FuturesUnordered, StreamExt};
use kcp_apis::builtin::{Resource, ResourceRef};
use kcp_registry::ownership::{Location, OwnershipEvent};
use kcp_registry::{Registry, RegistryError, Target};
use serde_json::Value;

use crate::Context;
use crate::driver::{Listed, Relisting, Watch, sleep_until};
use crate::queue::WorkQueue;
use graph::{Graph, Work};

/// The controller's name in logs and metrics.
const NAME: &str = "garbagecollector";
/// How many steps run at once.
const WORKERS: usize = 16;
type Events = Watch<OwnershipEvent>;

/// Runs the collector until `stop` turns true.
pub async fn run(registry: Registry, context: Context) {
    let mut stop = context.stop;
    let metrics = context.metrics.queue(NAME);
    let mut graph = Graph::default();
    let mut queue: WorkQueue<Work> = WorkQueue::new().with_metrics(metrics.clone());
    let mut watch = Relisting::new(NAME);
    let mut in_flight = FuturesUnordered::new();
    loop {
        let listing = list_and_watch(&registry, &mut graph, &mut queue);
        if watch.list_if_due(&mut stop, listing).await == Listed::Stopped {
            return;
        }
        while in_flight.len() < WORKERS {
            let Some(work) = queue.next() else { break };
            in_flight.push(metrics.timed(step(&registry, &graph, work)));
        }
        let wake_at = [queue.next_deadline(), watch.resync_at()]
            .into_iter()
            .flatten()
            .min();
        tokio::select! {
            _ = stop.wait_for(|stopped| *stopped) => return,
            event = watch.next() => {
                for work in event.into_iter().flat_map(|event| graph.apply(event)) {
                    queue.add(work);
                }
            }
            Some((work, outcome)) = in_flight.next(), if !in_flight.is_empty() => {
                match outcome {
                    Ok(next) => {
                        queue.forget(&work);
                        for next in next {
                            queue.add(next);
                        }
                    }
                    Err(error) => {
                        tracing::warn!(controller = NAME, ?work, %error, "retrying");
                        queue.add_rate_limited(work.clone());
                    }
                }
                queue.done(&work);
            }
            _ = sleep_until(wake_at), if wake_at.is_some() => {}
        }
    }
}

/// Lists every object that takes part in ownership into a fresh graph, and watches from there.
async fn list_and_watch(
    registry: &Registry,
    graph: &mut Graph,
    queue: &mut WorkQueue<Work>,
) -> Result<Events, RegistryError> {
    let (found, revision) = registry.list_ownership().await?;
    graph.clear();
    for (location, object) in found {
        for work in graph.listed(location, &object) {
            queue.add(work);
        }
    }
    tracing::info!(
        controller = NAME,
        dependents = graph.len(),
        revision,
        "ownership listed"
    );
    Ok(Box::pin(registry.watch_ownership(revision).await?))
}

type Stepped = Pin<Box<dyn Future<Output = (Work, Result<Vec<Work>, RegistryError>)> + Send>>;

/// A step of `work`, with what it needs of the graph taken now.
fn step(registry: &Registry, graph: &Graph, work: Work) -> Stepped {
    let registry = registry.clone();
    match work {
        Work::Dependent(location) => {
            let uid = graph.uid_at(&location);
            let dependents = dependent::Dependents {
                any: uid.is_some_and(|uid| graph.has_dependents(&location.cluster, uid)),
                one_waits: uid.is_some_and(|uid| graph.a_dependent_waits(&location.cluster, uid)),
            };
            Box::pin(async move {
                let result = dependent::reconcile(&registry, &location, dependents)
                    .await
                    .map(|()| Vec::new());
                (Work::Dependent(location), result)
            })
        }
        Work::Finalizer(location) => {
            let owner = graph
                .uid_at(&location)
                .map(|uid| (uid.to_string(), graph.dependents_of(&location.cluster, uid)));
            Box::pin(async move {
                let result = match owner {
                    Some((uid, dependents)) => {
                        finalizer::reconcile(&registry, &location, &uid, dependents)
                            .await
                            .map(|served| served.check.into_iter().map(Work::Dependent).collect())
                    }
                    None => Ok(Vec::new()),
                };
                (Work::Finalizer(location), result)
            })
        }
    }
}

/// The object `name` of `target`, if there is one.
async fn read(
    registry: &Registry,
    target: Target<'_>,
    name: &str,
) -> Result<Option<Value>, RegistryError> {
    match registry.get(target, name).await {
        Ok(object) => Ok(Some(object)),
        Err(RegistryError::NotFound { .. }) => Ok(None),
        Err(other) => Err(other),
    }
}

/// The object at `location`, and the resource it is of; `None` when either is gone.
async fn read_at(
    registry: &Registry,
    location: &Location,
) -> Result<Option<(ResourceRef, Value)>, RegistryError> {
    let Some(resource) = registry.resolve_location(location) else {
        return Ok(None);
    };
    let object = read(registry, target_of(location, &resource), &location.name).await?;
    Ok(object.map(|object| (resource, object)))
}

/// Changes the object at `location` by `edit` (only if it has uid `uid`, when given); an object
/// gone, or another one now, is left alone.
async fn edit_at(
    registry: &Registry,
    location: &Location,
    uid: Option<&str>,
    edit: &(dyn Fn(&mut Value) + Send + Sync),
) -> Result<(), RegistryError> {
    let Some(resource) = registry.resolve_location(location) else {
        return Ok(());
    };
    let result = registry
        .privileged()
        .patch(
            target_of(location, &resource),
            &location.name,
            &|current: &Value| {
                let mut next = current.clone();
                if uid.is_none_or(|uid| next["metadata"]["uid"].as_str() == Some(uid)) {
                    edit(&mut next);
                }
                Ok(next)
            },
        )
        .await;
    match result {
        Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(()),
        Err(other) => Err(other),
    }
}

/// Removes an object's references to the owners `owner_uids` (and the field, once empty).
fn drop_references(object: &mut Value, owner_uids: &[String]) {
    let metadata = &mut object["metadata"];
    if let Some(references) = metadata["ownerReferences"].as_array_mut() {
        references.retain(|r| {
            !owner_uids
                .iter()
                .any(|gone| r["uid"].as_str() == Some(gone))
        });
        if references.is_empty()
            && let Some(metadata) = metadata.as_object_mut()
        {
            metadata.remove("ownerReferences");
        }
    }
}

/// Where the object at `location` is read and written.
fn target_of<'a>(location: &'a Location, resource: &'a Resource) -> Target<'a> {
    Target {
        cluster: &location.cluster,
        resource,
        namespace: (!location.namespace.is_empty()).then_some(location.namespace.as_str()),
    }
}

/// Whether an object's finalizers include `name`.
fn has_finalizer(object: &Value, name: &str) -> bool {
    object["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| f.iter().any(|v| v == name))
}
