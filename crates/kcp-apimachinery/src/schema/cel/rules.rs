//! One schema node's `x-kubernetes-validations`, checked and compiled as kube-apiserver does
//! when a CRD is written: the rule, `message`, `messageExpression`, `reason`, `fieldPath` and
//! `optionalOldSelf` fields first (a node with such mistakes is not compiled), then the CEL
//! programs, and their estimated costs against Kubernetes' limits. Only syntax is checked:
//! this CEL has no type checker, so a rule naming a field the schema does not have fails when
//! it runs, not here.

use kube_cel::cel::common::ast::IdedExpr;
use serde_json::Value;

use super::super::{FieldError, child, index};
use super::estimate::{Estimate, STATIC_ESTIMATED_COST_LIMIT, estimate};
use super::instrument::{Instrumented, instrument};
use super::syntax::{parse, undefined_field};
use super::types::{Kind, Ty};
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

/// Go's `%#v` of the rule, which Kubernetes shows as the invalid value of a rule that does
/// not compile.
/// Why an expression does not compile.
enum Refusal {
    /// cel-go's error report (syntax, limits, an undefined field).
    Report(String),
    /// It certainly evaluates to another type than the one wanted.
    Type,
}

/// `source` parsed and estimated once, or why it does not compile: its syntax, a field its
/// object type does not declare, or a result of another type than `wanted` (known for a
/// literal, a variable or a field whose type the schema gives; calls and operators are left to
/// run time, where a wrong type fails the rule).
fn compile_expression(
    source: &str,
    self_ty: &Ty,
    wanted: &Kind,
) -> Result<(IdedExpr, Estimate), Refusal> {
    use kube_cel::cel::common::ast::Expr;
    let expression = parse(source).map_err(Refusal::Report)?;
    let estimate = estimate(&expression, self_ty);
    if let Some(field) = &estimate.undefined_field {
        return Err(Refusal::Report(undefined_field(source, field)));
    }
    let plain = matches!(
        expression.expr,
        Expr::Literal(_) | Expr::Ident(_) | Expr::Select(_)
    );
    let found = &estimate.result.kind;
    if plain
        && *found != Kind::Dyn
        && std::mem::discriminant(found) != std::mem::discriminant(wanted)
    {
        return Err(Refusal::Type);
    }
    Ok((expression, estimate))
}

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
        let program = match compile_expression(source, self_ty, &Kind::Bool) {
            Ok((expression, estimate)) => {
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
                Some((expression, runnable))
            }
            Err(refusal) => {
                let detail = match refusal {
                    Refusal::Report(report) => format!("compilation failed: {report}"),
                    Refusal::Type => "cel expression must evaluate to a bool".to_string(),
                };
                findings.error(invalid(at("rule"), &go_rule(raw), &detail));
                None
            }
        };
        let message_expression = match text(raw, "messageExpression") {
            "" => Ok(None),
            source => match compile_expression(source, self_ty, &Kind::String) {
                Ok((expression, estimate)) => {
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
                Err(refusal) => {
                    let detail = match refusal {
                        Refusal::Report(report) => {
                            format!("messageExpression compilation failed: {report}")
                        }
                        Refusal::Type => "messageExpression must evaluate to a string".to_string(),
                    };
                    findings.error(invalid(at("messageExpression"), &go_rule(raw), &detail));
                    Err(())
                }
            },
        };
        let Some((expression, runnable)) = program else {
            continue;
        };
        let uses_old_self = expression.references().has_variable("oldSelf");
        let optional_old_self = raw.get("optionalOldSelf").and_then(Value::as_bool);
        if !uses_old_self && let Some(optional) = optional_old_self {
            findings.error(invalid(
                at("optionalOldSelf"),
                &optional.to_string(),
                "may not be set if oldSelf is not used in rule",
            ));
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
            optional_old_self: optional_old_self == Some(true),
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
    let mut steps = Vec::new();
    let mut node = schema;
    let mut rest = path;
    while !rest.is_empty() {
        let name = if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[', ']']).unwrap_or(after.len());
            if end == 0 {
                return Err("unexpected end of JSON path".into());
            }
            rest = &after[end..];
            after[..end].to_string()
        } else if let Some(after) = rest.strip_prefix("['") {
            let (name, after) = quoted(after)?;
            rest = after
                .strip_prefix(']')
                .ok_or_else(|| format!("expected ] but got {after}"))?;
            name
        } else {
            return Err(format!("expected [ or . but got: {rest}"));
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
    Ok(out)
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
