//! Logical cluster names: new ones for workspaces (16 base36 characters, as kcp makes them) and
//! the one of a user's home, derived from the user name as kcp derives it.
//!
//! kcp draws a workspace's 16 characters at random. Ours start with the time instead (8
//! characters of milliseconds, then 8 random ones, about 41 bits): every key of a logical
//! cluster starts with its name under its resource's prefix, so random names scattered the
//! keys a new workspace writes (its namespaces, service accounts, configmaps, role bindings)
//! over the whole store, and each write dirtied a leaf of its own that had to be read first.
//! With names in creation order the new keys of each resource land side by side at one end.

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

/// 36 to the 8th: what 8 base36 digits hold.
const EIGHT_DIGITS: u64 = 36u64.pow(8);

/// `value` (below [`EIGHT_DIGITS`]) as 8 base36 digits.
fn eight_base36_digits(mut value: u64, name: &mut String) {
    let mut digits = [b'0'; 8];
    for digit in digits.iter_mut().rev() {
        *digit = DIGITS[(value % 36) as usize];
        value /= 36;
    }
    name.extend(digits.iter().map(|d| char::from(*d)));
}

/// A new logical cluster name: 16 base36 characters, the milliseconds since the Unix epoch
/// (modulo 36^8, about 89 years) and then 8 random ones. Names made later sort after names
/// made earlier, to the millisecond (see the module docs).
pub fn new_cluster_name() -> String {
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_millis());
    let random = u64::from_le_bytes(
        uuid::Uuid::new_v4().as_bytes()[..8]
            .try_into()
            .unwrap_or_default(),
    );
    let mut name = String::with_capacity(16);
    eight_base36_digits((millis % u128::from(EIGHT_DIGITS)) as u64, &mut name);
    eight_base36_digits(random % EIGHT_DIGITS, &mut name);
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
    use crate::tenancy::paths::valid_cluster_name;

    #[test]
    fn base36_pads_to_the_width_of_the_byte_count() {
        assert_eq!(base36_padded(&[0]), "00");
        assert_eq!(base36_padded(&[35]), "0z");
        assert_eq!(base36_padded(&[1, 0]), "0074");
        assert_eq!(base36_padded(&[0xff; 8]), "3w5e11264sgsf");
    }

    #[test]
    fn new_names_are_sixteen_base36_characters_and_differ() {
        let a = new_cluster_name();
        assert_eq!(a.len(), 16);
        assert!(a.bytes().all(|b| DIGITS.contains(&b)));
        assert!(valid_cluster_name(&a));
        assert_ne!(a, new_cluster_name());
    }

    #[test]
    fn names_made_later_sort_after_names_made_earlier() {
        let names: Vec<String> = (0..20)
            .map(|_| {
                std::thread::sleep(std::time::Duration::from_millis(2));
                new_cluster_name()
            })
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
    }

    #[test]
    fn eight_digits_are_padded_and_hold_the_largest_value() {
        let digits = |value| {
            let mut name = String::new();
            eight_base36_digits(value, &mut name);
            name
        };
        assert_eq!(digits(0), "00000000");
        assert_eq!(digits(35), "0000000z");
        assert_eq!(digits(EIGHT_DIGITS - 1), "zzzzzzzz");
    }

    #[test]
    fn home_names_depend_only_on_the_user() {
        assert_eq!(home_cluster_name("alice"), home_cluster_name("alice"));
        assert_ne!(home_cluster_name("alice"), home_cluster_name("bob"));
        assert_eq!(home_cluster_name("alice").len(), 13);
    }
}
