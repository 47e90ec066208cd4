//! Logical cluster names: random ones for workspaces (16 base36 characters, about 82 bits, as
//! kcp makes them) and the one of a user's home, derived from the user name as kcp derives it.

use sha2::{Digest, Sha224};

const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";

/// `bytes` as a big-endian number in base 36, left-padded with `0` to the length the largest
/// number of that many bytes needs.
pub fn base36_padded(bytes: &[u8]) -> String {
    let width = (bytes.len() as f64 * 8.0 / 36f64.log2()).ceil() as usize;
    let mut number = bytes.to_vec();
    let mut digits = Vec::with_capacity(width);
    while number.iter().any(|b| *b != 0) {
        let mut remainder = 0u32;
        for byte in &mut number {
            let value = (remainder << 8) | u32::from(*byte);
            *byte = (value / 36) as u8;
            remainder = value % 36;
        }
        digits.push(DIGITS[remainder as usize]);
    }
    while digits.len() < width {
        digits.push(b'0');
    }
    digits.reverse();
    String::from_utf8(digits).unwrap_or_default()
}

/// A new random logical cluster name: 16 base36 characters of the SHA-224 of 32 random bytes.
pub fn random_cluster_name() -> String {
    let mut random = [0u8; 32];
    random[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    random[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    let mut name = base36_padded(&Sha224::digest(random));
    name.truncate(16);
    name
}

/// The logical cluster name of `user`'s home workspace: the first 8 bytes of the SHA-224 of the
/// user name, in base 36.
pub fn home_cluster_name(user: &str) -> String {
    base36_padded(&Sha224::digest(user.as_bytes())[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base36_pads_to_the_width_of_the_byte_count() {
        assert_eq!(base36_padded(&[0]), "00");
        assert_eq!(base36_padded(&[35]), "0z");
        assert_eq!(base36_padded(&[1, 0]), "0074");
        assert_eq!(base36_padded(&[0xff; 8]), "3w5e11264sgsf");
    }

    #[test]
    fn random_names_are_sixteen_base36_characters_and_differ() {
        let a = random_cluster_name();
        assert_eq!(a.len(), 16);
        assert!(a.bytes().all(|b| DIGITS.contains(&b)));
        assert_ne!(a, random_cluster_name());
    }

    #[test]
    fn home_names_depend_only_on_the_user() {
        assert_eq!(home_cluster_name("alice"), home_cluster_name("alice"));
        assert_ne!(home_cluster_name("alice"), home_cluster_name("bob"));
        assert_eq!(home_cluster_name("alice").len(), 13);
    }
}
