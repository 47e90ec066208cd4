//! A JSON-over-HTTPS server for the webhooks tests play: every POST body is parsed as JSON and
//! handed with the request path to the test's handler, whose JSON is the answer. The server's
//! certificate (self-signed, for 127.0.0.1) is the CA the client must trust.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// What answers a request: its path and JSON body in, the JSON answer out.
pub type Handler = Arc<dyn Fn(&str, Value) -> Value + Send + Sync>;

/// A serving certificate for 127.0.0.1 and its PEM, which clients trust as their CA.
pub struct Certificate {
    pub ca_pem: String,
    tls: Arc<rustls::ServerConfig>,
}

/// A new self-signed certificate for 127.0.0.1.
pub fn certificate() -> Certificate {
    let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()])
        .expect("generate a certificate");
    let cert_pem = certified.cert.pem();
    let key_pem = certified.signing_key.serialize_pem();
    let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .expect("parse the certificate");
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).expect("parse the key");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .expect("a server configuration");
    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
    Certificate {
        ca_pem: cert_pem,
        tls: Arc::new(tls),
    }
}

/// Serves `handler` on `address` (port 0: any free one) until the returned task is aborted
/// (its connections with it); answers the address it listens on.
pub async fn serve(
    address: SocketAddr,
    certificate: &Certificate,
    handler: Handler,
) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind(address).await.expect("bind the webhook");
    let address = listener.local_addr().expect("the webhook's address");
    let acceptor = TlsAcceptor::from(certificate.tls.clone());
    let task = tokio::spawn(async move {
        // The connections live in the server's task: aborting it closes them too, as a
        // webhook that goes down does.
        let mut connections = tokio::task::JoinSet::new();
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            while connections.try_join_next().is_some() {}
            let acceptor = acceptor.clone();
            let handler = handler.clone();
            connections.spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let handler = handler.clone();
                    async move {
                        let path = request.uri().path().to_string();
                        let body = request.into_body().collect().await.map(|b| b.to_bytes());
                        let asked: Value = body
                            .ok()
                            .and_then(|b| serde_json::from_slice(&b).ok())
                            .unwrap_or_default();
                        let answer = serde_json::to_vec(&handler(&path, asked)).unwrap_or_default();
                        Ok::<_, Infallible>(
                            hyper::Response::builder()
                                .header("Content-Type", "application/json")
                                .body(Full::new(Bytes::from(answer)))
                                .expect("a response"),
                        )
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (address, task)
}
