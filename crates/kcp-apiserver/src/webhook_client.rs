//! Posting JSON to a webhook over HTTPS, as kube-apiserver calls its webhooks (conversion,
//! token authentication, authorization): HTTP/1.1, the server verified against a CA bundle
//! (the system's roots without one), optionally presenting a bearer token or a client
//! certificate, over connections [`WebhookClients`] keeps and reuses. Also reads the kubeconfig-format files that name authentication and
//! authorization webhooks (`--authentication-token-webhook-config-file`,
//! `--authorization-webhook-config-file`).
//!
//! Errors read as they do after kube-apiserver's `Post "<url>": ` (`dial tcp ...`, `the server
//! responded with the status code ...`).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use bytes::Bytes;
use http::{Request, Uri, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// The largest answer read (converted lists can be large).
const MAX_RESPONSE_BYTES: usize = 64 << 20;

/// `text` quoted as Go's `%q` quotes it (for URLs and names in messages).
pub fn go_quote(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

/// Where a webhook is and how to reach it.
#[derive(Debug, Clone, Default)]
pub struct Endpoint {
    /// `https://host[:port]/path`.
    pub url: String,
    /// PEM CA certificates that verify the webhook's certificate.
    pub ca_bundle: Option<Vec<u8>>,
    /// A bearer token sent with each call.
    pub token: Option<String>,
    /// A PEM client certificate and key presented to the webhook.
    pub client_certificate: Option<(Vec<u8>, Vec<u8>)>,
    /// The name the webhook's certificate must carry when it is not the URL's host (a
    /// Service's `<name>.<namespace>.svc` dialled at an endpoint's address).
    pub server_name: Option<String>,
}

impl Endpoint {
    /// The webhook a kubeconfig-format file names: the cluster and user of its current context
    /// (the first ones without one), with files relative to the file's directory.
    pub fn from_kubeconfig_file(path: &Path) -> Result<Endpoint, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("read the webhook config file {}: {e}", path.display()))?;
        let config: Value = serde_saphyr::from_str(&text)
            .map_err(|e| format!("the webhook config file {}: {e}", path.display()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        Endpoint::from_kubeconfig(&config, base)
            .map_err(|e| format!("the webhook config file {}: {e}", path.display()))
    }

    fn from_kubeconfig(config: &Value, base: &Path) -> Result<Endpoint, String> {
        let current = config["current-context"].as_str().unwrap_or_default();
        let context = named(&config["contexts"], current).map(|c| &c["context"]);
        let cluster_name = context.and_then(|c| c["cluster"].as_str());
        let user_name = context.and_then(|c| c["user"].as_str());
        let pick = |list: &Value, name: Option<&str>, field: &str| -> Value {
            match name {
                Some(name) => named(list, name).map(|e| e[field].clone()),
                None => list
                    .as_array()
                    .and_then(|l| l.first())
                    .map(|e| e[field].clone()),
            }
            .unwrap_or(Value::Null)
        };
        let cluster = pick(&config["clusters"], cluster_name, "cluster");
        let user = pick(&config["users"], user_name, "user");
        let url = cluster["server"]
            .as_str()
            .filter(|s| !s.is_empty())
            .ok_or("no cluster with a server")?
            .to_string();
        let file_or_data =
            |entry: &Value, file: &str, data: &str| -> Result<Option<Vec<u8>>, String> {
                if let Some(encoded) = entry[data].as_str() {
                    return base64::engine::general_purpose::STANDARD
                        .decode(encoded)
                        .map(Some)
                        .map_err(|e| format!("{data}: {e}"));
                }
                match entry[file].as_str() {
                    Some(name) => std::fs::read(base.join(name))
                        .map(Some)
                        .map_err(|e| format!("{file} {name}: {e}")),
                    None => Ok(None),
                }
            };
        let ca_bundle = file_or_data(
            &cluster,
            "certificate-authority",
            "certificate-authority-data",
        )?;
        let certificate = file_or_data(&user, "client-certificate", "client-certificate-data")?;
        let key = file_or_data(&user, "client-key", "client-key-data")?;
        let token = match user["token"].as_str() {
            Some(token) => Some(token.to_string()),
            None => match user["tokenFile"].as_str() {
                Some(name) => Some(
                    std::fs::read_to_string(base.join(name))
                        .map_err(|e| format!("tokenFile {name}: {e}"))?
                        .trim()
                        .to_string(),
                ),
                None => None,
            },
        };
        Ok(Endpoint {
            url,
            ca_bundle,
            token,
            client_certificate: certificate.zip(key),
            server_name: None,
        })
    }

    /// The TLS name the webhook's certificate must carry: `server_name`, else the URL's host.
    fn tls_name(&self, uri: &Uri) -> Result<String, String> {
        if let Some(name) = &self.server_name {
            return Ok(name.clone());
        }
        let host = uri.host().ok_or("the URL has no host")?;
        Ok(host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string())
    }

    /// A client configuration trusting the CA bundle (or the system's roots), presenting the
    /// client certificate if there is one.
    fn tls_config(&self) -> Result<rustls::ClientConfig, String> {
        let mut roots = rustls::RootCertStore::empty();
        match self
            .ca_bundle
            .as_deref()
            .filter(|b| !b.trim_ascii().is_empty())
        {
            Some(pem) => {
                for cert in CertificateDer::pem_slice_iter(pem) {
                    let cert =
                        cert.map_err(|e| format!("unable to load root certificates: {e}"))?;
                    roots
                        .add(cert)
                        .map_err(|e| format!("unable to load root certificates: {e}"))?;
                }
                if roots.is_empty() {
                    return Err(
                        "unable to load root certificates: unable to parse bytes as PEM block"
                            .into(),
                    );
                }
            }
            None => {
                for cert in rustls_native_certs::load_native_certs().certs {
                    let _ = roots.add(cert);
                }
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots);
        let mut config = match &self.client_certificate {
            None => builder.with_no_client_auth(),
            Some((cert, key)) => {
                let chain = CertificateDer::pem_slice_iter(cert)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| format!("the client certificate: {e}"))?;
                let key = PrivateKeyDer::from_pem_slice(key)
                    .map_err(|e| format!("the client key: {e}"))?;
                builder
                    .with_client_auth_cert(chain, key)
                    .map_err(|e| format!("the client certificate: {e}"))?
            }
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

/// Idle connections kept per webhook address at most.
const IDLE_PER_ADDRESS: usize = 16;
/// How long an idle connection is kept.
const IDLE_FOR: Duration = Duration::from_secs(60);
/// TLS configurations (one per CA bundle and client certificate) kept at most; the cache
/// starts over when full.
const MAX_TLS_CONFIGS: usize = 256;

/// Where a pooled connection goes: the address dialled, the TLS name verified, and the TLS
/// configuration's key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ConnectionKey {
    host: String,
    port: u16,
    tls_name: String,
    tls: u64,
}

struct Idle {
    sender: http1::SendRequest<Full<Bytes>>,
    since: Instant,
}

#[derive(Default)]
struct Pool {
    idle: HashMap<ConnectionKey, Vec<Idle>>,
    tls: HashMap<u64, Arc<rustls::ClientConfig>>,
}

/// Clients of webhooks, as kube-apiserver keeps them: one TLS configuration per CA bundle and
/// client certificate, built once, and HTTP/1.1 connections reused from call to call (idle
/// ones kept a minute). Cloning shares the pool. Each webhook user (conversion, token and
/// authorization webhooks, admission) holds its own.
#[derive(Clone, Default)]
pub struct WebhookClients {
    pool: Arc<Mutex<Pool>>,
}

impl std::fmt::Debug for WebhookClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookClients").finish_non_exhaustive()
    }
}

impl WebhookClients {
    /// Posts `body` to `endpoint` and answers the response body as JSON (`what` names what
    /// the answer must be, for the error when it is not JSON).
    pub async fn post(
        &self,
        endpoint: &Endpoint,
        body: Vec<u8>,
        what: &str,
    ) -> Result<Value, String> {
        let uri: Uri = endpoint
            .url
            .parse()
            .map_err(|e| format!("invalid URL: {e}"))?;
        if uri.scheme_str() != Some("https") {
            return Err("only https URLs are supported".into());
        }
        let host = uri.host().ok_or("the URL has no host")?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(443);
        let key = ConnectionKey {
            host: host.clone(),
            port,
            tls_name: endpoint.tls_name(&uri)?,
            tls: tls_key(endpoint),
        };
        let path = uri.path_and_query().map_or("/", |p| p.as_str());
        let authority = uri.authority().map_or(host.as_str(), |a| a.as_str());
        let body = Bytes::from(body);
        let request = || {
            let mut request = Request::post(path)
                .header(header::HOST, authority)
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::ACCEPT, "application/json, */*");
            if let Some(token) = &endpoint.token {
                request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
            }
            request
                .body(Full::new(body.clone()))
                .map_err(|e| e.to_string())
        };
        let (mut sender, reused) = match self.idle(&key) {
            Some(sender) => (sender, true),
            None => (self.connect(endpoint, &key).await?, false),
        };
        let response = match sender.send_request(request()?).await {
            // A kept connection the webhook closed meanwhile: once more on a new one.
            Err(error) if reused && (error.is_closed() || error.is_canceled()) => {
                sender = self.connect(endpoint, &key).await?;
                sender.send_request(request()?).await
            }
            other => other,
        }
        .map_err(|e| e.to_string())?;
        let status = response.status();
        let bytes = Limited::new(response.into_body(), MAX_RESPONSE_BYTES)
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        self.keep(key, sender);
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            let text = text.trim();
            return Err(if text.is_empty() {
                format!(
                    "the server responded with the status code {} but did not return more information",
                    status.as_u16()
                )
            } else {
                format!(
                    "the server responded with the status code {}: {text}",
                    status.as_u16()
                )
            });
        }
        serde_json::from_slice(&bytes)
            .map_err(|e| format!("the response is not a JSON {what}: {e}"))
    }

    /// An idle connection to `key` still open, if one is kept.
    fn idle(&self, key: &ConnectionKey) -> Option<http1::SendRequest<Full<Bytes>>> {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        let idle = pool.idle.get_mut(key)?;
        while let Some(kept) = idle.pop() {
            if kept.since.elapsed() < IDLE_FOR && !kept.sender.is_closed() {
                return Some(kept.sender);
            }
        }
        None
    }

    /// Keeps `sender` for the next call to `key`, unless its connection closed or enough are
    /// kept.
    fn keep(&self, key: ConnectionKey, sender: http1::SendRequest<Full<Bytes>>) {
        if sender.is_closed() {
            return;
        }
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        let idle = pool.idle.entry(key).or_default();
        idle.retain(|kept| kept.since.elapsed() < IDLE_FOR && !kept.sender.is_closed());
        if idle.len() < IDLE_PER_ADDRESS {
            idle.push(Idle {
                sender,
                since: Instant::now(),
            });
        }
    }

    /// The TLS configuration of `endpoint`, built once per CA bundle and client certificate.
    fn tls_config(
        &self,
        endpoint: &Endpoint,
        key: u64,
    ) -> Result<Arc<rustls::ClientConfig>, String> {
        if let Some(config) = self
            .pool
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .tls
            .get(&key)
        {
            return Ok(config.clone());
        }
        let config = Arc::new(endpoint.tls_config()?);
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        if pool.tls.len() >= MAX_TLS_CONFIGS {
            pool.tls.clear();
        }
        pool.tls.insert(key, config.clone());
        Ok(config)
    }

    /// A new connection to `key`'s address, TLS verified against its name.
    async fn connect(
        &self,
        endpoint: &Endpoint,
        key: &ConnectionKey,
    ) -> Result<http1::SendRequest<Full<Bytes>>, String> {
        let (host, port) = (key.host.as_str(), key.port);
        let server_name = ServerName::try_from(key.tls_name.clone()).map_err(|e| e.to_string())?;
        let connector = TlsConnector::from(self.tls_config(endpoint, key.tls)?);
        let tcp = TcpStream::connect((host, port))
            .await
            .map_err(|e| format!("dial tcp {host}:{port}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let tls = connector
            .connect(server_name, tcp)
            .await
            .map_err(|e| format!("tls: {e}"))?;
        let (sender, connection) = http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
        // The connection lives while its sender does (in a call or kept idle).
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(sender)
    }
}

/// The key of an endpoint's TLS configuration: its CA bundle and client certificate.
fn tls_key(endpoint: &Endpoint) -> u64 {
    let mut hasher = std::hash::DefaultHasher::new();
    endpoint.ca_bundle.hash(&mut hasher);
    endpoint.client_certificate.hash(&mut hasher);
    hasher.finish()
}

/// The entry of a kubeconfig list (`clusters`, `users`, `contexts`) called `name`.
fn named<'a>(list: &'a Value, name: &str) -> Option<&'a Value> {
    list.as_array()?.iter().find(|e| e["name"] == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_contexts_cluster_and_user_are_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "from-file\n").unwrap();
        let config = serde_json::json!({
            "clusters": [
                {"name": "other", "cluster": {"server": "https://other"}},
                {"name": "hook", "cluster": {"server": "https://hook:8443/authn", "certificate-authority-data": "UEVN"}},
            ],
            "users": [{"name": "me", "user": {"tokenFile": "token"}}],
            "contexts": [{"name": "c", "context": {"cluster": "hook", "user": "me"}}],
            "current-context": "c",
        });
        let endpoint = Endpoint::from_kubeconfig(&config, dir.path()).unwrap();
        assert_eq!(endpoint.url, "https://hook:8443/authn");
        assert_eq!(endpoint.ca_bundle.as_deref(), Some(&b"PEM"[..]));
        assert_eq!(endpoint.token.as_deref(), Some("from-file"));
        // Without a context, the first cluster and user.
        let first =
            serde_json::json!({"clusters": [{"name": "a", "cluster": {"server": "https://a"}}]});
        assert_eq!(
            Endpoint::from_kubeconfig(&first, dir.path()).unwrap().url,
            "https://a"
        );
        assert!(Endpoint::from_kubeconfig(&serde_json::json!({}), dir.path()).is_err());
    }
}
