//! The one HTTP client both kcp and its baseline are driven with: hyper's connection-level client
//! over tokio-rustls, one kept-alive connection per worker, HTTP/1.1 or h2 chosen by ALPN, trusting
//! kcp's CA (`<root>/ca.crt`).

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, bail};
use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// The HTTP version a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Protocol {
    /// HTTP/1.1 (ALPN `http/1.1`), one request at a time per connection.
    Http1,
    /// HTTP/2 (ALPN `h2`), one stream at a time per connection.
    H2,
}

impl Protocol {
    pub fn label(self) -> &'static str {
        match self {
            Protocol::Http1 => "http/1.1",
            Protocol::H2 => "h2",
        }
    }
}

/// Where to connect and how: the server's address and a TLS configuration trusting its CA.
#[derive(Clone)]
pub struct Target {
    pub address: SocketAddr,
    tls: Arc<rustls::ClientConfig>,
    h2_tls: Arc<rustls::ClientConfig>,
}

impl Target {
    /// A target at `address` whose certificate chains to the PEM CA `ca_pem`.
    pub fn new(address: SocketAddr, ca_pem: &[u8]) -> anyhow::Result<Target> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem) {
            roots
                .add(cert.context("parse the CA certificate")?)
                .context("trust the CA certificate")?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut tls = config.clone();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        let mut h2_tls = config;
        h2_tls.alpn_protocols = vec![b"h2".to_vec()];
        Ok(Target {
            address,
            tls: Arc::new(tls),
            h2_tls: Arc::new(h2_tls),
        })
    }

    /// Opens one TLS connection and completes the HTTP handshake.
    pub async fn connect(&self, protocol: Protocol) -> anyhow::Result<Connection> {
        let tcp = TcpStream::connect(self.address)
            .await
            .with_context(|| format!("connect to {}", self.address))?;
        tcp.set_nodelay(true)?;
        let config = match protocol {
            Protocol::Http1 => &self.tls,
            Protocol::H2 => &self.h2_tls,
        };
        let name = ServerName::IpAddress(self.address.ip().into());
        let tls = TlsConnector::from(Arc::clone(config))
            .connect(name, tcp)
            .await
            .context("TLS handshake")?;
        let io = TokioIo::new(tls);
        let sender = match protocol {
            Protocol::Http1 => {
                let (sender, connection) = http1::handshake(io).await?;
                tokio::spawn(connection);
                Sender::Http1(sender)
            }
            Protocol::H2 => {
                let (sender, connection) = http2::handshake(TokioExecutor::new(), io).await?;
                tokio::spawn(connection);
                Sender::H2(sender)
            }
        };
        Ok(Connection {
            sender,
            authority: self.address.to_string(),
        })
    }
}

/// One kept-alive connection.
pub struct Connection {
    sender: Sender,
    authority: String,
}

enum Sender {
    Http1(http1::SendRequest<Full<Bytes>>),
    H2(http2::SendRequest<Full<Bytes>>),
}

impl Connection {
    /// A request for `path` in the form this connection's protocol wants: origin form with a
    /// `Host` header on HTTP/1.1, an absolute URI (`:scheme`, `:authority`) on h2.
    pub fn request(&self, method: http::Method, path: &str) -> http::request::Builder {
        match self.sender {
            Sender::Http1(_) => Request::builder()
                .method(method)
                .uri(path)
                .header(http::header::HOST, &self.authority),
            Sender::H2(_) => Request::builder()
                .method(method)
                .uri(format!("https://{}{path}", self.authority)),
        }
    }

    /// [`Connection::request`] with `authorization` (a bearer token's header value).
    pub fn authorized(
        &self,
        method: http::Method,
        path: &str,
        authorization: &str,
    ) -> http::request::Builder {
        self.request(method, path)
            .header(http::header::AUTHORIZATION, authorization)
    }

    /// Sends `request` and reads the whole response.
    pub async fn send(&mut self, request: Request<Full<Bytes>>) -> anyhow::Result<Answer> {
        let response = self.respond(request).await?;
        let status = response.status();
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(str::to_string);
        let content_encoding = response
            .headers()
            .get(http::header::CONTENT_ENCODING)
            .and_then(|value| value.to_str().ok())
            .map(str::to_string);
        let body = response.into_body().collect().await?.to_bytes();
        Ok(Answer {
            status,
            content_type,
            content_encoding,
            body,
        })
    }

    /// Sends `request` and answers the status and the body as it streams (watches).
    pub async fn stream(
        &mut self,
        request: Request<Full<Bytes>>,
    ) -> anyhow::Result<(StatusCode, hyper::body::Incoming)> {
        let response = self.respond(request).await?;
        Ok((response.status(), response.into_body()))
    }

    /// Sends `request` once the connection is ready; the response's body is still to be read.
    async fn respond(
        &mut self,
        request: Request<Full<Bytes>>,
    ) -> anyhow::Result<http::Response<hyper::body::Incoming>> {
        Ok(match &mut self.sender {
            Sender::Http1(sender) => {
                sender.ready().await?;
                sender.send_request(request).await?
            }
            Sender::H2(sender) => {
                sender.ready().await?;
                sender.send_request(request).await?
            }
        })
    }

    /// Sends `request` and requires `expected` as the answer.
    pub async fn expect(
        &mut self,
        request: Request<Full<Bytes>>,
        expected: StatusCode,
    ) -> anyhow::Result<Answer> {
        let what = format!("{} {}", request.method(), request.uri());
        let answer = self.send(request).await?;
        if answer.status != expected {
            bail!(
                "{what}: expected {expected}, got {}: {}",
                answer.status,
                String::from_utf8_lossy(&answer.body)
            );
        }
        Ok(answer)
    }
}

/// A whole response.
pub struct Answer {
    pub status: StatusCode,
    pub content_type: Option<String>,
    /// `gzip` when the body is compressed (only when the request offered it).
    pub content_encoding: Option<String>,
    pub body: Bytes,
}

/// The store's revision now: the resourceVersion of a one-item list.
pub async fn current_revision(target: &Target, authorization: &str) -> anyhow::Result<u64> {
    let mut connection = target.connect(Protocol::Http1).await?;
    let request = connection
        .authorized(
            http::Method::GET,
            "/clusters/root/api/v1/namespaces?limit=1",
            authorization,
        )
        .body(Full::new(Bytes::new()))?;
    let answer = connection.expect(request, StatusCode::OK).await?;
    let list: serde_json::Value = serde_json::from_slice(&answer.body)?;
    list["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .context("a list's resourceVersion")
}
