//! String formats Kubernetes checks field values against, with its messages: config keys,
//! qualified names, fully qualified domain names, base64 as Go decodes it. DNS labels and
//! subdomains are [`kcp_apimachinery::dns`]'s.
//!
//! Must not know: objects or field paths (callers attach those).

use kcp_apimachinery::dns::dns1123_subdomain_errors;
use kcp_apimachinery::labels::validation::{label_key_errors, regex_error};

/// Problems with a ConfigMap or Secret data key.
pub fn config_key_errors(key: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if key.len() > 253 {
        errors.push("must be no more than 253 characters".to_string());
    }
    let shape_ok = !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if !shape_ok {
        errors.push(regex_error(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
            "[-._a-zA-Z0-9]+",
            &["key.name", "KEY_NAME", "key-name"],
        ));
    }
    if key == "." {
        errors.push("must not be '.'".into());
    } else if key == ".." {
        errors.push("must not be '..'".into());
    } else if key.starts_with("..") {
        errors.push("must not start with '..'".into());
    }
    errors
}

/// Problems with `value` as a "qualified name" (label keys, finalizers, controller names).
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    label_key_errors(value)
}

/// Why `name` is not a domain with at least three dot-separated segments (webhook names), as
/// `IsFullyQualifiedName` words it: `None` for an empty name (the caller reports it as required).
pub fn fully_qualified_name_error(name: &str) -> Option<String> {
    let errors = dns1123_subdomain_errors(name);
    if !errors.is_empty() {
        return Some(errors.join(","));
    }
    if name.split('.').count() < 3 {
        return Some("should be a domain with at least three segments separated by dots".into());
    }
    None
}

/// Decodes standard base64 as Go's `encoding/json` does for `[]byte` fields (padding required,
/// `\r` and `\n` ignored); the error is Go's `illegal base64 data at input byte N`.
pub fn decode_base64(text: &str) -> Result<Vec<u8>, String> {
    let corrupt = |at: usize| format!("illegal base64 data at input byte {at}");
    let sextet = |c: u8| -> Option<u32> {
        match c {
            b'A'..=b'Z' => Some((c - b'A') as u32),
            b'a'..=b'z' => Some((c - b'a') as u32 + 26),
            b'0'..=b'9' => Some((c - b'0') as u32 + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    };
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    let mut quantum: Vec<u32> = Vec::with_capacity(4);
    let mut quantum_start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'\n' || c == b'\r' {
            i += 1;
            continue;
        }
        if quantum.is_empty() {
            quantum_start = i;
        }
        if c == b'=' {
            // Padding may only end a quantum of two or three symbols.
            match quantum.len() {
                0 | 1 => return Err(corrupt(i)),
                2 => {
                    let mut j = i + 1;
                    while j < bytes.len() && matches!(bytes[j], b'\n' | b'\r') {
                        j += 1;
                    }
                    if j >= bytes.len() {
                        return Err(corrupt(bytes.len()));
                    }
                    if bytes[j] != b'=' {
                        return Err(corrupt(j - 1));
                    }
                    i = j + 1;
                }
                _ => i += 1,
            }
            while i < bytes.len() && matches!(bytes[i], b'\n' | b'\r') {
                i += 1;
            }
            if i < bytes.len() {
                return Err(corrupt(i));
            }
            push_quantum(&quantum, &mut out);
            return Ok(out);
        }
        let Some(value) = sextet(c) else {
            return Err(corrupt(i));
        };
        quantum.push(value);
        if quantum.len() == 4 {
            push_quantum(&quantum, &mut out);
            quantum.clear();
        }
        i += 1;
    }
    if !quantum.is_empty() {
        return Err(corrupt(quantum_start));
    }
    Ok(out)
}

fn push_quantum(quantum: &[u32], out: &mut Vec<u8>) {
    let mut bits = 0u32;
    for (i, value) in quantum.iter().enumerate() {
        bits |= value << (18 - 6 * i);
    }
    let bytes = bits.to_be_bytes();
    out.extend_from_slice(&bytes[1..quantum.len()]);
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY_REGEX: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

    #[test]
    fn config_keys() {
        let cases: &[(&str, &[&str])] = &[
            ("key.name", &[]),
            ("KEY_NAME-1", &[]),
            (".hidden", &[]),
            ("a b", &[KEY_REGEX]),
            ("a/b", &[KEY_REGEX]),
            ("", &[KEY_REGEX]),
            (".", &["must not be '.'"]),
            ("..", &["must not be '..'"]),
            ("..a", &["must not start with '..'"]),
        ];
        for (key, expected) in cases {
            assert_eq!(config_key_errors(key), *expected, "{key}");
        }
        assert_eq!(
            config_key_errors(&"k".repeat(254)),
            vec!["must be no more than 253 characters"]
        );
    }

    #[test]
    fn fully_qualified_names() {
        assert_eq!(fully_qualified_name_error("a.b.c"), None);
        assert_eq!(
            fully_qualified_name_error("a.b").as_deref(),
            Some("should be a domain with at least three segments separated by dots")
        );
        assert!(
            fully_qualified_name_error("A.b.c")
                .unwrap()
                .starts_with("a lowercase RFC 1123 subdomain")
        );
    }

    #[test]
    fn base64_as_go_decodes_it() {
        let cases: &[(&str, Result<&[u8], usize>)] = &[
            ("", Ok(b"")),
            ("YQ==", Ok(b"a")),
            ("YWI=", Ok(b"ab")),
            ("YWJj", Ok(b"abc")),
            ("YW\nJj\r\n", Ok(b"abc")),
            ("YQ", Err(0)),
            ("YWJjZ", Err(4)),
            ("a b", Err(1)),
            ("YQ=", Err(3)),
            ("YQ=a", Err(2)),
            ("Y===", Err(1)),
            ("YWI=YQ==", Err(4)),
            ("hello!", Err(5)),
        ];
        for (text, expected) in cases {
            let got = decode_base64(text);
            match expected {
                Ok(bytes) => assert_eq!(got.as_deref(), Ok(*bytes), "{text:?}"),
                Err(at) => assert_eq!(
                    got,
                    Err(format!("illegal base64 data at input byte {at}")),
                    "{text:?}"
                ),
            }
        }
    }
}
