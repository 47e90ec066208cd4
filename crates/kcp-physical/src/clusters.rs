//! A Cluster's reconcile: its kubeconfig (`spec.kubeconfig`, or the Secret
//! `spec.kubeconfigSecretRef` names, key `kubeconfig` unless it says another), a client of the
//! physical cluster, its [`Importer`] (started again when the kubeconfig or the Cluster's uid
//! changes), and its status: `Ready` (`True`/`APIsImported`; `Unknown`/`Connecting` before the
//! first import ends; `False` with `InvalidKubeConfig`, `KubeConfigSecretNotFound`,
//! `Unreachable` or `ImportFailed`) and `syncedResources`, the resources whose import is
//! compatible with the workspace's negotiated schema and available there. A Cluster that went
//! takes its importer and imports with it (they are also owned by it).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kcp_sdk::ClusterKey;
use kube::Api;
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};

use crate::importer::{Importer, Outcome};
use crate::kinds::{self, Gvr};
use crate::placement::Placement;
use crate::requests;
use crate::splitter::Placements;
use crate::{Shared, SyncerMode, pull};

/// Why a Cluster cannot be connected to: a reason and a message for its `Ready` condition.
struct Problem {
    reason: &'static str,
    message: String,
}

pub async fn reconcile(shared: &Arc<Shared>, key: &ClusterKey) -> anyhow::Result<Option<Duration>> {
    let workspace = shared.config.client(&key.cluster)?;
    let Some(cluster) = shared.clusters.get(key) else {
        uninstall(shared, key);
        forget(shared, key);
        per_workspace(shared, &key.cluster);
        for import in shared.imports_in(&key.cluster) {
            if import["spec"]["location"] == key.name.as_str() {
                let name = import["metadata"]["name"].as_str().unwrap_or_default();
                requests::delete(&workspace, &requests::path(&kinds::imports(), None, name))
                    .await?;
            }
        }
        return Ok(None);
    };
    let cluster = serde_json::to_value(&*cluster)?;
    if cluster["metadata"]["deletionTimestamp"].is_string() {
        forget(shared, key);
        return Ok(None);
    }
    let connected = match kubeconfig(&workspace, &cluster).await {
        Ok(text) => {
            let fingerprint = fingerprint(&cluster, &text);
            let running = shared
                .importers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(key)
                .is_some_and(|i| i.fingerprint == fingerprint);
            match running {
                true => Ok(()),
                false => match client(&text).await {
                    Ok(remote) => {
                        let importer = Importer::start(
                            shared.clone(),
                            key.clone(),
                            cluster.clone(),
                            remote,
                            fingerprint,
                        );
                        let previous = shared
                            .importers
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .insert(key.clone(), importer);
                        if let Some(previous) = previous {
                            previous.stop();
                        }
                        Ok(())
                    }
                    Err(message) => Err(Problem {
                        reason: "InvalidKubeConfig",
                        message,
                    }),
                },
            }
        }
        Err(problem) => Err(problem),
    };
    let outcome = match &connected {
        Ok(()) => shared
            .importers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .and_then(Importer::outcome),
        Err(_) => {
            forget(shared, key);
            None
        }
    };
    let mut conditions = cluster["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let (status, reason, message) = match (&connected, &outcome) {
        (Err(problem), _) => ("False", problem.reason, problem.message.clone()),
        (Ok(()), None) => (
            "Unknown",
            "Connecting",
            "importing the cluster's APIs".to_string(),
        ),
        // Ready once this controller sees the imports too: negotiation takes a Ready Cluster's
        // imports as all there is from it.
        (Ok(()), Some(Outcome::Imported(names))) if !imports_seen(shared, key, names) => (
            "Unknown",
            "Connecting",
            "importing the cluster's APIs".to_string(),
        ),
        (Ok(()), Some(Outcome::Imported(names))) => (
            "True",
            "APIsImported",
            format!(
                "{} of {} resources imported",
                names.len(),
                shared.options.resources.len()
            ),
        ),
        (Ok(()), Some(Outcome::Unreachable(message))) => ("False", "Unreachable", message.clone()),
        (Ok(()), Some(Outcome::Failed(message))) => ("False", "ImportFailed", message.clone()),
    };
    // Pull mode: Ready only while the syncer installed there beats.
    let (status, reason, message) = match shared.options.syncer_mode {
        SyncerMode::Pull if status == "True" => match pull(shared, key, &cluster, &workspace).await
        {
            Ok(None) => (status, reason, message),
            Ok(Some(waiting)) => ("False", "SyncerNotReady", waiting),
            Err(error) => ("False", "SyncerNotInstalled", format!("{error:#}")),
        },
        _ => (status, reason, message),
    };
    let before =
        kinds::condition(&cluster, "Ready").map(|c| (c["status"].clone(), c["reason"].clone()));
    let transition = before != Some((json!(status), json!(reason)));
    let mut changed = kinds::set_condition(&mut conditions, "Ready", status, reason, &message);
    let synced = synced_resources(shared, key);
    if shared.options.syncer_mode == SyncerMode::Push && connected.is_ok() {
        sync(shared, key);
    }
    per_workspace(shared, &key.cluster);
    changed |= cluster["status"]["syncedResources"] != json!(synced);
    if changed {
        let path = requests::path(&kinds::clusters(), None, &key.name);
        let status = json!({"conditions": conditions, "syncedResources": synced});
        requests::patch_status(&workspace, &path, &status).await?;
        if transition {
            let kind = if status == "True" {
                "Normal"
            } else {
                "Warning"
            };
            crate::events::record(
                &workspace,
                crate::events::Event {
                    object: &cluster,
                    api_version: "cluster.example.dev/v1alpha1",
                    object_kind: "Cluster",
                    kind,
                    reason,
                    message: &message,
                },
            )
            .await;
        }
    }
    // A Secret that appears, or a kubeconfig fixed in it, is seen on the next look; a
    // heartbeat is looked at often.
    match shared.options.syncer_mode {
        SyncerMode::Pull if connected.is_ok() => Ok(Some(
            shared.options.poll_interval.min(Duration::from_secs(5)),
        )),
        _ => Ok(connected.is_err().then_some(shared.options.poll_interval)),
    }
}

/// Pull mode: installs (or updates) the syncer of `key` in its cluster, and says why it is
/// not ready yet (`None` while its heartbeat is fresh).
async fn pull(
    shared: &Arc<Shared>,
    key: &ClusterKey,
    cluster: &Value,
    workspace: &kube::Client,
) -> anyhow::Result<Option<String>> {
    let resources = synced_api_resources(shared, key);
    if resources.is_empty() {
        return Ok(Some("no resource to sync yet".into()));
    }
    let install = pull::Install {
        workspace: key.cluster.clone(),
        cluster: key.name.clone(),
        resources,
        resync: shared.options.poll_interval.max(Duration::from_secs(30)),
        heartbeat: shared
            .options
            .poll_interval
            .clamp(Duration::from_secs(1), Duration::from_secs(10)),
        image: shared.options.syncer_image.clone(),
        split_roots: shared.options.split_deployments,
    };
    let fingerprint = format!(
        "{}/{}",
        cluster["metadata"]["uid"].as_str().unwrap_or_default(),
        install.fingerprint()
    );
    let installed = shared
        .installed
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(key)
        .is_some_and(|f| *f == fingerprint);
    if !installed {
        let remote = remote(shared, key);
        let Some(remote) = remote else {
            return Ok(Some("connecting".into()));
        };
        pull::apply(workspace, &pull::upstream_objects(&install, cluster)).await?;
        let Some((token, ca)) = pull::token(workspace, &key.name).await? else {
            return Ok(Some("waiting for the syncer's token".into()));
        };
        let kubeconfig =
            pull::upstream_kubeconfig(&shared.config.url_of(&key.cluster), &ca, &token);
        pull::apply(&remote, &pull::downstream_objects(&install, &kubeconfig)).await?;
        tracing::info!(cluster = %key, "syncer installed");
        shared
            .installed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.clone(), fingerprint);
    }
    let lease = pull::lease(workspace, &key.name).await?;
    if let Some(age) = lease.as_ref().and_then(pull::age) {
        shared
            .options
            .metrics
            .heartbeat(&key.cluster, &key.name, age);
    }
    Ok(match lease {
        Some(lease) if pull::fresh(&lease) => None,
        Some(_) => Some(format!(
            "the syncer's heartbeat (Lease {}/{}) stopped",
            pull::UPSTREAM_NAMESPACE,
            pull::upstream_name(&key.name)
        )),
        None => Some(format!(
            "installed in namespace {}; no heartbeat yet",
            pull::syncer_namespace(&key.cluster, &key.name)
        )),
    })
}

/// Whether this controller's watch of imports shows every one of `names` (of `key`'s workspace).
fn imports_seen(shared: &Shared, key: &ClusterKey, names: &[String]) -> bool {
    names.iter().all(|name| {
        shared
            .imports
            .get(&ClusterKey {
                cluster: key.cluster.clone(),
                namespace: String::new(),
                name: name.clone(),
            })
            .is_some()
    })
}

/// Removes from `key`'s cluster what was synced there for its workspace, and in pull mode the
/// syncer installed there (in the background: the cluster may be gone too). What it had in the
/// workspace is owned by the Cluster.
fn uninstall(shared: &Shared, key: &ClusterKey) {
    let installed = shared
        .installed
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(key);
    shared.options.metrics.forget(&key.cluster, &key.name);
    let remote = remote(shared, key);
    let Some(remote) = remote else {
        return;
    };
    let key = key.clone();
    tokio::spawn(async move {
        let mut outcome = crate::syncer::forget_downstream(&remote, &key.cluster, &key.name).await;
        if installed.is_some() && outcome.is_ok() {
            outcome = pull::uninstall(&remote, &key.cluster, &key.name).await;
        }
        if let Err(error) = outcome {
            tracing::info!(cluster = %key, error = format!("{error:#}"), "could not clean the cluster up");
        }
    });
}

/// The client of `key`'s physical cluster its importer uses, if it runs.
fn remote(shared: &Shared, key: &ClusterKey) -> Option<kube::Client> {
    shared
        .importers
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(key)
        .map(|i| i.remote.clone())
}

/// Stops the importer and the syncer of `key`, if any.
fn forget(shared: &Shared, key: &ClusterKey) {
    let importer = shared
        .importers
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(key);
    if let Some(importer) = importer {
        importer.stop();
    }
    let syncer = shared
        .syncers
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .remove(key);
    if let Some((_, syncer)) = syncer {
        syncer.abort();
    }
}

/// The namespaced resources `key`'s imports make available, as the syncer's resources.
fn synced_api_resources(shared: &Shared, key: &ClusterKey) -> Vec<kube::api::ApiResource> {
    let mut resources: Vec<kube::api::ApiResource> = shared
        .imports_in(&key.cluster)
        .iter()
        .filter(|i| {
            i["spec"]["location"] == key.name.as_str() && i["spec"]["scope"] == "Namespaced"
        })
        .filter(|i| kinds::is_true(i, "Compatible") && kinds::is_true(i, "Available"))
        .filter_map(|i| {
            let gvr = Gvr::of_spec(&i["spec"])?;
            let kind = i["spec"]["kind"].as_str()?;
            let gvk = kube::core::GroupVersionKind::gvk(&gvr.group, &gvr.version, kind);
            Some(kube::api::ApiResource::from_gvk_with_plural(
                &gvk,
                &gvr.plural,
            ))
        })
        .collect();
    resources.sort_by(|a, b| (&a.group, &a.plural).cmp(&(&b.group, &b.plural)));
    resources.dedup_by(|a, b| a.group == b.group && a.plural == b.plural);
    resources
}

/// Runs the syncer of `key` (push mode) over the resources it makes available, started again
/// when they change.
fn sync(shared: &Arc<Shared>, key: &ClusterKey) {
    let resources = synced_api_resources(shared, key);
    let names: Vec<String> = resources
        .iter()
        .map(|r| format!("{}.{}", r.plural, r.group))
        .collect();
    let mut syncers = shared.syncers.lock().unwrap_or_else(|e| e.into_inner());
    if syncers
        .get(key)
        .is_some_and(|(running, task)| *running == names && !task.is_finished())
    {
        return;
    }
    if let Some((_, previous)) = syncers.remove(key) {
        previous.abort();
    }
    if resources.is_empty() {
        return;
    }
    let remote = remote(shared, key);
    let (Some(remote), Ok(upstream)) = (remote, shared.config.client(&key.cluster)) else {
        return;
    };
    let options = crate::syncer::SyncerOptions {
        workspace: key.cluster.clone(),
        location: key.name.clone(),
        resources,
        resync: shared.options.poll_interval,
        split_roots: shared.options.split_deployments,
        heartbeat: None,
        metrics: shared.options.metrics.clone(),
    };
    let cluster = key.clone();
    let task = tokio::spawn(async move {
        let run = crate::syncer::run(upstream, remote, options, std::future::pending());
        if let Err(error) = run.await {
            tracing::warn!(%cluster, error = format!("{error:#}"), "the syncer stopped");
        }
    });
    syncers.insert(key.clone(), (names, task));
}

/// The standing of `workspace`'s Clusters that sync `resource` (any, when `None`).
pub fn placement(shared: &Shared, workspace: &str, resource: Option<&str>) -> Placement {
    let clusters = crate::in_workspace(&shared.clusters, workspace);
    crate::placement::placement(&clusters, shared.options.unreachable_grace, resource)
}

/// A function giving `workspace`'s placement now.
fn placements(shared: &Arc<Shared>, workspace: &str, resource: Option<&'static str>) -> Placements {
    let (shared, workspace) = (shared.clone(), workspace.to_string());
    Arc::new(move || placement(&shared, &workspace, resource))
}

/// Runs what each workspace with Clusters needs once (its namespace scheduler, its deployment
/// splitter), as the options ask; stops them once it has no Cluster left.
fn per_workspace(shared: &Arc<Shared>, workspace: &str) {
    if shared.options.split_deployments {
        split(shared, workspace);
    }
    if shared.options.schedule_namespaces {
        schedule(shared, workspace);
    }
}

/// Runs `run`, the `what` of `workspace`, in a task of its own that says why it stopped.
fn spawn(
    workspace: &str,
    what: &'static str,
    run: impl Future<Output = anyhow::Result<()>> + Send + 'static,
) -> tokio::task::JoinHandle<()> {
    let workspace = workspace.to_string();
    tokio::spawn(async move {
        if let Err(error) = run.await {
            tracing::warn!(
                workspace,
                error = format!("{error:#}"),
                "the {what} stopped"
            );
        }
    })
}

/// Runs the namespace scheduler of `workspace` while it has Clusters.
fn schedule(shared: &Arc<Shared>, workspace: &str) {
    let mut schedulers = shared.schedulers.lock().unwrap_or_else(|e| e.into_inner());
    if crate::in_workspace(&shared.clusters, workspace).is_empty() {
        if let Some(scheduler) = schedulers.remove(workspace) {
            scheduler.abort();
        }
        return;
    }
    if schedulers.get(workspace).is_some_and(|s| !s.is_finished()) {
        return;
    }
    let Ok(client) = shared.config.client(workspace) else {
        return;
    };
    let placements = placements(shared, workspace, None);
    let run = crate::scheduler::run(client, placements, std::future::pending());
    schedulers.insert(
        workspace.to_string(),
        spawn(workspace, "namespace scheduler", run),
    );
}

/// Runs the deployment splitter of `workspace` while it has Clusters and publishes
/// Deployments; stops it once it has no Cluster left.
fn split(shared: &Arc<Shared>, workspace: &str) {
    let mut splitters = shared.splitters.lock().unwrap_or_else(|e| e.into_inner());
    let clusters = crate::in_workspace(&shared.clusters, workspace);
    if clusters.is_empty() {
        if let Some(splitter) = splitters.remove(workspace) {
            splitter.abort();
        }
        return;
    }
    if splitters.get(workspace).is_some_and(|s| !s.is_finished()) {
        return;
    }
    let published = crate::in_workspace(&shared.negotiated, workspace)
        .into_iter()
        .find(|n| {
            n["spec"]["groupVersion"]["group"] == "apps"
                && n["spec"]["plural"] == "deployments"
                && kinds::is_true(n, "Published")
        });
    let (Some(negotiated), Ok(client)) = (published, shared.config.client(workspace)) else {
        return;
    };
    let version = negotiated["spec"]["groupVersion"]["version"]
        .as_str()
        .unwrap_or("v1");
    let gvk = kube::core::GroupVersionKind::gvk("apps", version, "Deployment");
    let options = crate::splitter::SplitterOptions {
        deployments: kube::api::ApiResource::from_gvk_with_plural(&gvk, "deployments"),
        resync: shared.options.poll_interval,
    };
    let ready = placements(shared, workspace, Some("deployments.apps"));
    let run = crate::splitter::run(client, options, ready, std::future::pending());
    splitters.insert(
        workspace.to_string(),
        spawn(workspace, "deployment splitter", run),
    );
}

/// The resources of `key`'s imports that are compatible and available, as `plural.group`.
fn synced_resources(shared: &Shared, key: &ClusterKey) -> Vec<String> {
    let mut synced: Vec<String> = shared
        .imports_in(&key.cluster)
        .iter()
        .filter(|i| i["spec"]["location"] == key.name.as_str())
        .filter(|i| kinds::is_true(i, "Compatible") && kinds::is_true(i, "Available"))
        .filter_map(|i| Gvr::of_spec(&i["spec"]).map(|gvr| gvr.group_resource()))
        .collect();
    synced.sort();
    synced.dedup();
    synced
}

fn fingerprint(cluster: &Value, kubeconfig: &str) -> String {
    let mut hasher = DefaultHasher::new();
    kubeconfig.hash(&mut hasher);
    format!(
        "{}/{:x}",
        cluster["metadata"]["uid"].as_str().unwrap_or_default(),
        hasher.finish()
    )
}

/// The Cluster's kubeconfig: inline, or from the Secret it names in its own workspace.
async fn kubeconfig(workspace: &kube::Client, cluster: &Value) -> Result<String, Problem> {
    let spec = &cluster["spec"];
    if let Some(text) = spec["kubeconfig"].as_str() {
        return Ok(text.to_string());
    }
    let reference = &spec["kubeconfigSecretRef"];
    let (Some(namespace), Some(name)) =
        (reference["namespace"].as_str(), reference["name"].as_str())
    else {
        return Err(Problem {
            reason: "InvalidKubeConfig",
            message: "neither spec.kubeconfig nor spec.kubeconfigSecretRef is set".into(),
        });
    };
    let key = reference["key"].as_str().unwrap_or("kubeconfig");
    let secrets: Api<Secret> = Api::namespaced(workspace.clone(), namespace);
    let secret = secrets.get_opt(name).await.map_err(|error| Problem {
        reason: "KubeConfigSecretNotFound",
        message: format!("reading Secret {namespace}/{name}: {error}"),
    })?;
    let data = secret.and_then(|s| s.data).unwrap_or_default();
    let Some(bytes) = data.get(key) else {
        return Err(Problem {
            reason: "KubeConfigSecretNotFound",
            message: format!("Secret {namespace}/{name} has no key {key:?}"),
        });
    };
    String::from_utf8(bytes.0.clone()).map_err(|_| Problem {
        reason: "InvalidKubeConfig",
        message: format!("key {key:?} of Secret {namespace}/{name} is not text"),
    })
}

/// A client of the physical cluster a kubeconfig's current context names.
async fn client(kubeconfig: &str) -> Result<kube::Client, String> {
    let parsed =
        Kubeconfig::from_yaml(kubeconfig).map_err(|e| format!("invalid kubeconfig: {e}"))?;
    let mut config = kube::Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default())
        .await
        .map_err(|e| format!("invalid kubeconfig: {e}"))?;
    config.connect_timeout = Some(Duration::from_secs(5));
    config.read_timeout = Some(Duration::from_secs(30));
    kube::Client::try_from(config)
        .map_err(|e| format!("error creating a client from the kubeconfig: {e}"))
}
