//! API sharing (`apis.kcp.io`): what the registry itself knows of APIResourceSchemas,
//! APIExports and APIBindings. Their objects are kcp's system kinds (`kcp_apis::system`); the
//! controllers that bind them are `kcp-controllers`' `apis`.
//!
//! - [`schemas`]: an APIResourceSchema's spec as the CRD spec it serves like.
//! - [`bound`]: which resources each logical cluster's APIBindings bind, served by the
//!   `served` layers between kcp's kinds and the cluster's own CRDs, and stored under the
//!   export's identity.
//! - `admission`: APIResourceSchemas are validated as CRDs and immutable; an APIBinding needs
//!   verb `bind` on its export.

mod admission;
pub mod bound;
pub mod schemas;

use sha2::{Digest, Sha256};

/// The namespace of an APIExport's identity Secret (when its spec names none).
pub const IDENTITY_NAMESPACE: &str = "kcp-system";

/// The finalizer an APIBinding carries until its bound objects are gone.
pub const BINDING_FINALIZER: &str = "apis.kcp.io/apibinding-finalizer";

/// An APIExport's identity hash: the hex SHA-256 of its identity key, as kcp computes it.
pub fn identity_hash(key: &[u8]) -> String {
    Sha256::digest(key)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A new identity key: 256 random bits, as the base64 text kcp keeps in the Secret's `key`.
pub fn new_identity_key() -> String {
    use base64::Engine;
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system has randomness");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_identity_hash_is_the_hex_sha256_of_the_key() {
        assert_eq!(
            super::identity_hash(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
