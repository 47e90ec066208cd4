//! One schema node's `x-kubernetes-validations`, checked and compiled as kube-apiserver does
//! when a CRD is written: the rule, `message`, `messageExpression`, `reason`, `fieldPath` and
//! `optionalOldSelf` fields first (a node with such mistakes is not compiled), then the CEL
//! programs, and their estimated costs against Kubernetes' limits. This CEL has no type
//! checker: besides syntax, what is checked is what the estimate and `result_type` can tell
//! for certain, the fields selected from objects of the schema and the type of the result (a
//! `bool` for a rule, a `string` for a message expression); an expression of a type not known
//! here passes, and fails when it runs if it is wrong.

use kube_cel::cel::common::ast::IdedExpr;
use serde_json::Value;

use super::super::{FieldError, child, index};
use super::estimate::{Estimate, STATIC_ESTIMATED_COST_LIMIT, estimate};
use super::instrument::{Instrumented, instrument};
use super::result_type::{Type, result_type};
use super::syntax::{parse, undefined_field};
use super::types::Ty;
use super::{Findings, cost_message};
use crate::labels::validation::go_quote;
use crate::object::text;

/// The `reason` of a rule; `None` means `FieldValueInvalid`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Reason {
    Invalid,
    Forbidden,
    Required,
    Duplicate,
}

const REASONS: [(&str, Reason); 4] = [
    ("FieldValueDuplicate", Reason::Duplicate),
    ("FieldValueForbidden", Reason::Forbidden),
    ("FieldValueInvalid", Reason::Invalid),
    ("FieldValueRequired", Reason::Required),
];

/// A compiled rule.
pub(super) struct Rule {
    /// What messages name the rule by: the trimmed message, or else the trimmed rule.
    pub(super) shown: String,
    /// `failed rule: <rule>` unless a message is set.
    pub(super) message: String,
    /// The rule as written, for what it reaches of `self` and `oldSelf`.
    pub(super) expression: IdedExpr,
    /// The rule as it runs, charging the meter.
    pub(super) runnable: Instrumented,
    pub(super) message_expression: Option<MessageExpression>,
    pub(super) reason: Reason,
    /// The normalized `fieldPath` (`replicas`, `labels[app]`), appended to the node's path.
    pub(super) field_path: Option<String>,
    pub(super) uses_old_self: bool,
    pub(super) optional_old_self: bool,
}

/// A compiled `messageExpression`.
pub(super) struct MessageExpression {
    pub(super) source: String,
    pub(super) expression: IdedExpr,
    pub(super) runnable: Instrumented,
}

fn has_newlines(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// An expression parsed and estimated once.
struct Compiled {
    expression: IdedExpr,
    estimate: Estimate,
    /// Its result is certainly of another type than the one wanted (see `result_type`). CRD
    /// validation refuses it; a rule already stored still runs, and its result fails the rule
    /// when it runs, so that an upgrade never leaves a stored CRD's objects unchecked.
    wrong_type: bool,
}

/// `source` parsed and estimated once (its result's type checked against `wanted`; `oldSelf`
/// is an optional with `optional_old_self`), or cel-go's report of why it does not compile:
/// its syntax, a limit, a field its object type does not declare.
fn compile_expression(
    source: &str,
    self_ty: &Ty,
    wanted: &Type<'_>,
    optional_old_self: bool,
) -> Result<Compiled, String> {
    let expression = parse(source)?;
    let estimate = estimate(&expression, self_ty);
    if let Some(field) = &estimate.undefined_field {
        return Err(undefined_field(source, field));
    }
    let wrong_type = !result_type(&expression, self_ty, optional_old_self).may_be(wanted);
    Ok(Compiled {
        expression,
        estimate,
        wrong_type,
    })
}

/// Go's `%#v` of the rule, which Kubernetes shows as the invalid value of a rule that does
/// not compile.
fn go_rule(rule: &Value) -> String {
    let reason = match rule.get("reason").and_then(Value::as_str) {
        None => "(*apiextensions.FieldValueErrorReason)(nil)",
        Some(_) => "(*apiextensions.FieldValueErrorReason)(0xc000010000)",
    };
    let optional = match rule.get("optionalOldSelf").and_then(Value::as_bool) {
        None => "(*bool)(nil)",
        Some(_) => "(*bool)(0xc000010008)",
    };
    format!(
        "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{reason}, FieldPath:{}, OptionalOldSelf:{optional}}}",
        go_quote(text(rule, "rule")),
        go_quote(text(rule, "message")),
        go_quote(text(rule, "messageExpression")),
        go_quote(text(rule, "fieldPath")),
    )
}

fn invalid(field: String, shown: &str, detail: &str) -> FieldError {
    FieldError::new(
        "FieldValueInvalid",
        &field,
        format!("Invalid value: {shown}: {detail}"),
    )
}

fn old_self_unused(field: String, optional: bool) -> FieldError {
    invalid(
        field,
        &optional.to_string(),
        "may not be set if oldSelf is not used in rule",
    )
}

fn required(field: String, detail: &str) -> FieldError {
    FieldError::new(
        "FieldValueRequired",
        &field,
        format!("Required value: {detail}"),
    )
}

/// The mistakes kube-apiserver finds in a rule's fields before compiling anything.
fn field_errors(rule: &Value, schema: &Value, at: &dyn Fn(&str) -> String) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let source = text(rule, "rule");
    let message = text(rule, "message");
    if source.trim().is_empty() {
        errors.push(required(at("rule"), "rule is not specified"));
    } else if !message.is_empty() && message.trim().is_empty() {
        errors.push(invalid(
            at("message"),
            &go_quote(message),
            "message must be non-empty if specified",
        ));
    } else if has_newlines(message.trim()) {
        errors.push(invalid(
            at("message"),
            &go_quote(message),
            "message must not contain line breaks",
        ));
    } else if has_newlines(source.trim()) && message.trim().is_empty() {
        errors.push(required(
            at("message"),
            "message must be specified if rule contains line breaks",
        ));
    }
    let message_expression = text(rule, "messageExpression");
    if !message_expression.is_empty() && message_expression.trim().is_empty() {
        errors.push(required(
            at("messageExpression"),
            "messageExpression must be non-empty if specified",
        ));
    }
    if let Some(reason) = rule.get("reason").and_then(Value::as_str)
        && !REASONS.iter().any(|(name, _)| *name == reason)
    {
        let supported: Vec<String> = REASONS.iter().map(|(name, _)| go_quote(name)).collect();
        errors.push(FieldError::new(
            "FieldValueNotSupported",
            at("reason"),
            format!(
                "Unsupported value: {}: supported values: {}",
                go_quote(reason),
                supported.join(", ")
            ),
        ));
    }
    let field_path = text(rule, "fieldPath");
    if !field_path.is_empty() && field_path.trim().is_empty() {
        errors.push(invalid(
            at("fieldPath"),
            &go_quote(field_path),
            "fieldPath must be non-empty if specified",
        ));
    }
    if has_newlines(field_path) {
        errors.push(invalid(
            at("fieldPath"),
            &go_quote(field_path),
            "fieldPath must not contain line breaks",
        ));
    }
    if !field_path.is_empty() && normalize_field_path(field_path, schema).is_err() {
        errors.push(invalid(
            at("fieldPath"),
            &go_quote(field_path),
            "fieldPath must be a valid path",
        ));
    }
    errors
}

/// Compiles the rules of `schema` (at `path`, relative to the schema root); every problem
/// goes to `findings` with Kubernetes' path and message. `types` is the schema that gives the
/// node its type (differs from `schema` inside `allOf`), `self_ty` what CEL sees of it, and
/// `cardinality` how many times its rules can run per object (rule costs are multiplied by
/// it, message expressions' are not, as in Kubernetes).
pub(super) fn compile(
    schema: &Value,
    types: &Value,
    path: &str,
    self_ty: &Ty,
    cardinality: u64,
    findings: &mut Findings,
) -> Vec<Rule> {
    let Some(raw_rules) = schema
        .get("x-kubernetes-validations")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    let mut mistakes = false;
    for (i, raw) in raw_rules.iter().enumerate() {
        let at = |field: &str| child(&index(&child(path, "x-kubernetes-validations"), i), field);
        for error in field_errors(raw, types, &at) {
            findings.error(error);
            mistakes = true;
        }
    }
    if mistakes {
        return Vec::new();
    }
    let mut rules = Vec::with_capacity(raw_rules.len());
    for (i, raw) in raw_rules.iter().enumerate() {
        let at = |field: &str| child(&index(&child(path, "x-kubernetes-validations"), i), field);
        let source = text(raw, "rule");
        let optional_old_self = raw.get("optionalOldSelf").and_then(Value::as_bool);
        let optional = optional_old_self == Some(true);
        let program = match compile_expression(source, self_ty, &Type::Bool, optional) {
            Ok(Compiled {
                expression,
                estimate,
                wrong_type,
            }) => {
                if wrong_type {
                    findings.refused_on_write(invalid(
                        at("rule"),
                        &go_rule(raw),
                        "cel expression must evaluate to a bool",
                    ));
                }
                let cost = estimate.cost.saturating_mul(cardinality);
                if cost > STATIC_ESTIMATED_COST_LIMIT {
                    findings.cost(FieldError::new(
                        "FieldValueForbidden",
                        at("rule"),
                        format!(
                            "Forbidden: {}",
                            cost_message("estimated rule cost", cost, STATIC_ESTIMATED_COST_LIMIT)
                        ),
                    ));
                }
                findings.observe(at("rule"), cost);
                let runnable = instrument(&expression, &estimate);
                Some((expression, runnable, wrong_type))
            }
            Err(report) => {
                let detail = format!("compilation failed: {report}");
                findings.error(invalid(at("rule"), &go_rule(raw), &detail));
                None
            }
        };
        // As in Kubernetes, the message expression of a rule that does not compile is not
        // compiled, and such a rule counts as one that does not use `oldSelf`.
        let Some((expression, runnable, wrong_type)) = program else {
            if let Some(optional) = optional_old_self {
                findings.error(old_self_unused(at("optionalOldSelf"), optional));
            }
            continue;
        };
        // A rule of the wrong type is refused as one that does not compile, but only when the
        // CRD is written; stored, it still runs, with its static message.
        if wrong_type && let Some(optional) = optional_old_self {
            findings.refused_on_write(old_self_unused(at("optionalOldSelf"), optional));
        }
        let message_expression = match text(raw, "messageExpression") {
            _ if wrong_type => Ok(None),
            "" => Ok(None),
            source => match compile_expression(source, self_ty, &Type::String, optional) {
                Ok(Compiled {
                    expression,
                    estimate,
                    wrong_type,
                }) => {
                    if wrong_type {
                        findings.refused_on_write(invalid(
                            at("messageExpression"),
                            &go_rule(raw),
                            "messageExpression must evaluate to a string",
                        ));
                    }
                    if estimate.cost > STATIC_ESTIMATED_COST_LIMIT {
                        findings.cost(FieldError::new(
                            "FieldValueForbidden",
                            at("messageExpression"),
                            format!(
                                "Forbidden: {}",
                                cost_message(
                                    "estimated messageExpression cost",
                                    estimate.cost,
                                    STATIC_ESTIMATED_COST_LIMIT
                                )
                            ),
                        ));
                    }
                    findings.observe(at("messageExpression"), estimate.cost);
                    let runnable = instrument(&expression, &estimate);
                    Ok(Some(MessageExpression {
                        source: source.to_string(),
                        expression,
                        runnable,
                    }))
                }
                Err(report) => {
                    let detail = format!("messageExpression compilation failed: {report}");
                    findings.error(invalid(at("messageExpression"), &go_rule(raw), &detail));
                    Err(())
                }
            },
        };
        let uses_old_self = expression.references().has_variable("oldSelf");
        if !uses_old_self && let Some(optional) = optional_old_self {
            findings.error(old_self_unused(at("optionalOldSelf"), optional));
            continue;
        }
        let Ok(message_expression) = message_expression else {
            continue;
        };
        let message = text(raw, "message").trim();
        let shown = if message.is_empty() {
            source.trim()
        } else {
            message
        };
        let reason = text(raw, "reason");
        rules.push(Rule {
            shown: shown.to_string(),
            message: if message.is_empty() {
                format!("failed rule: {}", source.trim())
            } else {
                message.to_string()
            },
            expression,
            runnable,
            message_expression,
            reason: REASONS
                .iter()
                .find(|(name, _)| *name == reason)
                .map_or(Reason::Invalid, |(_, r)| *r),
            field_path: match text(raw, "fieldPath") {
                "" => None,
                field_path => normalize_field_path(field_path, types).ok(),
            },
            uses_old_self,
            optional_old_self: optional,
        });
    }
    rules
}

/// One step of a `fieldPath`: a declared property (`.name`, `['name']`) or a map key.
enum Step {
    Property(String),
    Key(String),
}

/// A rule's `fieldPath` (`.spec.replicas`, `.labels['app.kubernetes.io/name']`) checked
/// against the schema it sits on and written as a field path (`spec.replicas`,
/// `labels[app.kubernetes.io/name]`), as Kubernetes' `ValidFieldPath`.
pub(super) fn normalize_field_path(path: &str, schema: &Value) -> Result<String, String> {
    valid_field_path(path, schema, true).map(|(path, _)| path)
}

/// Kubernetes' `ValidFieldPath`: `path` checked against `schema`, written as a field path
/// (see `normalize_field_path`), with the schema node it points to; or why it is not a valid
/// path (kube's texts). Without `array_notation` (`WithFieldPathAllowArrayNotation(false)`,
/// as for a CRD's `selectableFields`), a `[` step is refused.
pub fn valid_field_path<'a>(
    path: &str,
    schema: &'a Value,
    array_notation: bool,
) -> Result<(String, &'a Value), String> {
    let mut steps = Vec::new();
    let mut node = schema;
    let mut rest = path;
    while !rest.is_empty() {
        let name = if let Some(after) = rest.strip_prefix('.') {
            if after.is_empty() {
                return Err("unexpected end of JSON path".into());
            }
            let name = token(after);
            rest = &after[name.len()..];
            name.to_string()
        } else if !array_notation && rest.starts_with('[') {
            return Err("array notation is not allowed".into());
        } else if let Some(after) = rest.strip_prefix("['") {
            let (name, after) = quoted(after)?;
            rest = match after.strip_prefix(']') {
                Some(rest) => rest,
                None if after.is_empty() => return Err("unexpected end of JSON path".into()),
                None => return Err(format!("expected ] but got {}", token(after))),
            };
            name
        } else {
            return Err(format!("expected [ or . but got: {}", token(rest)));
        };
        let properties = node.get("properties").and_then(Value::as_object);
        let additional = node.get("additionalProperties").filter(|a| a.is_object());
        if let Some(properties) = properties {
            node = properties
                .get(&name)
                .ok_or("does not refer to a valid field")?;
            steps.push(Step::Property(name));
        } else if let Some(additional) = additional {
            node = additional;
            steps.push(Step::Key(name));
        } else {
            return Err("does not refer to a valid field".into());
        }
    }
    let mut out = String::new();
    for step in steps {
        match step {
            Step::Property(name) => out = child(&out, &name),
            Step::Key(key) => out = format!("{out}[{key}]"),
        }
    }
    Ok((out, node))
}

/// The next token of a field path as Kubernetes' `ValidFieldPath` splits it: a delimiter
/// (`.`, `[`, `]`), a single-quoted string (quotes included), or the text up to the next
/// delimiter. A name after a `.` is one token, even a delimiter (`..a` names `.`).
fn token(s: &str) -> &str {
    let bytes = s.as_bytes();
    if bytes.first() == Some(&b'\'') {
        return (1..bytes.len())
            .find(|&i| bytes[i] == b'\'' && bytes[i - 1] != b'\\')
            .map_or(s, |i| &s[..=i]);
    }
    match s.find(['.', '[', ']']) {
        Some(0) => &s[..1],
        Some(end) => &s[..end],
        None => s,
    }
}

/// The single-quoted string at the start of `s` (after its opening quote), unescaped, and
/// what follows the closing quote.
fn quoted(s: &str) -> Result<(String, &str), String> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\'' => return Ok((out, &s[i + 1..])),
            '\\' => {
                let (_, escaped) = chars.next().ok_or("unexpected end of JSON path")?;
                out.push(match escaped {
                    'a' => '\u{7}',
                    'b' => '\u{8}',
                    'f' => '\u{c}',
                    'n' => '\n',
                    'r' => '\r',
                    't' => '\t',
                    'v' => '\u{b}',
                    '\'' => '\'',
                    '\\' => '\\',
                    other => return Err(format!("invalid escape char \\{other}")),
                });
            }
            other => out.push(other),
        }
    }
    Err("unexpected end of JSON path".into())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn field_paths_are_normalized_against_the_schema() {
        let schema = json!({"type": "object", "properties": {
            "replicas": {"type": "integer"},
            "a.b": {"type": "string"},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        }});
        let normalized = |p: &str| normalize_field_path(p, &schema);
        assert_eq!(normalized(".replicas").as_deref(), Ok("replicas"));
        assert_eq!(normalized("['a.b']").as_deref(), Ok("a.b"));
        assert_eq!(normalized(".labels.app").as_deref(), Ok("labels[app]"));
        assert_eq!(
            normalized(".labels['x.y/z']").as_deref(),
            Ok("labels[x.y/z]")
        );
        assert!(normalized(".missing").is_err());
        assert!(normalized("replicas").is_err());
        assert!(normalized(".labels['open").is_err());
    }
}
