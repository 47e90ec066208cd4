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
mod identity;
pub mod root;
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

/// The name kcp gives the APIBinding a workspace type's `defaultAPIBindings` entry makes in
/// `cluster`: the export's name (at most 247 characters), `-`, and the first five characters
/// of the base-62 SHA-224 of `<cluster>|<path>|<export>`, lower-cased.
pub fn default_binding_name(cluster: &str, path: &str, export: &str) -> String {
    let digest = sha2::Sha224::digest(format!("{cluster}|{path}|{export}").as_bytes());
    let hash: String = base62(&digest).chars().take(5).collect();
    let prefix: String = export.chars().take(253 - 1 - 5).collect();
    format!("{prefix}-{}", hash.to_lowercase())
}

/// `bytes` as a big-endian number in base 62 (`0-9a-zA-Z`, most significant digit first, no
/// leading zeros), as Go's `big.Int.Text(62)` writes it.
fn base62(bytes: &[u8]) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let mut number: Vec<u8> = bytes.iter().copied().skip_while(|b| *b == 0).collect();
    let mut digits = Vec::new();
    while !number.is_empty() {
        let mut remainder = 0u32;
        let mut quotient = Vec::with_capacity(number.len());
        for byte in &number {
            let value = (remainder << 8) | u32::from(*byte);
            let digit = value / 62;
            remainder = value % 62;
            if !(quotient.is_empty() && digit == 0) {
                quotient.push(digit as u8);
            }
        }
        digits.push(DIGITS[remainder as usize]);
        number = quotient;
    }
    if digits.is_empty() {
        digits.push(b'0');
    }
    digits.reverse();
    String::from_utf8(digits).expect("ASCII digits")
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
    fn base62_writes_numbers_as_go_does() {
        assert_eq!(super::base62(&[0]), "0");
        assert_eq!(super::base62(&[61]), "Z");
        assert_eq!(super::base62(&[62]), "10");
        assert_eq!(super::base62(&[1, 0]), "48");
        let name = super::default_binding_name("abc", "root", "tenancy.kcp.io");
        assert!(name.starts_with("tenancy.kcp.io-") && name.len() == "tenancy.kcp.io-".len() + 5);
        assert_eq!(name, name.to_lowercase());
    }

    #[test]
    fn the_identity_hash_is_the_hex_sha256_of_the_key() {
        assert_eq!(
            super::identity_hash(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
