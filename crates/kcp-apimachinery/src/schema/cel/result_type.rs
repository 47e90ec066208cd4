//! What a rule or `messageExpression` evaluates to, as far as it is certain, for the check
//! kube-apiserver makes when a CRD is written: a rule must be of type `bool`, a message
//! expression of type `string`, as cel-go's checker types them.
//!
//! This CEL has no type checker and the cost estimate's types ([`super::estimate`]) are
//! sizes more than types (`exists_one` is taken for an `int`, `dyn(x)` for the type of `x`,
//! `null` for an `int`, the larger branch of a conditional for both), so the result type is
//! worked out here, and only where the checker's answer is certain: `self` and `oldSelf` from
//! the schema (`oldSelf` optional with `optionalOldSelf`), literals, field selections and
//! indexes, operators, comprehensions (`all`, `exists`, `exists_one`, `map`, `filter`),
//! conversions, optionals, and the functions of CEL's and Kubernetes' libraries whose every
//! overload returns one type. Anything else is [`Type::Dyn`] and passes: an unknown function,
//! a function whose result depends on argument types not known here, a conditional whose
//! branches differ, and `dyn` itself (cel-go's checker types such expressions `dyn`, which
//! kube-apiserver refuses as well; they are let through here, where `dyn` and "not known"
//! cannot be told apart).
//!
//! [`Type::Other`] stands for a value that is certainly neither a `bool` nor a `string`
//! without its exact type being known (a number of a `dyn` operand, a quantity, a URL): every
//! overload that can produce it returns something else than `bool` and `string`, so the
//! checker types it so or `dyn`, both refused.

use std::collections::BTreeMap;

use kube_cel::cel::common::ast::{
    CallExpr, ComprehensionExpr, EntryExpr, Expr, IdedExpr, ListExpr, LiteralValue, MapExpr,
};

use super::types::{Kind, Ty};

/// The type of an expression as cel-go's checker would give it, where it is certain.
#[derive(Debug, Clone)]
pub(super) enum Type<'a> {
    Bool,
    Int,
    Uint,
    Double,
    String,
    Bytes,
    Duration,
    Timestamp,
    Null,
    List(Box<Type<'a>>),
    /// Key and value types.
    Map(Box<Type<'a>>, Box<Type<'a>>),
    /// An object of the schema, by its declared (escaped) fields.
    Object(&'a BTreeMap<String, Ty>),
    Optional(Box<Type<'a>>),
    /// Certainly neither a `bool` nor a `string`, though the exact type is not known.
    Other,
    /// The element of an empty list or map literal, or of `optional.none()`: the type it is
    /// joined with.
    Free,
    /// `dyn`, or what is not known here.
    Dyn,
}

impl<'a> Type<'a> {
    /// What CEL sees of a schema value of type `ty`.
    fn of_schema(ty: &'a Ty) -> Type<'a> {
        match &ty.kind {
            Kind::Bool => Type::Bool,
            Kind::Int => Type::Int,
            Kind::Double => Type::Double,
            Kind::String => Type::String,
            Kind::Bytes => Type::Bytes,
            Kind::Duration => Type::Duration,
            Kind::Timestamp => Type::Timestamp,
            Kind::List(item) => Type::List(Box::new(Type::of_schema(item))),
            Kind::Map(value) => Type::Map(Box::new(Type::String), Box::new(Type::of_schema(value))),
            Kind::Object(fields) => Type::Object(fields),
            Kind::Dyn => Type::Dyn,
        }
    }

    /// Whether the checker may type the expression `wanted` (a `Bool` or a `String`): it
    /// does, or its type is not known here.
    pub(super) fn may_be(&self, wanted: &Type<'_>) -> bool {
        matches!(self, Type::Dyn | Type::Free) || self.same_as(wanted)
    }

    /// Equality of types, objects by the fields they declare.
    fn same_as(&self, other: &Type<'_>) -> bool {
        match (self, other) {
            (Type::List(a), Type::List(b)) | (Type::Optional(a), Type::Optional(b)) => a.same_as(b),
            (Type::Map(ka, va), Type::Map(kb, vb)) => ka.same_as(kb) && va.same_as(vb),
            (Type::Object(a), Type::Object(b)) => a == b,
            _ => std::mem::discriminant(self) == std::mem::discriminant(other),
        }
    }

    /// Whether the type is not known at all: `dyn`, or `Other` as an operand (it may be
    /// `dyn` to the checker).
    fn unknown(&self) -> bool {
        matches!(self, Type::Dyn | Type::Other | Type::Free)
    }

    /// An element taken out of a container: an unbound element is not known.
    fn taken(self) -> Type<'a> {
        match self {
            Type::Free => Type::Dyn,
            ty => ty,
        }
    }
}

/// The common type of two values (list elements, conditional branches, an optional and its
/// default): the same type, or a container of joined elements; `Dyn` when they differ or one
/// of them is not known.
fn join<'a>(a: Type<'a>, b: Type<'a>) -> Type<'a> {
    match (a, b) {
        (Type::Free, ty) | (ty, Type::Free) => ty,
        (Type::List(a), Type::List(b)) => Type::List(Box::new(join(*a, *b))),
        (Type::Optional(a), Type::Optional(b)) => Type::Optional(Box::new(join(*a, *b))),
        (Type::Map(ka, va), Type::Map(kb, vb)) => {
            Type::Map(Box::new(join(*ka, *kb)), Box::new(join(*va, *vb)))
        }
        (a, b) if !a.unknown() && a.same_as(&b) => a,
        _ => Type::Dyn,
    }
}

/// The type `expression` evaluates to with `self` of type `self_ty`, and `oldSelf` of the
/// same type, or an optional of it when `optional_old_self`.
pub(super) fn result_type<'a>(
    expression: &IdedExpr,
    self_ty: &'a Ty,
    optional_old_self: bool,
) -> Type<'a> {
    let mut typer = Typer {
        self_ty,
        optional_old_self,
        scopes: Vec::new(),
    };
    typer.visit(expression)
}

struct Typer<'a> {
    self_ty: &'a Ty,
    optional_old_self: bool,
    /// Comprehension variables, innermost last.
    scopes: Vec<(String, Type<'a>)>,
}

impl<'a> Typer<'a> {
    fn visit(&mut self, e: &IdedExpr) -> Type<'a> {
        match &e.expr {
            Expr::Literal(literal) => literal_type(literal),
            Expr::Ident(name) => self.variable(name).unwrap_or(Type::Dyn),
            Expr::Select(select) if select.test => Type::Bool,
            Expr::Select(select) => {
                let operand = self.visit(&select.operand);
                select_field(operand, &select.field)
            }
            Expr::Call(call) => self.call(call),
            Expr::List(list) => self.list(list),
            Expr::Map(map) => self.map(map),
            Expr::Comprehension(comprehension) => self.comprehension(comprehension),
            Expr::Struct(_) | Expr::Unspecified => Type::Dyn,
        }
    }

    fn variable(&self, name: &str) -> Option<Type<'a>> {
        if let Some((_, ty)) = self.scopes.iter().rev().find(|(n, _)| n == name) {
            return Some(ty.clone());
        }
        let self_type = || Type::of_schema(self.self_ty);
        match name {
            "self" => Some(self_type()),
            "oldSelf" if self.optional_old_self => Some(Type::Optional(Box::new(self_type()))),
            "oldSelf" => Some(self_type()),
            _ => None,
        }
    }

    fn list(&mut self, list: &ListExpr) -> Type<'a> {
        let mut element = Type::Free;
        for (i, item) in list.elements.iter().enumerate() {
            let mut ty = self.visit(item);
            // `[?x]`: the value of an optional, if any.
            if list.optional_indices.contains(&i) {
                ty = match ty {
                    Type::Optional(inner) => inner.taken(),
                    _ => Type::Dyn,
                };
            }
            element = join(element, ty);
        }
        Type::List(Box::new(element))
    }

    fn map(&mut self, map: &MapExpr) -> Type<'a> {
        let (mut key, mut value) = (Type::Free, Type::Free);
        for entry in &map.entries {
            let EntryExpr::MapEntry(entry) = &entry.expr else {
                return Type::Dyn;
            };
            key = join(key, self.visit(&entry.key));
            let ty = self.visit(&entry.value);
            // `{?k: v}`: the value of an optional, if any.
            value = join(
                value,
                match ty {
                    Type::Optional(inner) if entry.optional => inner.taken(),
                    _ if entry.optional => Type::Dyn,
                    ty => ty,
                },
            );
        }
        Type::Map(Box::new(key), Box::new(value))
    }

    /// A comprehension's result, with its accumulator typed by its initial value, or by what
    /// the step makes of it when that value is an empty list (`map` and `filter`).
    fn comprehension(&mut self, c: &ComprehensionExpr) -> Type<'a> {
        let range = self.visit(&c.iter_range);
        let element = match (&range, &c.iter_var2) {
            (Type::List(item), None) => (**item).clone().taken(),
            (Type::Map(key, _), None) => (**key).clone().taken(),
            _ => Type::Dyn,
        };
        let mut accumulator = self.visit(&c.accu_init);
        let depth = self.scopes.len();
        self.scopes.push((c.accu_var.clone(), accumulator.clone()));
        self.scopes.push((c.iter_var.clone(), element));
        if let Some(second) = &c.iter_var2 {
            self.scopes.push((second.clone(), Type::Dyn));
        }
        let step = self.visit(&c.loop_step);
        self.scopes.truncate(depth);
        if has_free(&accumulator) {
            accumulator = join(accumulator, step);
        }
        self.scopes.push((c.accu_var.clone(), accumulator));
        let result = self.visit(&c.result);
        self.scopes.truncate(depth);
        result
    }

    fn call(&mut self, call: &CallExpr) -> Type<'a> {
        let name = call.func_name.as_str();
        // `sets.contains(...)`: the target names a namespace, not a value.
        let namespace = match call.target.as_deref().map(|t| &t.expr) {
            Some(Expr::Ident(ns)) if self.variable(ns).is_none() => Some(ns.as_str()),
            _ => None,
        };
        let target = match (&call.target, namespace) {
            (Some(target), None) => Some(self.visit(target)),
            _ => None,
        };
        // `a.?field`: the field is a string literal.
        if name == "_?._"
            && let [operand, field] = call.args.as_slice()
            && let Expr::Literal(LiteralValue::String(field)) = &field.expr
        {
            let operand = self.visit(operand);
            return optional_select(operand, field.inner());
        }
        let args: Vec<Type<'a>> = call.args.iter().map(|a| self.visit(a)).collect();
        match (namespace, target) {
            (Some(ns), _) => namespaced(ns, name, args),
            (None, None) => global(name, args),
            (None, Some(receiver)) => method(receiver, name, args),
        }
    }
}

/// Whether a type still has an unbound element (an empty literal's).
fn has_free(ty: &Type<'_>) -> bool {
    match ty {
        Type::Free => true,
        Type::List(inner) | Type::Optional(inner) => has_free(inner),
        Type::Map(key, value) => has_free(key) || has_free(value),
        _ => false,
    }
}

fn literal_type<'a>(literal: &LiteralValue) -> Type<'a> {
    match literal {
        LiteralValue::Boolean(_) => Type::Bool,
        LiteralValue::Int(_) => Type::Int,
        LiteralValue::UInt(_) => Type::Uint,
        LiteralValue::Double(_) => Type::Double,
        LiteralValue::String(_) => Type::String,
        LiteralValue::Bytes(_) => Type::Bytes,
        LiteralValue::Null => Type::Null,
    }
}

/// `operand.field`: a declared field, a map value, or either of an optional (optional
/// chaining).
fn select_field<'a>(operand: Type<'a>, field: &str) -> Type<'a> {
    match operand {
        Type::Object(fields) => fields.get(field).map_or(Type::Dyn, Type::of_schema),
        Type::Map(_, value) => value.taken(),
        Type::Optional(inner) => Type::Optional(Box::new(select_field(*inner, field))),
        _ => Type::Dyn,
    }
}

/// `operand[index]`: a list item, a map value, or either of an optional.
fn index<'a>(operand: Type<'a>) -> Type<'a> {
    match operand {
        Type::List(item) => item.taken(),
        Type::Map(_, value) => value.taken(),
        Type::Optional(inner) => Type::Optional(Box::new(index(*inner))),
        _ => Type::Dyn,
    }
}

/// `operand.?field`: an optional of a declared field or a map value (of an optional operand
/// too: optionals do not nest).
fn optional_select<'a>(operand: Type<'a>, field: &str) -> Type<'a> {
    let operand = match operand {
        Type::Optional(inner) => *inner,
        ty => ty,
    };
    match operand {
        Type::Object(fields) if fields.contains_key(field) => {
            Type::Optional(Box::new(select_field(operand, field)))
        }
        Type::Map(..) => Type::Optional(Box::new(select_field(operand, field))),
        _ => Type::Dyn,
    }
}

/// `operand[?index]`: an optional of a list item or a map value.
fn optional_index(operand: Type<'_>) -> Type<'_> {
    let operand = match operand {
        Type::Optional(inner) => *inner,
        ty => ty,
    };
    match operand {
        Type::List(_) | Type::Map(..) => Type::Optional(Box::new(index(operand))),
        _ => Type::Dyn,
    }
}

/// Operators and global functions.
fn global<'a>(name: &str, args: Vec<Type<'a>>) -> Type<'a> {
    let mut args = args.into_iter();
    let mut next = || args.next().unwrap_or(Type::Dyn);
    match name {
        "_&&_"
        | "_||_"
        | "!_"
        | "@not_strictly_false"
        | "_==_"
        | "_!=_"
        | "_<_"
        | "_<=_"
        | "_>_"
        | "_>=_"
        | "@in"
        | "matches"
        | "bool"
        | "isQuantity"
        | "isURL"
        | "isIP"
        | "isCIDR"
        | "isSemver" => Type::Bool,
        "_?_:_" => {
            let _condition = next();
            join(next(), next())
        }
        "_+_" => add(next(), next()),
        "_-_" => subtract(next(), next()),
        "_*_" | "_/_" | "_%_" => arithmetic(next(), next(), numeric),
        "-_" => {
            let operand = next();
            arithmetic(operand.clone(), operand, numeric)
        }
        "_[_]" => index(next()),
        "_[?_]" => optional_index(next()),
        "size" => Type::Int,
        "int" => Type::Int,
        "uint" => Type::Uint,
        "double" => Type::Double,
        "string" => Type::String,
        "bytes" => Type::Bytes,
        "duration" => Type::Duration,
        "timestamp" => Type::Timestamp,
        "type" | "quantity" | "url" | "ip" | "cidr" | "semver" => Type::Other,
        _ => Type::Dyn,
    }
}

/// Functions called as `namespace.name(...)`.
fn namespaced<'a>(namespace: &str, name: &str, args: Vec<Type<'a>>) -> Type<'a> {
    match (namespace, name) {
        ("sets", "contains" | "intersects" | "equivalent") | ("ip", "isCanonical") => Type::Bool,
        ("strings", "quote") => Type::String,
        ("lists", "range") => Type::List(Box::new(Type::Int)),
        ("optional", "of" | "ofNonZeroValue") => {
            Type::Optional(Box::new(args.into_iter().next().unwrap_or(Type::Dyn)))
        }
        ("optional", "none") => Type::Optional(Box::new(Type::Free)),
        _ => Type::Dyn,
    }
}

/// Functions called on a value: `receiver.name(argument, ...)`.
fn method<'a>(receiver: Type<'a>, name: &str, args: Vec<Type<'a>>) -> Type<'a> {
    let argument = || args.first().cloned().unwrap_or(Type::Dyn);
    match name {
        "matches"
        | "startsWith"
        | "endsWith"
        | "contains"
        | "isSorted"
        | "hasValue"
        | "isInteger"
        | "isGreaterThan"
        | "isLessThan"
        | "containsIP"
        | "containsCIDR"
        | "isUnspecified"
        | "isLoopback"
        | "isLinkLocalMulticast"
        | "isLinkLocalUnicast"
        | "isGlobalUnicast" => Type::Bool,
        "size" | "indexOf" | "lastIndexOf" | "asInteger" | "sign" | "compareTo" | "family"
        | "prefixLength" | "major" | "minor" | "patch" | "getFullYear" | "getMonth"
        | "getDayOfYear" | "getDayOfMonth" | "getDate" | "getDayOfWeek" | "getHours"
        | "getMinutes" | "getSeconds" | "getMilliseconds" => Type::Int,
        "asApproximateFloat" => Type::Double,
        "lowerAscii" | "upperAscii" | "trim" | "charAt" | "substring" | "replace" | "join"
        | "format" | "find" | "getScheme" | "getHost" | "getHostname" | "getPort"
        | "getEscapedPath" => Type::String,
        "split" | "findAll" => Type::List(Box::new(Type::String)),
        "getQuery" => Type::Map(
            Box::new(Type::String),
            Box::new(Type::List(Box::new(Type::String))),
        ),
        "add" | "sub" | "ip" | "masked" => Type::Other,
        "reverse" => match receiver {
            ty @ (Type::String | Type::List(_)) => ty,
            _ => Type::Dyn,
        },
        "sort" | "slice" | "distinct" => match receiver {
            ty @ Type::List(_) => ty,
            _ => Type::Dyn,
        },
        "flatten" => match receiver {
            Type::List(_) => Type::List(Box::new(Type::Dyn)),
            _ => Type::Dyn,
        },
        "sum" | "min" | "max" => match receiver {
            Type::List(item) => item.taken(),
            _ => Type::Dyn,
        },
        "value" => match receiver {
            Type::Optional(inner) => inner.taken(),
            _ => Type::Dyn,
        },
        "orValue" => match receiver {
            Type::Optional(inner) => join(*inner, argument()).taken(),
            _ => Type::Dyn,
        },
        "or" => match (receiver, argument()) {
            (Type::Optional(a), Type::Optional(b)) => Type::Optional(Box::new(join(*a, *b))),
            _ => Type::Dyn,
        },
        _ => Type::Dyn,
    }
}

/// `a + b`: numbers, strings, bytes, lists, and durations added to durations or timestamps.
/// With one operand not known, the other decides which overload applies.
fn add<'a>(a: Type<'a>, b: Type<'a>) -> Type<'a> {
    match (a, b) {
        (Type::List(a), Type::List(b)) => Type::List(Box::new(join(*a, *b))),
        (Type::Duration, Type::Duration) => Type::Duration,
        (Type::Timestamp, Type::Duration) | (Type::Duration, Type::Timestamp) => Type::Timestamp,
        (known, other) | (other, known) if other.unknown() && !known.unknown() => match known {
            Type::Int | Type::Uint | Type::Double | Type::String | Type::Bytes => known,
            Type::List(_) => Type::List(Box::new(Type::Dyn)),
            Type::Duration | Type::Timestamp => Type::Other,
            _ => Type::Dyn,
        },
        (a, b)
            if matches!(
                a,
                Type::Int | Type::Uint | Type::Double | Type::String | Type::Bytes
            ) && a.same_as(&b) =>
        {
            a
        }
        _ => Type::Dyn,
    }
}

/// `a - b`: numbers, and durations and timestamps.
fn subtract<'a>(a: Type<'a>, b: Type<'a>) -> Type<'a> {
    match (&a, &b) {
        (Type::Timestamp, Type::Timestamp) | (Type::Duration, Type::Duration) => Type::Duration,
        (Type::Timestamp, Type::Duration) => Type::Timestamp,
        _ => arithmetic(a, b, |ty| {
            numeric(ty) || matches!(ty, Type::Duration | Type::Timestamp)
        }),
    }
}

/// An arithmetic operator on operands its overloads take (`fits`): the operands' type when
/// both are known and the same; some number (or time) when one is not known, which no overload
/// turns into a `bool` or a `string`. Operands of types it does not take make an expression the
/// checker refuses for another reason: not known here.
fn arithmetic<'a>(a: Type<'a>, b: Type<'a>, fits: fn(&Type<'_>) -> bool) -> Type<'a> {
    let usable = |ty: &Type<'_>| ty.unknown() || fits(ty);
    if !usable(&a) || !usable(&b) {
        return Type::Dyn;
    }
    match (a.unknown(), b.unknown()) {
        (false, false) if a.same_as(&b) => a,
        (false, false) => Type::Dyn,
        _ => Type::Other,
    }
}

fn numeric(ty: &Type<'_>) -> bool {
    matches!(ty, Type::Int | Type::Uint | Type::Double)
}

#[cfg(test)]
mod tests {
    use kube_cel::cel::parser::Parser;
    use serde_json::json;

    use super::*;

    fn schema() -> Ty {
        Ty::of(
            &json!({"type": "object", "properties": {
                "replicas": {"type": "integer"},
                "name": {"type": "string"},
                "opt": {"type": "string"},
                "items": {"type": "array", "items": {"type": "string"}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "ios": {"x-kubernetes-int-or-string": true},
            }}),
            false,
        )
        .unwrap()
    }

    /// The type of `source`, parsed with optional syntax (which cel-go accepts and this
    /// parser may not), `oldSelf` optional when `optional_old_self`.
    fn typed(source: &str, optional_old_self: bool) -> String {
        let expression = Parser::new()
            .enable_optional_syntax(true)
            .parse(source)
            .unwrap();
        let ty = schema();
        let result = result_type(&expression, &ty, optional_old_self);
        match result {
            Type::Object(_) => "Object".to_string(),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn operators_and_functions() {
        for (source, expected) in [
            ("self.replicas + 1", "Int"),
            ("self.replicas * 2", "Int"),
            ("size(self.items)", "Int"),
            ("self.name == 'x'", "Bool"),
            ("'x must be ' + string(self.replicas)", "String"),
            ("self.items.exists_one(x, x == 'a')", "Bool"),
            ("self.items.map(x, size(x))", "List(Int)"),
            ("self.items.filter(x, x != '')[0]", "String"),
            ("self.labels.map(k, k)[0]", "String"),
            ("self.replicas > 1 ? 'big' : 'small'", "String"),
            ("self.replicas > 1 ? 'big' : 1", "Dyn"),
            ("dyn(self.replicas)", "Dyn"),
            ("dyn(self.replicas) * 2", "Other"),
            ("dyn(self.replicas) + 1", "Int"),
            ("1 + dyn(self.replicas)", "Int"),
            ("[1] + dyn([2])", "List(Dyn)"),
            ("self.items.reverse()", "List(String)"),
            ("self.labels.a", "String"),
            ("has(self.name)", "Bool"),
            ("self.items.all(self, self == 'a')", "Bool"),
            ("self.items.map(self, self)[0]", "String"),
            ("dyn(self.replicas) + 'a'", "String"),
            ("self.ios + 1", "Int"),
            ("-dyn(1) + 'a'", "String"),
            (
                "timestamp('2020-01-01T00:00:00Z') - timestamp('2020-01-01T00:00:00Z')",
                "Duration",
            ),
            ("null", "Null"),
            ("[[], ['a']][1][0]", "String"),
            ("self.unknownFunction()", "Dyn"),
            ("quantity('1')", "Other"),
            ("isQuantity('1')", "Bool"),
        ] {
            assert_eq!(typed(source, false), expected, "{source}");
        }
    }

    #[test]
    fn optionals() {
        for (source, optional_old_self, expected) in [
            ("self.?labels.a.orValue('d')", false, "String"),
            ("self.labels[?'a'].orValue('d')", false, "String"),
            ("self.labels[?'a']", false, "Optional(String)"),
            ("self.items[?0].orValue(1)", false, "Dyn"),
            ("optional.none().orValue('d')", false, "String"),
            ("optional.of('a').value()", false, "String"),
            ("oldSelf.name", false, "String"),
            ("oldSelf.name", true, "Optional(String)"),
            ("oldSelf.hasValue()", true, "Bool"),
            ("oldSelf.value().name", true, "String"),
        ] {
            assert_eq!(typed(source, optional_old_self), expected, "{source}");
        }
    }
}
