//! The `kcp` binary. Thin: parses the command line and runs `kcp-server` until a signal.

use clap::{Parser, Subcommand};
use kcp_server::{Options, Server};
use tokio::signal::unix::{Signal, SignalKind, signal};

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
    Start(Options),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
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
            trim_freed_memory();
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

/// glibc keeps what the server frees (a deleted CRD's schema, a big request's buffers) in its
/// arenas; every few seconds, give the free pages back to the system.
/// The crate's only `unsafe` code: std has no wrapper for malloc_trim.
#[cfg(target_env = "gnu")]
#[allow(unsafe_code)]
fn trim_freed_memory() {
    std::thread::spawn(|| {
        loop {
            std::thread::sleep(std::time::Duration::from_secs(5));
            // SAFETY: malloc_trim(3) takes a plain integer and works on glibc's own allocator
            // state under glibc's own locks, so any thread may call it at any time; it only
            // returns free pages of glibc's arenas to the system and touches no live allocation.
            unsafe { libc::malloc_trim(0) };
        }
    });
}

#[cfg(not(target_env = "gnu"))]
fn trim_freed_memory() {}
