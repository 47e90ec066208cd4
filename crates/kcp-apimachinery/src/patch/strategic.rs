//! Strategic merge patch: a JSON merge patch that knows how each list merges.
//!
//! Lists replace by default; a list with a merge key merges element by element (matching on
//! the key), and a list of primitives with the merge strategy takes the union. The caller says
//! which is which through a [`ListStrategies`] lookup by field path (map keys only; list
//! elements add no segment). Directives: `$patch: replace | delete | merge` in maps and in
//! merge-key list elements, `$retainKeys`, `$deleteFromPrimitiveList/<field>` and
//! `$setElementOrder/<field>`.

use serde_json::{Map, Value};

use super::{PatchError, check_patch_depth, check_result_depth};

/// How a list at some path merges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListStrategy {
    /// The patch's list replaces the original (the default).
    Replace,
    /// Elements are maps merged by the value of this key.
    MergeByKey(&'static str),
    /// Elements are primitives; the result is the union, original order first.
    MergePrimitives,
}

/// Looks up the list strategy of a field path such as `["metadata", "finalizers"]`.
pub type ListStrategies<'a> = &'a dyn Fn(&[&str]) -> ListStrategy;

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList/";
const SET_ELEMENT_ORDER: &str = "$setElementOrder/";

/// Applies `patch` to `original`. The recursion follows the patch's maps and lists, whose depth
/// is checked first; the result must be within [`crate::json::MAX_DEPTH`].
pub fn apply(
    original: &Value,
    patch: &Value,
    strategies: ListStrategies<'_>,
) -> Result<Value, PatchError> {
    check_patch_depth(patch)?;
    let (Value::Object(original), Value::Object(patch)) = (original, patch) else {
        return Err(PatchError::Malformed(
            "strategic merge patch must be a JSON object".into(),
        ));
    };
    let mut path = Vec::new();
    let patched = merge_map(original, patch, &mut path, strategies)?
        .map_or(Value::Object(Map::new()), Value::Object);
    check_result_depth(&patched)?;
    Ok(patched)
}

/// Merges a patch map into an original map; `None` means `$patch: delete`.
fn merge_map<'p>(
    original: &Map<String, Value>,
    patch: &'p Map<String, Value>,
    path: &mut Vec<&'p str>,
    strategies: ListStrategies<'_>,
) -> Result<Option<Map<String, Value>>, PatchError> {
    match patch.get(DIRECTIVE).map(|d| d.as_str()) {
        None | Some(Some("merge")) => {}
        Some(Some("replace")) => return Ok(Some(strip_directives(patch))),
        Some(Some("delete")) => return Ok(None),
        Some(other) => {
            return Err(PatchError::Malformed(format!(
                "unknown patch directive: {}",
                other.unwrap_or("non-string")
            )));
        }
    }
    let mut result = original.clone();
    let mut orders: Vec<(&str, &Value)> = Vec::new();
    for (key, value) in patch {
        if key == DIRECTIVE || key == RETAIN_KEYS {
            continue;
        }
        if let Some(field) = key.strip_prefix(SET_ELEMENT_ORDER) {
            orders.push((field, value));
            continue;
        }
        if let Some(field) = key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
            let remove = value
                .as_array()
                .ok_or_else(|| PatchError::Malformed(format!("{key} must be a list")))?;
            if let Some(Value::Array(items)) = result.get_mut(field) {
                items.retain(|item| !remove.contains(item));
            }
            continue;
        }
        path.push(key);
        let merged = match (original.get(key), value) {
            (_, Value::Null) => None,
            (Some(Value::Object(o)), Value::Object(p)) => {
                merge_map(o, p, path, strategies)?.map(Value::Object)
            }
            (_, Value::Object(p)) => {
                merge_map(&Map::new(), p, path, strategies)?.map(Value::Object)
            }
            (Some(Value::Array(o)), Value::Array(p)) => {
                Some(Value::Array(merge_list(o, p, path, strategies)?))
            }
            (_, Value::Array(p)) => Some(Value::Array(merge_list(&[], p, path, strategies)?)),
            (_, other) => Some(other.clone()),
        };
        path.pop();
        match merged {
            Some(value) => result.insert(key.clone(), value),
            None => result.remove(key),
        };
    }
    for (field, order) in orders {
        path.push(field);
        let strategy = strategies(path);
        path.pop();
        if let (Some(Value::Array(items)), Value::Array(order)) = (result.get_mut(field), order) {
            reorder(items, order, strategy);
        }
    }
    if let Some(retain) = patch.get(RETAIN_KEYS) {
        let retain = retain.as_array().ok_or_else(|| {
            PatchError::Malformed("$retainKeys must be a list of field names".into())
        })?;
        result.retain(|key, _| retain.iter().any(|k| k.as_str() == Some(key)));
    }
    Ok(Some(result))
}

fn merge_list<'p>(
    original: &[Value],
    patch: &'p [Value],
    path: &mut Vec<&'p str>,
    strategies: ListStrategies<'_>,
) -> Result<Vec<Value>, PatchError> {
    match strategies(path) {
        ListStrategy::Replace => Ok(patch
            .iter()
            .filter(|v| !is_directive_only(v))
            .cloned()
            .collect()),
        ListStrategy::MergePrimitives => {
            let mut result = original.to_vec();
            for item in patch {
                if !result.contains(item) {
                    result.push(item.clone());
                }
            }
            Ok(result)
        }
        ListStrategy::MergeByKey(merge_key) => {
            if patch
                .iter()
                .any(|item| item.get(DIRECTIVE).and_then(Value::as_str) == Some("replace"))
            {
                return Ok(patch
                    .iter()
                    .filter(|item| !is_directive_only(item))
                    .map(strip_value)
                    .collect());
            }
            let mut result = original.to_vec();
            for item in patch {
                let Value::Object(patch_item) = item else {
                    return Err(PatchError::Malformed(format!(
                        "elements of {} must be objects with the merge key {merge_key}",
                        path.join(".")
                    )));
                };
                let key = patch_item.get(merge_key).ok_or_else(|| {
                    PatchError::Malformed(format!(
                        "map: {patch_item:?} does not contain declared merge key: {merge_key}"
                    ))
                })?;
                let position = result.iter().position(|o| o.get(merge_key) == Some(key));
                let empty = Map::new();
                let current = match position.map(|i| &result[i]) {
                    Some(Value::Object(o)) => o,
                    _ => &empty,
                };
                match (merge_map(current, patch_item, path, strategies)?, position) {
                    (Some(merged), Some(i)) => result[i] = Value::Object(merged),
                    (Some(merged), None) => result.push(Value::Object(merged)),
                    (None, Some(i)) => {
                        result.remove(i);
                    }
                    (None, None) => {}
                }
            }
            Ok(result)
        }
    }
}

/// Orders `items` as `order` lists them (by merge key or by value); the rest keep their place
/// after them.
fn reorder(items: &mut [Value], order: &[Value], strategy: ListStrategy) {
    let rank = |item: &Value| -> usize {
        let found = match strategy {
            ListStrategy::MergeByKey(key) => order
                .iter()
                .position(|o| o.get(key).is_some() && o.get(key) == item.get(key)),
            _ => order.iter().position(|o| o == item),
        };
        found.unwrap_or(order.len())
    };
    items.sort_by_key(|item| rank(item));
}

fn is_directive_only(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|m| m.len() == 1 && m.contains_key(DIRECTIVE))
}

fn strip_directives(map: &Map<String, Value>) -> Map<String, Value> {
    map.iter()
        .filter(|(k, _)| !k.starts_with('$'))
        .map(|(k, v)| (k.clone(), strip_value(v)))
        .collect()
}

fn strip_value(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(strip_directives(map)),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn strategies(path: &[&str]) -> ListStrategy {
        match path {
            ["metadata", "finalizers"] => ListStrategy::MergePrimitives,
            ["metadata", "ownerReferences"] => ListStrategy::MergeByKey("uid"),
            ["spec", "containers"] => ListStrategy::MergeByKey("name"),
            ["spec", "containers", "ports"] => ListStrategy::MergeByKey("containerPort"),
            _ => ListStrategy::Replace,
        }
    }

    fn smp(original: Value, patch: Value) -> Value {
        apply(&original, &patch, &strategies).unwrap()
    }

    #[test]
    fn maps_merge_and_null_deletes() {
        assert_eq!(
            smp(
                json!({"data": {"a": "1", "b": "2"}}),
                json!({"data": {"a": null, "c": "3"}})
            ),
            json!({"data": {"b": "2", "c": "3"}})
        );
    }

    #[test]
    fn lists_without_a_strategy_are_replaced() {
        assert_eq!(
            smp(json!({"rules": [1, 2]}), json!({"rules": [3]})),
            json!({"rules": [3]})
        );
    }

    #[test]
    fn primitive_merge_lists_take_the_union_and_honour_delete_from_primitive_list() {
        let original = json!({"metadata": {"finalizers": ["a", "b"]}});
        assert_eq!(
            smp(
                original.clone(),
                json!({"metadata": {"finalizers": ["c", "a"]}})
            ),
            json!({"metadata": {"finalizers": ["a", "b", "c"]}})
        );
        assert_eq!(
            smp(
                original,
                json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}})
            ),
            json!({"metadata": {"finalizers": ["b"]}})
        );
    }

    #[test]
    fn keyed_lists_merge_by_key_and_delete_or_replace_by_directive() {
        let original = json!({"spec": {"containers": [
            {"name": "a", "image": "a:1", "ports": [{"containerPort": 80, "name": "http"}]},
            {"name": "b", "image": "b:1"}
        ]}});
        let patched = smp(
            original.clone(),
            json!({"spec": {"containers": [
                {"name": "a", "image": "a:2", "ports": [{"containerPort": 443}]},
                {"name": "c", "image": "c:1"}
            ]}}),
        );
        assert_eq!(
            patched,
            json!({"spec": {"containers": [
                {"name": "a", "image": "a:2", "ports": [{"containerPort": 80, "name": "http"}, {"containerPort": 443}]},
                {"name": "b", "image": "b:1"},
                {"name": "c", "image": "c:1"}
            ]}})
        );
        let deleted = smp(
            original.clone(),
            json!({"spec": {"containers": [{"name": "b", "$patch": "delete"}]}}),
        );
        assert_eq!(deleted["spec"]["containers"].as_array().unwrap().len(), 1);
        let replaced = smp(
            original,
            json!({"spec": {"containers": [{"name": "z"}, {"$patch": "replace"}]}}),
        );
        assert_eq!(replaced, json!({"spec": {"containers": [{"name": "z"}]}}));
    }

    #[test]
    fn map_directives_replace_delete_and_retain_keys() {
        let original = json!({"spec": {"a": 1, "b": {"c": 2}}});
        assert_eq!(
            smp(
                original.clone(),
                json!({"spec": {"$patch": "replace", "x": 1}})
            ),
            json!({"spec": {"x": 1}})
        );
        assert_eq!(
            smp(
                original.clone(),
                json!({"spec": {"b": {"$patch": "delete"}}})
            ),
            json!({"spec": {"a": 1}})
        );
        assert_eq!(
            smp(
                original,
                json!({"spec": {"$retainKeys": ["b", "d"], "d": 4}})
            ),
            json!({"spec": {"b": {"c": 2}, "d": 4}})
        );
        assert!(
            apply(
                &json!({}),
                &json!({"a": {"$patch": "explode"}}),
                &strategies
            )
            .is_err()
        );
    }

    #[test]
    fn results_deeper_than_the_limit_are_refused() {
        let mut deep = json!({});
        for _ in 0..crate::json::MAX_DEPTH {
            deep = json!({ "n": deep });
        }
        let error = apply(&json!({}), &json!({ "spec": deep }), &strategies).unwrap_err();
        assert_eq!(error.to_string(), "exceeded max depth of 100");
        let mut far = json!({});
        // (Deeper values cannot even be dropped on a test thread's stack.)
        for _ in 0..1_000 {
            far = json!([far]);
        }
        assert!(apply(&json!({}), &json!({ "spec": far }), &strategies).is_err());
    }

    #[test]
    fn set_element_order_reorders_merged_lists() {
        let original = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        let patched = smp(
            original,
            json!({"spec": {
                "$setElementOrder/containers": [{"name": "b"}, {"name": "a"}],
                "containers": [{"name": "a", "image": "x"}]
            }}),
        );
        assert_eq!(
            patched,
            json!({"spec": {"containers": [{"name": "b"}, {"name": "a", "image": "x"}]}})
        );
    }
}
