//! The composition root of kcp: turns [`Options`] into a running [`Server`].
//!
//! It owns what lives in the root directory (certificates, the admin token, `admin.kubeconfig`,
//! the embedded store), the choice of storage backend (the only crate that names one), and the
//! order of start-up. It must not know HTTP details (that is `kcp-apiserver`) or storage
//! internals (the backends).

mod compactor;
mod kubeconfig;
mod options;
mod pki;
mod store;
mod token;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use kcp_apiserver::authn::{TokenAuthenticator, User};
use kcp_apiserver::router::Router;
use kcp_apiserver::{ServeHandle, serve};
use kcp_controllers::Controllers;
use kcp_registry::Registry;

/// The logical cluster that exists from the first start.
const ROOT_CLUSTER: &str = "root";

pub use options::Options;
pub use store::Store;

/// A started server.
pub struct Server {
    /// The address it listens on (the real port when `--secure-port 0` was given).
    pub address: SocketAddr,
    /// The admin kubeconfig it wrote.
    pub kubeconfig: PathBuf,
    serving: ServeHandle,
    controllers: Controllers,
    compactor: Option<tokio::task::JoinHandle<()>>,
    store: Store,
}

impl Server {
    /// Prepares the root directory, opens storage, and starts serving.
    pub async fn start(options: Options) -> anyhow::Result<Server> {
        let root = &options.root_directory;
        create_private_dir(root)?;
        let store = Store::open(&options).await?;
        let revision = store.storage().current_revision().await?;
        tracing::info!(revision, "storage ready");
        let registry = Registry::new(store.storage()).with_webhook_converter(Arc::new(
            kcp_apiserver::conversion_webhook::HttpsConversionWebhooks::default(),
        ));

        let pki = pki::load_or_create(root, &options.bind_address)?;
        let token = token::load_or_create(root)?;
        let mut authn = TokenAuthenticator::default();
        authn.add(
            kcp_apiserver::authn::token_digest(&token),
            User {
                name: "kcp-admin".into(),
                groups: vec!["system:masters".into()],
            },
        );

        let listener = tokio::net::TcpListener::bind((options.bind_address, options.secure_port))
            .await
            .with_context(|| {
                format!("listen on {}:{}", options.bind_address, options.secure_port)
            })?;
        let address = listener.local_addr()?;
        let kubeconfig = root.join("admin.kubeconfig");
        kubeconfig::write(
            &kubeconfig,
            &kubeconfig::server_base(address),
            &pki.ca_pem,
            &token,
        )?;
        registry
            .bootstrap_root(&format!(
                "{}/clusters/{ROOT_CLUSTER}",
                kubeconfig::server_base(address)
            ))
            .await
            .context("bootstrap the root workspace")?;
        let controllers = Controllers::start(registry.clone());
        let compactor = compactor::start(store.storage(), options.etcd_compaction_interval);
        let serving = serve(
            listener,
            Arc::new(pki.server_config()?),
            Arc::new(Router::new(authn, registry)),
        );
        tracing::info!(
            "ready to serve on https://{address}; use it with KUBECONFIG={}",
            kubeconfig.display()
        );
        Ok(Server {
            address,
            kubeconfig,
            serving,
            controllers,
            compactor,
            store,
        })
    }

    /// Stops serving and the controllers, then closes storage.
    pub async fn shutdown(self) {
        self.serving.shutdown();
        self.controllers.shutdown().await;
        if let Some(compactor) = self.compactor {
            compactor.abort();
        }
        self.store.close().await;
    }
}

/// Creates `dir` (and parents) readable by the owner only.
fn create_private_dir(dir: &std::path::Path) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("create root directory {}", dir.display()))
}

/// Writes `contents` to `path` readable by the owner only, replacing it atomically.
fn write_private(path: &std::path::Path, contents: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let temporary = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temporary)
        .with_context(|| format!("write {}", temporary.display()))?;
    file.write_all(contents)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path).with_context(|| format!("write {}", path.display()))
}
