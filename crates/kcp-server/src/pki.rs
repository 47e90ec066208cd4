//! The serving certificates in the root directory: a self-signed CA (`ca.crt`, `ca.key`) and a
//! serving certificate it signed (`apiserver.crt`, `apiserver.key`) for localhost, 127.0.0.1, ::1
//! and the bind address. Made on the first start, reused afterwards.

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

const CA_CERT: &str = "ca.crt";
const CA_KEY: &str = "ca.key";
const SERVING_CERT: &str = "apiserver.crt";
const SERVING_KEY: &str = "apiserver.key";

/// The PEM material the server needs.
pub struct Pki {
    pub ca_pem: String,
    pub serving_cert_pem: String,
    pub serving_key_pem: String,
}

/// Reads the certificates from `root`, or makes and stores new ones if any file is missing.
pub fn load_or_create(root: &Path, bind_address: &IpAddr) -> anyhow::Result<Pki> {
    let read = |name: &str| std::fs::read_to_string(root.join(name));
    if let (Ok(ca_pem), Ok(serving_cert_pem), Ok(serving_key_pem)) =
        (read(CA_CERT), read(SERVING_CERT), read(SERVING_KEY))
    {
        return Ok(Pki {
            ca_pem,
            serving_cert_pem,
            serving_key_pem,
        });
    }
    let (pki, ca_key_pem) = create(bind_address).context("generate the serving certificates")?;
    crate::write_private(&root.join(CA_KEY), ca_key_pem.as_bytes())?;
    crate::write_private(&root.join(SERVING_KEY), pki.serving_key_pem.as_bytes())?;
    crate::write_private(&root.join(SERVING_CERT), pki.serving_cert_pem.as_bytes())?;
    crate::write_private(&root.join(CA_CERT), pki.ca_pem.as_bytes())?;
    Ok(pki)
}

/// A new CA and serving certificate; also returns the CA key, kept for signing later.
fn create(bind_address: &IpAddr) -> anyhow::Result<(Pki, String)> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "kcp-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate()?;
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let ca_key_pem = ca_key.serialize_pem();
    let issuer = Issuer::new(ca_params, ca_key);

    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    if !bind_address.is_unspecified() && !names.contains(&bind_address.to_string()) {
        names.push(bind_address.to_string());
    }
    let mut params = CertificateParams::new(names)?;
    params.distinguished_name.push(DnType::CommonName, "kcp");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    let pki = Pki {
        ca_pem: ca_cert.pem(),
        serving_cert_pem: cert.pem(),
        serving_key_pem: key.serialize_pem(),
    };
    Ok((pki, ca_key_pem))
}

impl Pki {
    /// A rustls server configuration with this certificate, offering h2 and http/1.1; with
    /// `client_ca` (PEM), client certificates it signed are asked for and verified (a client
    /// may still present none), as kube-apiserver's `--client-ca-file`.
    pub fn server_config(&self, client_ca: Option<&[u8]>) -> anyhow::Result<rustls::ServerConfig> {
        let certs = CertificateDer::pem_slice_iter(self.serving_cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .context("parse the serving certificate")?;
        let key = PrivateKeyDer::from_pem_slice(self.serving_key_pem.as_bytes())
            .context("parse the serving key")?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()?;
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(pem) => {
                let mut roots = rustls::RootCertStore::empty();
                for certificate in CertificateDer::pem_slice_iter(pem) {
                    roots
                        .add(certificate.context("parse the client CA file")?)
                        .context("add a client CA")?;
                }
                anyhow::ensure!(!roots.is_empty(), "the client CA file holds no certificate");
                let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider,
                )
                .allow_unauthenticated()
                .build()
                .context("build the client certificate verifier")?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut config = builder.with_single_cert(certs, key)?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        // Sessions resume as with kube-apiserver (Go's crypto/tls): from tickets the server
        // encrypts and the client keeps, so the server holds nothing per client. rustls' default
        // instead keeps the last 256 clients' sessions in the server, small blocks allocated
        // whenever a client connects, which kept allocator pages after bursts.
        config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        config.ticketer = rustls::crypto::ring::Ticketer::new().context("make the TLS ticketer")?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rustls_pki_types::CertificateDer;
    use rustls_pki_types::pem::PemObject;

    #[test]
    fn certificates_are_made_once_and_load_into_rustls() {
        let dir = tempfile::tempdir().unwrap();
        let address = "10.1.2.3".parse().unwrap();
        let first = super::load_or_create(dir.path(), &address).unwrap();
        first.server_config(None).unwrap();
        let again = super::load_or_create(dir.path(), &address).unwrap();
        assert_eq!(first.ca_pem, again.ca_pem);
        assert_eq!(first.serving_cert_pem, again.serving_cert_pem);
    }

    /// Passes what `from` has to send to `to`.
    fn transfer(from: &mut rustls::Connection, to: &mut rustls::Connection) {
        let mut bytes = Vec::new();
        while from.wants_write() {
            from.write_tls(&mut bytes).unwrap();
        }
        let mut read = &bytes[..];
        while !read.is_empty() {
            to.read_tls(&mut read).unwrap();
            to.process_new_packets().unwrap();
        }
    }

    /// Handshakes `client` with `server` in memory, through the tickets the server sends after
    /// the handshake, and says how the handshake went.
    fn handshake(
        client: &Arc<rustls::ClientConfig>,
        server: &Arc<rustls::ServerConfig>,
    ) -> rustls::HandshakeKind {
        let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
        let mut client = rustls::Connection::Client(
            rustls::ClientConnection::new(Arc::clone(client), name).unwrap(),
        );
        let mut server =
            rustls::Connection::Server(rustls::ServerConnection::new(Arc::clone(server)).unwrap());
        for _ in 0..20 {
            transfer(&mut client, &mut server);
            transfer(&mut server, &mut client);
            if !client.is_handshaking() && !server.is_handshaking() && !server.wants_write() {
                break;
            }
        }
        assert!(!client.is_handshaking(), "the handshake did not finish");
        client.handshake_kind().unwrap()
    }

    #[test]
    fn a_client_resumes_its_session_from_a_ticket_that_the_server_does_not_keep() {
        let dir = tempfile::tempdir().unwrap();
        let pki = super::load_or_create(dir.path(), &"127.0.0.1".parse().unwrap()).unwrap();
        let server = Arc::new(pki.server_config(None).unwrap());
        assert!(
            !server.session_storage.can_cache(),
            "the server keeps sessions"
        );
        let mut roots = rustls::RootCertStore::empty();
        for certificate in CertificateDer::pem_slice_iter(pki.ca_pem.as_bytes()) {
            roots.add(certificate.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
            let client = Arc::new(
                rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
                    .with_protocol_versions(&[version])
                    .unwrap()
                    .with_root_certificates(roots.clone())
                    .with_no_client_auth(),
            );
            assert_eq!(handshake(&client, &server), rustls::HandshakeKind::Full);
            assert_eq!(
                handshake(&client, &server),
                rustls::HandshakeKind::Resumed,
                "{version:?}"
            );
        }
    }
}
