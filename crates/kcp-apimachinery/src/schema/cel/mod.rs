//! CEL validation rules of custom resources (`x-kubernetes-validations`), on the kube-cel
//! crate's CEL (with Kubernetes' CEL libraries) and our own schema walk, with
//! kube-apiserver's paths and messages.
//!
//! [`CelValidator::compile`] checks and compiles every rule of a CRD version's schema once
//! (its errors are what CRD validation reports); [`CelValidator::validate`] evaluates them
//! against each written object: rules run on every non-null value their node matches
//! (properties, list items, map values, `allOf` branches), transition rules (those naming
//! `oldSelf`) only where the old object has a value at the same place (map-type list items
//! are matched by their keys, other list items never), and on updates a failing rule whose
//! value did not change is forgiven (ratcheting). Not done: cost budgets, and type checking
//! at compile time (CEL here only parses).

mod evaluate;
mod needs;
mod rules;
mod values;

#[cfg(test)]
mod tests;

use kube_cel::KubeCelExt;
use kube_cel::cel::Context;
use serde_json::Value;

use super::{FieldError, child, index};
use needs::Need;
use rules::Rule;
use values::Shape;

/// The compiled `x-kubernetes-validations` of one CRD version's `openAPIV3Schema`: compiled
/// once, shared between threads, evaluated on every write of a custom resource.
pub struct CelValidator {
    root: Node,
    /// CEL's standard functions and Kubernetes' libraries, shared by every evaluation.
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

fn flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// The node for `schema` at `path` (schema path, relative to the root), typed by `types`
/// (the same schema except inside `allOf`); `None` when nothing below has rules.
fn build(
    schema: &Value,
    types: &Value,
    resource_root: bool,
    path: &str,
    errors: &mut Vec<FieldError>,
) -> Option<Node> {
    let rules = rules::compile(schema, types, path, errors);
    let embedded = |s: &Value| flag(s, "x-kubernetes-embedded-resource");
    let items = match (schema.get("items"), types.get("items")) {
        (Some(items), Some(item_types)) if items.is_object() && item_types.is_object() => build(
            items,
            item_types,
            embedded(item_types),
            &child(path, "items"),
            errors,
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
                errors,
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
                errors,
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
                errors,
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
        need.add_uses(rule.program.expression(), variable);
        if let Some(expression) = &rule.message_expression {
            need.add_uses(expression.expression(), variable);
        }
    }
    need
}

impl CelValidator {
    /// Checks and compiles every rule in `schema` (a CRD version's `openAPIV3Schema`).
    /// `Ok(None)` when the schema has no rules at all. `Err` holds one error per mistake,
    /// with Kubernetes' message and the path of the rule's field relative to the schema
    /// root (`properties[spec].x-kubernetes-validations[0].rule`); the caller prefixes
    /// `spec.versions[i].schema.openAPIV3Schema.`.
    pub fn compile(schema: &Value) -> Result<Option<CelValidator>, Vec<FieldError>> {
        let mut errors = Vec::new();
        let root = build(schema, schema, true, "", &mut errors);
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(root.map(|root| CelValidator {
            root,
            functions: Context::default().with_all(),
        }))
    }

    /// Evaluates every rule against `new` (`old`: the stored object on update). Returns
    /// every failure, with Kubernetes' paths (`spec.items[2].name`) and messages.
    pub fn validate(&self, new: &Value, old: Option<&Value>) -> Vec<FieldError> {
        evaluate::run(&self.root, &self.functions, new, old)
    }
}

#[cfg(test)]
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<CelValidator>();
};
