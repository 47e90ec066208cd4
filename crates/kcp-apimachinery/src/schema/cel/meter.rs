//! The actual cost of rules while they run. The interpreter counts nothing itself, so rules
//! are run as rewritten by `super::instrument`, whose added calls land here and charge a
//! per-thread meter: each rule gets [`PER_CALL_LIMIT`] units and the whole object
//! [`RUNTIME_BUDGET`]; once either is spent every further charge fails with cel-go's
//! `operation cancelled: actual cost limit exceeded`, so loops stop at their next step.
//!
//! Units follow cel-go's (a variable or field 1, a call 1, list and map literals 10 and 30),
//! plus what this interpreter really does: it copies a value each time a field is selected
//! and each time a comprehension binds an element or its accumulator, so those are charged
//! by the size of what is copied (one unit per value, a tenth per byte of text), and the
//! functions whose work or result outgrows their inputs (regular expressions, `replace`,
//! `join`, `format`, `lists.range`, set functions, ...) are charged before they run from the
//! sizes of their actual arguments.
//!
//! Must not know: schemas, messages (the caller turns an exceeded meter into Kubernetes'
//! messages).

use std::cell::Cell;
use std::collections::BTreeMap;

use kube_cel::cel::common::ast::{Expr, IdedExpr, LiteralValue};
use kube_cel::cel::common::types::{CelBytes, CelList, CelMap, CelOptional, CelString};
use kube_cel::cel::common::value::Val;
use kube_cel::cel::objects::Key;
use kube_cel::cel::{Context, ExecutionError, FunctionContext, ResolveResult, Value};

use super::estimate::scaled;

/// Most units one rule may spend (Kubernetes' PerCallLimit).
pub(super) const PER_CALL_LIMIT: u64 = 1_000_000;

/// Most units all the rules of one object may spend (Kubernetes' RuntimeCELCostBudget).
pub(super) const RUNTIME_BUDGET: u64 = 10_000_000;

/// cel-go's error when a program runs past its cost limit.
pub(super) const COST_LIMIT_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

pub(super) const ITERATE: &str = "@cost_iterate";
pub(super) const REFERENCE: &str = "@cost_reference";
pub(super) const MEASURE: &str = "@cost_measure";
pub(super) const GUARD: &str = "@cost_guard";

/// Which limit a rule ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Exceeded {
    /// The rule's own limit ([`PER_CALL_LIMIT`]).
    PerCall,
    /// What was left of the object's budget.
    Budget,
}

#[derive(Clone, Copy)]
struct Meter {
    used: u64,
    per_call: u64,
    budget: u64,
    exceeded: Option<Exceeded>,
}

thread_local! {
    static METER: Cell<Option<Meter>> = const { Cell::new(None) };
}

/// What running one program cost.
pub(super) struct Metered<T> {
    pub(super) value: Option<T>,
    pub(super) used: u64,
    pub(super) exceeded: Option<Exceeded>,
}

/// Clears the meter when a metered run ends, panics included.
struct Running;

impl Drop for Running {
    fn drop(&mut self) {
        METER.with(|m| m.set(None));
    }
}

/// Runs `program` with a meter of `per_call` units, of which at most `budget` may be spent
/// (the object's remainder), after charging its `base` cost. `value` is `None` when the base
/// alone exceeds a limit (then `program` does not run).
pub(super) fn metered<T>(
    per_call: u64,
    budget: u64,
    base: u64,
    program: impl FnOnce() -> T,
) -> Metered<T> {
    METER.with(|m| {
        m.set(Some(Meter {
            used: 0,
            per_call,
            budget,
            exceeded: None,
        }))
    });
    let running = Running;
    let value = charge(base).is_ok().then(program);
    let meter = METER.with(Cell::get);
    drop(running);
    let (used, exceeded) = meter.map_or((0, None), |m| (m.used, m.exceeded));
    Metered {
        value,
        used,
        exceeded,
    }
}

fn cancelled() -> ExecutionError {
    ExecutionError::function_error("@cost", COST_LIMIT_EXCEEDED)
}

/// Adds `units` to the running meter; fails (and keeps failing) once a limit is passed.
/// Without a running meter nothing is counted.
pub(super) fn charge(units: u64) -> Result<(), ExecutionError> {
    METER.with(|cell| {
        let Some(mut meter) = cell.get() else {
            return Ok(());
        };
        if meter.exceeded.is_none() {
            meter.used = meter.used.saturating_add(units);
            if meter.used > meter.per_call {
                meter.exceeded = Some(Exceeded::PerCall);
            } else if meter.used > meter.budget {
                meter.exceeded = Some(Exceeded::Budget);
            }
            cell.set(Some(meter));
        }
        match meter.exceeded {
            Some(_) => Err(cancelled()),
            None => Ok(()),
        }
    })
}

/// Units left before a limit: how far a size needs counting.
fn allowance() -> u64 {
    METER.with(|cell| {
        cell.get().map_or(u64::MAX, |m| {
            m.per_call
                .min(m.budget)
                .saturating_sub(m.used)
                .saturating_add(1)
        })
    })
}

/// What copying `value` costs: one unit per value, plus a tenth per byte of text; counted
/// only up to `cap`.
pub(super) fn val_size(value: &dyn Val, cap: u64) -> u64 {
    // Most measured values are strings or scalars: no walk needed.
    if let Some(s) = value.downcast_ref::<CelString>() {
        return 1 + s.inner().len() as u64 / 10;
    }
    if value.downcast_ref::<CelList>().is_none()
        && value.downcast_ref::<CelMap>().is_none()
        && value.downcast_ref::<CelOptional>().is_none()
        && value.downcast_ref::<CelBytes>().is_none()
    {
        return 1;
    }
    let mut total: u64 = 0;
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        total = total.saturating_add(1);
        if total > cap {
            break;
        }
        if let Some(s) = value.downcast_ref::<CelString>() {
            total = total.saturating_add(s.inner().len() as u64 / 10);
        } else if let Some(b) = value.downcast_ref::<CelBytes>() {
            total = total.saturating_add(b.inner().len() as u64 / 10);
        } else if let Some(list) = value.downcast_ref::<CelList>() {
            pending.extend(list.inner().iter().map(|item| item.as_ref()));
        } else if let Some(map) = value.downcast_ref::<CelMap>() {
            for (key, item) in map.inner() {
                total = total.saturating_add(1);
                if let kube_cel::cel::common::types::CelMapKey::String(s) = key {
                    total = total.saturating_add(s.inner().len() as u64 / 10);
                }
                pending.push(item.as_ref());
            }
        } else if let Some(optional) = value.downcast_ref::<CelOptional>()
            && let Some(inner) = optional.inner()
        {
            pending.push(inner);
        }
    }
    total
}

/// [`val_size`] for the interpreter's other representation of values.
pub(super) fn value_size(value: &Value, cap: u64) -> u64 {
    let mut total: u64 = 0;
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        total = total.saturating_add(1);
        if total > cap {
            break;
        }
        match value {
            Value::String(s) => total = total.saturating_add(s.len() as u64 / 10),
            Value::Bytes(b) => total = total.saturating_add(b.len() as u64 / 10),
            Value::List(items) => pending.extend(items.iter()),
            Value::Map(map) => {
                for (key, item) in map.map.iter() {
                    total = total.saturating_add(1);
                    if let Key::String(s) = key {
                        total = total.saturating_add(s.len() as u64 / 10);
                    }
                    pending.push(item);
                }
            }
            _ => {}
        }
    }
    total
}

/// `size()` of a value: items, entries, bytes; 1 for anything else.
fn length(value: &Value) -> u64 {
    match value {
        Value::String(s) => s.len() as u64,
        Value::Bytes(b) => b.len() as u64,
        Value::List(items) => items.len() as u64,
        Value::Map(map) => map.map.len() as u64,
        _ => 1,
    }
}

/// Registers the functions instrumented rules call.
pub(super) fn register(context: &mut Context<'static>) {
    context.add_function(ITERATE, iterate);
    context.add_function(REFERENCE, reference);
    context.add_function(MEASURE, measure);
    context.add_function(GUARD, guard);
}

fn literal_str(expression: Option<&IdedExpr>) -> Option<&str> {
    match expression.map(|e| &e.expr) {
        Some(Expr::Literal(LiteralValue::String(s))) => Some(s.inner()),
        _ => None,
    }
}

fn literal_int(expression: Option<&IdedExpr>) -> u64 {
    match expression.map(|e| &e.expr) {
        Some(Expr::Literal(LiteralValue::Int(i))) => u64::try_from(*i.inner()).unwrap_or(0),
        _ => 0,
    }
}

/// `@cost_iterate(units, variable...)`, before each step of a comprehension: the step's own
/// units, and the sizes of the variables it measures (the element and accumulator just
/// copied into place, the variables the step hands to functions or compares).
fn iterate(ftx: &FunctionContext) -> ResolveResult {
    let mut units = literal_int(ftx.args.first());
    for name in ftx.args.iter().skip(1).filter_map(|a| literal_str(Some(a))) {
        if let Some(value) = ftx.ptx.get_variable(name) {
            units = units.saturating_add(val_size(value.as_ref(), allowance()));
        }
    }
    charge(units)?;
    Ok(Value::Bool(true))
}

/// `@cost_reference(variable, field, ...)`, before `variable.field...` is evaluated: every
/// selection copies the selected value.
fn reference(ftx: &FunctionContext) -> ResolveResult {
    let mut names = ftx.args.iter().filter_map(|a| literal_str(Some(a)));
    let Some(variable) = names.next() else {
        return Ok(Value::Bool(true));
    };
    let Some(root) = ftx.ptx.get_variable(variable) else {
        return Ok(Value::Bool(true));
    };
    let mut current: &dyn Val = root.as_ref();
    let mut units: u64 = 0;
    let mut selected = false;
    for name in names {
        let Some(map) = current.downcast_ref::<CelMap>() else {
            break;
        };
        let key = kube_cel::cel::common::types::CelMapKey::from(name);
        let Some(value) = map.inner().get(&key) else {
            break;
        };
        current = value.as_ref();
        units = units.saturating_add(val_size(current, allowance()));
        selected = true;
    }
    if !selected {
        // A bare variable: what its consumer copies or traverses.
        units = val_size(current, allowance());
    }
    charge(units)?;
    Ok(Value::Bool(true))
}

/// `@cost_measure(expression)`: evaluates a selection whose operand is not a variable and
/// charges the size of what it copied.
fn measure(ftx: &FunctionContext) -> ResolveResult {
    let Some(expression) = ftx.args.first() else {
        return Ok(Value::Null);
    };
    let value = Value::resolve(expression, ftx.ptx)?;
    charge(value_size(&value, allowance()))?;
    Ok(value)
}

/// The functions charged by their actual arguments before they run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Guarded {
    Regex,
    Contains,
    IndexOf,
    Replace,
    Split,
    Join,
    Format,
    Grow,
    Range,
    Sets,
    Distinct,
    Sort,
}

impl Guarded {
    /// The guard of a call to `name` (namespaced as written: `sets.contains`).
    pub(super) fn of(name: &str) -> Option<Guarded> {
        Some(match name {
            "matches" | "find" | "findAll" => Guarded::Regex,
            "contains" => Guarded::Contains,
            "indexOf" | "lastIndexOf" => Guarded::IndexOf,
            "replace" => Guarded::Replace,
            "split" => Guarded::Split,
            "join" => Guarded::Join,
            "format" => Guarded::Format,
            "strings.quote" | "base64.encode" | "base64.decode" => Guarded::Grow,
            "lists.range" => Guarded::Range,
            "sets.contains" | "sets.intersects" | "sets.equivalent" => Guarded::Sets,
            "distinct" => Guarded::Distinct,
            "sort" => Guarded::Sort,
            _ => return None,
        })
    }

    pub(super) fn code(self) -> i64 {
        self as i64
    }

    fn from_code(code: u64) -> Option<Guarded> {
        const ALL: [Guarded; 12] = [
            Guarded::Regex,
            Guarded::Contains,
            Guarded::IndexOf,
            Guarded::Replace,
            Guarded::Split,
            Guarded::Join,
            Guarded::Format,
            Guarded::Grow,
            Guarded::Range,
            Guarded::Sets,
            Guarded::Distinct,
            Guarded::Sort,
        ];
        ALL.into_iter().find(|g| g.code() as u64 == code)
    }

    /// What the call costs with these operands (the target first), before it runs.
    fn cost(self, operands: &[Value]) -> u64 {
        let len = |i: usize| operands.get(i).map_or(0, length);
        let text = |x: u64| scaled(x, 0.1);
        let is_string = |i: usize| matches!(operands.get(i), Some(Value::String(_)));
        let units = match self {
            Guarded::Regex => text(len(0).saturating_add(1)).saturating_mul(scaled(len(1), 0.25)),
            Guarded::Contains | Guarded::IndexOf if is_string(0) => {
                text(len(0)).saturating_mul(text(len(1)).max(1))
            }
            Guarded::Contains | Guarded::IndexOf => len(0),
            Guarded::Replace => {
                // Every byte may be replaced, and an empty pattern matches between bytes.
                let matches = len(0) / len(1).max(1) + 1;
                text(len(0).saturating_add(matches.saturating_mul(len(2))))
            }
            Guarded::Split => len(0).saturating_add(1),
            Guarded::Join => {
                let items = match operands.first() {
                    Some(Value::List(items)) => {
                        items.iter().map(length).fold(0, u64::saturating_add)
                    }
                    _ => 0,
                };
                text(items.saturating_add(len(0).saturating_mul(len(1))))
            }
            Guarded::Format => {
                let precision = match operands.first() {
                    Some(Value::String(format)) => precisions(format),
                    _ => 0,
                };
                let arguments = operands.get(1).map_or(0, |a| value_size(a, u64::MAX));
                text(len(0).saturating_add(arguments).saturating_add(precision))
            }
            Guarded::Grow => text(len(0).saturating_mul(2)),
            Guarded::Range => match operands.first() {
                Some(Value::Int(n)) => u64::try_from(*n).unwrap_or(0),
                Some(Value::UInt(n)) => *n,
                _ => 0,
            },
            Guarded::Sets => len(0).saturating_mul(len(1)),
            Guarded::Distinct => len(0).saturating_mul(len(0)),
            Guarded::Sort => {
                let n = len(0);
                n.saturating_mul(u64::from(64 - n.leading_zeros()))
            }
        };
        units.saturating_add(1)
    }
}

/// The digits `%.N` precisions of a format string ask for, which its result will hold.
fn precisions(format: &str) -> u64 {
    let mut total: u64 = 0;
    let mut rest = format;
    while let Some(at) = rest.find("%.") {
        rest = &rest[at + 2..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let precision = rest[..digits].parse::<u64>().unwrap_or(u64::MAX);
        total = total.saturating_add(precision);
        rest = &rest[digits..];
    }
    total
}

/// The variable a guarded call's `i`th operand is bound to in its delegate.
pub(super) fn operand_name(i: usize) -> String {
    format!("@cost_operand{i}")
}

/// `@cost_guard(guard, delegate, operands...)`: evaluates the operands once, charges what the
/// call will cost with them, then runs `delegate` (the original call over the bound operands).
fn guard(ftx: &FunctionContext) -> ResolveResult {
    let (Some(guarded), Some(delegate)) = (
        Guarded::from_code(literal_int(ftx.args.first())),
        ftx.args.get(1),
    ) else {
        return Err(ExecutionError::function_error(GUARD, "malformed guard"));
    };
    let mut operands = Vec::with_capacity(ftx.args.len().saturating_sub(2));
    for operand in ftx.args.iter().skip(2) {
        operands.push(Value::resolve(operand, ftx.ptx)?);
    }
    charge(guarded.cost(&operands))?;
    let mut variables: BTreeMap<String, Box<dyn Val>> = BTreeMap::new();
    for (i, value) in operands.into_iter().enumerate() {
        variables.insert(operand_name(i), value.try_into()?);
    }
    let scope = Context::Child {
        parent: ftx.ptx,
        variables,
        resolver: None,
    };
    Value::resolve(delegate, &scope)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_stop_at_the_per_call_limit_and_stay_stopped() {
        let run = metered(10, 100, 4, || {
            assert!(charge(5).is_ok());
            assert!(charge(2).is_err());
            assert!(charge(0).is_err());
            7
        });
        assert_eq!(run.value, Some(7));
        assert_eq!(run.used, 11);
        assert_eq!(run.exceeded, Some(Exceeded::PerCall));
        // The meter is gone after the run.
        assert!(charge(u64::MAX).is_ok());
    }

    #[test]
    fn the_budget_can_end_a_run_before_its_own_limit() {
        let run = metered(100, 10, 11, || unreachable!("the base is over budget"));
        assert_eq!(run.value, None::<()>);
        assert_eq!(run.exceeded, Some(Exceeded::Budget));
    }

    #[test]
    fn sizes_count_values_and_tenths_of_bytes() {
        let value = Value::List(std::sync::Arc::new(vec![
            Value::Int(1),
            Value::String(std::sync::Arc::new("x".repeat(25))),
        ]));
        assert_eq!(value_size(&value, u64::MAX), 1 + 1 + 1 + 2);
        let val: Box<dyn Val> = value.clone().try_into().unwrap();
        assert_eq!(val_size(val.as_ref(), u64::MAX), 5);
        assert_eq!(precisions("%.3f and %.10e and %d"), 13);
        assert_eq!(precisions("%.99999999999999999999999f"), u64::MAX);
    }
}
