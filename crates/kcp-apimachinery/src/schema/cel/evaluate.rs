//! Running compiled rules over an object (and the stored object on update), with
//! kube-apiserver's messages: `Invalid value: "<schema type>": <message>` (or `Forbidden`,
//! `Required value`, `Duplicate value` by the rule's `reason`), `<error> evaluating rule:
//! <rule>` when a rule cannot be evaluated.
//!
//! Every rule runs metered (`super::meter`): a rule over its own limit, or one that spends
//! the rest of the object's budget, ends the validation of the object with Kubernetes'
//! messages (`... no further validation rules will be run ...`). A rule that panics inside
//! the interpreter is reported as an internal error of that rule.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};

use kube_cel::cel::common::types::CelOptional;
use kube_cel::cel::common::value::Val;
use kube_cel::cel::{Context, ExecutionError, Value as CelValue};
use serde_json::Value;

use super::instrument::Instrumented;
use super::meter::{COST_LIMIT_EXCEEDED, Exceeded, PER_CALL_LIMIT, RUNTIME_BUDGET, metered};
use super::rules::{Reason, Rule};
use super::values::to_cel_needed;
use super::{Node, child, index};
use crate::schema::FieldError;

/// The cost limits of one validation.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub(super) per_call: u64,
    pub(super) budget: u64,
}

impl Limits {
    /// Kubernetes' PerCallLimit and RuntimeCELCostBudget.
    pub(super) const KUBERNETES: Limits = Limits {
        per_call: PER_CALL_LIMIT,
        budget: RUNTIME_BUDGET,
    };
}

const OUT_OF_BUDGET: &str =
    "validation failed due to running out of cost budget, no further validation rules will be run";

/// Longest message a `messageExpression` may produce (Kubernetes' 5 KiB).
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// The nearest value (itself or an ancestor) that can be matched with the old object, with
/// its old value: a failing rule is forgiven when that value did not change.
type Ratchet<'a> = Option<(&'a Value, &'a Value)>;

pub(super) fn run(
    root: &Node,
    functions: &Context<'static>,
    new: &Value,
    old: Option<&Value>,
    limits: Limits,
) -> Vec<FieldError> {
    let mut walk = Walk {
        functions,
        errors: Vec::new(),
        per_call: limits.per_call,
        remaining: limits.budget,
        stopped: false,
    };
    walk.node(root, new, old, "", old.map(|o| (o, new)));
    walk.errors
}

struct Walk<'f> {
    functions: &'f Context<'static>,
    errors: Vec<FieldError>,
    per_call: u64,
    /// What is left of the object's budget.
    remaining: u64,
    /// Set once a limit is passed: no further rule runs.
    stopped: bool,
}

/// How running one program ended.
enum Outcome {
    Value(CelValue),
    Failed(ExecutionError),
    /// The meter ran out: the rule's own limit or the object's budget.
    Exceeded(Exceeded),
    /// The interpreter panicked.
    Panicked,
}

impl Walk<'_> {
    fn node(
        &mut self,
        node: &Node,
        new: &Value,
        old: Option<&Value>,
        path: &str,
        ratchet: Ratchet,
    ) {
        if new.is_null() || self.stopped {
            return;
        }
        let old = old.filter(|o| !o.is_null());
        if !node.rules.is_empty() {
            self.rules(node, new, old, path, ratchet);
        }
        for branch in &node.all_of {
            self.node(branch, new, old, path, ratchet);
        }
        match new {
            Value::Array(items) => {
                let Some(item_node) = &node.items else { return };
                let old_items = old.and_then(Value::as_array);
                for (i, item) in items.iter().enumerate() {
                    let old_item = if node.list_map_keys.is_empty() {
                        None
                    } else {
                        old_items.and_then(|olds| same_keys(olds, item, &node.list_map_keys))
                    };
                    let ratchet = old_item.map(|o| (o, item)).or(ratchet);
                    self.node(item_node, item, old_item, &index(path, i), ratchet);
                }
            }
            Value::Object(fields) => {
                if let Some(value_node) = &node.additional_properties {
                    for (key, value) in fields {
                        let old_value = old.and_then(|o| o.get(key));
                        let ratchet = old_value.map(|o| (o, value)).or(ratchet);
                        self.node(
                            value_node,
                            value,
                            old_value,
                            &format!("{path}[{key}]"),
                            ratchet,
                        );
                    }
                }
                for (name, property_node) in &node.properties {
                    let Some(value) = fields.get(name) else {
                        continue;
                    };
                    let old_value = old.and_then(|o| o.get(name));
                    let ratchet = old_value.map(|o| (o, value)).or(ratchet);
                    self.node(property_node, value, old_value, &child(path, name), ratchet);
                }
            }
            _ => {}
        }
    }

    fn rules(
        &mut self,
        node: &Node,
        new: &Value,
        old: Option<&Value>,
        path: &str,
        ratchet: Ratchet,
    ) {
        let Some(shape) = &node.shape else { return };
        let shown_type = go_quoted(&node.type_name);
        if self.remaining == 0 {
            self.stop(path, &shown_type, OUT_OF_BUDGET.to_string());
            return;
        }
        let needs_old = node.rules.iter().any(|r| r.uses_old_self);
        let old = old.filter(|_| needs_old);
        let mut variables = BTreeMap::new();
        variables.insert(
            "self".to_string(),
            to_cel_needed(new, shape, &node.self_need),
        );
        if let Some(old) = old {
            variables.insert(
                "oldSelf".to_string(),
                to_cel_needed(old, shape, &node.old_self_need),
            );
        }
        let scope = Context::Child {
            parent: self.functions,
            variables,
            resolver: None,
        };
        for rule in &node.rules {
            if self.stopped {
                return;
            }
            if rule.uses_old_self && old.is_none() && !rule.optional_old_self {
                continue;
            }
            let result = if rule.optional_old_self {
                let wrapped = match old {
                    Some(o) => CelOptional::of(to_cel_needed(o, shape, &node.old_self_need)),
                    None => CelOptional::none(),
                };
                let mut variables: BTreeMap<String, Box<dyn Val>> = BTreeMap::new();
                variables.insert("oldSelf".to_string(), Box::new(wrapped));
                let optional = Context::Child {
                    parent: &scope,
                    variables,
                    resolver: None,
                };
                self.execute(&rule.runnable, &optional)
            } else {
                self.execute(&rule.runnable, &scope)
            };
            match result {
                Outcome::Value(CelValue::Bool(true)) => {}
                Outcome::Exceeded(Exceeded::PerCall) => {
                    self.stop(
                        path,
                        &shown_type,
                        format!(
                            "'{COST_LIMIT_EXCEEDED}': no further validation rules will be run due to call cost exceeds limit for rule: {}",
                            rule.shown
                        ),
                    );
                }
                Outcome::Exceeded(Exceeded::Budget) => {
                    self.stop(path, &shown_type, OUT_OF_BUDGET.to_string());
                }
                Outcome::Panicked => self.errors.push(FieldError::new(
                    "InternalError",
                    shown_path(path),
                    format!(
                        "Internal error: the interpreter failed evaluating rule: {}",
                        rule.shown
                    ),
                )),
                Outcome::Failed(error) => {
                    let detail = evaluation_error(&error, &rule.shown);
                    self.errors.push(FieldError::new(
                        "FieldValueInvalid",
                        shown_path(path),
                        format!("Invalid value: {shown_type}: {detail}"),
                    ));
                }
                Outcome::Value(_) => {
                    let unchanged = ratchet.is_some_and(|(o, n)| o == n);
                    if unchanged && !rule.uses_old_self {
                        continue;
                    }
                    let field = match &rule.field_path {
                        Some(field_path) => child(path, field_path),
                        None => path.to_string(),
                    };
                    let message = match &rule.message_expression {
                        None => None,
                        Some(expression) => match self.execute(&expression.runnable, &scope) {
                            Outcome::Value(value) => usable_message(value),
                            Outcome::Exceeded(Exceeded::PerCall) => {
                                self.stop(
                                    path,
                                    &shown_type,
                                    format!(
                                        "no further validation rules will be run due to call cost exceeds limit for messageExpression: {}",
                                        go_quoted(&expression.source)
                                    ),
                                );
                                return;
                            }
                            Outcome::Exceeded(Exceeded::Budget) => {
                                self.stop(
                                    path,
                                    &shown_type,
                                    "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run".to_string(),
                                );
                                return;
                            }
                            Outcome::Failed(_) | Outcome::Panicked => None,
                        },
                    };
                    let message = message.unwrap_or_else(|| rule.message.clone());
                    self.errors
                        .push(failure(rule, shown_path(&field), &shown_type, message));
                }
            }
        }
    }

    /// Runs one program under the meter, with what is left of the object's budget.
    fn execute(&mut self, program: &Instrumented, scope: &Context) -> Outcome {
        let run = metered(self.per_call, self.remaining, program.base, || {
            catch_unwind(AssertUnwindSafe(|| {
                CelValue::resolve(&program.expression, scope)
            }))
        });
        self.remaining = self.remaining.saturating_sub(run.used);
        if let Some(exceeded) = run.exceeded {
            return Outcome::Exceeded(exceeded);
        }
        match run.value {
            Some(Ok(Ok(value))) => Outcome::Value(value),
            Some(Ok(Err(error))) => Outcome::Failed(error),
            Some(Err(_)) => Outcome::Panicked,
            // Only a limit keeps a program from running.
            None => Outcome::Exceeded(Exceeded::Budget),
        }
    }

    /// Reports `message` at `path` and ends the validation.
    fn stop(&mut self, path: &str, shown_type: &str, message: String) {
        self.errors.push(FieldError::new(
            "FieldValueInvalid",
            shown_path(path),
            format!("Invalid value: {shown_type}: {message}"),
        ));
        self.stopped = true;
    }
}

/// Go's printing of the empty (nil) field path of the object root.
fn shown_path(path: &str) -> &str {
    if path.is_empty() { "<nil>" } else { path }
}

/// The old item of a `map` list with the same keys as `item`.
fn same_keys<'a>(olds: &'a [Value], item: &Value, keys: &[String]) -> Option<&'a Value> {
    olds.iter()
        .find(|old| keys.iter().all(|k| old.get(k) == item.get(k)))
}

/// The message a `messageExpression` gave, or `None` (then the static message is used)
/// when it is not a string, is blank, has line breaks or is too long.
pub(super) fn usable_message(value: CelValue) -> Option<String> {
    match value {
        CelValue::String(s) => {
            let trimmed = s.trim();
            (!trimmed.is_empty() && !trimmed.contains('\n') && trimmed.len() <= MAX_MESSAGE_BYTES)
                .then(|| trimmed.to_string())
        }
        _ => None,
    }
}

fn go_quoted(s: &str) -> String {
    crate::labels::validation::go_quote(s)
}

fn failure(rule: &Rule, field: &str, shown_type: &str, message: String) -> FieldError {
    match rule.reason {
        Reason::Invalid => FieldError::new(
            "FieldValueInvalid",
            field,
            format!("Invalid value: {shown_type}: {message}"),
        ),
        Reason::Forbidden => FieldError::new(
            "FieldValueForbidden",
            field,
            format!("Forbidden: {message}"),
        ),
        Reason::Required => FieldError::new(
            "FieldValueRequired",
            field,
            format!("Required value: {message}"),
        ),
        Reason::Duplicate => FieldError::new(
            "FieldValueDuplicate",
            field,
            format!("Duplicate value: {shown_type}"),
        ),
    }
}

/// A runtime error as kube-apiserver reports it, with cel-go's wording where it differs.
pub(super) fn evaluation_error(error: &ExecutionError, shown: &str) -> String {
    let text = match error {
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        ExecutionError::NoSuchOverload
        | ExecutionError::UnsupportedBinaryOperator(..)
        | ExecutionError::UnsupportedUnaryOperator(..)
        | ExecutionError::ValuesNotComparable(..)
        | ExecutionError::UnexpectedType { .. }
        | ExecutionError::UnsupportedTargetType { .. }
        | ExecutionError::NotSupportedAsMethod { .. } => {
            return format!(
                "'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {shown}"
            );
        }
        ExecutionError::DivisionByZero(_) => "division by zero".to_string(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_string(),
        ExecutionError::Overflow(..) => "integer overflow".to_string(),
        ExecutionError::IndexOutOfBounds(i) => format!("index out of bounds: {}", shown_index(i)),
        ExecutionError::UndeclaredReference(name) => {
            format!("undeclared reference to '{name}'")
        }
        ExecutionError::FunctionError { message, .. } => message.clone(),
        other => {
            let text = other.to_string();
            let mut chars = text.chars();
            match chars.next() {
                Some(first) => first.to_lowercase().chain(chars).collect(),
                None => text,
            }
        }
    };
    format!("{text} evaluating rule: {shown}")
}

fn shown_index(value: &CelValue) -> String {
    match value {
        CelValue::Int(i) => i.to_string(),
        CelValue::UInt(u) => u.to_string(),
        other => format!("{other:?}"),
    }
}
