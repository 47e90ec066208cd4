//! Conversion of a `metav1.LabelSelector` JSON object (`matchLabels`, `matchExpressions`) into a
//! [`Selector`], as Kubernetes' `LabelSelectorAsSelector` does it.
//!
//! Owns: reading the two fields from `serde_json::Value` (unknown fields are ignored, `null` means
//! absent, as Go's decoder treats them), mapping the four API operators, and the rule that a
//! `null` selector matches nothing while an empty one matches everything.
//!
//! Must not know: which object field holds the selector, or the stricter object validation of
//! selectors in specs (that belongs to the registry's validation of each kind).

use serde_json::Value;

use super::{Operator, Requirement, Selector, SelectorError};

struct Expression {
    key: String,
    operator: String,
    values: Vec<String>,
}

impl Selector {
    /// Converts a `LabelSelector` object. `null` gives [`Selector::nothing`]; `{}` (no labels, no
    /// expressions) gives [`Selector::everything`]. Errors: a malformed shape
    /// ([`SelectorError::Malformed`]), an operator other than `In`, `NotIn`, `Exists`,
    /// `DoesNotExist` ([`SelectorError::UnknownOperator`]), or an invalid requirement
    /// ([`SelectorError::Invalid`], with paths `key` / `values` / `values[i][key]`).
    pub fn from_label_selector(selector: &Value) -> Result<Self, SelectorError> {
        let object = match selector {
            Value::Null => return Ok(Self::nothing()),
            Value::Object(object) => object,
            _ => return Err(malformed("", "must be an object")),
        };
        let match_labels = read_match_labels(object.get("matchLabels"))?;
        let expressions = read_match_expressions(object.get("matchExpressions"))?;
        if match_labels.is_empty() && expressions.is_empty() {
            return Ok(Self::everything());
        }

        let mut requirements = Vec::with_capacity(match_labels.len() + expressions.len());
        for (key, value) in match_labels {
            requirements.push(
                Requirement::build(key, Operator::Equals, vec![value])
                    .map_err(SelectorError::Invalid)?,
            );
        }
        for expression in expressions {
            let operator = match expression.operator.as_str() {
                "In" => Operator::In,
                "NotIn" => Operator::NotIn,
                "Exists" => Operator::Exists,
                "DoesNotExist" => Operator::DoesNotExist,
                _ => return Err(SelectorError::UnknownOperator(expression.operator)),
            };
            requirements.push(
                Requirement::build(expression.key, operator, expression.values)
                    .map_err(SelectorError::Invalid)?,
            );
        }
        Ok(Self::from_requirements(requirements))
    }
}

fn malformed(path: &str, message: &str) -> SelectorError {
    SelectorError::Malformed {
        path: if path.is_empty() {
            "labelSelector".to_owned()
        } else {
            path.to_owned()
        },
        message: message.to_owned(),
    }
}

fn read_match_labels(value: Option<&Value>) -> Result<Vec<(String, String)>, SelectorError> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(labels)) => labels
            .iter()
            .map(|(key, value)| match value {
                Value::String(value) => Ok((key.clone(), value.clone())),
                _ => Err(malformed(&format!("matchLabels.{key}"), "must be a string")),
            })
            .collect(),
        Some(_) => Err(malformed("matchLabels", "must be an object")),
    }
}

fn read_match_expressions(value: Option<&Value>) -> Result<Vec<Expression>, SelectorError> {
    let items = match value {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(malformed("matchExpressions", "must be an array")),
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let path = format!("matchExpressions[{i}]");
            let Value::Object(item) = item else {
                return Err(malformed(&path, "must be an object"));
            };
            let string_field = |name: &str| match item.get(name) {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(s)) => Ok(s.clone()),
                Some(_) => Err(malformed(&format!("{path}.{name}"), "must be a string")),
            };
            let values = match item.get("values") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(values)) => values
                    .iter()
                    .enumerate()
                    .map(|(j, value)| {
                        value.as_str().map(str::to_owned).ok_or_else(|| {
                            malformed(&format!("{path}.values[{j}]"), "must be a string")
                        })
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(malformed(&format!("{path}.values"), "must be an array")),
            };
            Ok(Expression {
                key: string_field("key")?,
                operator: string_field("operator")?,
                values,
            })
        })
        .collect()
}
