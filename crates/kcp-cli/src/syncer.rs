//! The `syncer` binary (kcp's prototype's, as the cluster-controller runs it in push mode): one
//! workspace's objects assigned to one physical cluster synced down, their status up
//! (`kcp_physical::syncer`), until SIGINT or SIGTERM.
//!
//! `syncer --from-kubeconfig KCP [--from-context C] --workspace PATH [--to-kubeconfig CLUSTER
//! [--to-context C]] --cluster NAME [--resync-interval D] [--heartbeat-lease NS/NAME
//! [--heartbeat-interval D]] [--split-deployments=false] RESOURCE...`; without
//! `--to-kubeconfig`, the pod's own credentials (as the cluster-controller installs it in pull
//! mode).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use crate::kubeconfig::kube_config;
use anyhow::Context as _;
use clap::Parser;

#[derive(Parser)]
#[command(
    name = "syncer",
    about = "Syncs one workspace's objects assigned to a physical cluster (label kcp.dev/cluster) down, and their status up"
)]
struct Cli {
    /// The kubeconfig of kcp.
    #[arg(long)]
    from_kubeconfig: PathBuf,
    /// Its context to use (default: its current one).
    #[arg(long)]
    from_context: Option<String>,
    /// The workspaces synced from (paths such as `root:team`, or logical cluster names),
    /// repeated or comma-separated: one syncer serves them all.
    #[arg(long, required = true, value_delimiter = ',')]
    workspace: Vec<String>,
    /// The kubeconfig of the physical cluster (default: the pod's own credentials, as the
    /// syncer runs when the cluster-controller installed it).
    #[arg(long)]
    to_kubeconfig: Option<PathBuf>,
    /// Its context to use (default: its current one).
    #[arg(long)]
    to_context: Option<String>,
    /// The Cluster's name: objects labelled `kcp.dev/cluster=<name>` are synced.
    #[arg(long)]
    cluster: String,
    /// How often every object is looked at again.
    #[arg(long, default_value = "30s", value_parser = kcp_apimachinery::duration::parse)]
    resync_interval: Duration,
    /// Where to serve `/metrics` (plain HTTP; port 0 picks one, said on standard error).
    #[arg(long)]
    metrics_bind_address: Option<std::net::SocketAddr>,
    /// A Lease of the workspace (`namespace/name`) renewed as the syncer's heartbeat.
    #[arg(long)]
    heartbeat_lease: Option<String>,
    /// How often the heartbeat Lease is renewed (it lasts three times as long).
    #[arg(long, default_value = "10s", value_parser = kcp_apimachinery::duration::parse)]
    heartbeat_interval: Duration,
    /// Whether Deployments assigned to no cluster are left to a deployment splitter (only
    /// their leaves are synced).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    split_deployments: bool,
    /// The resources synced, as `plural[.group]` (namespaced ones).
    #[arg(required = true)]
    resources: Vec<String>,
}

/// What one workspace's sync needs: its client, and the options.
async fn prepare(
    kcp: &kcp_sdk::ClusterConfig,
    cli: &Cli,
    path: &str,
    heartbeat: Option<kcp_physical::syncer::heartbeat::Heartbeat>,
    metrics: &kcp_physical::metrics::Metrics,
) -> anyhow::Result<(kube::Client, kcp_physical::syncer::SyncerOptions)> {
    let upstream = kcp.client(path)?;
    // Objects say their workspace by logical cluster name: the path's is asked for.
    let logical_cluster: serde_json::Value = upstream
        .request(
            http::Request::get("/apis/core.kcp.io/v1alpha1/logicalclusters/cluster")
                .body(Vec::new())?,
        )
        .await
        .with_context(|| format!("reading the logical cluster of {path}"))?;
    let workspace = logical_cluster["metadata"]["annotations"]["kcp.io/cluster"]
        .as_str()
        .context("the logical cluster names no cluster")?
        .to_string();
    let mut puller = kcp_physical::puller::Puller::new(&upstream);
    let mut resources = Vec::new();
    for resource in &cli.resources {
        let found = puller
            .api_resource(resource)
            .await
            .with_context(|| format!("{resource} in {path}"))?;
        resources.push(found);
    }
    let options = kcp_physical::syncer::SyncerOptions {
        workspace,
        location: cli.cluster.clone(),
        resources,
        resync: cli.resync_interval,
        split_roots: cli.split_deployments,
        heartbeat,
        metrics: metrics.clone(),
    };
    Ok((upstream, options))
}

/// The `syncer` binary: one sync per workspace, all into the same physical cluster (each in
/// namespaces of its own there).
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    crate::finish(crate::block_on(async move {
        let kcp = kcp_sdk::ClusterConfig::new(
            kube_config(&cli.from_kubeconfig, cli.from_context.clone()).await?,
        );
        let downstream = match &cli.to_kubeconfig {
            Some(path) => kube::Client::try_from(kube_config(path, cli.to_context.clone()).await?)?,
            None => kube::Client::try_from(
                kube::Config::incluster().context("no --to-kubeconfig, and not in a pod")?,
            )?,
        };
        let heartbeat = match &cli.heartbeat_lease {
            Some(lease) => {
                let (namespace, name) = lease
                    .split_once('/')
                    .context("--heartbeat-lease takes namespace/name")?;
                Some(kcp_physical::syncer::heartbeat::Heartbeat {
                    namespace: namespace.to_string(),
                    name: name.to_string(),
                    interval: cli.heartbeat_interval,
                })
            }
            None => None,
        };
        let metrics = kcp_physical::metrics::Metrics::default();
        let _serving =
            crate::metrics_server::serve_physical(cli.metrics_bind_address, &metrics).await?;
        let stop = futures::FutureExt::shared(Box::pin(crate::shutdown_signal()?));
        let mut syncs = Vec::new();
        for path in &cli.workspace {
            let (upstream, options) =
                prepare(&kcp, &cli, path, heartbeat.clone(), &metrics).await?;
            syncs.push(kcp_physical::syncer::run(
                upstream,
                downstream.clone(),
                options,
                stop.clone(),
            ));
        }
        futures::future::try_join_all(syncs).await?;
        Ok(())
    }))
}
