//! Kubernetes label selectors: requirements on an object's labels, in their string form
//! (`app=web,tier in (a,b),!legacy,replicas>2`) and in their API form (`metav1.LabelSelector`).
//!
//! Owns: the [`Selector`] and [`Requirement`] model, the string grammar (`parser`), key and value
//! rules ([`validation`]), `LabelSelector` JSON conversion (`label_selector`), matching against
//! any label map through the [`Labels`] trait, and the canonical printed form. A selector keeps its
//! requirements sorted (by key, then operator, then values) and each requirement's values sorted
//! and de-duplicated, so two selectors that print the same compare equal, and
//! `Selector::parse(&s.to_string()) == Ok(s)` for every selector except [`Selector::nothing`].
//!
//! Must not know: where labels live in an object (callers pass `metadata.labels`), storage, HTTP,
//! or how errors become `Status` objects.

mod error;
mod label_selector;
mod parser;
pub mod validation;

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::BuildHasher;
use std::str::FromStr;

pub use error::{FieldError, FieldErrors, RequirementError, SelectorError};

/// How a requirement relates a label key to its values (Kubernetes' `selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Operator {
    /// `k in (a,b)`: the label exists and its value is one of the values.
    In,
    /// `k notin (a,b)`: the label is absent, or its value is none of the values.
    NotIn,
    /// `k=v`: the label exists with this value.
    Equals,
    /// `k==v`: the same as [`Operator::Equals`], printed as `==`.
    DoubleEquals,
    /// `k!=v`: the label is absent, or has another value.
    NotEquals,
    /// `k>5`: the label exists and is an integer greater than the value.
    GreaterThan,
    /// `k<5`: the label exists and is an integer less than the value.
    LessThan,
    /// `k`: the label exists.
    Exists,
    /// `!k`: the label does not exist.
    DoesNotExist,
}

impl Operator {
    /// Kubernetes' name for the operator (`in`, `notin`, `=`, `==`, `!=`, `gt`, `lt`, `exists`, `!`).
    pub fn as_str(self) -> &'static str {
        match self {
            Operator::In => "in",
            Operator::NotIn => "notin",
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::GreaterThan => "gt",
            Operator::LessThan => "lt",
            Operator::Exists => "exists",
            Operator::DoesNotExist => "!",
        }
    }
}

/// Read access to a set of labels. Implemented for the usual maps and for JSON objects, so a
/// selector can match `&object["metadata"]["labels"]` directly (a missing or non-object value has
/// no labels; a label whose JSON value is not a string counts as absent).
pub trait Labels {
    /// The value of label `key`, if it is set.
    fn get_label(&self, key: &str) -> Option<&str>;
}

impl Labels for BTreeMap<String, String> {
    fn get_label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl<S: BuildHasher> Labels for HashMap<String, String, S> {
    fn get_label(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }
}

impl Labels for serde_json::Map<String, serde_json::Value> {
    fn get_label(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(serde_json::Value::as_str)
    }
}

impl Labels for serde_json::Value {
    fn get_label(&self, key: &str) -> Option<&str> {
        self.as_object().and_then(|labels| labels.get_label(key))
    }
}

impl<T: Labels + ?Sized> Labels for &T {
    fn get_label(&self, key: &str) -> Option<&str> {
        (**self).get_label(key)
    }
}

/// One condition on one label key. Values are kept sorted and de-duplicated.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Requirement {
    key: String,
    operator: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// Builds a validated requirement, as Kubernetes' `NewRequirement` does: the key must be a
    /// qualified name, every value a valid label value; In and NotIn need at least one value,
    /// the equality operators exactly one, Gt and Lt exactly one integer, Exists and
    /// DoesNotExist none. Field paths in errors are `key` and `values[<i>][<key>]`.
    pub fn new(
        key: impl Into<String>,
        operator: Operator,
        values: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Self, SelectorError> {
        let values = values.into_iter().map(Into::into).collect();
        Self::build(key.into(), operator, values).map_err(SelectorError::Invalid)
    }

    pub(crate) fn build(
        key: String,
        operator: Operator,
        mut values: Vec<String>,
    ) -> Result<Self, FieldErrors> {
        let mut errs = Vec::new();
        let key_errs = validation::label_key_errors(&key);
        if !key_errs.is_empty() {
            errs.push(FieldError::string("key", &key, key_errs.join("; ")));
        }
        match operator {
            Operator::In | Operator::NotIn => {
                if values.is_empty() {
                    errs.push(FieldError::list(
                        "values",
                        &values,
                        "for 'in', 'notin' operators, values set can't be empty",
                    ));
                }
            }
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals => {
                if values.len() != 1 {
                    errs.push(FieldError::list(
                        "values",
                        &values,
                        "exact-match compatibility requires one single value",
                    ));
                }
            }
            Operator::Exists | Operator::DoesNotExist => {
                if !values.is_empty() {
                    errs.push(FieldError::list(
                        "values",
                        &values,
                        "values set must be empty for exists and does not exist",
                    ));
                }
            }
            Operator::GreaterThan | Operator::LessThan => {
                if values.len() != 1 {
                    errs.push(FieldError::list(
                        "values",
                        &values,
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                for (i, value) in values.iter().enumerate() {
                    if value.parse::<i64>().is_err() {
                        errs.push(FieldError::string(
                            format!("values[{i}]"),
                            value,
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        ));
                    }
                }
            }
        }
        for (i, value) in values.iter().enumerate() {
            let value_errs = validation::label_value_errors(value);
            if !value_errs.is_empty() {
                errs.push(FieldError::string(
                    format!("values[{i}][{key}]"),
                    value,
                    value_errs.join("; "),
                ));
            }
        }
        if !errs.is_empty() {
            return Err(FieldErrors(errs));
        }
        values.sort();
        values.dedup();
        Ok(Self {
            key,
            operator,
            values,
        })
    }

    /// The label key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The operator.
    pub fn operator(&self) -> Operator {
        self.operator
    }

    /// The values, sorted and without duplicates (empty for Exists and DoesNotExist).
    pub fn values(&self) -> &[String] {
        &self.values
    }

    /// Whether `labels` satisfy this requirement.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        let value = labels.get_label(&self.key);
        match self.operator {
            Operator::In | Operator::Equals | Operator::DoubleEquals => {
                value.is_some_and(|v| self.has_value(v))
            }
            Operator::NotIn | Operator::NotEquals => !value.is_some_and(|v| self.has_value(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(Ok(actual)), [wanted]) = (value.map(str::parse::<i64>), &*self.values)
                else {
                    return false;
                };
                let Ok(wanted) = wanted.parse::<i64>() else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    actual > wanted
                } else {
                    actual < wanted
                }
            }
        }
    }

    fn has_value(&self, value: &str) -> bool {
        self.values.iter().any(|v| v == value)
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values = self.values.join(",");
        match self.operator {
            Operator::Exists => write!(f, "{}", self.key),
            Operator::DoesNotExist => write!(f, "!{}", self.key),
            Operator::In => write!(f, "{} in ({values})", self.key),
            Operator::NotIn => write!(f, "{} notin ({values})", self.key),
            Operator::Equals => write!(f, "{}={values}", self.key),
            Operator::DoubleEquals => write!(f, "{}=={values}", self.key),
            Operator::NotEquals => write!(f, "{}!={values}", self.key),
            Operator::GreaterThan => write!(f, "{}>{values}", self.key),
            Operator::LessThan => write!(f, "{}<{values}", self.key),
        }
    }
}

/// A label selector: the AND of its requirements, or the selector that matches nothing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Selector(Inner);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Inner {
    /// All requirements must hold; none means everything matches. Kept sorted.
    All(Vec<Requirement>),
    /// Matches no labels (a nil `LabelSelector`).
    Nothing,
}

impl Default for Selector {
    fn default() -> Self {
        Self::everything()
    }
}

impl Selector {
    /// The selector that matches every set of labels (the empty string).
    pub fn everything() -> Self {
        Self(Inner::All(Vec::new()))
    }

    /// The selector that matches nothing (what a null `LabelSelector` converts to). It prints as
    /// the empty string, like Kubernetes', so it is the one selector that does not round-trip.
    pub fn nothing() -> Self {
        Self(Inner::Nothing)
    }

    /// Parses the string form, e.g. `app=web,tier in (a,b),!legacy,replicas>2`: comma-separated
    /// requirements `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, `k>n`, `k<n`,
    /// with optional whitespace between tokens; a missing value is the empty value (`k=`,
    /// `k in ()`). The empty string (or only whitespace) is [`Selector::everything`]. Errors carry
    /// Kubernetes' texts, e.g. `unable to parse requirement: found 'b', expected: in, notin, ...`.
    pub fn parse(selector: &str) -> Result<Self, SelectorError> {
        parser::parse(selector).map(Self::from_requirements)
    }

    /// Builds a selector from requirements (sorted into canonical order).
    pub fn from_requirements(requirements: impl IntoIterator<Item = Requirement>) -> Self {
        let mut requirements: Vec<Requirement> = requirements.into_iter().collect();
        requirements.sort();
        Self(Inner::All(requirements))
    }

    /// A selector requiring each `key=value` of `set` (validated; an empty set selects everything).
    pub fn from_set<K, V>(set: impl IntoIterator<Item = (K, V)>) -> Result<Self, SelectorError>
    where
        K: Into<String>,
        V: Into<String>,
    {
        let requirements = set
            .into_iter()
            .map(|(k, v)| Requirement::new(k, Operator::Equals, [v]))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self::from_requirements(requirements))
    }

    /// Adds a requirement (a no-op on [`Selector::nothing`], as in Kubernetes).
    pub fn add(&mut self, requirement: Requirement) {
        if let Inner::All(requirements) = &mut self.0 {
            let at = requirements.partition_point(|r| *r <= requirement);
            requirements.insert(at, requirement);
        }
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches<L: Labels + ?Sized>(&self, labels: &L) -> bool {
        match &self.0 {
            Inner::All(requirements) => requirements.iter().all(|r| r.matches(labels)),
            Inner::Nothing => false,
        }
    }

    /// Whether the selector does not restrict anything (it is [`Selector::everything`]).
    pub fn is_empty(&self) -> bool {
        matches!(&self.0, Inner::All(r) if r.is_empty())
    }

    /// Whether this is [`Selector::nothing`].
    pub fn matches_nothing(&self) -> bool {
        self.0 == Inner::Nothing
    }

    /// The requirements in canonical order, or `None` for [`Selector::nothing`] (which cannot be
    /// expressed as requirements).
    pub fn requirements(&self) -> Option<&[Requirement]> {
        match &self.0 {
            Inner::All(requirements) => Some(requirements),
            Inner::Nothing => None,
        }
    }

    /// The single value `key` must have, if the first requirement on `key` pins one (`=`, `==`,
    /// or `in` with one value); lets callers narrow a list before matching.
    pub fn requires_exact_match(&self, key: &str) -> Option<&str> {
        let requirement = self.requirements()?.iter().find(|r| r.key == key)?;
        match (requirement.operator, requirement.values.as_slice()) {
            (Operator::Equals | Operator::DoubleEquals | Operator::In, [value]) => Some(value),
            _ => None,
        }
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Inner::All(requirements) = &self.0 else {
            return Ok(());
        };
        for (i, requirement) in requirements.iter().enumerate() {
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

#[cfg(test)]
mod tests;
