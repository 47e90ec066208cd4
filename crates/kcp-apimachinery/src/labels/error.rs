//! Errors of label selector parsing, requirement construction and `LabelSelector` conversion.
//!
//! Owns: the error types and their texts, shaped like Kubernetes' (`unable to parse requirement:
//! ...`, `found '...', expected: ...`, field errors `<path>: Invalid value: "<v>": <detail>`, and
//! the `[a, b]` aggregate of several field errors).
//!
//! Must not know: how errors become HTTP `Status` objects (the API server maps them, once).

use std::fmt;

/// A label selector could not be parsed, built or converted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// The selector string is malformed between requirements (e.g. a trailing comma).
    #[error("{0}")]
    Syntax(String),
    /// One requirement of a selector string failed to parse or validate.
    #[error("unable to parse requirement: {0}")]
    Requirement(RequirementError),
    /// A requirement built from parts (a `LabelSelector`, [`super::Requirement::new`]) is invalid.
    #[error("{0}")]
    Invalid(FieldErrors),
    /// A `LabelSelector` expression names an operator other than In, NotIn, Exists, DoesNotExist.
    #[error("{} is not a valid label selector operator", super::validation::go_quote(.0))]
    UnknownOperator(String),
    /// A `LabelSelector` JSON object does not have the shape of the API type.
    #[error("{path}: {message}")]
    Malformed {
        /// Where in the `LabelSelector` the problem is, e.g. `matchExpressions[0].values`.
        path: String,
        /// What is wrong there.
        message: String,
    },
}

/// Why one requirement of a selector string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequirementError {
    /// The tokens do not form a requirement, e.g. `found 'y', expected: in, notin, ...`.
    #[error("{0}")]
    Syntax(String),
    /// The key or the values break the label syntax rules.
    #[error("{0}")]
    Invalid(FieldErrors),
}

/// One "Invalid value" field error, printed as `<field>: Invalid value: <value>: <detail>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field path, e.g. `key`, `values[0][app]`, or `<nil>` for a key in a selector string
    /// (Kubernetes parses those with no path and prints a nil path that way).
    pub field: String,
    /// The offending value, already rendered: Go-quoted for strings, JSON for lists.
    pub value: String,
    /// Why the value is invalid.
    pub detail: String,
}

impl FieldError {
    pub(crate) fn string(field: impl Into<String>, value: &str, detail: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            value: super::validation::go_quote(value),
            detail: detail.into(),
        }
    }

    pub(crate) fn list(
        field: impl Into<String>,
        values: &[String],
        detail: impl Into<String>,
    ) -> Self {
        // Go marshals an empty (nil) slice as `null`.
        let value = if values.is_empty() {
            "null".to_owned()
        } else {
            serde_json::to_string(values).unwrap_or_default()
        };
        Self {
            field: field.into(),
            value,
            detail: detail.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: Invalid value: {}", self.field, self.value)?;
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// A non-empty list of field errors, printed like Kubernetes' error aggregate: one error alone,
/// several as `[a, b]` with repeated texts dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldErrors(pub Vec<FieldError>);

impl fmt::Display for FieldErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut seen: Vec<String> = Vec::with_capacity(self.0.len());
        for err in &self.0 {
            let text = err.to_string();
            if !seen.contains(&text) {
                seen.push(text);
            }
        }
        match seen.as_slice() {
            [one] => f.write_str(one),
            many => write!(f, "[{}]", many.join(", ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_error_texts() {
        let e = FieldError::string("values[0][app]", "a b", "bad");
        assert_eq!(
            e.to_string(),
            r#"values[0][app]: Invalid value: "a b": bad"#
        );
        let e = FieldError::list("values", &[], "empty");
        assert_eq!(e.to_string(), "values: Invalid value: null: empty");
        let e = FieldError::list("values", &["a".into(), "b".into()], "x");
        assert_eq!(e.to_string(), r#"values: Invalid value: ["a","b"]: x"#);
    }

    #[test]
    fn aggregate_texts() {
        let a = FieldError::string("key", "k", "one");
        let b = FieldError::string("key", "k", "two");
        assert_eq!(FieldErrors(vec![a.clone()]).to_string(), a.to_string());
        assert_eq!(
            FieldErrors(vec![a.clone(), b.clone(), a.clone()]).to_string(),
            format!("[{a}, {b}]")
        );
        assert_eq!(
            FieldErrors(vec![a.clone(), a.clone()]).to_string(),
            a.to_string()
        );
    }

    #[test]
    fn selector_error_texts() {
        assert_eq!(
            SelectorError::UnknownOperator("Foo".into()).to_string(),
            r#""Foo" is not a valid label selector operator"#
        );
        assert_eq!(
            SelectorError::Requirement(RequirementError::Syntax("found 'x', expected: y".into()))
                .to_string(),
            "unable to parse requirement: found 'x', expected: y"
        );
        assert_eq!(
            SelectorError::Malformed {
                path: "matchLabels".into(),
                message: "must be an object".into()
            }
            .to_string(),
            "matchLabels: must be an object"
        );
    }
}
