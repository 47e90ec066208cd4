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
    Start(Options),
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
        Command::Start(options) => {
            // Installed before anything is announced, so a signal right after "ready" stops us
            // cleanly instead of killing the process.
            let signals = ShutdownSignals::install()?;
            memory::purge_periodically();
            #[cfg(feature = "allocator-census")]
            memory::census::write_periodically();
            let options = Options {
                on_thread_idle: Some(memory::release_thread_pages),
                ..options
            };
            let server = Server::start(options).await?;
            signals.wait().await;
            tracing::info!("shutting down");
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
