//! The worst-case cost of a rule, estimated when a CRD is written, in CEL's cost units and
//! modelled on cel-go's estimator with Kubernetes' size estimates ([`super::types`]):
//! selecting a field or naming a variable costs 1, a call 1 plus its arguments, a list
//! literal 10 and a map literal 30; a comprehension (`all`, `exists`, `exists_one`, `map`,
//! `filter`) costs its range plus, for every element the range can hold, its condition and
//! step, so nested comprehensions multiply; string functions cost a tenth of a unit per byte
//! they traverse (`matches` the product of the text's and the pattern's), list and set
//! functions by their sizes, comparisons by the smaller operand.
//!
//! This CEL has no type checker, so the estimate types what it can itself: `self`, `oldSelf`,
//! fields reached from them, comprehension variables, literals and the results of the
//! functions below; anything else is taken to be as large as a whole request. These types
//! serve sizes: they are not what cel-go's checker would say (`super::result_type` is).
//!
//! It also records which expressions are always small values (numbers, booleans, short
//! strings): the runtime meter (`super::meter`) does not need to measure those.

use std::collections::HashSet;

use kube_cel::cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, LiteralValue,
};

use super::types::{Kind, Ty};

/// Largest per-expression estimate a CRD may declare (Kubernetes' StaticEstimatedCostLimit).
pub(super) const STATIC_ESTIMATED_COST_LIMIT: u64 = 10_000_000;

/// Largest total of a CRD version's estimates (Kubernetes' StaticEstimatedCRDCostLimit).
pub(super) const STATIC_ESTIMATED_CRD_COST_LIMIT: u64 = 100_000_000;

/// Per byte of a string traversed.
const STRING_TRAVERSAL: f64 = 0.1;
/// Per byte of a regular expression, for its states.
const REGEX_LENGTH: f64 = 0.25;
const LIST_LITERAL: u64 = 10;
const MAP_LITERAL: u64 = 30;

/// The estimate of one expression, the ids of its sub-expressions known to be small values,
/// and of its comprehensions whose elements are.
#[derive(Default)]
pub(super) struct Estimate {
    pub(super) cost: u64,
    /// The first field selected from an object type that does not declare it, which cel-go's
    /// checker refuses (`undefined field '<name>'`).
    pub(super) undefined_field: Option<String>,
    pub(super) small: HashSet<u64>,
    pub(super) small_elements: HashSet<u64>,
}

/// Estimates `expression` evaluated with `self` (and `oldSelf`) of type `self_ty`.
pub(super) fn estimate(expression: &IdedExpr, self_ty: &Ty) -> Estimate {
    estimate_with(expression, self_ty, &[])
}

/// [`estimate`] where the variables `typed` also have known types (admission policies'
/// `object`, `oldObject`, `params`).
pub(super) fn estimate_with(expression: &IdedExpr, self_ty: &Ty, typed: &[(&str, Ty)]) -> Estimate {
    let mut estimator = Estimator {
        self_ty,
        typed,
        scopes: Vec::new(),
        small: HashSet::new(),
        small_elements: HashSet::new(),
        undefined_field: None,
    };
    let info = estimator.visit(expression);
    Estimate {
        cost: info.cost,
        undefined_field: estimator.undefined_field,
        small: estimator.small,
        small_elements: estimator.small_elements,
    }
}

/// `x * factor`, rounded up, saturating.
pub(super) fn scaled(x: u64, factor: f64) -> u64 {
    let product = (x as f64 * factor).ceil();
    if product >= u64::MAX as f64 {
        u64::MAX
    } else {
        product as u64
    }
}

/// What the estimate knows of an expression.
struct Info {
    cost: u64,
    ty: Ty,
}

impl Info {
    fn new(cost: u64, ty: Ty) -> Info {
        Info { cost, ty }
    }
}

struct Estimator<'a> {
    self_ty: &'a Ty,
    /// Other variables of known types.
    typed: &'a [(&'a str, Ty)],
    /// Comprehension variables, innermost last.
    scopes: Vec<(String, Ty)>,
    small: HashSet<u64>,
    small_elements: HashSet<u64>,
    undefined_field: Option<String>,
}

impl Estimator<'_> {
    fn visit(&mut self, e: &IdedExpr) -> Info {
        let info = match &e.expr {
            Expr::Literal(literal) => Info::new(0, literal_type(literal)),
            Expr::Ident(name) => Info::new(1, self.variable(name).unwrap_or_else(Ty::unknown)),
            Expr::Select(select) => {
                let operand = self.visit(&select.operand);
                if let Kind::Object(fields) = &operand.ty.kind
                    && !fields.contains_key(&select.field)
                    && self.undefined_field.is_none()
                {
                    self.undefined_field = Some(select.field.clone());
                }
                // A presence test (`has(...)`) costs nothing beyond its operand, as Kubernetes
                // configures CEL's estimator; a selection costs one.
                if select.test {
                    Info::new(operand.cost, Ty::scalar(Kind::Bool))
                } else {
                    let ty = field(&operand.ty, &select.field);
                    Info::new(operand.cost.saturating_add(1), ty)
                }
            }
            Expr::Call(call) => self.call(call),
            Expr::List(list) => {
                let mut cost = LIST_LITERAL;
                let mut item = None;
                for element in &list.elements {
                    let info = self.visit(element);
                    cost = cost.saturating_add(info.cost);
                    item.get_or_insert(info.ty);
                }
                let count = list.elements.len() as u64;
                Info::new(cost, Ty::list(item.unwrap_or_else(Ty::unknown), count))
            }
            Expr::Map(map) => {
                let mut cost = MAP_LITERAL;
                let mut value = None;
                for entry in &map.entries {
                    if let EntryExpr::MapEntry(entry) = &entry.expr {
                        cost = cost.saturating_add(self.visit(&entry.key).cost);
                        let info = self.visit(&entry.value);
                        cost = cost.saturating_add(info.cost);
                        value.get_or_insert(info.ty);
                    }
                }
                let count = map.entries.len() as u64;
                Info::new(cost, Ty::map(value.unwrap_or_else(Ty::unknown), count))
            }
            // Refused before estimating (see `super::syntax`).
            Expr::Struct(_) | Expr::Unspecified => Info::new(0, Ty::unknown()),
            Expr::Comprehension(comprehension) => {
                let (info, small_elements) = self.comprehension(comprehension);
                if small_elements {
                    self.small_elements.insert(e.id);
                }
                info
            }
        };
        if info.ty.is_small() {
            self.small.insert(e.id);
        }
        info
    }

    fn variable(&self, name: &str) -> Option<Ty> {
        if let Some((_, ty)) = self.scopes.iter().rev().find(|(n, _)| n == name) {
            return Some(ty.clone());
        }
        if let Some((_, ty)) = self.typed.iter().find(|(n, _)| *n == name) {
            return Some(ty.clone());
        }
        matches!(name, "self" | "oldSelf").then(|| self.self_ty.clone())
    }

    /// The comprehension's estimate, and whether its elements are small values.
    fn comprehension(&mut self, c: &ComprehensionExpr) -> (Info, bool) {
        let range = self.visit(&c.iter_range);
        let init = self.visit(&c.accu_init);
        let count = range.ty.size();
        let (item, small_elements) = match &range.ty.kind {
            Kind::List(item) => ((**item).clone(), item.is_small()),
            // Kubernetes sizes a map's keys by their declared type, a `string` with no maximum,
            // which its estimator takes as size 0: rules over keys cost what their maps' entry
            // counts make them. (At run time keys are metered as they are: not small.)
            Kind::Map(_) => (Ty::string(0), false),
            _ => (Ty::unknown(), false),
        };
        self.scopes.push((c.accu_var.clone(), init.ty.clone()));
        self.scopes.push((c.iter_var.clone(), item));
        let condition = self.visit(&c.loop_cond);
        let step = self.visit(&c.loop_step);
        self.scopes.pop();
        let result = self.visit(&c.result);
        self.scopes.pop();
        let per_element = condition.cost.saturating_add(step.cost);
        let cost = range
            .cost
            .saturating_add(init.cost)
            .saturating_add(result.cost)
            .saturating_add(count.saturating_mul(per_element));
        let ty = match &c.accu_init.expr {
            // `map` and `filter`: a list of at most one element per element of the range.
            Expr::List(_) => Ty::list(appended(&step.ty), count),
            Expr::Literal(_) => init.ty,
            _ => result.ty,
        };
        (Info::new(cost, ty), small_elements)
    }

    fn call(&mut self, call: &CallExpr) -> Info {
        let name = call.func_name.as_str();
        // `sets.contains(...)`: the target names a namespace, not a value.
        let namespace = match call.target.as_deref().map(|t| &t.expr) {
            Some(Expr::Ident(ns)) if self.variable(ns).is_none() => Some(ns.as_str()),
            _ => None,
        };
        let mut operands = Vec::with_capacity(call.args.len() + 1);
        if namespace.is_none()
            && let Some(target) = &call.target
        {
            operands.push(self.visit(target));
        }
        for arg in &call.args {
            operands.push(self.visit(arg));
        }
        let arguments: u64 = operands
            .iter()
            .fold(0u64, |sum, info| sum.saturating_add(info.cost));
        let size = |i: usize| operands.get(i).map_or(1, |o: &Info| o.ty.size());
        let ty_of = |i: usize| {
            operands
                .get(i)
                .map_or_else(Ty::unknown, |o: &Info| o.ty.clone())
        };
        let strings = |x: u64| scaled(x, STRING_TRAVERSAL);
        let qualified = match namespace {
            Some(ns) => format!("{ns}.{name}"),
            None => name.to_string(),
        };
        let bool_ty = || Ty::scalar(Kind::Bool);
        let int_ty = || Ty::scalar(Kind::Int);
        let (own, ty): (u64, Ty) = match qualified.as_str() {
            "_&&_" | "_||_" => (0, bool_ty()),
            "_?_:_" => {
                // The condition, then the dearer branch.
                let branches = operands
                    .get(1)
                    .map_or(0, |o| o.cost)
                    .max(operands.get(2).map_or(0, |o| o.cost));
                let cost = operands
                    .first()
                    .map_or(0, |o| o.cost)
                    .saturating_add(branches);
                let ty = larger(ty_of(1), ty_of(2));
                return Info::new(cost, ty);
            }
            "!_" | "-_" | "@not_strictly_false" => (1, ty_of(0)),
            "_==_" | "_!=_" | "_<_" | "_<=_" | "_>_" | "_>=_" => {
                (strings(size(0).min(size(1))), bool_ty())
            }
            "_+_" => match &operands.first().map(|o| &o.ty.kind) {
                Some(Kind::String | Kind::Bytes) => {
                    let total = size(0).saturating_add(size(1));
                    (
                        strings(total),
                        Ty {
                            max: total,
                            ..ty_of(0)
                        },
                    )
                }
                Some(Kind::List(item)) => {
                    let total = size(0).saturating_add(size(1));
                    // `[] + [x]` (how `map` builds its list) takes the right side's items.
                    let item = match (&item.kind, ty_of(1).element()) {
                        (Kind::Dyn, Some(right)) => right.clone(),
                        _ => (**item).clone(),
                    };
                    (1, Ty::list(item, total))
                }
                _ => (1, ty_of(0)),
            },
            "_-_" | "_*_" | "_/_" | "_%_" => (1, ty_of(0)),
            "@in" => match operands.get(1).map(|o| &o.ty.kind) {
                Some(Kind::Map(_) | Kind::Object(_)) => (1, bool_ty()),
                _ => (size(1), bool_ty()),
            },
            "_[_]" | "_[?_]" => (
                1,
                match &ty_of(0).kind {
                    Kind::List(item) | Kind::Map(item) => (**item).clone(),
                    _ => Ty::unknown(),
                },
            ),
            "size" => (1, int_ty()),
            "matches" | "find" | "findAll" => {
                let text = strings(size(0).saturating_add(1));
                let pattern = scaled(size(1), REGEX_LENGTH);
                let ty = match name {
                    "matches" => bool_ty(),
                    "find" => Ty::string(size(0)),
                    _ => Ty::list(Ty::string(size(0)), size(0)),
                };
                (text.saturating_mul(pattern), ty)
            }
            "contains" => match &ty_of(0).kind {
                Kind::String => (strings(size(0)).saturating_mul(strings(size(1))), bool_ty()),
                _ => (size(0), bool_ty()),
            },
            "startsWith" | "endsWith" => (strings(size(1)), bool_ty()),
            "indexOf" | "lastIndexOf" => match &ty_of(0).kind {
                Kind::String => (strings(size(0)).saturating_mul(strings(size(1))), int_ty()),
                _ => (size(0), int_ty()),
            },
            "lowerAscii" | "upperAscii" | "trim" | "charAt" | "substring" | "reverse" => {
                (strings(size(0)), Ty::string(size(0)))
            }
            "replace" => {
                // Worst case: every byte replaced by the replacement.
                let result = size(0)
                    .saturating_add(1)
                    .saturating_mul(size(2).max(1))
                    .saturating_add(size(0));
                (strings(size(0).saturating_add(result)), Ty::string(result))
            }
            "split" => (
                strings(size(0)),
                Ty::list(Ty::string(size(0)), size(0).saturating_add(1)),
            ),
            "join" => {
                let item = ty_of(0).element().map_or(1, Ty::size);
                let result = size(0).saturating_mul(item.saturating_add(size(1)));
                (strings(result), Ty::string(result))
            }
            "format" => {
                let result = size(0).saturating_add(size(1));
                (strings(result), Ty::string(result))
            }
            "strings.quote" | "base64.encode" | "base64.decode" => {
                let result = size(0).saturating_mul(2).saturating_add(2);
                (strings(result), Ty::string(result))
            }
            "isSorted" | "sum" | "min" | "max" | "slice" | "flatten" => {
                let item = ty_of(0).element().cloned().unwrap_or_else(Ty::unknown);
                let ty = match name {
                    "isSorted" => bool_ty(),
                    "sum" | "min" | "max" => item,
                    _ => ty_of(0),
                };
                (size(0).max(1), ty)
            }
            "sort" => {
                let n = size(0);
                let log = 64 - u64::from(n.leading_zeros());
                (n.saturating_mul(log.max(1)), ty_of(0))
            }
            "distinct" => (size(0).saturating_mul(size(0)).max(1), ty_of(0)),
            "sets.contains" | "sets.intersects" | "sets.equivalent" => {
                (size(0).saturating_mul(size(1)).max(1), bool_ty())
            }
            "lists.range" => {
                let n = match call.args.first().map(|a| &a.expr) {
                    Some(Expr::Literal(LiteralValue::Int(n))) => {
                        u64::try_from(*n.inner()).unwrap_or(0)
                    }
                    _ => super::types::MAX_REQUEST_BYTES,
                };
                (n.max(1), Ty::list(int_ty(), n))
            }
            "quantity" | "isQuantity" | "url" | "isURL" | "ip" | "isIP" | "cidr" | "isCIDR"
            | "semver" | "isSemver" => (strings(size(0)).max(1), Ty::dynamic(1)),
            "int" | "uint" => (1, int_ty()),
            "double" => (1, Ty::scalar(Kind::Double)),
            "duration" => (1, Ty::scalar(Kind::Duration)),
            "timestamp" => (1, Ty::scalar(Kind::Timestamp)),
            "string" => (strings(size(0)).max(1), Ty::string(size(0).max(20))),
            "dyn" | "value" | "orValue" => (1, ty_of(0)),
            "hasValue" => (1, bool_ty()),
            _ => (1, Ty::unknown()),
        };
        Info::new(own.saturating_add(arguments), ty)
    }
}

/// The element a `map` or `filter` step appends (`@result + [element]`), for the type of
/// the list it builds.
fn appended(step_ty: &Ty) -> Ty {
    step_ty.element().cloned().unwrap_or_else(Ty::unknown)
}

fn larger(a: Ty, b: Ty) -> Ty {
    if b.size() > a.size() { b } else { a }
}

fn literal_type(literal: &LiteralValue) -> Ty {
    match literal {
        LiteralValue::Boolean(_) => Ty::scalar(Kind::Bool),
        LiteralValue::Int(_) | LiteralValue::UInt(_) => Ty::scalar(Kind::Int),
        LiteralValue::Double(_) => Ty::scalar(Kind::Double),
        LiteralValue::String(s) => Ty::string(s.inner().len() as u64),
        LiteralValue::Bytes(b) => Ty {
            max: b.inner().len() as u64,
            ..Ty::scalar(Kind::Bytes)
        },
        LiteralValue::Null => Ty::scalar(Kind::Int),
    }
}

/// The type of `operand.name`.
fn field(operand: &Ty, name: &str) -> Ty {
    match &operand.kind {
        Kind::Object(fields) => fields.get(name).cloned().unwrap_or_else(Ty::unknown),
        Kind::Map(value) => (**value).clone(),
        _ => Ty::unknown(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn cost(rule: &str, schema: serde_json::Value) -> u64 {
        let ty = Ty::of(&schema, false).unwrap();
        let expression = super::super::syntax::parse(rule).unwrap();
        estimate(&expression, &ty).cost
    }

    fn items(max_items: Option<u64>, max_length: Option<u64>) -> serde_json::Value {
        let mut item = json!({"type": "string"});
        if let Some(n) = max_length {
            item["maxLength"] = json!(n);
        }
        let mut list = json!({"type": "array", "items": item});
        if let Some(n) = max_items {
            list["maxItems"] = json!(n);
        }
        json!({"type": "object", "properties": {"items": list}})
    }

    #[test]
    fn presence_tests_cost_only_their_operand() {
        let item = json!({"type": "object", "properties": {
            "a": {"type": "string"}, "b": {"type": "string"}}});
        // Kyverno's one-of rule: four tests of `self` (1 each) and two negations.
        let rule = "(has(self.a) && !has(self.b)) || (!has(self.a) && has(self.b))";
        assert_eq!(cost(rule, item), 6);
    }

    #[test]
    fn map_keys_count_as_kubernetes_sizes_them() {
        // Gateway API's annotation-key rule: 16 keys, each split, as Kubernetes estimates it.
        let annotations = json!({
            "type": "object",
            "maxProperties": 16,
            "additionalProperties": {"type": "string", "maxLength": 4096},
        });
        let rule = r#"self.all(key, key.split("/")[0].size() < 253)"#;
        assert!(cost(rule, annotations) < 1_000);
    }

    #[test]
    fn comprehensions_multiply_by_their_range() {
        let one = cost("self.items.all(x, x == 'a')", items(Some(10), Some(5)));
        // range (2) + result (1) + 10 × (condition 2 + step: @result 1 + x 1 + == 1)
        assert_eq!(one, 2 + 1 + 10 * 5);
        let nested = cost(
            "self.items.all(x, self.items.all(y, x == y))",
            items(Some(10), Some(5)),
        );
        // per outer element: condition 2, @result 1, then the inner comprehension
        // (comparing two strings of at most 20 bytes costs 2)
        assert_eq!(
            nested,
            2 + 1 + 10 * (2 + 1 + (2 + 1 + 10 * (2 + 1 + 1 + 1 + 2)))
        );
        let unbounded = cost(
            "self.items.all(x, self.items.all(y, x == y))",
            items(None, None),
        );
        assert!(unbounded > 100 * STATIC_ESTIMATED_COST_LIMIT, "{unbounded}");
    }

    #[test]
    fn string_functions_cost_by_length() {
        let schema = json!({"type": "object", "properties": {
            "s": {"type": "string", "maxLength": 100},
            "t": {"type": "string"},
        }});
        // (0.1 × (400 + 1)) × (0.25 × 4) + selections
        assert_eq!(cost("self.s.matches('^a.*')", schema.clone()), 41 + 2);
        assert_eq!(cost("self.s.size() < 10", schema.clone()), 4);
        assert!(cost("self.t.contains(self.t)", schema) > STATIC_ESTIMATED_COST_LIMIT);
    }

    #[test]
    fn small_expressions_are_recorded() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer"},
            "s": {"type": "string"},
        }});
        let ty = Ty::of(&schema, false).unwrap();
        let expression = super::super::syntax::parse("self.n > 0 && self.s != ''").unwrap();
        let estimate = estimate(&expression, &ty);
        let Expr::Call(and) = &expression.expr else {
            panic!()
        };
        let Expr::Call(greater) = &and.args[0].expr else {
            panic!()
        };
        let Expr::Call(differs) = &and.args[1].expr else {
            panic!()
        };
        assert!(estimate.small.contains(&greater.args[0].id));
        assert!(!estimate.small.contains(&differs.args[0].id));
    }
}
