//! Rewrites a compiled rule so that running it charges the meter (`super::meter`): the
//! interpreter gives no hook of its own, so the charges are calls added to the tree.
//!
//! - Each comprehension step becomes `@cost_iterate(units, accumulator, variable) ? step :
//!   null`: the units of its condition and step, and the copies of the bound element and
//!   accumulator, before every step (a loop cannot outrun its meter).
//! - Each variable or chain of selections from one (`self.spec.items`, `x.name`) that can be
//!   large becomes `@cost_reference(variable, fields...) ? chain : null`, charged by the sizes
//!   of the values the selections copy, looked up without copying them.
//! - Other selections of large values are wrapped in `@cost_measure`.
//! - Calls whose cost grows faster than their inputs (regular expressions, `replace`, `join`,
//!   `format`, `lists.range`, set functions, ...) become `@cost_guard(guard, delegate,
//!   operands...)`, which evaluates the operands once, charges, and runs the original call
//!   (`delegate`) on them.
//!
//! The conditional keeps the value as the interpreter produced it (no conversion), and the
//! added names start with `@`, which no rule can write. What every node costs once (cel-go's
//! units outside loops) is charged before the rule runs: [`Instrumented::base`].

use std::collections::HashSet;

use kube_cel::cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedEntryExpr, IdedExpr, ListExpr, LiteralValue,
    MapEntryExpr, MapExpr, SelectExpr,
};
use kube_cel::cel::common::types::{CelInt, CelString};

use super::estimate::Estimate;
use super::meter::{GUARD, Guarded, ITERATE, MEASURE, REFERENCE, operand_name};

/// A rule ready to run metered.
#[derive(Debug)]
pub(super) struct Instrumented {
    pub(super) expression: IdedExpr,
    /// The units of the nodes outside comprehension loops, charged once before running.
    pub(super) base: u64,
}

/// Instruments `expression`, knowing from its estimate which sub-expressions are small
/// values and which comprehensions have small elements (those need no measuring).
pub(super) fn instrument(expression: &IdedExpr, estimate: &Estimate) -> Instrumented {
    instrument_with(expression, estimate, &["self", "oldSelf"])
}

/// [`instrument`] for an expression whose top-level variables are `variables`.
pub(super) fn instrument_with(
    expression: &IdedExpr,
    estimate: &Estimate,
    variables: &[&str],
) -> Instrumented {
    let mut rewriter = Rewriter {
        next_id: max_id(expression).saturating_add(1),
        small: &estimate.small,
        small_elements: &estimate.small_elements,
        variables: variables.iter().map(|v| v.to_string()).collect(),
        accumulators: Vec::new(),
        per_step: Vec::new(),
    };
    let base = rewriter.units(expression);
    Instrumented {
        expression: rewriter.rewrite(expression),
        base,
    }
}

fn max_id(expression: &IdedExpr) -> u64 {
    let mut max = 0;
    let mut pending = vec![expression];
    while let Some(e) = pending.pop() {
        max = max.max(e.id);
        match &e.expr {
            Expr::Select(select) => pending.push(&select.operand),
            Expr::Call(call) => {
                pending.extend(call.target.as_deref());
                pending.extend(&call.args);
            }
            Expr::List(list) => pending.extend(&list.elements),
            Expr::Map(map) => {
                for entry in &map.entries {
                    max = max.max(entry.id);
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        pending.push(&entry.key);
                        pending.push(&entry.value);
                    }
                }
            }
            Expr::Comprehension(c) => pending.extend([
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ]),
            Expr::Literal(_) | Expr::Ident(_) | Expr::Struct(_) | Expr::Unspecified => {}
        }
    }
    max
}

struct Rewriter<'a> {
    next_id: u64,
    small: &'a HashSet<u64>,
    small_elements: &'a HashSet<u64>,
    /// For each comprehension step being rewritten (innermost last): the variables its
    /// condition and step name, measured by its per-step charge rather than one by one.
    per_step: Vec<Vec<String>>,
    /// Names bound to values: `self`, `oldSelf`, comprehension variables in scope.
    variables: Vec<String>,
    /// Comprehension accumulators in scope (charged per step, not per reference).
    accumulators: Vec<String>,
}

impl Rewriter<'_> {
    fn node(&mut self, expr: Expr) -> IdedExpr {
        let id = self.next_id;
        self.next_id = self.next_id.saturating_add(1);
        IdedExpr { id, expr }
    }

    fn string(&mut self, s: &str) -> IdedExpr {
        self.node(Expr::Literal(LiteralValue::String(CelString::from(s))))
    }

    fn int(&mut self, i: i64) -> IdedExpr {
        self.node(Expr::Literal(LiteralValue::Int(CelInt::from(i))))
    }

    fn call(&mut self, name: &str, args: Vec<IdedExpr>) -> IdedExpr {
        self.node(Expr::Call(CallExpr {
            func_name: name.to_string(),
            target: None,
            args,
        }))
    }

    /// `charge ? value : null`.
    fn charged(&mut self, charge: IdedExpr, value: IdedExpr) -> IdedExpr {
        let null = self.node(Expr::Literal(LiteralValue::Null));
        self.call("_?_:_", vec![charge, value, null])
    }

    fn is_variable(&self, name: &str) -> bool {
        self.variables.iter().any(|v| v == name)
    }

    fn is_accumulator(&self, name: &str) -> bool {
        self.accumulators.iter().any(|v| v == name)
    }

    /// `x.a.b` as (`x`, [`a`, `b`]) when `x` is a variable (not an accumulator) and every
    /// link is a plain selection.
    fn chain<'e>(&self, e: &'e IdedExpr) -> Option<(&'e str, Vec<&'e str>)> {
        match &e.expr {
            Expr::Ident(name) if self.is_variable(name) && !self.is_accumulator(name) => {
                Some((name.as_str(), Vec::new()))
            }
            Expr::Select(select) if !select.test => {
                let (root, mut fields) = self.chain(&select.operand)?;
                fields.push(select.field.as_str());
                Some((root, fields))
            }
            _ => None,
        }
    }

    fn reference(&mut self, root: &str, fields: &[&str], original: &IdedExpr) -> IdedExpr {
        let mut args = vec![self.string(root)];
        for field in fields {
            let field = self.string(field);
            args.push(field);
        }
        let charge = self.call(REFERENCE, args);
        self.charged(charge, original.clone())
    }

    fn rewrite(&mut self, e: &IdedExpr) -> IdedExpr {
        match &e.expr {
            Expr::Ident(_) | Expr::Select(SelectExpr { test: false, .. }) => {
                if let Some((root, fields)) = self.chain(e) {
                    // One copy of a small value needs no measuring.
                    if self.small.contains(&e.id) && fields.len() <= 1 {
                        return e.clone();
                    }
                    if fields.is_empty()
                        && let Some(names) = self.per_step.last_mut()
                    {
                        names.push(root.to_string());
                        return e.clone();
                    }
                    return self.reference(root, &fields, e);
                }
                let Expr::Select(select) = &e.expr else {
                    return e.clone();
                };
                let operand = self.rewrite(&select.operand);
                let rewritten = IdedExpr {
                    id: e.id,
                    expr: Expr::Select(SelectExpr {
                        operand: Box::new(operand),
                        field: select.field.clone(),
                        test: false,
                    }),
                };
                if self.small.contains(&e.id) {
                    rewritten
                } else {
                    self.call(MEASURE, vec![rewritten])
                }
            }
            Expr::Select(select) => {
                // `has(x.a.b)`: the operand is evaluated (and copied) unless it is a variable.
                let operand = match &select.operand.expr {
                    Expr::Ident(_) => (*select.operand).clone(),
                    _ => self.rewrite(&select.operand),
                };
                IdedExpr {
                    id: e.id,
                    expr: Expr::Select(SelectExpr {
                        operand: Box::new(operand),
                        field: select.field.clone(),
                        test: true,
                    }),
                }
            }
            Expr::Call(call) => self.rewrite_call(e.id, call),
            Expr::List(list) => IdedExpr {
                id: e.id,
                expr: Expr::List(ListExpr {
                    elements: list.elements.iter().map(|x| self.rewrite(x)).collect(),
                    optional_indices: list.optional_indices.clone(),
                }),
            },
            Expr::Map(map) => IdedExpr {
                id: e.id,
                expr: Expr::Map(MapExpr {
                    entries: map
                        .entries
                        .iter()
                        .map(|entry| IdedEntryExpr {
                            id: entry.id,
                            expr: match &entry.expr {
                                EntryExpr::MapEntry(m) => EntryExpr::MapEntry(MapEntryExpr {
                                    key: self.rewrite(&m.key),
                                    value: self.rewrite(&m.value),
                                    optional: m.optional,
                                }),
                                other => other.clone(),
                            },
                        })
                        .collect(),
                }),
            },
            Expr::Comprehension(c) => self.rewrite_comprehension(e.id, c),
            Expr::Literal(_) | Expr::Struct(_) | Expr::Unspecified => e.clone(),
        }
    }

    /// The target of `ns.f(...)` when `ns` names a namespace rather than a value.
    fn namespace<'e>(&self, call: &'e CallExpr) -> Option<&'e str> {
        match call.target.as_deref().map(|t| &t.expr) {
            Some(Expr::Ident(ns)) if !self.is_variable(ns) => Some(ns.as_str()),
            _ => None,
        }
    }

    fn rewrite_call(&mut self, id: u64, call: &CallExpr) -> IdedExpr {
        let namespace = self.namespace(call);
        let qualified = match namespace {
            Some(ns) => format!("{ns}.{}", call.func_name),
            None => call.func_name.clone(),
        };
        let Some(guarded) = Guarded::of(&qualified) else {
            let target = call.target.as_deref().map(|t| match namespace {
                Some(_) => t.clone(),
                None => self.rewrite(t),
            });
            return IdedExpr {
                id,
                expr: Expr::Call(CallExpr {
                    func_name: call.func_name.clone(),
                    target: target.map(Box::new),
                    args: call.args.iter().map(|a| self.rewrite(a)).collect(),
                }),
            };
        };
        let mut operands = Vec::with_capacity(call.args.len() + 1);
        if namespace.is_none()
            && let Some(target) = &call.target
        {
            operands.push(self.rewrite(target));
        }
        for arg in &call.args {
            operands.push(self.rewrite(arg));
        }
        let mut bound = (0..operands.len()).map(|i| Expr::Ident(operand_name(i)));
        let delegate_target = match (namespace, &call.target) {
            (Some(_), Some(target)) => Some(Box::new((**target).clone())),
            (None, Some(_)) => bound.next().map(|t| Box::new(self.node(t))),
            (_, None) => None,
        };
        let bound: Vec<Expr> = bound.collect();
        let delegate_args = bound.into_iter().map(|a| self.node(a)).collect();
        let delegate = self.node(Expr::Call(CallExpr {
            func_name: call.func_name.clone(),
            target: delegate_target,
            args: delegate_args,
        }));
        let code = self.int(guarded.code());
        let mut args = vec![code, delegate];
        args.extend(operands);
        let mut guard = self.call(GUARD, args);
        guard.id = id;
        guard
    }

    fn rewrite_comprehension(&mut self, id: u64, c: &ComprehensionExpr) -> IdedExpr {
        // Iterating a variable borrows it; its elements are charged as they are bound.
        let iter_range = match &c.iter_range.expr {
            Expr::Ident(name) if self.is_variable(name) => c.iter_range.clone(),
            _ => self.rewrite(&c.iter_range),
        };
        let accu_init = self.rewrite(&c.accu_init);
        self.variables.push(c.accu_var.clone());
        self.accumulators.push(c.accu_var.clone());
        self.variables.push(c.iter_var.clone());
        let mut per_step = self
            .units(&c.loop_cond)
            .saturating_add(self.units(&c.loop_step));
        self.per_step.push(Vec::new());
        let loop_cond = self.rewrite(&c.loop_cond);
        let step = self.rewrite(&c.loop_step);
        let mut measured = self.per_step.pop().unwrap_or_default();
        // Copies of the bound element and accumulator: counted as one unit each when they are
        // always small (`all`, `exists` accumulate a boolean), measured otherwise.
        if matches!(c.accu_init.expr, Expr::Literal(_)) {
            per_step = per_step.saturating_add(1);
        } else {
            measured.push(c.accu_var.clone());
        }
        if self.small_elements.contains(&id) {
            per_step = per_step.saturating_add(1);
        } else {
            measured.push(c.iter_var.clone());
        }
        let mut args = vec![self.int(i64::try_from(per_step).unwrap_or(i64::MAX))];
        for name in &measured {
            let name = self.string(name);
            args.push(name);
        }
        let charge = self.call(ITERATE, args);
        let loop_step = self.charged(charge, step);
        self.variables.pop();
        let result = self.rewrite(&c.result);
        self.variables.pop();
        self.accumulators.pop();
        IdedExpr {
            id,
            expr: Expr::Comprehension(Box::new(ComprehensionExpr {
                iter_range,
                iter_var: c.iter_var.clone(),
                iter_var2: c.iter_var2.clone(),
                accu_var: c.accu_var.clone(),
                accu_init,
                loop_cond,
                loop_step,
                result,
            })),
        }
    }

    /// cel-go's units for evaluating `e` once, without the steps of its comprehensions
    /// (charged as they run).
    fn units(&self, e: &IdedExpr) -> u64 {
        let mut total: u64 = 0;
        let mut pending = vec![e];
        while let Some(e) = pending.pop() {
            let own = match &e.expr {
                Expr::Literal(_) | Expr::Unspecified => 0,
                Expr::Ident(_) => 1,
                Expr::Select(select) => {
                    pending.push(&select.operand);
                    1
                }
                Expr::Call(call) => {
                    pending.extend(call.target.as_deref());
                    pending.extend(&call.args);
                    match call.func_name.as_str() {
                        "_&&_" | "_||_" | "_?_:_" => 0,
                        _ => 1,
                    }
                }
                Expr::List(list) => {
                    pending.extend(&list.elements);
                    10
                }
                Expr::Map(map) => {
                    for entry in &map.entries {
                        if let EntryExpr::MapEntry(entry) = &entry.expr {
                            pending.push(&entry.key);
                            pending.push(&entry.value);
                        }
                    }
                    30
                }
                Expr::Struct(_) => 40,
                Expr::Comprehension(c) => {
                    pending.extend([&c.iter_range, &c.accu_init, &c.result]);
                    0
                }
            };
            total = total.saturating_add(own);
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nothing_small() -> Estimate {
        Estimate {
            cost: 0,
            undefined_field: None,
            small: HashSet::new(),
            small_elements: HashSet::new(),
        }
    }

    fn rewritten(source: &str) -> String {
        let expression = super::super::syntax::parse(source).unwrap();
        format!("{:?}", instrument(&expression, &nothing_small()).expression)
    }

    #[test]
    fn loops_references_and_guarded_calls_are_charged() {
        let loops = rewritten("self.items.all(x, x > 0)");
        assert!(loops.contains(ITERATE), "{loops}");
        assert!(loops.contains(REFERENCE), "{loops}");
        let guarded = rewritten("self.s.replace('a', 'b') == ''");
        assert!(guarded.contains(GUARD), "{guarded}");
        let namespaced = rewritten("sets.contains(self.a, self.b)");
        assert!(namespaced.contains(GUARD), "{namespaced}");
    }

    #[test]
    fn base_units_leave_out_loop_steps() {
        let expression =
            super::super::syntax::parse("self.a.all(x, x > 0) && self.b == 1").unwrap();
        // self.a (2) + init 0 + result 1, then self.b (2) + 1 + == 1
        assert_eq!(
            instrument(&expression, &nothing_small()).base,
            2 + 1 + 2 + 1
        );
    }
}
