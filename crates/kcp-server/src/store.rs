//! The storage backend choice: the embedded redb store under the root directory, or etcd when
//! `--etcd-servers` is given. The only place in kcp that names a concrete backend.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use kcp_storage::Storage;
use kcp_storage_etcd::{EtcdConfig, EtcdStorage, EtcdTls};
use kcp_storage_redb::{OpenOptions, RedbStorage};

use crate::Options;

/// The store the server runs on.
pub enum Store {
    Embedded(RedbStorage),
    Etcd(EtcdStorage),
}

impl Store {
    pub async fn open(options: &Options) -> anyhow::Result<Store> {
        if options.etcd_servers.is_empty() {
            let path = options.root_directory.join("store.redb");
            let open = OpenOptions {
                on_writer_idle: options.on_thread_idle,
            };
            let store = RedbStorage::open_with(&path, open)
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

    pub fn storage(&self) -> Arc<dyn Storage> {
        match self {
            Store::Embedded(store) => Arc::new(store.clone()),
            Store::Etcd(store) => Arc::new(store.clone()),
        }
    }

    pub async fn close(self) {
        if let Store::Embedded(store) = self {
            store.close().await;
        }
    }
}
