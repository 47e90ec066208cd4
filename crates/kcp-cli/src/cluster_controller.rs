//! The cluster-controller (`kcp_physical`'s Cluster registration, API import and negotiation):
//! its flags, the `cluster-controller` binary against any kcp (`--kubeconfig`, `--context`),
//! and the same controller inside `kcp start` ([`run_in_server`]), on the admin kubeconfig the
//! server wrote.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use crate::kubeconfig;
use clap::Parser;

/// Where the controller (and the syncers it runs) count: `kcp start` registers it in the
/// server's `/metrics`.
pub use kcp_physical::metrics::Metrics;

/// What the controller imports and how it publishes, wherever it runs.
#[derive(clap::Args, Debug, Clone)]
pub struct ControllerFlags {
    /// The resources imported from every registered Cluster, as `plural[.group]`.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "deployments.apps,pods,services,configmaps,secrets"
    )]
    pub resources_to_sync: Vec<String>,
    /// Publish negotiated resources as CRDs of the workspace as soon as they are negotiated.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub auto_publish_apis: bool,
    /// How often Clusters' APIs are imported again.
    #[arg(long, default_value = "1m0s", value_parser = kcp_apimachinery::duration::parse)]
    pub cluster_poll_interval: Duration,
    /// How objects assigned to a Cluster (label `kcp.dev/cluster`) reach it: `push`, a syncer
    /// run by this controller; `pull`, a syncer this controller installs into the cluster
    /// (Ready while its heartbeat Lease is fresh); or `none`.
    #[arg(long, default_value = "push", value_parser = ["push", "pull", "none"])]
    pub syncer_mode: String,
    /// The image of the syncer installed in pull mode.
    #[arg(long, default_value = concat!("kcp-rs/syncer:", env!("CARGO_PKG_VERSION")))]
    pub syncer_image: String,
    /// Split Deployments assigned to no cluster across the workspace's Ready clusters.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub deployment_splitter: bool,
    /// Place each namespace on one of the workspace's Ready clusters (label kcp.dev/cluster);
    /// what is in it follows unless assigned on its own.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub namespace_scheduler: bool,
    /// How long a Cluster may stay unreachable before its share of split Deployments moves
    /// to the other Ready clusters.
    #[arg(long, default_value = "5m0s", value_parser = kcp_apimachinery::duration::parse)]
    pub cluster_unreachable_grace_period: Duration,
}

impl ControllerFlags {
    fn options(&self, metrics: kcp_physical::metrics::Metrics) -> kcp_physical::Options {
        kcp_physical::Options {
            resources: self.resources_to_sync.clone(),
            auto_publish: self.auto_publish_apis,
            poll_interval: self.cluster_poll_interval,
            syncer_mode: match self.syncer_mode.as_str() {
                "push" => kcp_physical::SyncerMode::Push,
                "pull" => kcp_physical::SyncerMode::Pull,
                _ => kcp_physical::SyncerMode::None,
            },
            syncer_image: self.syncer_image.clone(),
            split_deployments: self.deployment_splitter,
            schedule_namespaces: self.namespace_scheduler,
            unreachable_grace: self.cluster_unreachable_grace_period,
            metrics,
        }
    }
}

/// `kcp start`'s flags for the controller it runs.
#[derive(clap::Args, Debug, Clone)]
pub struct InServerFlags {
    /// Run the cluster-controller inside the server: Clusters (cluster.example.dev) registered
    /// in any workspace get their APIs imported, negotiated and published there.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub install_cluster_controller: bool,
    #[command(flatten)]
    pub controller: ControllerFlags,
}

#[derive(Parser)]
#[command(
    name = "cluster-controller",
    about = "Imports the APIs of the physical Clusters registered in kcp's workspaces and negotiates them"
)]
struct Cli {
    /// The kubeconfig of kcp, with credentials that may read all workspaces (`/clusters/*`).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// The context of the kubeconfig to use (default: its current one).
    #[arg(long)]
    context: Option<String>,
    /// Where to serve `/metrics` (plain HTTP; port 0 picks one, said on standard error).
    #[arg(long)]
    metrics_bind_address: Option<std::net::SocketAddr>,
    #[command(flatten)]
    controller: ControllerFlags,
}

async fn config(path: &Path, context: Option<String>) -> anyhow::Result<kcp_sdk::ClusterConfig> {
    Ok(kcp_sdk::ClusterConfig::new(
        kubeconfig::kube_config(path, context).await?,
    ))
}

/// The `cluster-controller` binary: runs until SIGINT or SIGTERM.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    crate::finish(crate::block_on(async move {
        let path = kubeconfig::locate(cli.kubeconfig.as_deref())?;
        let config = config(&path, cli.context).await?;
        let stop = crate::shutdown_signal()?;
        let metrics = kcp_physical::metrics::Metrics::default();
        let _serving =
            crate::metrics_server::serve_physical(cli.metrics_bind_address, &metrics).await?;
        kcp_physical::run(config, cli.controller.options(metrics), stop).await
    }))
}

/// The controller inside `kcp start`: on the server's admin kubeconfig (its `shard-base`
/// context, whose user may read all workspaces), until `stop` completes; counting in
/// `metrics` (which the server's `/metrics` renders).
pub async fn run_in_server(
    kubeconfig: &Path,
    flags: &InServerFlags,
    metrics: kcp_physical::metrics::Metrics,
    stop: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let config = config(kubeconfig, Some("shard-base".into())).await?;
    kcp_physical::run(config, flags.controller.options(metrics), stop).await
}
