//! The four walks server-side apply makes over objects with their [`Schema`]: the set of fields
//! an object sets ([`field_set`]), what changed between two objects ([`compare`]), an applied
//! configuration merged into a live object ([`merge`]), and fields taken out of an object
//! ([`remove`]). Each follows structured-merge-diff's rules for which paths are members.
//!
//! Objects are at most [`crate::json::MAX_DEPTH`] deep when they are written, so the walks
//! recurse.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::types::{ListType, Schema, Shape};
use crate::fieldpath::{PathElement, Set};

/// A value a walk cannot place (a list-map item without its key, duplicate items in an
/// applied configuration), with the path where it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct TypeError {
    pub path: String,
    pub message: String,
}

/// What changed from one object to another, as sets of paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    pub added: Set,
    pub modified: Set,
    pub removed: Set,
}

impl Comparison {
    /// Whether nothing changed.
    pub fn is_same(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }
}

/// A path as structured-merge-diff prints it in conflicts: `.spec.ports[port=80]`.
pub fn path_string(path: &[PathElement]) -> String {
    path.iter().map(element_string).collect()
}

fn element_string(element: &PathElement) -> String {
    match element {
        PathElement::Field(name) => format!(".{name}"),
        PathElement::Key(fields) => {
            let fields: Vec<String> = fields
                .iter()
                .map(|(name, value)| format!("{name}={}", value_string(value)))
                .collect();
            format!("[{}]", fields.join(","))
        }
        PathElement::Value(value) => format!("[={}]", value_string(value)),
        PathElement::Index(index) => format!("[{index}]"),
    }
}

fn value_string(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::String(text) => format!("{text:?}"),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(value_string).collect();
            format!("[{}]", items.join(","))
        }
        Value::Object(fields) => {
            let fields: Vec<String> = fields
                .iter()
                .map(|(k, v)| format!("{k}={}", value_string(v)))
                .collect();
            format!("{{{}}}", fields.join(","))
        }
        other => other.to_string(),
    }
}

/// Where a walk is, for errors.
struct Trail<'p> {
    path: &'p [PathElement],
}

impl Trail<'_> {
    fn error(&self, message: String) -> TypeError {
        TypeError {
            path: path_string(self.path),
            message,
        }
    }
}

/// The element naming `item` in a list of type `list` (`k:` by its keys, `v:` by value).
fn item_element(
    list: &ListType,
    schema: &Schema<'_>,
    item: &Value,
    index: usize,
    trail: &Trail<'_>,
) -> Result<PathElement, TypeError> {
    match list {
        ListType::Map(keys) if !keys.is_empty() => {
            let mut fields = Vec::with_capacity(keys.len());
            for key in keys {
                let value = item
                    .get(key)
                    .or_else(|| schema.item_default(key))
                    .ok_or_else(|| {
                        trail.error(format!(
                            "element {index}: associative list with keys has an element that omits key field {key:?} (and doesn't have default value)"
                        ))
                    })?;
                fields.push((key.clone(), value.clone()));
            }
            Ok(PathElement::key(fields))
        }
        _ => Ok(PathElement::Value(item.clone())),
    }
}

fn is_leaf(shape: &Shape) -> bool {
    matches!(
        shape,
        Shape::Scalar | Shape::Map { atomic: true } | Shape::List(ListType::Atomic)
    )
}

/// Every path `value` sets (structured-merge-diff's `ToFieldSet`): leaves, atomic values,
/// list items, map entries, and struct fields holding null or `{}`.
pub fn field_set(value: &Value, schema: Schema<'_>) -> Result<Set, TypeError> {
    let mut set = Set::new();
    let mut path = Vec::new();
    children_set(value, schema, &mut path, &mut set)?;
    Ok(set)
}

fn children_set(
    value: &Value,
    schema: Schema<'_>,
    path: &mut Vec<PathElement>,
    out: &mut Set,
) -> Result<(), TypeError> {
    match schema.shape(value) {
        Shape::Map { atomic: false } => {
            let Value::Object(fields) = value else {
                return Ok(());
            };
            for (name, child) in fields {
                let (child_schema, declared) = schema.field(name);
                let element = PathElement::Field(name.clone());
                let leaf = is_leaf(&child_schema.shape(child));
                let empty = child.is_null() || child.as_object().is_some_and(Map::is_empty);
                if leaf || empty || !declared {
                    out.members.insert(element.clone());
                }
                if !leaf {
                    descend(child, child_schema, element, path, out)?;
                }
            }
        }
        Shape::List(list @ (ListType::Set | ListType::Map(_))) => {
            let Value::Array(items) = value else {
                return Ok(());
            };
            let item_schema = schema.items();
            let mut seen = BTreeMap::new();
            let mut elements = Vec::with_capacity(items.len());
            for (index, item) in items.iter().enumerate() {
                let element = item_element(&list, &schema, item, index, &Trail { path })?;
                *seen.entry(element.clone()).or_insert(0usize) += 1;
                elements.push(element);
            }
            for (item, element) in items.iter().zip(elements) {
                out.members.insert(element.clone());
                if seen[&element] == 1 && !is_leaf(&item_schema.shape(item)) {
                    descend(item, item_schema, element, path, out)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

fn descend(
    value: &Value,
    schema: Schema<'_>,
    element: PathElement,
    path: &mut Vec<PathElement>,
    out: &mut Set,
) -> Result<(), TypeError> {
    let mut child = Set::new();
    path.push(element);
    let result = children_set(value, schema, path, &mut child);
    let element = path.pop().expect("pushed above");
    result?;
    if !child.is_empty() {
        out.children.insert(element, child);
    }
    Ok(())
}

/// What changed from `old` to `new` (structured-merge-diff's `Compare`): leaves added,
/// modified or removed, and containers added or removed with everything in them.
pub fn compare(old: &Value, new: &Value, schema: Schema<'_>) -> Result<Comparison, TypeError> {
    let mut out = Comparison::default();
    let mut path = Vec::new();
    compare_children(Some(old), Some(new), schema, &mut path, &mut out)?;
    Ok(out)
}

/// Compares the insides of two containers of the same shape.
fn compare_children(
    old: Option<&Value>,
    new: Option<&Value>,
    schema: Schema<'_>,
    path: &mut Vec<PathElement>,
    out: &mut Comparison,
) -> Result<(), TypeError> {
    let shape = schema.shape(new.or(old).unwrap_or(&Value::Null));
    match shape {
        Shape::Map { atomic: false } => {
            let empty = Map::new();
            let old_fields = old.and_then(Value::as_object).unwrap_or(&empty);
            let new_fields = new.and_then(Value::as_object).unwrap_or(&empty);
            for name in old_fields.keys() {
                let (child_schema, _) = schema.field(name);
                compare_at(
                    old_fields.get(name),
                    new_fields.get(name),
                    child_schema,
                    PathElement::Field(name.clone()),
                    path,
                    out,
                )?;
            }
            for (name, value) in new_fields {
                if !old_fields.contains_key(name) {
                    let (child_schema, _) = schema.field(name);
                    compare_at(
                        None,
                        Some(value),
                        child_schema,
                        PathElement::Field(name.clone()),
                        path,
                        out,
                    )?;
                }
            }
        }
        Shape::List(list @ (ListType::Set | ListType::Map(_))) => {
            let item_schema = schema.items();
            let old_items = index_items(&list, &schema, old, path)?;
            let new_items = index_items(&list, &schema, new, path)?;
            let mut order: Vec<&PathElement> = old_items.keys().collect();
            order.extend(new_items.keys().filter(|e| !old_items.contains_key(e)));
            for element in order {
                let none = Vec::new();
                let left = old_items.get(element).unwrap_or(&none);
                let right = new_items.get(element).unwrap_or(&none);
                match (left.len(), right.len()) {
                    (0..=1, 0..=1) => compare_at(
                        left.first().copied(),
                        right.first().copied(),
                        item_schema,
                        element.clone(),
                        path,
                        out,
                    )?,
                    (l, r) if l >= 2 && r >= 2 => {
                        if left != right {
                            insert_at(&mut out.modified, path, element.clone());
                        }
                    }
                    (l, _) if l >= 2 => {
                        if let Some(right) = right.first() {
                            compare_at(None, Some(right), item_schema, element.clone(), path, out)?;
                        }
                        insert_at(&mut out.removed, path, element.clone());
                    }
                    _ => {
                        if let Some(left) = left.first() {
                            compare_at(Some(left), None, item_schema, element.clone(), path, out)?;
                        }
                        insert_at(&mut out.added, path, element.clone());
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// A list's items by their elements, duplicates together, in first-seen order of elements.
fn index_items<'v>(
    list: &ListType,
    schema: &Schema<'_>,
    value: Option<&'v Value>,
    path: &[PathElement],
) -> Result<indexmap_lite::Ordered<'v>, TypeError> {
    let mut out = indexmap_lite::Ordered::default();
    if let Some(Value::Array(items)) = value {
        for (index, item) in items.iter().enumerate() {
            let element = item_element(list, schema, item, index, &Trail { path })?;
            out.push(element, item);
        }
    }
    Ok(out)
}

/// A small insertion-ordered multimap from elements to items.
mod indexmap_lite {
    use std::collections::BTreeMap;

    use serde_json::Value;

    use crate::fieldpath::PathElement;

    #[derive(Default)]
    pub(super) struct Ordered<'v> {
        order: Vec<PathElement>,
        items: BTreeMap<PathElement, Vec<&'v Value>>,
    }

    impl<'v> Ordered<'v> {
        pub(super) fn push(&mut self, element: PathElement, item: &'v Value) {
            match self.items.get_mut(&element) {
                Some(items) => items.push(item),
                None => {
                    self.order.push(element.clone());
                    self.items.insert(element, vec![item]);
                }
            }
        }

        pub(super) fn keys(&self) -> impl Iterator<Item = &PathElement> {
            self.order.iter()
        }

        pub(super) fn contains_key(&self, element: &PathElement) -> bool {
            self.items.contains_key(element)
        }

        pub(super) fn get(&self, element: &PathElement) -> Option<&Vec<&'v Value>> {
            self.items.get(element)
        }
    }
}

/// Inserts `path` + `element` into `set`.
fn insert_at(set: &mut Set, path: &[PathElement], element: PathElement) {
    let mut node = set;
    for step in path {
        node = node.children.entry(step.clone()).or_default();
    }
    node.members.insert(element);
}

/// Compares one field or item, present on either side.
fn compare_at(
    old: Option<&Value>,
    new: Option<&Value>,
    schema: Schema<'_>,
    element: PathElement,
    path: &mut Vec<PathElement>,
    out: &mut Comparison,
) -> Result<(), TypeError> {
    let old_shape = old.map(|v| schema.shape(v));
    let new_shape = new.map(|v| schema.shape(v));
    let is_empty = |v: Option<&Value>| match v {
        None => true,
        Some(Value::Object(fields)) => fields.is_empty(),
        Some(Value::Array(items)) => items.is_empty(),
        Some(_) => false,
    };
    let shapes_differ = matches!((&old_shape, &new_shape), (Some(a), Some(b)) if a != b);
    let leaf = shapes_differ
        || new_shape
            .as_ref()
            .or(old_shape.as_ref())
            .is_some_and(is_leaf)
        || (is_empty(old) && is_empty(new));
    if leaf {
        match (old, new) {
            (None, Some(_)) => insert_at(&mut out.added, path, element),
            (Some(_), None) => insert_at(&mut out.removed, path, element),
            (Some(a), Some(b)) if a != b => insert_at(&mut out.modified, path, element),
            _ => {}
        }
        return Ok(());
    }
    path.push(element);
    let result = compare_children(old, new, schema, path, out);
    let element = path.pop().expect("pushed above");
    result?;
    match (old, new) {
        (None, _) => insert_at(&mut out.added, path, element),
        (_, None) => insert_at(&mut out.removed, path, element),
        _ => {}
    }
    Ok(())
}

/// `config` merged into `live` (structured-merge-diff's `Merge`): leaves and atomic values
/// from `config`; maps field by field; set and map lists item by item, items only `live` has
/// kept in place and `config`'s in its order.
pub fn merge(live: &Value, config: &Value, schema: Schema<'_>) -> Result<Value, TypeError> {
    let mut path = Vec::new();
    merge_at(Some(live), config, schema, &mut path)
}

fn merge_at(
    live: Option<&Value>,
    config: &Value,
    schema: Schema<'_>,
    path: &mut Vec<PathElement>,
) -> Result<Value, TypeError> {
    let shape = schema.shape(config);
    let live = live.filter(|live| schema.shape(live) == shape);
    match (shape, live) {
        (Shape::Map { atomic: false }, Some(Value::Object(live_fields))) => {
            let Value::Object(config_fields) = config else {
                return Ok(config.clone());
            };
            let mut out = live_fields.clone();
            for (name, value) in config_fields {
                let (child_schema, _) = schema.field(name);
                path.push(PathElement::Field(name.clone()));
                let merged = merge_at(live_fields.get(name), value, child_schema, path);
                path.pop();
                out.insert(name.clone(), merged?);
            }
            Ok(Value::Object(out))
        }
        (
            Shape::List(list @ (ListType::Set | ListType::Map(_))),
            Some(Value::Array(live_items)),
        ) => {
            let Value::Array(config_items) = config else {
                return Ok(config.clone());
            };
            merge_lists(&list, schema, live_items, config_items, path).map(Value::Array)
        }
        (Shape::List(list @ (ListType::Set | ListType::Map(_))), None) => {
            // Nothing to merge with, but duplicates are refused all the same.
            if let Value::Array(items) = config {
                merge_lists(&list, schema, &[], items, path)?;
            }
            Ok(config.clone())
        }
        _ => Ok(config.clone()),
    }
}

fn merge_lists(
    list: &ListType,
    schema: Schema<'_>,
    live: &[Value],
    config: &[Value],
    path: &mut Vec<PathElement>,
) -> Result<Vec<Value>, TypeError> {
    let item_schema = schema.items();
    let trail_error = |path: &[PathElement], message: String| Trail { path }.error(message);
    let mut config_elements = Vec::with_capacity(config.len());
    let mut in_config: BTreeMap<PathElement, usize> = BTreeMap::new();
    for (index, item) in config.iter().enumerate() {
        let element = item_element(list, &schema, item, index, &Trail { path })?;
        if in_config.insert(element.clone(), index).is_some() {
            return Err(trail_error(
                path,
                format!(
                    "duplicate entries for key {}",
                    element_string(&element).trim_start_matches('.')
                ),
            ));
        }
        config_elements.push(element);
    }
    let mut live_elements = Vec::with_capacity(live.len());
    let mut in_live: BTreeMap<PathElement, usize> = BTreeMap::new();
    for (index, item) in live.iter().enumerate() {
        let element = item_element(list, &schema, item, index, &Trail { path })?;
        in_live.entry(element.clone()).or_insert(index);
        live_elements.push(element);
    }
    let mut out = Vec::with_capacity(live.len().max(config.len()));
    let mut emitted: BTreeMap<PathElement, ()> = BTreeMap::new();
    let (mut l, mut r) = (0, 0);
    while l < live.len() || r < config.len() {
        if l < live.len() {
            let element = &live_elements[l];
            if emitted.contains_key(element) {
                l += 1;
                continue;
            }
            if !in_config.contains_key(element) {
                out.push(live[l].clone());
                emitted.insert(element.clone(), ());
                l += 1;
                continue;
            }
        }
        if r < config.len() {
            let element = config_elements[r].clone();
            let live_item = in_live.get(&element).map(|&i| &live[i]);
            path.push(element.clone());
            let merged = merge_at(live_item, &config[r], item_schema, path);
            path.pop();
            out.push(merged?);
            emitted.insert(element, ());
            r += 1;
        } else {
            l += 1;
        }
    }
    Ok(out)
}

/// `value` without the paths in `set` (structured-merge-diff's `RemoveItems`); a map or list
/// left empty by the removal goes too.
pub fn remove(value: &Value, set: &Set, schema: Schema<'_>) -> Value {
    remove_at(value, set, schema).unwrap_or_else(|| Value::Object(Map::new()))
}

fn remove_at(value: &Value, set: &Set, schema: Schema<'_>) -> Option<Value> {
    match (schema.shape(value), value) {
        (Shape::Map { atomic: false }, Value::Object(fields)) => {
            let mut out = Map::new();
            for (name, child) in fields {
                let element = PathElement::Field(name.clone());
                if set.members.contains(&element) {
                    continue;
                }
                match set.children.get(&element) {
                    Some(below) => {
                        let (child_schema, _) = schema.field(name);
                        if let Some(kept) = remove_at(child, below, child_schema) {
                            out.insert(name.clone(), kept);
                        }
                    }
                    None => {
                        out.insert(name.clone(), child.clone());
                    }
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        (Shape::List(list @ (ListType::Set | ListType::Map(_))), Value::Array(items)) => {
            let item_schema = schema.items();
            let mut out = Vec::with_capacity(items.len());
            for (index, item) in items.iter().enumerate() {
                let Ok(element) = item_element(&list, &schema, item, index, &Trail { path: &[] })
                else {
                    out.push(item.clone());
                    continue;
                };
                if set.members.contains(&element) {
                    continue;
                }
                match set.children.get(&element) {
                    Some(below) => {
                        if let Some(kept) = remove_at(item, below, item_schema) {
                            out.push(kept);
                        }
                    }
                    None => out.push(item.clone()),
                }
            }
            (!out.is_empty()).then_some(Value::Array(out))
        }
        _ => Some(value.clone()),
    }
}
