//! The GET baseline: a bare hyper server over tokio-rustls that answers with fixed bytes, either
//! the same for every request ([`BareServer::start`]) or a recording of kcp's answers replayed
//! by request ([`BareServer::replay`]). It serves kcp's own certificate
//! (`<root>/apiserver.crt`, `.key`) with the same ALPN offer and the same hyper-util auto
//! builder as kcp, on a runtime of its own with as many worker threads as kcp gets, so the only
//! difference left is what kcp does per request.

use std::collections::HashMap;
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

/// One recorded answer: its headers that matter to a client, and its body as sent.
#[derive(Clone)]
pub struct Recorded {
    pub content_type: String,
    /// `gzip` when the body was sent compressed.
    pub content_encoding: Option<String>,
    pub body: Bytes,
}

/// What the server answers.
enum Replies {
    /// The same to every request.
    Every(Recorded),
    /// By [`request_key`]; anything else is 404.
    ByRequest(HashMap<String, Recorded>),
}

impl Replies {
    fn find(&self, uri: &http::Uri) -> Option<&Recorded> {
        match self {
            Replies::Every(recorded) => Some(recorded),
            Replies::ByRequest(answers) => answers.get(&request_key(uri)),
        }
    }
}

/// A request's path with its query parameters decoded and sorted, `timeout` left out (clients
/// add it to discovery requests at will), so that a recording matches however a client
/// encodes or orders the same request.
pub fn request_key(uri: &http::Uri) -> String {
    let mut pairs: Vec<(String, String)> =
        form_urlencoded::parse(uri.query().unwrap_or_default().as_bytes())
            .filter(|(name, _)| name != "timeout")
            .map(|(name, value)| (name.into_owned(), value.into_owned()))
            .collect();
    pairs.sort();
    let query: Vec<String> = pairs
        .into_iter()
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    format!("{}?{}", uri.path(), query.join("&"))
}

impl BareServer {
    /// Serves `body` as `content_type` on a free loopback port with the certificate in `root`.
    pub fn start(root: &Path, body: Bytes, content_type: String) -> anyhow::Result<BareServer> {
        BareServer::serve(
            root,
            Replies::Every(Recorded {
                content_type,
                content_encoding: None,
                body,
            }),
        )
    }

    /// Replays `answers` (by [`request_key`]), 404 to any other request.
    pub fn replay(root: &Path, answers: HashMap<String, Recorded>) -> anyhow::Result<BareServer> {
        BareServer::serve(root, Replies::ByRequest(answers))
    }

    fn serve(root: &Path, replies: Replies) -> anyhow::Result<BareServer> {
        let replies = Arc::new(replies);
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
                let replies = replies.clone();
                tokio::spawn(async move {
                    let Ok(tls_stream) = acceptor.accept(stream).await else {
                        return;
                    };
                    let service = hyper::service::service_fn(move |request| {
                        let response = answer(replies.find(request.uri()));
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

fn answer(recorded: Option<&Recorded>) -> http::Response<Full<Bytes>> {
    let Some(recorded) = recorded else {
        return http::Response::builder()
            .status(http::StatusCode::NOT_FOUND)
            .body(Full::new(Bytes::from_static(b"not recorded")))
            .expect("a valid response");
    };
    let mut response =
        http::Response::builder().header(http::header::CONTENT_TYPE, &recorded.content_type);
    if let Some(encoding) = &recorded.content_encoding {
        response = response.header(http::header::CONTENT_ENCODING, encoding);
    }
    response
        .body(Full::new(recorded.body.clone()))
        .expect("a valid response")
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

#[cfg(test)]
mod tests {
    use super::request_key;

    #[test]
    fn a_request_matches_its_recording_however_its_query_is_written() {
        let recorded: http::Uri = "/clusters/root:o/apis/g/v1/ws?limit=500&continue=eyJ9%3D"
            .parse()
            .unwrap();
        let sent: http::Uri = "/clusters/root:o/apis/g/v1/ws?continue=eyJ9=&limit=500&timeout=32s"
            .parse()
            .unwrap();
        assert_eq!(request_key(&recorded), request_key(&sent));
        let other: http::Uri = "/clusters/root:o/apis/g/v1/ws?limit=500".parse().unwrap();
        assert_ne!(request_key(&recorded), request_key(&other));
    }
}
