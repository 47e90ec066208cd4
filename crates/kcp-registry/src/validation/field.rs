//! Field errors worded as `k8s.io/apimachinery/pkg/util/validation/field` words them.
//!
//! Each builder returns a [`Cause`] whose `message` is Kubernetes' "error body" (the text after
//! `<field>: `): `Required value`, `Invalid value: "x": detail`, `Unsupported value: "x":
//! supported values: "a", "b"`, `Forbidden: detail`, `Too long: must have at most N bytes`,
//! `Duplicate value: "x"`. Bad values print as Go prints them: strings quoted (`%q`), numbers
//! and booleans bare, structures in a `%#v`-like form the caller renders.

use kcp_apimachinery::labels::validation::go_quote;

use crate::error::Cause;

/// The problems found with one object, in the order Kubernetes reports them.
pub type Errors = Vec<Cause>;

/// A rejected value, printed the way Go's field errors print it.
#[derive(Debug, Clone, PartialEq)]
pub enum Bad<'a> {
    /// Printed quoted, as `%q`.
    Str(&'a str),
    /// Printed bare, as `%v`.
    Int(i64),
    /// Printed as written: a `%#v` rendering (`[]string{"a"}`) or a `String()` result.
    Go(String),
}

impl Bad<'_> {
    fn render(&self) -> String {
        match self {
            Bad::Str(s) => go_quote(s),
            Bad::Int(i) => i.to_string(),
            Bad::Go(s) => s.clone(),
        }
    }
}

fn with_detail(head: String, detail: &str) -> String {
    if detail.is_empty() {
        head
    } else {
        format!("{head}: {detail}")
    }
}

/// `Required value[: detail]`.
pub fn required(field: impl Into<String>, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueRequired",
        field: field.into(),
        message: with_detail("Required value".into(), detail),
    }
}

/// `Forbidden[: detail]`.
pub fn forbidden(field: impl Into<String>, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueForbidden",
        field: field.into(),
        message: with_detail("Forbidden".into(), detail),
    }
}

/// `Invalid value: <value>[: detail]`.
pub fn invalid(field: impl Into<String>, value: Bad<'_>, detail: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        field: field.into(),
        message: with_detail(format!("Invalid value: {}", value.render()), detail),
    }
}

/// `Unsupported value: <value>: supported values: "a", "b"`.
pub fn not_supported(field: impl Into<String>, value: Bad<'_>, supported: &[&str]) -> Cause {
    let detail = if supported.is_empty() {
        String::new()
    } else {
        let quoted: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
        format!("supported values: {}", quoted.join(", "))
    };
    Cause {
        reason: "FieldValueNotSupported",
        field: field.into(),
        message: with_detail(format!("Unsupported value: {}", value.render()), &detail),
    }
}

/// `Too long: must have at most <max> bytes` (the value itself is never shown).
pub fn too_long(field: impl Into<String>, max: usize) -> Cause {
    Cause {
        reason: "FieldValueTooLong",
        field: field.into(),
        message: format!("Too long: must have at most {max} bytes"),
    }
}

/// `Duplicate value: <value>`.
pub fn duplicate(field: impl Into<String>, value: Bad<'_>) -> Cause {
    Cause {
        reason: "FieldValueDuplicate",
        field: field.into(),
        message: format!("Duplicate value: {}", value.render()),
    }
}

/// `path[key]`, as `field.Path.Key` prints a map key.
pub fn key(path: &str, key: &str) -> String {
    format!("{path}[{key}]")
}

/// `path[i]`, as `field.Path.Index` prints a list index.
pub fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// Go's `%#v` of a `[]string`: `[]string{"a", "b"}` (`[]string(nil)` when empty).
pub fn go_strings<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return "[]string(nil)".into();
    }
    let quoted: Vec<String> = items.iter().map(|s| go_quote(s.as_ref())).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

/// Go's `%#v` of a `[]byte`: `[]byte{0x61, 0x62}` (`[]byte(nil)` when empty).
pub fn go_bytes(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "[]byte(nil)".into();
    }
    let hex: Vec<String> = bytes.iter().map(|b| format!("0x{b:x}")).collect();
    format!("[]byte{{{}}}", hex.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_follow_kubernetes() {
        let cases = [
            (required("a", ""), "FieldValueRequired", "Required value"),
            (
                required("a", "must be set"),
                "FieldValueRequired",
                "Required value: must be set",
            ),
            (forbidden("a", "no"), "FieldValueForbidden", "Forbidden: no"),
            (
                invalid("a", Bad::Str("x y"), "bad"),
                "FieldValueInvalid",
                "Invalid value: \"x y\": bad",
            ),
            (
                invalid("a", Bad::Int(-1), "must be greater than 0"),
                "FieldValueInvalid",
                "Invalid value: -1: must be greater than 0",
            ),
            (
                not_supported("a", Bad::Str("X"), &["Role", "ClusterRole"]),
                "FieldValueNotSupported",
                "Unsupported value: \"X\": supported values: \"Role\", \"ClusterRole\"",
            ),
            (
                too_long("a", 1048576),
                "FieldValueTooLong",
                "Too long: must have at most 1048576 bytes",
            ),
            (
                duplicate("a", Bad::Str("w")),
                "FieldValueDuplicate",
                "Duplicate value: \"w\"",
            ),
        ];
        for (cause, reason, message) in cases {
            assert_eq!((cause.reason, cause.message.as_str()), (reason, message));
        }
    }

    #[test]
    fn go_renderings() {
        assert_eq!(go_strings(&["a", "b"]), r#"[]string{"a", "b"}"#);
        assert_eq!(go_strings::<&str>(&[]), "[]string(nil)");
        assert_eq!(go_bytes(b"ab"), "[]byte{0x61, 0x62}");
        assert_eq!(go_bytes(b""), "[]byte(nil)");
        assert_eq!(key("data", "a b"), "data[a b]");
        assert_eq!(index("rules", 0), "rules[0]");
    }
}
