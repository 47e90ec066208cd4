//! DNS names as Kubernetes checks them, in one place: the RFC 1123 label (namespace names, for
//! instance), the RFC 1123 subdomain (most object names, label key prefixes) and the RFC 1035
//! label (CRD version names).
//!
//! Each rule comes twice: `is_*`, whether a string follows it (length included), and `*_errors`,
//! why not, with the messages of `k8s.io/apimachinery/pkg/util/validation` as kcp answers them
//! (empty when it does). The rules are checked byte by byte, without a regex engine.
//!
//! Must not know: objects or field paths (callers add them).

use crate::labels::validation::{max_len_error, regex_error};

/// Longest RFC 1123 label (and RFC 1035 label).
pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
/// Longest RFC 1123 subdomain, and so the longest label-key prefix.
pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
/// Longest RFC 1035 label.
pub const DNS1035_LABEL_MAX_LENGTH: usize = 63;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL_ERR_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";

fn lower_alnum(c: &u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, any length.
fn is_dns1123_label_shape(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            lower_alnum(first)
                && lower_alnum(last)
                && b.iter().all(|c| lower_alnum(c) || *c == b'-')
        }
        _ => false,
    }
}

/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`, any length.
fn is_dns1123_subdomain_shape(s: &str) -> bool {
    s.split('.').all(is_dns1123_label_shape)
}

/// `^[a-z]([-a-z0-9]*[a-z0-9])?$`, any length.
fn is_dns1035_label_shape(s: &str) -> bool {
    let b = s.as_bytes();
    b.first().is_some_and(u8::is_ascii_lowercase)
        && b.last().is_some_and(lower_alnum)
        && b.iter().all(|c| lower_alnum(c) || *c == b'-')
}

/// Whether `value` is a lowercase RFC 1123 label: `[a-z0-9]`, then `[a-z0-9-]`, ending in
/// `[a-z0-9]`, at most 63 bytes.
pub fn is_dns1123_label(value: &str) -> bool {
    value.len() <= DNS1123_LABEL_MAX_LENGTH && is_dns1123_label_shape(value)
}

/// Whether `value` is a lowercase RFC 1123 subdomain: labels joined by `.`, at most 253 bytes.
pub fn is_dns1123_subdomain(value: &str) -> bool {
    value.len() <= DNS1123_SUBDOMAIN_MAX_LENGTH && is_dns1123_subdomain_shape(value)
}

/// Whether `value` is an RFC 1035 label: an RFC 1123 label that starts with a letter.
pub fn is_dns1035_label(value: &str) -> bool {
    value.len() <= DNS1035_LABEL_MAX_LENGTH && is_dns1035_label_shape(value)
}

/// Why `value` is not a lowercase RFC 1123 label; empty when it is one. A name of at most 63
/// bytes that would be a subdomain is only wrong by its dots, and is told so.
pub fn dns1123_label_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_LABEL_MAX_LENGTH {
        errors.push(format!(
            "must be no more than {DNS1123_LABEL_MAX_LENGTH} characters"
        ));
    }
    if !is_dns1123_label_shape(value) {
        if value.len() <= DNS1123_LABEL_MAX_LENGTH && is_dns1123_subdomain_shape(value) {
            errors.push("must not contain dots".to_string());
        } else {
            errors.push(regex_error(
                DNS1123_LABEL_ERR_MSG,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errors
}

/// Why `value` is not a lowercase RFC 1123 subdomain; empty when it is one.
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errors.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
    }
    if !is_dns1123_subdomain_shape(value) {
        errors.push(regex_error(
            DNS1123_SUBDOMAIN_ERR_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errors
}

/// Why `value` is not an RFC 1035 label; empty when it is one.
pub fn dns1035_label_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > DNS1035_LABEL_MAX_LENGTH {
        errors.push(format!(
            "must be no more than {DNS1035_LABEL_MAX_LENGTH} characters"
        ));
    }
    if !is_dns1035_label_shape(value) {
        errors.push(regex_error(
            DNS1035_LABEL_ERR_MSG,
            DNS1035_LABEL_FMT,
            &["my-name", "abc-123"],
        ));
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    const LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
    const SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    const DNS1035_MESSAGE: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";

    #[test]
    fn dns1123_labels() {
        for ok in [
            "a",
            "0",
            "team-1",
            "a--b",
            "2xj8f9k3m5n7p1q4",
            &"a".repeat(63),
        ] {
            assert!(is_dns1123_label(ok), "{ok}");
            assert!(dns1123_label_errors(ok).is_empty(), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "A",
            "a_b",
            "a.b",
            "a:b",
            "é",
            &"a".repeat(64),
        ] {
            assert!(!is_dns1123_label(bad), "{bad:?}");
            assert!(!dns1123_label_errors(bad).is_empty(), "{bad:?}");
        }
        assert_eq!(dns1123_label_errors("a.b"), vec!["must not contain dots"]);
        assert_eq!(dns1123_label_errors("A"), vec![LABEL_MESSAGE]);
        assert_eq!(dns1123_label_errors(""), vec![LABEL_MESSAGE]);
        assert_eq!(
            dns1123_label_errors(&"a".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
        assert_eq!(
            dns1123_label_errors(&format!("{}.b", "a".repeat(63))),
            vec!["must be no more than 63 characters", LABEL_MESSAGE]
        );
    }

    #[test]
    fn dns1123_subdomains() {
        for ok in ["a", "a.b", "0-0.a1", "a.b-c.d1", &"a".repeat(253)] {
            assert!(is_dns1123_subdomain(ok), "{ok}");
            assert!(dns1123_subdomain_errors(ok).is_empty(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "a.",
            ".a",
            "a..b",
            "A",
            "a_b",
            "-a",
            "a-.b",
            &"a".repeat(254),
        ] {
            assert!(!is_dns1123_subdomain(bad), "{bad}");
            assert!(!dns1123_subdomain_errors(bad).is_empty(), "{bad}");
        }
        assert_eq!(
            dns1123_subdomain_errors("Bad_Name"),
            vec![SUBDOMAIN_MESSAGE]
        );
        assert_eq!(
            dns1123_subdomain_errors(&"a".repeat(254)),
            vec!["must be no more than 253 bytes"]
        );
    }

    #[test]
    fn dns1035_labels() {
        for ok in ["v1", "v1beta1", "a", "my-name", &"a".repeat(63)] {
            assert!(is_dns1035_label(ok), "{ok}");
            assert!(dns1035_label_errors(ok).is_empty(), "{ok}");
        }
        for bad in ["1v", "V1", "v-", "", "a.b"] {
            assert!(!is_dns1035_label(bad), "{bad}");
            assert_eq!(dns1035_label_errors(bad), vec![DNS1035_MESSAGE], "{bad}");
        }
        assert!(!is_dns1035_label(&"a".repeat(64)));
        assert_eq!(
            dns1035_label_errors(&"a".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
    }
}
