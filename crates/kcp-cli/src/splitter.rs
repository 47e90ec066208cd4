//! The `deployment-splitter` binary (kcp's prototype's; the cluster-controller runs the same per
//! workspace): the Deployments of one workspace assigned to no cluster split across its Ready
//! Clusters (`kcp_physical::splitter`), until SIGINT or SIGTERM.
//!
//! `deployment-splitter --kubeconfig KCP [--context C] --workspace PATH [--resync-interval D]`

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::Parser;

use crate::kubeconfig::kube_config;

#[derive(Parser)]
#[command(
    name = "deployment-splitter",
    about = "Splits a workspace's Deployments across its Ready clusters"
)]
struct Cli {
    /// The kubeconfig of kcp.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// Its context to use (default: its current one).
    #[arg(long)]
    context: Option<String>,
    /// The workspace (a path such as `root:team`, or a logical cluster name).
    #[arg(long)]
    workspace: String,
    /// How often every Deployment is split again.
    #[arg(long, default_value = "30s", value_parser = kcp_apimachinery::duration::parse)]
    resync_interval: Duration,
    /// How long a Cluster may stay unreachable before its share moves to the other clusters.
    #[arg(long, default_value = "5m0s", value_parser = kcp_apimachinery::duration::parse)]
    cluster_unreachable_grace_period: Duration,
}

/// The `deployment-splitter` binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    crate::finish(crate::block_on(async move {
        let kcp = kcp_sdk::ClusterConfig::new(kube_config(&cli.kubeconfig, cli.context).await?);
        let client = kcp.client(&cli.workspace)?;
        let mut puller = kcp_physical::puller::Puller::new(&client);
        let deployments = puller.api_resource("deployments.apps").await?;
        // The workspace's Clusters, looked at twice a second.
        let grace = cli.cluster_unreachable_grace_period;
        let known = Arc::new(Mutex::new(kcp_physical::placement::Placement::new()));
        let watcher = {
            let (client, known) = (client.clone(), known.clone());
            tokio::spawn(async move {
                loop {
                    let request = http::Request::get("/apis/cluster.example.dev/v1alpha1/clusters")
                        .body(Vec::new())
                        .expect("a request");
                    if let Ok(list) = client.request::<serde_json::Value>(request).await {
                        let items = list["items"].as_array().cloned().unwrap_or_default();
                        let placement = kcp_physical::placement::placement(
                            &items,
                            grace,
                            Some("deployments.apps"),
                        );
                        *known.lock().unwrap_or_else(|e| e.into_inner()) = placement;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            })
        };
        let ready: kcp_physical::splitter::Placements =
            Arc::new(move || known.lock().unwrap_or_else(|e| e.into_inner()).clone());
        let options = kcp_physical::splitter::SplitterOptions {
            deployments,
            resync: cli.resync_interval,
        };
        let stop = crate::shutdown_signal()?;
        let result = kcp_physical::splitter::run(client, options, ready, stop).await;
        watcher.abort();
        result
    }))
}
