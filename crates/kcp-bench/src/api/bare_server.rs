//! The GET baseline: a bare hyper server over tokio-rustls that answers every request with the
//! same fixed bytes. It serves kcp's own certificate (`<root>/apiserver.crt`, `.key`) with the
//! same ALPN offer and the same hyper-util auto builder as kcp, on a runtime of its own with as
//! many worker threads as kcp gets, so the only difference left is what kcp does per request.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// A running baseline server; dropping it stops it.
pub struct BareServer {
    pub address: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl BareServer {
    /// Serves `body` as `content_type` on a free loopback port with the certificate in `root`.
    pub fn start(root: &Path, body: Bytes, content_type: String) -> anyhow::Result<BareServer> {
        let tls = Arc::new(server_config(root)?);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(std::thread::available_parallelism().map_or(2, |n| n.get()))
            .thread_name("bare-server")
            .enable_all()
            .build()?;
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        let acceptor = TlsAcceptor::from(tls);
        runtime.spawn(async move {
            let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                return;
            };
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                let acceptor = acceptor.clone();
                let body = body.clone();
                let content_type = content_type.clone();
                tokio::spawn(async move {
                    let Ok(tls_stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |_request| {
                        let response = http::Response::builder()
                            .header(http::header::CONTENT_TYPE, &content_type)
                            .body(Full::new(body.clone()))
                            .expect("a valid response");
                        async move { Ok::<_, Infallible>(response) }
                    });
                    let _ = auto::Builder::new(TokioExecutor::new())
                        .serve_connection_with_upgrades(TokioIo::new(tls_stream), service)
                        .await;
                });
            }
        });
        Ok(BareServer {
            address,
            runtime: Some(runtime),
        })
    }
}

impl Drop for BareServer {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            // Allowed inside an async context, unlike dropping the runtime.
            runtime.shutdown_background();
        }
    }
}

/// kcp's serving certificate and key from `root`, offering h2 and http/1.1 as kcp does.
fn server_config(root: &Path) -> anyhow::Result<rustls::ServerConfig> {
    let cert_path = root.join("apiserver.crt");
    let key_path = root.join("apiserver.key");
    let certs = CertificateDer::pem_file_iter(&cert_path)
        .with_context(|| format!("read {}", cert_path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .context("parse the serving certificate")?;
    let key = PrivateKeyDer::from_pem_file(&key_path)
        .with_context(|| format!("read {}", key_path.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}
