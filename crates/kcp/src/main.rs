//! The `kcp` binary. Thin: parses options, picks the storage backend, runs until a signal.
//!
//! It is, for now, the composition root (the only place that names a concrete backend); it moves
//! into a `kcp-server` crate when the API server arrives.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use kcp_storage::Storage;
use kcp_storage_etcd::{EtcdConfig, EtcdStorage, EtcdTls};
use kcp_storage_redb::RedbStorage;

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
    Start(StartOptions),
}

#[derive(Args)]
struct StartOptions {
    /// Directory for the embedded store, certificates and the admin kubeconfig.
    #[arg(long, default_value = ".kcp")]
    root_directory: PathBuf,
    /// Comma-separated etcd URLs; without it, the embedded store under the root directory.
    #[arg(long, value_delimiter = ',')]
    etcd_servers: Vec<String>,
    /// CA bundle that verifies etcd's serving certificate.
    #[arg(long)]
    etcd_cafile: Option<PathBuf>,
    /// Client certificate for etcd.
    #[arg(long, requires = "etcd_keyfile")]
    etcd_certfile: Option<PathBuf>,
    /// Client key for etcd.
    #[arg(long, requires = "etcd_certfile")]
    etcd_keyfile: Option<PathBuf>,
}

/// The store the server runs on.
enum Store {
    Embedded(RedbStorage),
    Etcd(EtcdStorage),
}

impl Store {
    async fn open(options: &StartOptions) -> anyhow::Result<Store> {
        if options.etcd_servers.is_empty() {
            let path = options.root_directory.join("store.redb");
            let store = RedbStorage::open(&path)
                .with_context(|| format!("open the embedded store at {}", path.display()))?;
            tracing::info!(path = %path.display(), "embedded store open");
            return Ok(Store::Embedded(store));
        }
        let read = |path: &Option<PathBuf>| -> anyhow::Result<Option<Vec<u8>>> {
            path.as_ref()
                .map(|p| std::fs::read(p).with_context(|| format!("read {}", p.display())))
                .transpose()
        };
        let tls = match read(&options.etcd_cafile)? {
            Some(ca_pem) => Some(EtcdTls {
                ca_pem,
                client_cert_pem: read(&options.etcd_certfile)?,
                client_key_pem: read(&options.etcd_keyfile)?,
            }),
            None => None,
        };
        let config = EtcdConfig {
            tls,
            ..EtcdConfig::new(options.etcd_servers.clone())
        };
        let store = EtcdStorage::connect(config)
            .await
            .context("connect to etcd")?;
        tracing::info!(servers = ?options.etcd_servers, "etcd store connected");
        Ok(Store::Etcd(store))
    }

    fn storage(&self) -> Arc<dyn Storage> {
        match self {
            Store::Embedded(store) => Arc::new(store.clone()),
            Store::Etcd(store) => Arc::new(store.clone()),
        }
    }

    async fn close(self) {
        if let Store::Embedded(store) = self {
            store.close().await;
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    match Cli::parse().command {
        Command::Start(options) => start(options).await,
    }
}

async fn start(options: StartOptions) -> anyhow::Result<()> {
    std::fs::create_dir_all(&options.root_directory)
        .with_context(|| format!("create root directory {}", options.root_directory.display()))?;
    let store = Store::open(&options).await?;
    let revision = store.storage().current_revision().await?;
    tracing::info!(
        revision,
        "storage ready; the Kubernetes API is not served yet (see the README)"
    );
    shutdown_signal().await;
    tracing::info!("shutting down");
    store.close().await;
    Ok(())
}

async fn shutdown_signal() {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .expect("install the SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
}
