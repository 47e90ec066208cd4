//! Syntax rules for label keys and values, with Kubernetes' error texts.
//!
//! Owns: "qualified name" keys (an optional DNS-1123 subdomain prefix of at most 253 bytes, a `/`,
//! and a name of at most 63 bytes), label values (at most 63 bytes, alphanumeric at both ends,
//! `-`, `_`, `.` inside), Kubernetes' message builders (`RegexError`, `MaxLenError`) and Go-style
//! quoting of bad values in messages. The prefix's DNS-1123 subdomain rule, like every DNS name
//! rule, is [`crate::dns`]'s. The messages follow `k8s.io/apimachinery/pkg/api/validate/content`
//! (Kubernetes 1.35 and later: lengths are counted in "bytes").
//!
//! Must not know: selectors, objects, where a key or value came from (callers add the field path).

use crate::dns::dns1123_subdomain_errors;

/// Longest name part of a label key, and longest label value.
pub const LABEL_MAX_LENGTH: usize = 63;

const LABEL_KEY_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_KEY_ERR_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// Why `value` is not a valid label key (a Kubernetes "qualified name"); empty when it is valid.
pub fn label_key_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let mut parts = value.split('/');
    let first = parts.next().unwrap_or_default();
    let (prefix, name) = match (parts.next(), parts.next()) {
        (None, _) => (None, first),
        (Some(name), None) => (Some(first), name),
        (Some(_), Some(_)) => {
            errs.push(format!(
                "a valid label key {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(LABEL_KEY_ERR_MSG, LABEL_KEY_FMT, &["MyName", "my.name", "123-abc"])
            ));
            return errs;
        }
    };
    if let Some(prefix) = prefix {
        if prefix.is_empty() {
            errs.push("prefix part must be non-empty".to_owned());
        } else {
            errs.extend(
                dns1123_subdomain_errors(prefix)
                    .into_iter()
                    .map(|msg| format!("prefix part {msg}")),
            );
        }
    }
    if name.is_empty() {
        errs.push("name part must be non-empty".to_owned());
    } else if name.len() > LABEL_MAX_LENGTH {
        errs.push(format!("name part {}", max_len_error(LABEL_MAX_LENGTH)));
    }
    if !is_label_name_shape(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                LABEL_KEY_ERR_MSG,
                LABEL_KEY_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// Why `value` is not a valid label value; empty when it is valid (the empty string is valid).
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_MAX_LENGTH {
        errs.push(max_len_error(LABEL_MAX_LENGTH));
    }
    if !value.is_empty() && !is_label_name_shape(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR_MSG,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`, without a regex engine.
fn is_label_name_shape(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && b.iter()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// Kubernetes' `MaxLenError` (in bytes, as Kubernetes 1.35 words it).
pub fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} bytes")
}

/// Kubernetes' `RegexError`: the message, then the examples and the regular expression in
/// parentheses, including its doubled space before each " or ".
pub fn regex_error(msg: &str, re: &str, examples: &[&str]) -> String {
    let mut out = format!("{msg} (e.g. ");
    for (i, example) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push('\'');
        out.push_str(example);
        out.push_str("', ");
    }
    out.push_str("regex used for validation is '");
    out.push_str(re);
    out.push_str("')");
    out
}

/// Quotes `s` the way Go's `%q` does (close enough for error messages).
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAME_REGEX_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

    #[test]
    fn label_keys() {
        let ok = [
            "a",
            "A",
            "1",
            "a.b-c_d",
            "Upper.Case",
            "example.com/name",
            "a/b",
            "sub.example-1.com/Name_1",
            &"n".repeat(63),
            &format!("{}/{}", "p".repeat(253), "n".repeat(63)),
            &format!("{}.{}/x", "a".repeat(63), "b".repeat(100)),
        ];
        for key in ok {
            assert_eq!(label_key_errors(key), Vec::<String>::new(), "{key}");
        }
        let bad = [
            "",
            "-a",
            "a-",
            "_a",
            "a b",
            "a@b",
            &"n".repeat(64),
            "/a",
            "a/",
            "a/b/c",
            "Example.com/a",
            "ex_ample.com/a",
            "-example.com/a",
            "example..com/a",
            "example.com./a",
            &format!("{}/n", "p".repeat(254)),
            "é",
        ];
        for key in bad {
            assert!(!label_key_errors(key).is_empty(), "{key} should be invalid");
        }
    }

    #[test]
    fn label_key_messages() {
        assert_eq!(
            label_key_errors(""),
            vec![
                "name part must be non-empty".to_owned(),
                NAME_REGEX_MSG.to_owned()
            ]
        );
        assert_eq!(label_key_errors("a-"), vec![NAME_REGEX_MSG.to_owned()]);
        assert_eq!(
            label_key_errors(&"n".repeat(64)),
            vec!["name part must be no more than 63 bytes".to_owned()]
        );
        assert_eq!(
            label_key_errors("/a"),
            vec!["prefix part must be non-empty".to_owned()]
        );
        assert_eq!(
            label_key_errors("Ex.com/a"),
            vec!["prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_owned()]
        );
        let long_prefix = label_key_errors(&format!("{}/a", "p".repeat(254)));
        assert_eq!(
            long_prefix,
            vec!["prefix part must be no more than 253 bytes".to_owned()]
        );
        assert_eq!(
            label_key_errors("a/b/c"),
            vec!["a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')".to_owned()]
        );
        // Both parts wrong: both are reported, prefix first.
        assert_eq!(label_key_errors("A/-").len(), 2);
    }

    #[test]
    fn label_values() {
        for value in ["", "a", "0", "a.b_c-d", "MyValue", &"v".repeat(63)] {
            assert_eq!(label_value_errors(value), Vec::<String>::new(), "{value}");
        }
        assert_eq!(
            label_value_errors(&"v".repeat(64)),
            vec!["must be no more than 63 bytes".to_owned()]
        );
        let regex_msg = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
        for value in ["-a", "a-", ".", "a b", "a/b", "-5", "ü"] {
            assert_eq!(
                label_value_errors(value),
                vec![regex_msg.to_owned()],
                "{value}"
            );
        }
        assert_eq!(label_value_errors(&format!("{}-", "v".repeat(63))).len(), 2);
    }

    #[test]
    fn quoting_follows_go() {
        assert_eq!(go_quote("a b"), r#""a b""#);
        assert_eq!(go_quote("q\"\\"), r#""q\"\\""#);
        assert_eq!(go_quote("\n\t\u{1}\u{7f}"), r#""\n\t\x01\x7f""#);
        assert_eq!(go_quote("é"), "\"é\"");
        assert_eq!(go_quote("\u{85}"), r#""\u0085""#);
    }
}
