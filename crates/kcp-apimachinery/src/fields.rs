//! Kubernetes field selectors: `metadata.name=foo,status.phase!=Running`, parsed as
//! `k8s.io/apimachinery/pkg/fields` parses them and matched through a field accessor.
//!
//! Owns: the grammar (comma-separated `field=value`, `field==value`, `field!=value` terms; empty
//! terms are skipped; no whitespace trimming; the field part ends at the first operator), value
//! escaping (`\\`, `\,`, `\=`; any other escape and any bare `=` in a value are errors), the
//! canonical printed form, and matching, where an absent field compares as the empty string, as
//! Kubernetes' field sets do. Requirements are kept sorted (field, operator, value), so
//! `Selector::parse(&s.to_string()) == Ok(s)` for every parsed selector.
//!
//! Must not know: which fields a kind supports, or how to read a field from an object. Callers
//! check [`Selector::requirements`] against their own per-kind list (and may rename fields with
//! [`Selector::transform`]) and pass an accessor to [`Selector::matches`].

use std::fmt;
use std::str::FromStr;

/// A field selector could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A term has no operator.
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    InvalidTerm {
        /// The whole selector string.
        selector: String,
        /// The term that has no `=`, `==` or `!=`.
        term: String,
    },
    /// A value contains a backslash escape other than `\\`, `\,`, `\=` (or ends in `\`).
    #[error("invalid field selector: invalid escape sequence: {0}")]
    InvalidEscapeSequence(String),
    /// A value contains an unescaped `=` (printed as its code point, as Kubernetes prints it).
    #[error("invalid field selector: unescaped character in value: {}", u32::from(*.0))]
    UnescapedCharacter(char),
}

/// How a field relates to its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operator {
    /// `field=value` (also spelled `field==value`).
    Equals,
    /// `field!=value`.
    NotEquals,
}

impl Operator {
    /// The printed operator, `=` or `!=` (Kubernetes' `selection.Equals` / `NotEquals`).
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::Equals => "=",
            Operator::NotEquals => "!=",
        }
    }
}

/// One `field <op> value` term. The value is stored unescaped.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Requirement {
    field: String,
    operator: Operator,
    value: String,
}

impl Requirement {
    /// A requirement on `field`. Fields are printed as they are (Kubernetes has no escaping for
    /// them), so a field containing `=`, `,` or ending in `!` does not survive printing.
    pub fn new(field: impl Into<String>, operator: Operator, value: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            operator,
            value: value.into(),
        }
    }

    /// The field path, e.g. `metadata.name`.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// The operator.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The (unescaped) value.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// Whether a field whose value is `actual` (`None` when absent, which compares as "")
    /// satisfies this requirement.
    pub fn matches(&self, actual: Option<&str>) -> bool {
        let equal = actual.unwrap_or_default() == self.value;
        match self.operator {
            Operator::Equals => equal,
            Operator::NotEquals => !equal,
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{}{}",
            self.field,
            self.operator.as_str(),
            escape_value(&self.value)
        )
    }
}

/// A field selector: the AND of its requirements; none selects everything.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Selector {
    requirements: Vec<Requirement>,
}

impl Selector {
    /// The selector that matches everything (the empty string).
    pub fn everything() -> Self {
        Self::default()
    }

    /// Parses the string form. Terms are examined in sorted order, so with several bad terms the
    /// reported one is the same as Kubernetes reports. A term with an empty field and an empty
    /// value (`=`) selects nothing and is dropped, as Kubernetes drops it.
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        let mut terms = split_terms(selector);
        terms.sort_unstable();
        let mut requirements = Vec::with_capacity(terms.len());
        for term in terms {
            if term.is_empty() {
                continue;
            }
            let (field, operator, raw_value) =
                split_term(term).ok_or_else(|| SelectorError::InvalidTerm {
                    selector: selector.to_owned(),
                    term: term.to_owned(),
                })?;
            let value = unescape_value(raw_value)?;
            if field.is_empty() && value.is_empty() {
                continue;
            }
            requirements.push(Requirement::new(field, operator, value));
        }
        Ok(Self::from_requirements(requirements))
    }

    /// Builds a selector from requirements (sorted into canonical order).
    pub fn from_requirements(requirements: impl IntoIterator<Item = Requirement>) -> Self {
        let mut requirements: Vec<Requirement> = requirements.into_iter().collect();
        requirements.sort();
        Self { requirements }
    }

    /// A selector requiring `field=value` for each pair.
    pub fn from_set<K, V>(set: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        Self::from_requirements(
            set.into_iter()
                .map(|(k, v)| Requirement::new(k, Operator::Equals, v)),
        )
    }

    /// Whether the selector does not restrict anything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }

    /// The requirements in canonical order, for callers to check the fields against what a kind
    /// supports.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// The value `field` must equal, if an `=` requirement pins it (e.g. `metadata.name`), so a
    /// caller can turn a list into a get.
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.requirements
            .iter()
            .find(|r| r.operator == Operator::Equals && r.field == field)
            .map(|r| r.value.as_str())
    }

    /// Whether the object whose fields `fields` reads satisfies every requirement. `fields`
    /// returns `None` for a field the object does not have, which compares as "".
    pub fn matches<S: AsRef<str>>(&self, mut fields: impl FnMut(&str) -> Option<S>) -> bool {
        self.requirements.iter().all(|r| {
            let actual = fields(&r.field);
            r.matches(actual.as_ref().map(AsRef::as_ref))
        })
    }

    /// Rewrites each requirement's field and value with `f` (e.g. a kind's field-label
    /// conversion); a requirement that `f` maps to an empty field and an empty value is dropped,
    /// and the first error stops the rewrite, as in Kubernetes' `Transform`.
    pub fn transform<E>(
        &self,
        mut f: impl FnMut(&str, &str) -> Result<(String, String), E>,
    ) -> Result<Self, E> {
        let mut requirements = Vec::with_capacity(self.requirements.len());
        for r in &self.requirements {
            let (field, value) = f(&r.field, &r.value)?;
            if field.is_empty() && value.is_empty() {
                continue;
            }
            requirements.push(Requirement::new(field, r.operator, value));
        }
        Ok(Self::from_requirements(requirements))
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, requirement) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

impl FromStr for Selector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Escapes `\`, `,` and `=` with a backslash so any string can be a field selector value.
pub fn escape_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Reverses [`escape_value`]. Errors on an unknown escape, a trailing `\`, or a bare `,` / `=`.
pub fn unescape_value(escaped: &str) -> Result<String, SelectorError> {
    let mut out = String::with_capacity(escaped.len());
    let mut chars = escaped.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => out.push(e),
                Some(e) => return Err(SelectorError::InvalidEscapeSequence(format!("\\{e}"))),
                None => return Err(SelectorError::InvalidEscapeSequence("\\".to_owned())),
            },
            ',' | '=' => return Err(SelectorError::UnescapedCharacter(c)),
            c => out.push(c),
        }
    }
    Ok(out)
}

/// Splits on commas that are not escaped; escapes stay in the terms.
fn split_terms(selector: &str) -> Vec<&str> {
    if selector.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in selector.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(&selector[start..i]);
            start = i + 1;
        }
    }
    terms.push(&selector[start..]);
    terms
}

/// Splits a term at its first operator; `!=` and `==` are tried before `=` at each position.
fn split_term(term: &str) -> Option<(&str, Operator, &str)> {
    term.char_indices().find_map(|(i, _)| {
        let rest = &term[i..];
        [
            ("!=", Operator::NotEquals),
            ("==", Operator::Equals),
            ("=", Operator::Equals),
        ]
        .into_iter()
        .find(|(spelling, _)| rest.starts_with(spelling))
        .map(|(spelling, operator)| (&term[..i], operator, &rest[spelling.len()..]))
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    #[test]
    fn parses_and_prints_canonically() {
        let cases = [
            ("", ""),
            ("a=b", "a=b"),
            ("a==b", "a=b"),
            ("a!=b", "a!=b"),
            ("b=1,a=2", "a=2,b=1"),
            ("a!=x,a=y", "a=y,a!=x"),
            ("a=b,,c=d,", "a=b,c=d"),
            (",", ""),
            ("a=", "a="),
            ("=b", "=b"),
            ("=", ""),
            ("!=", ""),
            ("==", ""),
            ("=,a=b", "a=b"),
            (
                "metadata.namespace!=kube-system,metadata.name=foo",
                "metadata.name=foo,metadata.namespace!=kube-system",
            ),
            (r"a=x\,y", r"a=x\,y"),
            (r"a=x\=y", r"a=x\=y"),
            (r"a=x\\y", r"a=x\\y"),
            (r"a=\\\,\=", r"a=\\\,\="),
            ("a!=b!c", "a!=b!c"),
            ("a=!b", "a=!b"),
            ("a b = c", "a b = c"),
            (r"a\,b=c", r"a\,b=c"),
            (r"a\=b", r"a\=b"),
            ("spec.nodeName=ü", "spec.nodeName=ü"),
        ];
        for (input, want) in cases {
            let selector = Selector::parse(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
            assert_eq!(selector.to_string(), want, "{input:?}");
            assert_eq!(
                Selector::parse(want),
                Ok(selector.clone()),
                "{input:?} round trip"
            );
            assert_eq!(input.parse::<Selector>(), Ok(selector));
        }
    }

    #[test]
    fn parsed_requirements() {
        let selector = Selector::parse(r"a b = c,x==y\,z,n!=").unwrap();
        let got: Vec<(&str, Operator, &str)> = selector
            .requirements()
            .iter()
            .map(|r| (r.field(), r.operator(), r.value()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("a b ", Operator::Equals, " c"),
                ("n", Operator::NotEquals, ""),
                ("x", Operator::Equals, "y,z"),
            ]
        );
        let (field, operator, value) = (r"a\", Operator::Equals, "b");
        let parsed = Selector::parse(r"a\=b").unwrap();
        assert_eq!(
            parsed.requirements(),
            [Requirement::new(field, operator, value)]
        );
    }

    #[test]
    fn parse_errors_match_kubernetes() {
        let cases = [
            ("a", "invalid selector: 'a'; can't understand 'a'"),
            ("a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"),
            ("a!b", "invalid selector: 'a!b'; can't understand 'a!b'"),
            (
                r"a=x\y",
                r"invalid field selector: invalid escape sequence: \y",
            ),
            (
                r"a=x\",
                r"invalid field selector: invalid escape sequence: \",
            ),
            (
                r"a=x\!",
                r"invalid field selector: invalid escape sequence: \!",
            ),
            (
                "a=b=c",
                "invalid field selector: unescaped character in value: 61",
            ),
            (
                "a==b=c",
                "invalid field selector: unescaped character in value: 61",
            ),
            (
                "a===b",
                "invalid field selector: unescaped character in value: 61",
            ),
            (
                "a!==b",
                "invalid field selector: unescaped character in value: 61",
            ),
            // Terms are checked in sorted order: "a=b\q" sorts before "z".
            (
                r"z,a=b\q",
                r"invalid field selector: invalid escape sequence: \q",
            ),
            (
                r"a,z=b\q",
                "invalid selector: 'a,z=b\\q'; can't understand 'a'",
            ),
        ];
        for (input, want) in cases {
            let got = Selector::parse(input).map_err(|e| e.to_string());
            assert_eq!(got, Err(want.to_owned()), "{input:?}");
        }
        assert_eq!(
            Selector::parse("a=b=c"),
            Err(SelectorError::UnescapedCharacter('='))
        );
    }

    #[test]
    fn matches_through_an_accessor() {
        let object: BTreeMap<&str, &str> = [
            ("metadata.name", "foo"),
            ("metadata.namespace", "ns"),
            ("empty", ""),
        ]
        .into_iter()
        .collect();
        let cases = [
            ("", true),
            ("metadata.name=foo", true),
            ("metadata.name==foo", true),
            ("metadata.name=bar", false),
            ("metadata.name!=bar", true),
            ("metadata.name!=foo", false),
            ("metadata.name=foo,metadata.namespace=ns", true),
            ("metadata.name=foo,metadata.namespace!=ns", false),
            // Absent fields compare as "".
            ("missing=", true),
            ("missing!=", false),
            ("missing=x", false),
            ("missing!=x", true),
            ("empty=", true),
            ("empty!=", false),
        ];
        for (input, want) in cases {
            let selector = Selector::parse(input).unwrap();
            assert_eq!(
                selector.matches(|f| object.get(f).copied()),
                want,
                "{input}"
            );
            let owned = selector.matches(|f| object.get(f).map(|v| v.to_string()));
            assert_eq!(owned, want, "{input} (owned)");
        }
    }

    #[test]
    fn exact_match_and_building() {
        let selector = Selector::parse("metadata.name=foo,metadata.namespace!=ns").unwrap();
        assert_eq!(selector.requires_exact_match("metadata.name"), Some("foo"));
        assert_eq!(selector.requires_exact_match("metadata.namespace"), None);
        assert_eq!(selector.requires_exact_match("other"), None);
        assert!(Selector::everything().is_empty());
        assert!(!selector.is_empty());
        assert_eq!(Selector::parse(""), Ok(Selector::everything()));
        let from_set = Selector::from_set([("b", "x,y"), ("a", "1")]);
        assert_eq!(from_set.to_string(), r"a=1,b=x\,y");
        assert_eq!(Selector::parse(&from_set.to_string()), Ok(from_set));
        assert_eq!(Operator::Equals.as_str(), "=");
        assert_eq!(Operator::NotEquals.as_str(), "!=");
    }

    #[test]
    fn transform_renames_and_drops() {
        let selector = Selector::parse("spec.host=n1,drop=me,status.phase!=Failed").unwrap();
        let renamed = selector
            .transform(|field, value| -> Result<_, String> {
                Ok(match field {
                    "spec.host" => ("spec.nodeName".to_owned(), value.to_owned()),
                    "drop" => (String::new(), String::new()),
                    _ => (field.to_owned(), value.to_owned()),
                })
            })
            .unwrap();
        assert_eq!(renamed.to_string(), "spec.nodeName=n1,status.phase!=Failed");
        let err = selector
            .transform(|field, _| Err::<(String, String), _>(format!("{field} unsupported")));
        assert_eq!(err, Err("drop unsupported".to_owned()));
    }

    #[test]
    fn escaping() {
        let cases = [
            ("", ""),
            ("plain", "plain"),
            ("a,b", r"a\,b"),
            ("a=b", r"a\=b"),
            (r"a\b", r"a\\b"),
            ("!", "!"),
            (r"\,=", r"\\\,\="),
        ];
        for (raw, escaped) in cases {
            assert_eq!(escape_value(raw), escaped);
            assert_eq!(unescape_value(escaped), Ok(raw.to_owned()));
        }
        assert_eq!(
            unescape_value("a,b"),
            Err(SelectorError::UnescapedCharacter(','))
        );
        assert_eq!(
            unescape_value("a,b").unwrap_err().to_string(),
            "invalid field selector: unescaped character in value: 44"
        );
    }

    #[test]
    fn splitting() {
        assert_eq!(split_terms(""), Vec::<&str>::new());
        assert_eq!(split_terms(","), vec!["", ""]);
        assert_eq!(split_terms(r"a\,b,c"), vec![r"a\,b", "c"]);
        assert_eq!(split_terms(r"a\\,b"), vec![r"a\\", "b"]);
        assert_eq!(split_term("a!=b"), Some(("a", Operator::NotEquals, "b")));
        assert_eq!(split_term("a==b"), Some(("a", Operator::Equals, "b")));
        assert_eq!(split_term("a=b"), Some(("a", Operator::Equals, "b")));
        assert_eq!(split_term("a!b"), None);
        assert_eq!(split_term("éa=b"), Some(("éa", Operator::Equals, "b")));
    }

    proptest! {
        #[test]
        fn any_accepted_string_round_trips(input in r"[ab.=!,\\ é]{0,20}") {
            if let Ok(selector) = Selector::parse(&input) {
                let printed = selector.to_string();
                prop_assert_eq!(Selector::parse(&printed), Ok(selector), "{:?} printed as {:?}", input, printed);
            }
        }

        #[test]
        fn any_value_round_trips(
            fields in proptest::collection::vec(("[a-z][a-z.]{0,6}", any::<bool>(), r"[a-z,=!\\ ]{0,8}"), 0..5)
        ) {
            let selector = Selector::from_requirements(fields.into_iter().map(|(field, not, value)| {
                let operator = if not { Operator::NotEquals } else { Operator::Equals };
                Requirement::new(field, operator, value)
            }));
            let printed = selector.to_string();
            prop_assert_eq!(Selector::parse(&printed), Ok(selector), "{}", printed);
        }
    }
}
