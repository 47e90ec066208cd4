//! The `kcp` binary. Thin: parses the command line and runs `kcp-server` until a signal.

use clap::{Parser, Subcommand};
use kcp_server::{Options, Server};
use tokio::signal::unix::{Signal, SignalKind, signal};

mod memory;

#[derive(Parser)]
#[command(
    name = "kcp",
    version,
    about = "A multi-tenant, Kubernetes-API-compatible control plane"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start the server.
    // A flag given twice takes its last value, as kube-apiserver's flags do (a wrapper adds
    // `--secure-port` to flags that already name one).
    #[command(args_override_self = true)]
    Start(StartArgs),
}

/// `kcp start`: the server's options, and those of the cluster-controller it runs.
#[derive(clap::Args)]
struct StartArgs {
    #[command(flatten)]
    server: Options,
    #[command(flatten)]
    clusters: kcp_cli::cluster_controller::InServerFlags,
}

fn main() -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(memory::release_on_park)
        .build()?
        .block_on(run())
}

async fn run() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    match Cli::parse().command {
        Command::Start(StartArgs { server, clusters }) => {
            // Installed before anything is announced, so a signal right after "ready" stops us
            // cleanly instead of killing the process.
            let signals = ShutdownSignals::install()?;
            memory::purge_periodically();
            #[cfg(feature = "allocator-census")]
            memory::census::write_periodically();
            let physical_metrics = kcp_cli::cluster_controller::Metrics::default();
            let registered = physical_metrics.clone();
            let options = Options {
                on_thread_idle: Some(memory::release_thread_pages),
                extra_metrics: Some(kcp_server::ExtraMetrics(std::sync::Arc::new(
                    move |registry| registered.register(registry),
                ))),
                ..server
            };
            let server = std::sync::Arc::new(Server::start(options).await?);
            let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
            let cluster_controller = clusters.install_cluster_controller.then(|| {
                let server = server.clone();
                tokio::spawn(async move {
                    // Only once a Cluster is registered somewhere: its clients cost memory.
                    let clusters_kind = ("cluster.example.dev", "v1alpha1", "clusters");
                    tokio::select! {
                        registered = server.first_object(clusters_kind.0, clusters_kind.1, clusters_kind.2) => {
                            if let Err(error) = registered {
                                tracing::error!(error = format!("{error:#}"), "waiting for a Cluster failed");
                                return;
                            }
                        }
                        _ = &mut stopped => return,
                    }
                    tracing::info!("a Cluster is registered: starting the cluster-controller");
                    let stopped = async move {
                        let _ = stopped.await;
                    };
                    let run = kcp_cli::cluster_controller::run_in_server(
                        &server.kubeconfig,
                        &clusters,
                        physical_metrics,
                        stopped,
                    );
                    if let Err(error) = run.await {
                        tracing::error!(
                            error = format!("{error:#}"),
                            "the cluster-controller stopped"
                        );
                    }
                })
            });
            signals.wait().await;
            tracing::info!("shutting down");
            let _ = stop.send(());
            if let Some(cluster_controller) = cluster_controller {
                let _ = cluster_controller.await;
            }
            let server = std::sync::Arc::try_unwrap(server)
                .map_err(|_| anyhow::anyhow!("the server is still in use at shutdown"))?;
            server.shutdown().await;
            Ok(())
        }
    }
}

/// SIGINT and SIGTERM, caught.
struct ShutdownSignals {
    interrupt: Signal,
    terminate: Signal,
}

impl ShutdownSignals {
    fn install() -> std::io::Result<Self> {
        Ok(ShutdownSignals {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    async fn wait(mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}
