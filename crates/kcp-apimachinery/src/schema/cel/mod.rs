//! CEL validation rules of custom resources (`x-kubernetes-validations`), on the kube-cel
//! crate's CEL (with Kubernetes' CEL libraries) and our own schema walk, with
//! kube-apiserver's paths and messages.
//!
//! [`CelValidator::compile`] checks and compiles every rule of a CRD version's schema once;
//! [`CelValidator::check`] adds what CRD validation also refuses: rules whose estimated cost
//! (`estimate`, from the schema's `maxItems`, `maxProperties` and `maxLength`, as Kubernetes
//! estimates it) exceeds Kubernetes' per-expression limit, and schemas whose rules together
//! exceed the per-CRD limit. Rule texts are parsed within Kubernetes' size and recursion
//! limits (`syntax`), on a thread of their own with a stack those limits fit in.
//!
//! [`CelValidator::validate`] evaluates the rules against each written object: rules run on
//! every non-null value their node matches (properties, list items, map values, `allOf`
//! branches), transition rules (those naming `oldSelf`) only where the old object has a value
//! at the same place (map-type list items are matched by their keys, other list items never),
//! and on updates a failing rule whose value did not change is forgiven (ratcheting). Rules run
//! as rewritten by `instrument`, so that `meter` counts their actual cost: a rule that passes
//! Kubernetes' per-call limit, or an object whose rules pass the runtime budget, stops the
//! validation with Kubernetes' messages. Evaluation is synchronous and may take long on large
//! objects: callers on an async runtime run it on a blocking thread. Not done: full type
//! checking at compile time (CEL here only parses; `result_type` refuses a rule or message
//! expression only when its result is certainly not a `bool` or a `string`).
//!
//! Must not know: HTTP, storage, where the schema comes from.

mod estimate;
mod evaluate;
mod expressions;
mod instrument;
mod meter;
mod needs;
mod result_type;
mod rules;
mod syntax;
mod types;
mod values;

#[cfg(test)]
mod tests;

use std::sync::Arc;

use kube_cel::KubeCelExt;
use kube_cel::cel::Context;
use serde_json::Value;

use super::{FieldError, child, index};
use estimate::STATIC_ESTIMATED_CRD_COST_LIMIT;
pub use expressions::{Evaluation, Expression, Outcome, undefined_field};
use needs::Need;
use rules::Rule;
pub use rules::valid_field_path;
use types::{Child, Ty, child_cardinality, max_cardinality};
use values::Shape;

use crate::object::flag;

/// The stack CEL compilation runs on: Kubernetes' parser limits (250 levels of nesting) need
/// more than a default thread's in unoptimized builds.
const COMPILE_STACK_BYTES: usize = 16 * 1024 * 1024;

/// The compiled `x-kubernetes-validations` of one CRD version's `openAPIV3Schema`: compiled
/// once, shared between threads (cloning shares it), evaluated on every write of a custom
/// resource.
#[derive(Clone)]
pub struct CelValidator {
    inner: Arc<Compiled>,
}

struct Compiled {
    root: Node,
    /// CEL's standard functions, Kubernetes' libraries and the meter's functions, shared by
    /// every evaluation.
    functions: Context<'static>,
}

impl std::fmt::Debug for CelValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CelValidator").finish_non_exhaustive()
    }
}

/// A schema node that has rules, or has descendants with rules.
struct Node {
    /// The schema's `type`, which messages show as the invalid value.
    type_name: String,
    rules: Vec<Rule>,
    /// How values at this node are shown to its rules (only built when it has rules).
    shape: Option<Shape>,
    /// What the rules reach of `self` and of `oldSelf`: only that is converted.
    self_need: Need,
    old_self_need: Need,
    properties: Vec<(String, Node)>,
    additional_properties: Option<Box<Node>>,
    items: Option<Box<Node>>,
    /// `x-kubernetes-list-map-keys` of a `map` list: how old items are found.
    list_map_keys: Vec<String>,
    all_of: Vec<Node>,
}

/// What compiling a schema's rules found: mistakes every server refuses, and what only CRD
/// validation refuses (costs over Kubernetes' limits, results of the wrong type): rules
/// already stored keep working, within the runtime limits.
#[derive(Default)]
struct Findings {
    /// Each mistake, and whether only a write of the CRD refuses it.
    errors: Vec<(FieldError, bool)>,
    /// The sum of every rule's and message expression's estimated cost.
    total: u64,
    /// The (at most four) dearest contributions of at least 1% of the per-CRD limit,
    /// dearest first: the paths Kubernetes blames when the total is over it.
    dearest: Vec<(String, u64)>,
}

impl Findings {
    fn error(&mut self, error: FieldError) {
        self.errors.push((error, false));
    }

    fn cost(&mut self, error: FieldError) {
        self.refused_on_write(error);
    }

    fn refused_on_write(&mut self, error: FieldError) {
        self.errors.push((error, true));
    }

    fn observe(&mut self, path: String, cost: u64) {
        self.total = self.total.saturating_add(cost);
        if cost < STATIC_ESTIMATED_CRD_COST_LIMIT / 100 {
            return;
        }
        let at = self.dearest.partition_point(|(_, c)| *c >= cost);
        self.dearest.insert(at, (path, cost));
        self.dearest.truncate(4);
    }

    /// The errors over the per-CRD limit, once every rule has been observed.
    fn finish(&mut self) {
        if self.total <= STATIC_ESTIMATED_CRD_COST_LIMIT {
            return;
        }
        for (path, _) in std::mem::take(&mut self.dearest) {
            self.cost(FieldError::new(
                "FieldValueForbidden",
                &path,
                "Forbidden: contributed to estimated rule & messageExpression cost total exceeding cost limit for entire OpenAPIv3 schema".into(),
            ));
        }
        self.cost(FieldError::new(
            "FieldValueForbidden",
            "",
            format!(
                "Forbidden: {}",
                cost_message(
                    "x-kubernetes-validations estimated rule & messageExpression cost total for entire OpenAPIv3 schema",
                    self.total,
                    STATIC_ESTIMATED_CRD_COST_LIMIT
                )
            ),
        ));
    }
}

/// Kubernetes' message for an estimate over its limit: the factor as Go prints it (`%f` under
/// 1.5, `%.1f` up to 100, then "more than 100x").
fn cost_message(what: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

/// The node for `schema` at `path` (schema path, relative to the root), typed by `types`
/// (the same schema except inside `allOf`); `None` when nothing below has rules.
/// `cardinality`: how many times the node can occur per object, `None` when unbounded.
fn build(
    schema: &Value,
    types: &Value,
    resource_root: bool,
    path: &str,
    cardinality: Option<u64>,
    findings: &mut Findings,
) -> Option<Node> {
    let rules = if schema.get("x-kubernetes-validations").is_some() {
        let self_ty = Ty::of(types, resource_root).unwrap_or_else(Ty::unknown);
        let runs = cardinality.unwrap_or_else(|| max_cardinality(self_ty.min_json));
        rules::compile(schema, types, path, &self_ty, runs, findings)
    } else {
        Vec::new()
    };
    let embedded = |s: &Value| flag(s, "x-kubernetes-embedded-resource");
    let items = match (schema.get("items"), types.get("items")) {
        (Some(items), Some(item_types)) if items.is_object() && item_types.is_object() => build(
            items,
            item_types,
            embedded(item_types),
            &child(path, "items"),
            child_cardinality(cardinality, types, Child::Items),
            findings,
        ),
        _ => None,
    };
    let mut properties = Vec::new();
    if let (Some(props), Some(prop_types)) = (
        schema.get("properties").and_then(Value::as_object),
        types.get("properties").and_then(Value::as_object),
    ) {
        for (name, property) in props {
            let Some(property_type) = prop_types.get(name) else {
                continue;
            };
            let at = child(path, &format!("properties[{name}]"));
            if let Some(node) = build(
                property,
                property_type,
                embedded(property_type),
                &at,
                child_cardinality(cardinality, types, Child::Property),
                findings,
            ) {
                properties.push((name.clone(), node));
            }
        }
    }
    let additional_properties = match (
        schema.get("additionalProperties"),
        types.get("additionalProperties"),
    ) {
        (Some(values), Some(value_types)) if values.is_object() && value_types.is_object() => {
            build(
                values,
                value_types,
                embedded(value_types),
                &child(path, "additionalProperties"),
                child_cardinality(cardinality, types, Child::Values),
                findings,
            )
        }
        _ => None,
    };
    let all_of: Vec<Node> = schema
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter_map(|(i, branch)| {
            build(
                branch,
                types,
                resource_root,
                &index(&child(path, "allOf"), i),
                cardinality,
                findings,
            )
        })
        .collect();
    if rules.is_empty()
        && items.is_none()
        && properties.is_empty()
        && additional_properties.is_none()
        && all_of.is_empty()
    {
        return None;
    }
    let list_map_keys =
        if types.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map") {
            types
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|k| k.as_str().map(str::to_string))
                .collect()
        } else {
            Vec::new()
        };
    Some(Node {
        type_name: types
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        shape: (!rules.is_empty()).then(|| Shape::of(types, resource_root)),
        self_need: needs(&rules, "self"),
        old_self_need: needs(&rules, "oldSelf"),
        rules,
        properties,
        additional_properties: additional_properties.map(Box::new),
        items: items.map(Box::new),
        list_map_keys,
        all_of,
    })
}

/// What `rules` (and their message expressions) reach of `variable`.
fn needs(rules: &[Rule], variable: &str) -> Need {
    let mut need = Need::Nothing;
    for rule in rules {
        need.add_uses(&rule.expression, variable);
        if let Some(message) = &rule.message_expression {
            need.add_uses(&message.expression, variable);
        }
    }
    need
}

/// Runs `f` on a thread with a stack deep enough for the parser at Kubernetes' limits;
/// `None` if that thread cannot be had or `f` panics.
fn with_stack<T: Send>(f: impl FnOnce() -> T + Send) -> Option<T> {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("cel-compile".into())
            .stack_size(COMPILE_STACK_BYTES)
            .spawn_scoped(scope, f)
            .ok()?
            .join()
            .ok()
    })
}

/// The node tree of `schema` and what compiling it found.
fn compile_schema(schema: &Value) -> Result<(Option<Node>, Findings), FieldError> {
    with_stack(|| {
        let mut findings = Findings::default();
        let root = build(schema, schema, true, "", Some(1), &mut findings);
        findings.finish();
        (root, findings)
    })
    .ok_or_else(|| {
        FieldError::new(
            "InternalError",
            "x-kubernetes-validations",
            "Internal error: the validation rules could not be compiled".into(),
        )
    })
}

impl CelValidator {
    /// Checks and compiles every rule in `schema` (a CRD version's `openAPIV3Schema`).
    /// `Ok(None)` when the schema has no rules at all. `Err` holds one error per mistake,
    /// with Kubernetes' message and the path of the rule's field relative to the schema
    /// root (`properties[spec].x-kubernetes-validations[0].rule`); the caller prefixes
    /// `spec.versions[i].schema.openAPIV3Schema.`. Estimated costs are not held against the
    /// rules here (see [`CelValidator::check`]): this is how a stored CRD is served.
    pub fn compile(schema: &Value) -> Result<Option<CelValidator>, Vec<FieldError>> {
        let (root, findings) = compile_schema(schema).map_err(|e| vec![e])?;
        let errors: Vec<FieldError> = findings
            .errors
            .into_iter()
            .filter(|(_, cost)| !cost)
            .map(|(e, _)| e)
            .collect();
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(root.map(|root| {
            let mut functions = Context::default().with_all();
            meter::register(&mut functions);
            CelValidator {
                inner: Arc::new(Compiled { root, functions }),
            }
        }))
    }

    /// Everything CRD validation refuses in `schema`'s rules: what [`CelValidator::compile`]
    /// reports, and the rules (and message expressions) whose estimated cost exceeds
    /// Kubernetes' per-expression limit (`Forbidden` at the rule), and, when all of them
    /// together exceed the per-CRD limit, the dearest ones and the schema root (an empty
    /// path).
    pub fn check(schema: &Value) -> Vec<FieldError> {
        match compile_schema(schema) {
            Ok((_, findings)) => findings.errors.into_iter().map(|(e, _)| e).collect(),
            Err(error) => vec![error],
        }
    }

    /// Evaluates every rule against `new` (`old`: the stored object on update). Returns
    /// every failure, with Kubernetes' paths (`spec.items[2].name`) and messages; stops at
    /// the first rule that exceeds its cost limit or the object's budget.
    pub fn validate(&self, new: &Value, old: Option<&Value>) -> Vec<FieldError> {
        self.validate_within(new, old, evaluate::Limits::KUBERNETES)
    }

    fn validate_within(
        &self,
        new: &Value,
        old: Option<&Value>,
        limits: evaluate::Limits,
    ) -> Vec<FieldError> {
        evaluate::run(&self.inner.root, &self.inner.functions, new, old, limits)
    }
}

#[cfg(test)]
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<CelValidator>();
};
