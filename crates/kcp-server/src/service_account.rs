//! The service account token issuer of this server, from the `--service-account-*` flags: the
//! signing key is `--service-account-signing-key-file`, or one made at the first start and
//! kept, owner-only, as `<root>/service-account.key`.

use std::path::Path;

use anyhow::Context;
use kcp_registry::serviceaccounts::{ServiceAccountTokens, TokenConfig};

use crate::Options;

/// The kept signing key's file in the root directory.
const KEY_FILE: &str = "service-account.key";

pub fn tokens(options: &Options, ca_pem: &str) -> anyhow::Result<ServiceAccountTokens> {
    let signing_key_pem = match &options.service_account_signing_key_file {
        Some(path) => read(path)?,
        None => load_or_create(&options.root_directory)?,
    };
    let verifying_keys_pem = options
        .service_account_key_file
        .iter()
        .map(|path| read(path))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let max = options.service_account_max_token_expiration.as_secs();
    ServiceAccountTokens::new(TokenConfig {
        signing_key_pem,
        verifying_keys_pem,
        issuers: options.service_account_issuer.clone(),
        audiences: options.api_audiences.clone(),
        max_expiration_seconds: (max > 0).then_some(max as i64),
        root_ca_pem: ca_pem.as_bytes().to_vec(),
    })
    .map_err(anyhow::Error::msg)
}

fn read(path: &Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("read {}", path.display()))
}

fn load_or_create(root: &Path) -> anyhow::Result<Vec<u8>> {
    let path = root.join(KEY_FILE);
    if let Ok(existing) = std::fs::read(&path) {
        return Ok(existing);
    }
    let pem = kcp_registry::serviceaccounts::tokens::generate_signing_key()
        .map_err(anyhow::Error::msg)?;
    crate::write_private(&path, &pem).context("store the service account signing key")?;
    Ok(pem)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_signing_key_is_made_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let first = super::load_or_create(dir.path()).unwrap();
        assert!(String::from_utf8_lossy(&first).starts_with("-----BEGIN PRIVATE KEY-----"));
        assert_eq!(super::load_or_create(dir.path()).unwrap(), first);
    }
}
