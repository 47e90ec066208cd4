//! `kubectl kcp cluster cordon|uncordon|drain NAME`: a physical Cluster of the current workspace
//! taken out of (or put back into) placement, as `kubectl cordon|uncordon|drain` do for a node.
//!
//! - `cordon`: `spec.unschedulable`; what runs there stays, nothing new goes there.
//! - `uncordon`: both fields cleared.
//! - `drain`: refused when no other Ready, schedulable Cluster of the workspace syncs what this
//!   one does (nothing is changed then); else cordoned with `spec.evictAfter` now, so that the
//!   cluster-controller moves its namespaces and its shares of split Deployments away
//!   make-before-break; waits (up to `--timeout`) until none is left there, and says which
//!   objects stay because a user assigned them there by label.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::{Args, Parser, Subcommand};
use http::Method;
use serde_json::{Value, json};

use crate::kubeconfig::KubeconfigFile;
use crate::server::{self, Answer};

const CLUSTERS: &str = "/apis/cluster.example.dev/v1alpha1/clusters";
const LABEL: &str = "kcp.dev/cluster";

#[derive(Parser)]
#[command(
    name = "kubectl kcp cluster",
    about = "Take physical clusters of the current workspace out of placement, or put them back"
)]
pub struct ClusterCli {
    /// The kubeconfig to use (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true)]
    pub kubeconfig: Option<std::path::PathBuf>,
    #[command(subcommand)]
    pub command: ClusterCommand,
}

#[derive(Subcommand)]
pub enum ClusterCommand {
    /// Mark a cluster unschedulable: what runs there stays, nothing new goes there.
    Cordon { name: String },
    /// Mark a cluster schedulable again.
    Uncordon { name: String },
    /// Cordon a cluster and move what runs there to the others, make-before-break.
    Drain(DrainArgs),
}

#[derive(Args)]
pub struct DrainArgs {
    name: String,
    /// How long to wait for the cluster to be empty (0: forever).
    #[arg(long, default_value = "5m", value_parser = kcp_apimachinery::duration::parse)]
    timeout: Duration,
}

/// Runs a `kubectl kcp cluster` command against the current workspace.
pub async fn run(file: &KubeconfigFile, command: ClusterCommand) -> anyhow::Result<()> {
    let client = server::client(file, &file.current_server()?).await?;
    match command {
        ClusterCommand::Cordon { name } => {
            let changed = update(&client, &name, |spec| {
                set(spec, "unschedulable", json!(true))
            })
            .await?;
            println!(
                "cluster/{name} {}cordoned",
                if changed { "" } else { "already " }
            );
        }
        ClusterCommand::Uncordon { name } => {
            let changed = update(&client, &name, |spec| {
                let unschedulable = set(spec, "unschedulable", Value::Null);
                set(spec, "evictAfter", Value::Null) | unschedulable
            })
            .await?;
            println!(
                "cluster/{name} {}uncordoned",
                if changed { "" } else { "already " }
            );
        }
        ClusterCommand::Drain(args) => drain(&client, args).await?,
    }
    Ok(())
}

/// Sets (or, for null, removes) `field` of `spec`; says whether it changed.
fn set(spec: &mut Value, field: &str, value: Value) -> bool {
    let Some(spec) = spec.as_object_mut() else {
        return false;
    };
    match value {
        Value::Null => spec.remove(field).is_some(),
        value => spec.insert(field.to_string(), value.clone()).as_ref() != Some(&value),
    }
}

/// Reads the Cluster `name`, changes its spec with `change`, and writes it back if that changed
/// anything (again after a conflict); says whether it did.
async fn update(
    client: &kube::Client,
    name: &str,
    change: impl Fn(&mut Value) -> bool,
) -> anyhow::Result<bool> {
    let path = format!("{CLUSTERS}/{name}");
    for _ in 0..5 {
        let mut cluster = match server::send(client, Method::GET, &path, None).await? {
            Answer::Ok(cluster) => cluster,
            failed => return Err(server::failure(failed)),
        };
        if !change(&mut cluster["spec"]) {
            return Ok(false);
        }
        match server::send(client, Method::PUT, &path, Some(&cluster)).await? {
            Answer::Ok(_) => return Ok(true),
            Answer::Failed { code: 409, .. } => continue,
            failed => return Err(server::failure(failed)),
        }
    }
    bail!("cluster {name} kept changing; try again")
}

/// Whether `cluster` is Ready and schedulable (not cordoned, not drained).
fn takes_workloads(cluster: &Value) -> bool {
    kcp_physical::placement::standing(cluster, Duration::ZERO)
        == Some(kcp_physical::placement::Standing::Schedulable)
}

/// The resources `cluster` syncs.
fn synced(cluster: &Value) -> Vec<String> {
    cluster["status"]["syncedResources"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect()
        })
        .unwrap_or_default()
}

async fn list(client: &kube::Client, path: &str) -> anyhow::Result<Vec<Value>> {
    match server::send(client, Method::GET, path, None).await? {
        Answer::Ok(list) => Ok(list["items"].as_array().cloned().unwrap_or_default()),
        // A kind the workspace does not serve holds nothing.
        Answer::Failed { code: 404, .. } => Ok(Vec::new()),
        failed => Err(server::failure(failed)),
    }
}

async fn drain(client: &kube::Client, args: DrainArgs) -> anyhow::Result<()> {
    let name = &args.name;
    let clusters = list(client, CLUSTERS).await?;
    let Some(drained) = clusters
        .iter()
        .find(|c| c["metadata"]["name"] == name.as_str())
    else {
        bail!("clusters.cluster.example.dev \"{name}\" not found");
    };
    // Another cluster must take everything this one syncs that it runs.
    let needed = synced(drained);
    let takers: Vec<&Value> = clusters
        .iter()
        .filter(|c| c["metadata"]["name"] != name.as_str() && takes_workloads(c))
        .collect();
    let covered = |resource: &str| {
        takers
            .iter()
            .any(|c| synced(c).iter().any(|r| r == resource))
    };
    if let Some(missing) = needed.iter().find(|r| !covered(r)) {
        bail!(
            "cannot drain cluster {name}: no other Ready, schedulable cluster of this workspace syncs {missing}"
        );
    }
    let now = kcp_physical::kinds::now();
    update(client, name, |spec| {
        let cordoned = set(spec, "unschedulable", json!(true));
        let evicting = spec["evictAfter"].is_string() || set(spec, "evictAfter", json!(now));
        cordoned | evicting
    })
    .await?;
    println!("cluster/{name} cordoned");
    // What the controllers placed there: leaves of split Deployments, namespaces they placed.
    let selector = format!("labelSelector={LABEL}%3D{name}");
    let started = Instant::now();
    loop {
        let leaves = list(
            client,
            &format!("/apis/apps/v1/deployments?{selector},kcp.dev/owned-by"),
        )
        .await?;
        let namespaces = list(client, &format!("/api/v1/namespaces?{selector}")).await?;
        let placed = namespaces
            .iter()
            .filter(|n| {
                n["metadata"]["annotations"][kcp_physical::scheduler::PLACED_ANNOTATION] == "true"
            })
            .count();
        if leaves.is_empty() && placed == 0 {
            break;
        }
        if !args.timeout.is_zero() && started.elapsed() > args.timeout {
            bail!(
                "cluster {name} still runs {} split Deployment share(s) and {placed} namespace(s) after {:?}",
                leaves.len(),
                args.timeout
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let kept = list(client, &format!("/api/v1/namespaces?{selector}"))
        .await
        .context("listing namespaces")?
        .len();
    if kept > 0 {
        eprintln!("Warning: {kept} namespace(s) labelled {LABEL}={name} by hand stay there");
    }
    println!("cluster/{name} drained");
    Ok(())
}
