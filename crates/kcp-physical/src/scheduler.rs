//! The namespace scheduler: every namespace of a workspace with Clusters is placed on one
//! schedulable cluster (label `kcp.dev/cluster` on the Namespace, and the annotation
//! [`PLACED_ANNOTATION`] saying the scheduler chose it), the one with the fewest namespaces
//! (ties by name); the syncer then takes everything in it there that is not assigned on its
//! own (see [`crate::syncer`]). A namespace a user labelled is theirs and never moved; one the
//! scheduler placed moves when its cluster is drained, lost past the unreachable grace period,
//! or deleted, and stays on a cordoned one. Kubernetes' own `kube-*` namespaces are never
//! placed.
//!
//! One pass places every namespace at once (counts kept as it goes, so that namespaces made
//! together spread), after any change of a namespace or of the clusters' standing.

use std::collections::BTreeMap;
use std::pin::pin;
use std::time::Duration;

use futures::StreamExt;
use http::Method;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

use crate::kinds::CLUSTER_LABEL;
use crate::placement::{Placement, Standing};
use crate::requests::{self, Answer};
use crate::splitter::Placements;

/// On a Namespace: the scheduler placed it (so it may move it).
pub const PLACED_ANNOTATION: &str = "scheduling.kcp.io/placed";

/// Whether the namespace `name` is one the scheduler never places.
fn system(name: &str) -> bool {
    name.starts_with("kube-")
}

/// Where `namespace` should go now, if it should move (or be placed at all): `counts` are the
/// namespaces each cluster holds.
pub fn decide(
    namespace: &Value,
    placement: &Placement,
    counts: &BTreeMap<String, usize>,
) -> Option<String> {
    let metadata = &namespace["metadata"];
    if system(metadata["name"].as_str().unwrap_or_default())
        || metadata["deletionTimestamp"].is_string()
    {
        return None;
    }
    let current = metadata["labels"][CLUSTER_LABEL].as_str();
    let ours = metadata["annotations"][PLACED_ANNOTATION] == "true";
    match current {
        Some(_) if !ours => return None,
        Some(cluster)
            if matches!(
                placement.get(cluster),
                Some(Standing::Schedulable | Standing::Cordoned)
            ) =>
        {
            return None;
        }
        _ => {}
    }
    let best = crate::placement::schedulable(placement)
        .into_iter()
        .min_by_key(|c| (counts.get(c).copied().unwrap_or(0), c.clone()))?;
    (current != Some(best.as_str())).then_some(best)
}

/// The namespaces each cluster holds.
fn counts(namespaces: &[Value]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for namespace in namespaces {
        if let Some(cluster) = namespace["metadata"]["labels"][CLUSTER_LABEL].as_str() {
            *counts.entry(cluster.to_string()).or_insert(0) += 1;
        }
    }
    counts
}

/// One pass: places or moves every namespace that needs it.
async fn pass(
    client: &kube::Client,
    store: &Store<DynamicObject>,
    placement: &Placement,
) -> anyhow::Result<()> {
    let mut namespaces: Vec<Value> = store
        .state()
        .iter()
        .filter_map(|n| serde_json::to_value(&**n).ok())
        .collect();
    namespaces.sort_by(|a, b| {
        let name = |n: &Value| {
            n["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        };
        name(a).cmp(&name(b))
    });
    let mut counts = counts(&namespaces);
    for namespace in &namespaces {
        let Some(cluster) = decide(namespace, placement, &counts) else {
            continue;
        };
        let name = namespace["metadata"]["name"].as_str().unwrap_or_default();
        if let Some(from) = namespace["metadata"]["labels"][CLUSTER_LABEL].as_str()
            && let Some(count) = counts.get_mut(from)
        {
            *count = count.saturating_sub(1);
        }
        *counts.entry(cluster.clone()).or_insert(0) += 1;
        let patch = json!({"metadata": {
            "resourceVersion": namespace["metadata"]["resourceVersion"],
            "labels": {CLUSTER_LABEL: cluster},
            "annotations": {PLACED_ANNOTATION: "true"},
        }});
        tracing::info!(namespace = name, cluster, "namespace placed");
        match requests::send(
            client,
            Method::PATCH,
            &format!("/api/v1/namespaces/{name}"),
            Some(&patch),
            "application/merge-patch+json",
        )
        .await?
        {
            Answer::Ok(_) => {
                let message = match namespace["metadata"]["labels"][CLUSTER_LABEL].as_str() {
                    Some(from) => format!("moved from cluster {from} to {cluster}"),
                    None => format!("placed on cluster {cluster}"),
                };
                crate::events::record(
                    client,
                    crate::events::Event {
                        object: namespace,
                        api_version: "v1",
                        object_kind: "Namespace",
                        kind: "Normal",
                        reason: "Placed",
                        message: &message,
                    },
                )
                .await;
            }
            Answer::NotFound => {}
            _ => anyhow::bail!("could not place namespace {name}"),
        }
    }
    Ok(())
}

/// Places the namespaces of the workspace `client` talks to until `stop` completes.
pub async fn run(
    client: kube::Client,
    placements: Placements,
    stop: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let resource = ApiResource::erase::<k8s_openapi::api::core::v1::Namespace>(&());
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let writer = reflector::store::Writer::new(resource);
    let store = writer.as_reader();
    let mut events = pin!(reflector::reflector(
        writer,
        watcher(api, watcher::Config::default()).default_backoff()
    ));
    let mut stop = pin!(stop);
    let mut placement = placements();
    let mut look = tokio::time::interval(Duration::from_millis(500));
    let mut ready = false;
    let mut dirty = true;
    loop {
        if ready && dirty {
            dirty = false;
            if let Err(error) = pass(&client, &store, &placement).await {
                tracing::info!(
                    error = format!("{error:#}"),
                    "namespace placement failed; retrying"
                );
                dirty = true;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        tokio::select! {
            _ = &mut stop => return Ok(()),
            event = events.next() => match event {
                Some(Ok(watcher::Event::InitDone)) => { ready = true; dirty = true; }
                Some(Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_))) => dirty = true,
                Some(Ok(_)) => {}
                Some(Err(error)) => tracing::info!(%error, "watch of namespaces failed; kube-rs watches again"),
                None => return Ok(()),
            },
            _ = look.tick() => {
                let now = placements();
                if now != placement {
                    placement = now;
                    dirty = true;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn namespace(name: &str, cluster: Option<&str>, ours: bool) -> Value {
        let mut namespace = json!({"metadata": {"name": name, "labels": {}, "annotations": {}}});
        if let Some(cluster) = cluster {
            namespace["metadata"]["labels"][CLUSTER_LABEL] = json!(cluster);
        }
        if ours {
            namespace["metadata"]["annotations"][PLACED_ANNOTATION] = json!("true");
        }
        namespace
    }

    #[test]
    fn namespaces_go_to_the_emptiest_schedulable_cluster_and_stay_there() {
        let placement = Placement::from([
            ("east".to_string(), Standing::Schedulable),
            ("west".to_string(), Standing::Schedulable),
            ("north".to_string(), Standing::Cordoned),
        ]);
        let counts = BTreeMap::from([("east".to_string(), 2), ("west".to_string(), 1)]);
        assert_eq!(
            decide(&namespace("a", None, false), &placement, &counts),
            Some("west".into())
        );
        assert_eq!(
            decide(&namespace("a", None, false), &placement, &BTreeMap::new()),
            Some("east".into())
        );
        // Placed already, even on a cordoned cluster: stays; Kubernetes' own: never placed.
        assert_eq!(
            decide(&namespace("a", Some("north"), true), &placement, &counts),
            None
        );
        assert_eq!(
            decide(&namespace("kube-system", None, false), &placement, &counts),
            None
        );
        // Drained or lost: moves if the scheduler placed it, not if a user did.
        let drained = Placement::from([
            ("east".to_string(), Standing::Evicting),
            ("west".to_string(), Standing::Schedulable),
        ]);
        assert_eq!(
            decide(&namespace("a", Some("east"), true), &drained, &counts),
            Some("west".into())
        );
        assert_eq!(
            decide(&namespace("a", Some("gone"), true), &drained, &counts),
            Some("west".into())
        );
        assert_eq!(
            decide(&namespace("a", Some("east"), false), &drained, &counts),
            None
        );
        // Nowhere to go: stays where it is.
        let none = Placement::from([("east".to_string(), Standing::Evicting)]);
        assert_eq!(
            decide(&namespace("a", Some("east"), true), &none, &counts),
            None
        );
        assert_eq!(decide(&namespace("a", None, false), &none, &counts), None);
    }
}
