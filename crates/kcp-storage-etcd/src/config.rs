//! How to reach an etcd cluster: endpoints, TLS material, key prefix and timeouts.
//!
//! This module owns the configuration values and their validation only; it must not know how
//! connections are made or how storage operations are translated.

use std::time::Duration;

use kcp_storage::StorageError;

/// Where and how to connect to etcd.
#[derive(Clone, Debug)]
pub struct EtcdConfig {
    /// Client URLs of the members, `http://host:port` or `https://host:port`. Requests go to one
    /// member at a time and move on to the next when one cannot be reached.
    pub endpoints: Vec<String>,
    /// TLS material; required for `https://` endpoints, rejected for `http://` ones.
    pub tls: Option<EtcdTls>,
    /// Prepended to every key sent to etcd and stripped from every key read back, so several
    /// stores can share one cluster. Empty: keys are used as they are. Revisions and compaction
    /// are cluster-wide and therefore shared by every prefix.
    pub key_prefix: Vec<u8>,
    /// How long [`EtcdStorage::connect`](crate::EtcdStorage::connect) waits for a member to
    /// answer before failing with [`StorageError::Unavailable`]; also the TCP connect timeout of
    /// one attempt (capped at 3 seconds).
    pub connect_timeout: Duration,
    /// Longest wait for the answer to one read or write. A write that times out may or may not
    /// have been applied; it fails with [`StorageError::Unavailable`].
    pub request_timeout: Duration,
}

/// PEM-encoded TLS material for talking to etcd over `https://`.
#[derive(Clone, Debug)]
pub struct EtcdTls {
    /// The CA that signed the servers' certificates.
    pub ca_pem: Vec<u8>,
    /// Client certificate chain, for servers started with `--client-cert-auth`.
    pub client_cert_pem: Option<Vec<u8>>,
    /// Private key of the client certificate.
    pub client_key_pem: Option<Vec<u8>>,
}

impl EtcdConfig {
    /// Plain configuration for `endpoints`, without TLS or key prefix, with default timeouts.
    pub fn new<I, S>(endpoints: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        EtcdConfig {
            endpoints: endpoints.into_iter().map(Into::into).collect(),
            tls: None,
            key_prefix: Vec::new(),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(60),
        }
    }

    pub fn with_tls(mut self, tls: EtcdTls) -> Self {
        self.tls = Some(tls);
        self
    }

    pub fn with_key_prefix(mut self, prefix: impl Into<Vec<u8>>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Rejects configurations that can never work, before any connection is tried.
    pub(crate) fn validate(&self) -> Result<(), StorageError> {
        let invalid = |message: String| Err(StorageError::InvalidRequest(message));
        if self.endpoints.is_empty() {
            return invalid("etcd configuration has no endpoints".into());
        }
        for endpoint in &self.endpoints {
            let secure = if endpoint.starts_with("https://") {
                true
            } else if endpoint.starts_with("http://") {
                false
            } else {
                return invalid(format!(
                    "etcd endpoint {endpoint:?} must start with http:// or https://"
                ));
            };
            if secure && self.tls.is_none() {
                return invalid(format!(
                    "etcd endpoint {endpoint} uses https but no TLS material is configured"
                ));
            }
            if !secure && self.tls.is_some() {
                return invalid(format!(
                    "etcd endpoint {endpoint} uses http but TLS material is configured"
                ));
            }
        }
        if let Some(tls) = &self.tls
            && tls.client_cert_pem.is_some() != tls.client_key_pem.is_some()
        {
            return invalid("etcd client certificate and key must be given together".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_catches_scheme_and_tls_mismatches() {
        assert!(
            EtcdConfig::new(["http://127.0.0.1:2379"])
                .validate()
                .is_ok()
        );
        assert!(EtcdConfig::new(Vec::<String>::new()).validate().is_err());
        assert!(EtcdConfig::new(["127.0.0.1:2379"]).validate().is_err());
        assert!(
            EtcdConfig::new(["https://127.0.0.1:2379"])
                .validate()
                .is_err()
        );
        let tls = EtcdTls {
            ca_pem: b"ca".to_vec(),
            client_cert_pem: Some(b"cert".to_vec()),
            client_key_pem: None,
        };
        assert!(
            EtcdConfig::new(["https://127.0.0.1:2379"])
                .with_tls(tls.clone())
                .validate()
                .is_err()
        );
        let tls = EtcdTls {
            client_key_pem: Some(b"key".to_vec()),
            ..tls
        };
        assert!(
            EtcdConfig::new(["https://127.0.0.1:2379"])
                .with_tls(tls.clone())
                .validate()
                .is_ok()
        );
        assert!(
            EtcdConfig::new(["http://127.0.0.1:2379"])
                .with_tls(tls)
                .validate()
                .is_err()
        );
    }
}
