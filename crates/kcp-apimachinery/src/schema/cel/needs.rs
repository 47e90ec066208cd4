//! Which parts of `self` (and `oldSelf`) a node's rules can reach, so that only those are
//! handed to CEL: a rule `self.spec.replicas <= 10` on the root needs `spec.replicas`, not
//! the whole object. A variable used in any other way (`self == oldSelf`, `size(self)`,
//! `self.?spec`) needs everything.

use std::collections::BTreeMap;

use kube_cel::cel::common::ast::{EntryExpr, Expr, IdedExpr};

/// The part of a value some expressions reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Need {
    /// Nothing (the variable is not used).
    Nothing,
    /// Only these fields (by their CEL names), each to the depth given.
    Fields(BTreeMap<String, Need>),
    Everything,
}

impl Need {
    fn add_path(&mut self, path: &[&str]) {
        let Some((first, rest)) = path.split_first() else {
            *self = Need::Everything;
            return;
        };
        match self {
            Need::Everything => {}
            Need::Nothing => {
                let mut below = Need::Nothing;
                below.add_path(rest);
                *self = Need::Fields(BTreeMap::from([(first.to_string(), below)]));
            }
            Need::Fields(fields) => fields
                .entry(first.to_string())
                .or_insert(Need::Nothing)
                .add_path(rest),
        }
    }

    /// Adds what `expression` reaches of `variable`.
    pub(super) fn add_uses(&mut self, expression: &IdedExpr, variable: &str) {
        if matches!(self, Need::Everything) {
            return;
        }
        match &expression.expr {
            Expr::Ident(name) if name == variable => *self = Need::Everything,
            Expr::Select(_) => match select_path(expression, variable) {
                Some(mut path) => {
                    path.reverse();
                    self.add_path(&path);
                }
                None => {
                    if let Expr::Select(select) = &expression.expr {
                        self.add_uses(&select.operand, variable);
                    }
                }
            },
            Expr::Call(call) => {
                if let Some(target) = &call.target {
                    self.add_uses(target, variable);
                }
                for arg in &call.args {
                    self.add_uses(arg, variable);
                }
            }
            Expr::Comprehension(comprehension) => {
                if comprehension.iter_var == variable
                    || comprehension.accu_var == variable
                    || comprehension.iter_var2.as_deref() == Some(variable)
                {
                    *self = Need::Everything;
                    return;
                }
                for part in [
                    &comprehension.iter_range,
                    &comprehension.accu_init,
                    &comprehension.loop_cond,
                    &comprehension.loop_step,
                    &comprehension.result,
                ] {
                    self.add_uses(part, variable);
                }
            }
            Expr::List(list) => {
                for element in &list.elements {
                    self.add_uses(element, variable);
                }
            }
            Expr::Map(map) => {
                for entry in &map.entries {
                    self.add_entry_uses(&entry.expr, variable);
                }
            }
            Expr::Struct(structure) => {
                for entry in &structure.entries {
                    self.add_entry_uses(&entry.expr, variable);
                }
            }
            Expr::Literal(_) | Expr::Ident(_) | Expr::Unspecified => {}
        }
    }

    fn add_entry_uses(&mut self, entry: &EntryExpr, variable: &str) {
        match entry {
            EntryExpr::StructField(field) => self.add_uses(&field.value, variable),
            EntryExpr::MapEntry(map_entry) => {
                self.add_uses(&map_entry.key, variable);
                self.add_uses(&map_entry.value, variable);
            }
        }
    }
}

/// `variable.a.b.c` as `[c, b, a]`; `None` when the chain does not start at `variable`.
fn select_path<'e>(expression: &'e IdedExpr, variable: &str) -> Option<Vec<&'e str>> {
    match &expression.expr {
        Expr::Ident(name) if name == variable => Some(Vec::new()),
        Expr::Select(select) => {
            let mut path = select_path(&select.operand, variable)?;
            path.insert(0, select.field.as_str());
            Some(path)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use kube_cel::cel::Program;

    use super::*;

    fn need(sources: &[&str], variable: &str) -> Need {
        let mut need = Need::Nothing;
        for source in sources {
            let program = Program::compile(source).unwrap();
            need.add_uses(program.expression(), variable);
        }
        need
    }

    fn fields(entries: &[(&str, Need)]) -> Need {
        Need::Fields(
            entries
                .iter()
                .map(|(k, v)| (k.to_string(), v.clone()))
                .collect(),
        )
    }

    #[test]
    fn field_chains_need_only_their_fields() {
        assert_eq!(
            need(&["self.spec.a < self.spec.b", "has(self.status)"], "self"),
            fields(&[
                (
                    "spec",
                    fields(&[("a", Need::Everything), ("b", Need::Everything)])
                ),
                ("status", Need::Everything),
            ])
        );
        assert_eq!(
            need(&["self.spec.items.all(i, i.x > 0)"], "self"),
            fields(&[("spec", fields(&[("items", Need::Everything)]))])
        );
        assert_eq!(need(&["self.a == 1"], "oldSelf"), Need::Nothing);
    }

    #[test]
    fn other_uses_need_everything() {
        assert_eq!(
            need(&["self.a == 1", "self == oldSelf"], "self"),
            Need::Everything
        );
        assert_eq!(need(&["size(self) > 1"], "self"), Need::Everything);
        assert_eq!(
            need(&["self.exists(k, k == 'a')"], "self"),
            Need::Everything
        );
    }
}
