//! The deployment splitter (kcp's 2021 prototype's): a Deployment of a workspace that names no
//! cluster (no `kcp.dev/cluster` label) and is not itself a leaf is split across the
//! workspace's Ready clusters that serve Deployments, into leaf Deployments `<name>--<cluster>`
//! (labelled `kcp.dev/cluster=<cluster>` and `kcp.dev/owned-by=<name>`, owned by the root, so
//! that the syncer takes each to its cluster and deleting the root deletes them); replicas are
//! divided evenly, the remainder to the first clusters by name. The root's status is the sum of
//! its leaves' (its `observedGeneration` its own once every leaf has caught up with the share
//! it was given), so `kubectl rollout status` on the root reports what runs. Beyond the
//! prototype: a root is split again when clusters become Ready or stop being so, when it is
//! scaled or changed, and when a leaf is deleted or changed by hand; a cordoned cluster keeps
//! its share but gets no new one, and a drained one gives its share up make-before-break (its
//! leaf is deleted only once the leaves that took its share are available: see
//! [`crate::placement`]). The root's conditions say `Available` (kube's reasons) and `Split`
//! (the shares, or `Draining`, or `NoClusters`).

use std::collections::BTreeMap;
use std::pin::pin;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use http::Method;
use kcp_sdk::Queue;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

use crate::kinds::CLUSTER_LABEL;
use crate::placement::{Placement, Standing};
use crate::requests::{self, Answer};

pub use crate::kinds::OWNED_BY_LABEL;

/// The status fields that are counts, summed over the leaves.
const COUNTS: &[&str] = &[
    "replicas",
    "updatedReplicas",
    "readyReplicas",
    "availableReplicas",
    "unavailableReplicas",
    "terminatingReplicas",
];

/// Each cluster's share of `replicas`, by cluster name: even, the remainder first.
pub fn shares(replicas: i64, clusters: &[String]) -> BTreeMap<String, i64> {
    let mut names = clusters.to_vec();
    names.sort();
    names.dedup();
    let count = names.len() as i64;
    names
        .into_iter()
        .enumerate()
        .map(|(i, name)| {
            let share = replicas / count + i64::from((i as i64) < replicas % count);
            (name, share)
        })
        .collect()
}

/// Whether `deployment` is one the splitter splits: assigned to no cluster, and no leaf.
pub fn is_root(deployment: &Value) -> bool {
    let labels = &deployment["metadata"]["labels"];
    labels.get(CLUSTER_LABEL).is_none() && labels.get(OWNED_BY_LABEL).is_none()
}

/// The leaf of `root` for `cluster`, with `replicas`.
pub fn leaf(root: &Value, cluster: &str, replicas: i64) -> Value {
    let name = root["metadata"]["name"].as_str().unwrap_or_default();
    let mut labels = root["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    labels.insert(CLUSTER_LABEL.into(), json!(cluster));
    labels.insert(OWNED_BY_LABEL.into(), json!(name));
    let mut spec = root["spec"].clone();
    spec["replicas"] = json!(replicas);
    json!({
        "apiVersion": root["apiVersion"],
        "kind": root["kind"],
        "metadata": {
            "name": format!("{name}--{cluster}"),
            "namespace": root["metadata"]["namespace"],
            "labels": labels,
            "ownerReferences": [{
                "apiVersion": root["apiVersion"],
                "kind": root["kind"],
                "name": name,
                "uid": root["metadata"]["uid"],
                "controller": true,
                "blockOwnerDeletion": true,
            }],
        },
        "spec": spec,
    })
}

/// The root's status from its leaves': counts summed; `observedGeneration` the root's own once
/// every leaf observed its own current generation (else what the root said before).
pub fn root_status(root: &Value, leaves: &[Value], complete: bool) -> Value {
    let mut status = serde_json::Map::new();
    for count in COUNTS {
        let sum: i64 = leaves
            .iter()
            .filter_map(|l| l["status"][*count].as_i64())
            .sum();
        if sum != 0 || leaves.iter().any(|l| l["status"].get(*count).is_some()) {
            status.insert((*count).into(), json!(sum));
        }
    }
    let caught_up = complete
        && leaves.iter().all(|l| {
            let generation = l["metadata"]["generation"].as_i64().unwrap_or_default();
            l["status"]["observedGeneration"]
                .as_i64()
                .is_some_and(|o| o >= generation)
        });
    let observed = match caught_up {
        true => root["metadata"]["generation"].clone(),
        false => root["status"]["observedGeneration"].clone(),
    };
    if !observed.is_null() {
        status.insert("observedGeneration".into(), observed);
    }
    Value::Object(status)
}

/// What the splitter of one workspace needs.
#[derive(Clone)]
pub struct SplitterOptions {
    /// The Deployments resource as the workspace serves it.
    pub deployments: ApiResource,
    /// How often every root is split again.
    pub resync: Duration,
}

/// The clusters a workspace's roots may be split over now, with their standing: a function,
/// since Clusters come and go.
pub type Placements = Arc<dyn Fn() -> Placement + Send + Sync>;

/// A root, by namespace and name.
type RootKey = (String, String);

/// Splits the roots of the workspace `client` talks to until `stop` completes.
pub async fn run(
    client: kube::Client,
    options: SplitterOptions,
    placements: Placements,
    stop: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &options.deployments);
    let writer = reflector::store::Writer::new(options.deployments.clone());
    let store = writer.as_reader();
    let mut events = pin!(reflector::reflector(
        writer,
        watcher(api, watcher::Config::default()).default_backoff()
    ));
    let mut stop = pin!(stop);
    let mut queue: Queue<RootKey> = Queue::new();
    let mut running = FuturesUnordered::new();
    let mut resync = tokio::time::interval(options.resync);
    let mut clusters = placements();
    let mut look = tokio::time::interval(Duration::from_millis(500));
    loop {
        while running.len() < 8 {
            let Some(key) = queue.pop() else { break };
            let (client, store, options, clusters) = (
                client.clone(),
                store.clone(),
                options.clone(),
                clusters.clone(),
            );
            running.push(async move {
                let outcome = split(&client, &store, &options, &clusters, &key).await;
                (key, outcome)
            });
        }
        let due = queue.next_due();
        tokio::select! {
            _ = &mut stop => return Ok(()),
            event = events.next() => match event {
                Some(Ok(watcher::Event::Apply(object) | watcher::Event::Delete(object))) => {
                    if let Some(key) = root_key(&object) {
                        queue.add(key);
                    }
                }
                Some(Ok(watcher::Event::InitDone)) => every_root(&store, &mut queue),
                Some(Ok(_)) => {}
                Some(Err(error)) => tracing::info!(%error, "watch of Deployments failed; kube-rs watches again"),
                None => return Ok(()),
            },
            _ = look.tick() => {
                let now = placements();
                if now != clusters {
                    clusters = now;
                    every_root(&store, &mut queue);
                }
            }
            _ = resync.tick() => every_root(&store, &mut queue),
            Some((key, outcome)) = running.next(), if !running.is_empty() => {
                match outcome {
                    Ok(()) => queue.succeeded(&key),
                    Err(error) => {
                        tracing::info!(?key, error = format!("{error:#}"), "split failed; retrying");
                        queue.retry(key.clone());
                    }
                }
                queue.done(&key);
            }
            _ = crate::sleep_until(due), if due.is_some() => {}
        }
    }
}

fn every_root(store: &Store<DynamicObject>, queue: &mut Queue<RootKey>) {
    for object in store.state() {
        if let Some(key) = root_key(&object) {
            queue.add(key);
        }
    }
}

/// The root a Deployment is (or is a leaf of).
fn root_key(object: &DynamicObject) -> Option<RootKey> {
    let namespace = object.metadata.namespace.clone()?;
    let labels = object.metadata.labels.as_ref();
    match labels.and_then(|l| l.get(OWNED_BY_LABEL)) {
        Some(root) => Some((namespace, root.clone())),
        None if labels.is_some_and(|l| l.contains_key(CLUSTER_LABEL)) => None,
        None => Some((namespace, object.metadata.name.clone()?)),
    }
}

/// The cluster a leaf is assigned to.
fn leaf_cluster(leaf: &Value) -> String {
    leaf["metadata"]["labels"][CLUSTER_LABEL]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Whether a leaf runs what it was last given: its generation observed, all its replicas
/// available.
fn available(leaf: &Value) -> bool {
    let generation = leaf["metadata"]["generation"].as_i64().unwrap_or_default();
    let wanted = leaf["spec"]["replicas"].as_i64().unwrap_or(1);
    leaf["status"]["observedGeneration"]
        .as_i64()
        .is_some_and(|o| o >= generation)
        && leaf["status"]["availableReplicas"].as_i64().unwrap_or(0) >= wanted
}

/// The clusters a root with leaves on `on` is split over: the schedulable ones, and cordoned
/// ones it already runs on (a cordon takes nothing away); a drained cluster only while no
/// other can take its share.
pub fn targets(placement: &Placement, on: &[String]) -> Vec<String> {
    let keeps = |standing: Standing| {
        placement
            .iter()
            .filter(move |(name, s)| **s == standing && on.contains(name))
            .map(|(name, _)| name.clone())
    };
    let mut targets = crate::placement::schedulable(placement);
    targets.extend(keeps(Standing::Cordoned));
    if targets.is_empty() {
        targets.extend(keeps(Standing::Evicting));
    }
    targets.sort();
    targets
}

/// The root's `Available` condition (as kube's deployment controller words it) and its `Split`
/// one (the clusters and shares, or why there are none).
fn root_conditions(
    conditions: &mut Vec<Value>,
    root: &Value,
    status: &Value,
    wanted: &BTreeMap<String, i64>,
    draining: &[String],
) {
    let replicas = root["spec"]["replicas"].as_i64().unwrap_or(1);
    let available = status["availableReplicas"].as_i64().unwrap_or(0);
    let (state, reason) = match available >= replicas {
        true => ("True", "MinimumReplicasAvailable"),
        false => ("False", "MinimumReplicasUnavailable"),
    };
    let message = match available >= replicas {
        true => "Deployment has minimum availability.",
        false => "Deployment does not have minimum availability.",
    };
    crate::kinds::set_condition(conditions, "Available", state, reason, message);
    let shares: Vec<String> = wanted.iter().map(|(c, n)| format!("{c}={n}")).collect();
    let (state, reason, message) = match (wanted.is_empty(), draining.is_empty()) {
        (true, _) => (
            "False",
            "NoClusters",
            "no Ready cluster serves Deployments".to_string(),
        ),
        (false, true) => ("True", "Split", shares.join(", ")),
        (false, false) => (
            "True",
            "Draining",
            format!(
                "{}; moving off {} once available there",
                shares.join(", "),
                draining.join(", ")
            ),
        ),
    };
    crate::kinds::set_condition(conditions, "Split", state, reason, &message);
}

async fn split(
    client: &kube::Client,
    store: &Store<DynamicObject>,
    options: &SplitterOptions,
    clusters: &Placement,
    (namespace, name): &RootKey,
) -> anyhow::Result<()> {
    let all: Vec<Value> = store
        .state()
        .iter()
        .filter(|o| o.metadata.namespace.as_deref() == Some(namespace))
        .filter_map(|o| serde_json::to_value(&**o).ok())
        .collect();
    let leaves: Vec<&Value> = all
        .iter()
        .filter(|d| d["metadata"]["labels"][OWNED_BY_LABEL] == name.as_str())
        .collect();
    let deployments = &options.deployments;
    let root = all.iter().find(|d| d["metadata"]["name"] == name.as_str());
    let Some(root) = root.filter(|d| is_root(d)) else {
        // Assigned to a cluster since: its leaves go. Gone: they go with it (owned by it).
        if root.is_some() {
            for leaf in &leaves {
                let leaf_name = leaf["metadata"]["name"].as_str().unwrap_or_default();
                requests::delete(
                    client,
                    &requests::path(deployments, Some(namespace), leaf_name),
                )
                .await?;
            }
        }
        return Ok(());
    };
    if root["metadata"]["deletionTimestamp"].is_string() {
        return Ok(());
    }
    let replicas = root["spec"]["replicas"].as_i64().unwrap_or(1);
    let on: Vec<String> = leaves.iter().map(|l| leaf_cluster(l)).collect();
    let targets = targets(clusters, &on);
    let wanted = match targets.is_empty() {
        true => BTreeMap::new(),
        false => shares(replicas, &targets),
    };
    let mut complete = !wanted.is_empty();
    for (cluster, share) in &wanted {
        let desired = leaf(root, cluster, *share);
        let leaf_name = desired["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        match leaves
            .iter()
            .find(|l| l["metadata"]["name"] == leaf_name.as_str())
        {
            None => {
                complete = false;
                let path = requests::collection(deployments, Some(namespace));
                match requests::send(
                    client,
                    Method::POST,
                    &path,
                    Some(&desired),
                    "application/json",
                )
                .await?
                {
                    Answer::Ok(_) | Answer::AlreadyExists => {}
                    _ => anyhow::bail!("could not create the leaf {leaf_name}"),
                }
            }
            Some(existing)
                if existing["spec"] != desired["spec"]
                    || existing["metadata"]["labels"] != desired["metadata"]["labels"] =>
            {
                complete = false;
                let mut updated = (*existing).clone();
                updated["spec"] = desired["spec"].clone();
                updated["metadata"]["labels"] = desired["metadata"]["labels"].clone();
                let path = requests::path(deployments, Some(namespace), &leaf_name);
                requests::write(client, Method::PUT, &path, &updated).await?;
            }
            Some(_) => {}
        }
    }
    // A drained cluster's leaf goes once the leaves taking its share run it (make-before-break);
    // a lost cluster's at once.
    let replaced = complete
        && leaves
            .iter()
            .filter(|l| wanted.contains_key(&leaf_cluster(l)))
            .all(|l| available(l));
    let mut draining = Vec::new();
    for stale in leaves
        .iter()
        .filter(|l| !wanted.contains_key(&leaf_cluster(l)))
    {
        let cluster = leaf_cluster(stale);
        if clusters.get(&cluster) == Some(&Standing::Evicting) && !replaced {
            draining.push(cluster);
            continue;
        }
        complete = false;
        let leaf_name = stale["metadata"]["name"].as_str().unwrap_or_default();
        requests::delete(
            client,
            &requests::path(deployments, Some(namespace), leaf_name),
        )
        .await?;
    }
    let current: Vec<Value> = leaves
        .iter()
        .filter(|l| {
            let cluster = leaf_cluster(l);
            wanted.contains_key(&cluster) || draining.contains(&cluster)
        })
        .map(|l| (*l).clone())
        .collect();
    complete &= draining.is_empty();
    let status = root_status(root, &current, complete);
    let mut merged = root["status"].clone();
    if !merged.is_object() {
        merged = json!({});
    }
    for (key, value) in status.as_object().into_iter().flatten() {
        merged[key] = value.clone();
    }
    for count in COUNTS {
        if status.get(*count).is_none()
            && let Some(fields) = merged.as_object_mut()
        {
            fields.remove(*count);
        }
    }
    let mut conditions = merged["conditions"].as_array().cloned().unwrap_or_default();
    let split_before =
        crate::kinds::condition(root, "Split").map(|c| (c["reason"].clone(), c["message"].clone()));
    root_conditions(&mut conditions, root, &status, &wanted, &draining);
    merged["conditions"] = Value::Array(conditions);
    if merged != root["status"] {
        let mut updated = root.clone();
        updated["status"] = merged;
        let path = format!(
            "{}/status",
            requests::path(deployments, Some(namespace), name)
        );
        requests::write(client, Method::PUT, &path, &updated).await?;
        if let Some(split) = crate::kinds::condition(&updated, "Split")
            && split_before != Some((split["reason"].clone(), split["message"].clone()))
        {
            let reason = split["reason"].as_str().unwrap_or_default();
            let kind = if reason == "NoClusters" {
                "Warning"
            } else {
                "Normal"
            };
            crate::events::record(
                client,
                crate::events::Event {
                    object: root,
                    api_version: "apps/v1",
                    object_kind: "Deployment",
                    kind,
                    reason,
                    message: split["message"].as_str().unwrap_or_default(),
                },
            )
            .await;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn cordons_keep_shares_and_drains_give_them_up_when_another_can_take_them() {
        let placement = Placement::from([
            ("cordoned".to_string(), Standing::Cordoned),
            ("drained".to_string(), Standing::Evicting),
            ("ready".to_string(), Standing::Schedulable),
        ]);
        let on = names(&["cordoned", "drained"]);
        assert_eq!(targets(&placement, &on), ["cordoned", "ready"]);
        assert_eq!(targets(&placement, &[]), ["ready"]);
        let alone = Placement::from([("drained".to_string(), Standing::Evicting)]);
        assert_eq!(targets(&alone, &names(&["drained"])), ["drained"]);
        assert!(targets(&alone, &[]).is_empty());
    }

    #[test]
    fn a_leaf_is_available_once_it_runs_its_share() {
        let mut leaf = json!({"metadata": {"generation": 2}, "spec": {"replicas": 3},
            "status": {"observedGeneration": 1, "availableReplicas": 3}});
        assert!(!available(&leaf));
        leaf["status"]["observedGeneration"] = json!(2);
        assert!(available(&leaf));
        leaf["spec"]["replicas"] = json!(4);
        assert!(!available(&leaf));
    }

    #[test]
    fn replicas_are_divided_evenly_the_remainder_first() {
        let split = shares(5, &names(&["west", "east"]));
        assert_eq!(
            split,
            BTreeMap::from([("east".into(), 3), ("west".into(), 2)])
        );
        let split = shares(8, &names(&["east", "west", "north"]));
        assert_eq!(split.values().copied().collect::<Vec<_>>(), [3, 3, 2]);
        assert_eq!(shares(1, &names(&["a", "b"]))["b"], 0);
    }

    #[test]
    fn a_leaf_is_the_root_with_its_share_and_labels() {
        let root = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "uid": "r1", "labels": {"app": "web"}, "generation": 2},
            "spec": {"replicas": 5, "template": {"metadata": {"labels": {"app": "web"}}}},
        });
        assert!(is_root(&root));
        let east = leaf(&root, "east", 3);
        assert_eq!(east["metadata"]["name"], "web--east");
        assert_eq!(
            east["metadata"]["labels"],
            json!({"app": "web", "kcp.dev/cluster": "east", "kcp.dev/owned-by": "web"})
        );
        assert_eq!(east["metadata"]["ownerReferences"][0]["uid"], "r1");
        assert_eq!(east["spec"]["replicas"], 3);
        assert!(!is_root(&east));

        let mut leaves = vec![east.clone(), leaf(&root, "west", 2)];
        for (leaf, (available, observed)) in leaves.iter_mut().zip([(3, 1), (2, 1)]) {
            leaf["metadata"]["generation"] = json!(1);
            leaf["status"] = json!({"replicas": available, "availableReplicas": available, "observedGeneration": observed});
        }
        let status = root_status(&root, &leaves, true);
        assert_eq!(
            status,
            json!({"replicas": 5, "availableReplicas": 5, "observedGeneration": 2})
        );
        leaves[1]["metadata"]["generation"] = json!(2);
        let status = root_status(&root, &leaves, true);
        assert!(status.get("observedGeneration").is_none(), "{status}");
    }
}
