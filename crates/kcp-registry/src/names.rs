//! Object name rules and `generateName`, with Kubernetes' messages.
//!
//! Which rule a kind's names follow is [`NameRule`]; kinds pick theirs in `validation`. The DNS
//! rules themselves (label, subdomain) are [`kcp_apimachinery::dns`]'s.

use kcp_apimachinery::dns::{dns1123_label_errors, dns1123_subdomain_errors};

/// Problems with `name` as one URL path segment (RBAC names): not `.` or `..`, no `/` or `%`.
pub fn path_segment_errors(name: &str, prefix: bool) -> Vec<String> {
    if !prefix {
        for illegal in [".", ".."] {
            if name == illegal {
                return vec![format!("may not be '{illegal}'")];
            }
        }
    }
    ["/", "%"]
        .iter()
        .filter(|illegal| name.contains(*illegal))
        .map(|illegal| format!("may not contain '{illegal}'"))
        .collect()
}

/// The rule a kind's object names follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// An RFC 1123 subdomain (most kinds).
    Subdomain,
    /// An RFC 1123 label (namespaces).
    Label,
    /// Anything that fits in one URL path segment (RBAC kinds, certificate signing requests).
    PathSegment,
}

impl NameRule {
    /// Problems with `name`; with `prefix`, `name` is a `generateName` that will get a suffix,
    /// so a trailing dash is fine.
    pub fn errors(self, name: &str, prefix: bool) -> Vec<String> {
        let masked;
        let name = if prefix && self != NameRule::PathSegment && name.ends_with('-') {
            // Kubernetes drops the last two characters and appends an `a`.
            masked = format!("{}a", &name[..name.len().saturating_sub(2)]);
            masked.as_str()
        } else {
            name
        };
        match self {
            NameRule::Subdomain => dns1123_subdomain_errors(name),
            NameRule::Label => dns1123_label_errors(name),
            NameRule::PathSegment => path_segment_errors(name, prefix),
        }
    }
}

/// `prefix` plus five random characters from the alphabet Kubernetes uses (no vowels, no
/// look-alikes), the prefix cut so the result stays within 63 characters.
pub fn generate(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    const MAX_PREFIX: usize = 63 - 5;
    let prefix = if prefix.len() > MAX_PREFIX {
        &prefix[..MAX_PREFIX]
    } else {
        prefix
    };
    let suffix: String = (0..5)
        .map(|_| ALPHABET[fastrand::usize(..ALPHABET.len())] as char)
        .collect();
    format!("{prefix}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const LABEL_MESSAGE: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";

    #[test]
    fn subdomains_and_labels() {
        let subdomain = |name: &str| NameRule::Subdomain.errors(name, false);
        let label = |name: &str| NameRule::Label.errors(name, false);
        assert!(subdomain("a.b-c.d1").is_empty());
        assert!(!subdomain("Bad_Name").is_empty());
        assert!(!subdomain("-a").is_empty());
        assert!(!subdomain("a..b").is_empty());
        assert!(!subdomain(&"a".repeat(254)).is_empty());
        assert!(label("team-1").is_empty());
        assert!(!label("a.b").is_empty());
        assert!(!label(&"a".repeat(64)).is_empty());
        assert_eq!(label("a.b"), vec!["must not contain dots".to_string()]);
        assert_eq!(label("A"), vec![LABEL_MESSAGE.to_string()]);
    }

    #[test]
    fn name_rules() {
        let cases: &[(NameRule, &str, bool, &[&str])] = &[
            (NameRule::PathSegment, "a:b@c", false, &[]),
            (NameRule::PathSegment, ".", false, &["may not be '.'"]),
            (NameRule::PathSegment, "..", false, &["may not be '..'"]),
            (NameRule::PathSegment, "..", true, &[]),
            (
                NameRule::PathSegment,
                "a/b%c",
                false,
                &["may not contain '/'", "may not contain '%'"],
            ),
            (NameRule::Subdomain, "web-", true, &[]),
            (NameRule::Label, "web-", true, &[]),
            (NameRule::Label, "team-a", false, &[]),
        ];
        for (rule, name, prefix, expected) in cases {
            assert_eq!(rule.errors(name, *prefix), *expected, "{rule:?} {name}");
        }
        assert!(!NameRule::Subdomain.errors("web-", false).is_empty());
    }

    #[test]
    fn generated_names_keep_the_prefix_and_fit() {
        let name = generate("web-");
        assert!(name.starts_with("web-") && name.len() == 9);
        assert_eq!(generate(&"x".repeat(100)).len(), 63);
    }
}
