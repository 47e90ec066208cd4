//! RFC 6902 JSON patch, applied operation by operation under kube-apiserver's limits and ours.
//!
//! - At most [`MAX_JSON_PATCH_OPERATIONS`] operations (413, as kube-apiserver).
//! - `copy` operations together may add at most [`MAX_COPY_BYTES`] of JSON (kube-apiserver's
//!   `JSONPatchMaxCopyBytes`, evanphx/json-patch's `AccumulatedCopySizeLimit`), so a small patch
//!   cannot double a document again and again.
//! - The document is never deeper than [`MAX_DEPTH`]: each operation's inserted value is
//!   measured against the depth of the place it goes to (no walk of the whole document).
//! - The other costs a small patch could multiply are bounded too: `test` compares at most the
//!   patch's own value, and array shifts plus the depth walks of values moved deeper share a
//!   budget of [`MAX_PATCH_WORK`] steps.
//!
//! Messages follow evanphx/json-patch (v4), which kube-apiserver answers with.

use serde_json::Value;

use super::PatchError;
use crate::json::{MAX_DEPTH, depth_message, encoded_len_within, exceeds_depth, json_type};

/// Most operations a JSON patch may carry, as kube-apiserver limits them.
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// The most bytes (as compact JSON) the `copy` operations of one patch may add together.
pub const MAX_COPY_BYTES: usize = 3 * 1024 * 1024;

/// The most array elements shifted and moved nodes measured while applying one patch.
pub const MAX_PATCH_WORK: usize = 1 << 24;

/// Applies an RFC 6902 JSON patch to `object`; all or nothing.
pub fn apply(object: &Value, patch: &Value) -> Result<Value, PatchError> {
    let operations = patch.as_array().ok_or_else(|| {
        PatchError::Malformed(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Patch",
            json_type(patch)
        ))
    })?;
    if let Some(other) = operations.iter().find(|op| !op.is_object()) {
        return Err(PatchError::Malformed(format!(
            "json: cannot unmarshal {} into Go value of type jsonpatch.Operation",
            json_type(other)
        )));
    }
    if operations.len() > MAX_JSON_PATCH_OPERATIONS {
        return Err(PatchError::TooLarge(format!(
            "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
            operations.len()
        )));
    }
    let mut state = Applying {
        document: object.clone(),
        copied: 0,
        work: 0,
    };
    for operation in operations {
        state.apply(operation)?;
    }
    // Each step kept what it inserted within the limit; a document that was already deeper
    // (stored before the limit existed) must come out within it.
    if exceeds_depth(&state.document, MAX_DEPTH) {
        return Err(PatchError::NotApplicable(depth_message()));
    }
    Ok(state.document)
}

fn missing(message: String) -> PatchError {
    PatchError::NotApplicable(format!("{message}: missing value"))
}

struct Applying {
    document: Value,
    copied: usize,
    work: usize,
}

/// A parsed JSON pointer: its text and its unescaped tokens.
struct Pointer<'a> {
    text: &'a str,
    tokens: Vec<String>,
}

impl<'a> Pointer<'a> {
    fn parse(text: &'a str) -> Option<Self> {
        if text.is_empty() {
            return Some(Pointer {
                text,
                tokens: Vec::new(),
            });
        }
        let rest = text.strip_prefix('/')?;
        let tokens = rest
            .split('/')
            .map(|token| token.replace("~1", "/").replace("~0", "~"))
            .collect();
        Some(Pointer { text, tokens })
    }

    /// The tokens of the parent and the last token; `None` for the root.
    fn split(&self) -> Option<(&[String], &str)> {
        let (last, parent) = self.tokens.split_last()?;
        Some((parent, last))
    }

    fn is_proper_prefix_of(&self, other: &Pointer<'_>) -> bool {
        self.tokens.len() < other.tokens.len() && other.tokens.starts_with(&self.tokens)
    }
}

/// An array index as RFC 6901 writes them: digits, no leading zero.
fn index(token: &str) -> Option<usize> {
    if token.is_empty()
        || !token.bytes().all(|b| b.is_ascii_digit())
        || (token.len() > 1 && token.starts_with('0'))
    {
        return None;
    }
    token.parse().ok()
}

fn walk<'v>(mut value: &'v Value, tokens: &[String]) -> Option<&'v Value> {
    for token in tokens {
        value = match value {
            Value::Object(fields) => fields.get(token)?,
            Value::Array(items) => items.get(index(token)?)?,
            _ => return None,
        };
    }
    Some(value)
}

fn walk_mut<'v>(mut value: &'v mut Value, tokens: &[String]) -> Option<&'v mut Value> {
    for token in tokens {
        value = match value {
            Value::Object(fields) => fields.get_mut(token)?,
            Value::Array(items) => items.get_mut(index(token)?)?,
            _ => return None,
        };
    }
    Some(value)
}

impl Applying {
    fn apply(&mut self, operation: &Value) -> Result<(), PatchError> {
        let kind = operation
            .get("op")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        if !matches!(
            kind,
            "add" | "remove" | "replace" | "move" | "copy" | "test"
        ) {
            return Err(PatchError::NotApplicable(format!(
                "Unexpected kind: {kind}"
            )));
        }
        let path_text = operation
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| missing(format!("{kind} operation failed to decode path")))?;
        let Some(path) = Pointer::parse(path_text) else {
            return Err(missing(format!(
                "{kind} operation does not apply: doc is missing path: \"{path_text}\""
            )));
        };
        let value = operation.get("value");
        let from = || -> Result<Pointer<'_>, PatchError> {
            let text = operation
                .get("from")
                .and_then(Value::as_str)
                .ok_or_else(|| missing(format!("{kind} operation failed to decode from")))?;
            Pointer::parse(text).ok_or_else(|| {
                missing(format!(
                    "{kind} operation does not apply: doc is missing from path: {text}"
                ))
            })
        };
        match kind {
            "add" => {
                let value = value.ok_or_else(|| missing("add operation: value".into()))?;
                self.check_depth(kind, &path, value, &mut None)?;
                self.add(kind, &path, value.clone())
            }
            "replace" => {
                let value = value.ok_or_else(|| missing("replace operation: value".into()))?;
                self.check_depth(kind, &path, value, &mut None)?;
                self.replace(&path, value.clone())
            }
            "remove" => self.remove(kind, &path).map(drop),
            "test" => self.test(&path, value),
            "move" => {
                let from = from()?;
                if from.is_proper_prefix_of(&path) {
                    return Err(PatchError::NotApplicable(format!(
                        "move operation does not apply: \"{}\" is a prefix of \"{}\"",
                        from.text, path.text
                    )));
                }
                if from.tokens == path.tokens {
                    return walk(&self.document, &path.tokens).map(drop).ok_or_else(|| {
                        missing(format!(
                            "move operation does not apply: doc is missing from path: {}",
                            from.text
                        ))
                    });
                }
                let moved = self.remove(kind, &from)?;
                if path.tokens.len() > from.tokens.len() {
                    let mut budget = Some(MAX_PATCH_WORK.saturating_sub(self.work));
                    let result = self.check_depth(kind, &path, &moved, &mut budget);
                    self.work = MAX_PATCH_WORK - budget.unwrap_or(0);
                    result?;
                }
                self.add(kind, &path, moved)
            }
            "copy" => {
                let from = from()?;
                let source = walk(&self.document, &from.tokens).ok_or_else(|| {
                    missing(format!(
                        "copy operation does not apply: doc is missing from path: {}",
                        from.text
                    ))
                })?;
                let room = MAX_COPY_BYTES - self.copied;
                let Some(size) = encoded_len_within(source, room) else {
                    let size = encoded_len_within(source, usize::MAX).unwrap_or(usize::MAX);
                    return Err(PatchError::NotApplicable(format!(
                        "Unable to complete the copy, the accumulated size increase of copy is {}, exceeding the limit {MAX_COPY_BYTES}",
                        self.copied.saturating_add(size)
                    )));
                };
                self.copied += size;
                self.check_depth(kind, &path, source, &mut None)?;
                let copy = source.clone();
                self.add(kind, &path, copy)
            }
            other => Err(PatchError::NotApplicable(format!(
                "Unexpected kind: {other}"
            ))),
        }
    }

    /// Fails unless `value` fits at `path` within [`MAX_DEPTH`]. With a budget, each container
    /// looked at costs one step, and running out fails.
    fn check_depth(
        &self,
        kind: &str,
        path: &Pointer<'_>,
        value: &Value,
        budget: &mut Option<usize>,
    ) -> Result<(), PatchError> {
        let too_deep = || {
            PatchError::NotApplicable(format!(
                "{kind} operation does not apply: the value at \"{}\" would nest the object too deeply: {}",
                path.text,
                depth_message()
            ))
        };
        if !matches!(value, Value::Array(_) | Value::Object(_)) {
            return Ok(());
        }
        let Some(room) = MAX_DEPTH.checked_sub(path.tokens.len()) else {
            return Err(too_deep());
        };
        let Some(steps) = budget else {
            return if exceeds_depth(value, room) {
                Err(too_deep())
            } else {
                Ok(())
            };
        };
        let mut stack = vec![(value, 1usize)];
        while let Some((value, level)) = stack.pop() {
            if *steps == 0 {
                return Err(too_expensive());
            }
            *steps -= 1;
            if level > room {
                return Err(too_deep());
            }
            let children: Box<dyn Iterator<Item = &Value>> = match value {
                Value::Array(items) => Box::new(items.iter()),
                Value::Object(fields) => Box::new(fields.values()),
                _ => continue,
            };
            stack.extend(
                children
                    .filter(|child| matches!(child, Value::Array(_) | Value::Object(_)))
                    .map(|child| (child, level + 1)),
            );
        }
        Ok(())
    }

    fn charge(&mut self, steps: usize) -> Result<(), PatchError> {
        self.work = self.work.saturating_add(steps);
        if self.work > MAX_PATCH_WORK {
            return Err(too_expensive());
        }
        Ok(())
    }

    fn add(&mut self, kind: &str, path: &Pointer<'_>, value: Value) -> Result<(), PatchError> {
        let Some((parent, key)) = path.split() else {
            self.document = value;
            return Ok(());
        };
        let doc_missing = || {
            let what = if kind == "add" {
                "path"
            } else {
                "destination path"
            };
            missing(format!(
                "{kind} operation does not apply: doc is missing {what}: \"{}\"",
                path.text
            ))
        };
        let shift = match walk_mut(&mut self.document, parent).ok_or_else(doc_missing)? {
            Value::Object(fields) => {
                fields.insert(key.to_string(), value);
                return Ok(());
            }
            Value::Array(items) => {
                if key == "-" {
                    items.push(value);
                    return Ok(());
                }
                let at = index(key).filter(|&i| i <= items.len()).ok_or_else(|| {
                    PatchError::NotApplicable(format!(
                        "error in {kind} for path: '{}': Unable to access invalid index: {key}: invalid index referenced",
                        path.text
                    ))
                })?;
                items.len() - at
            }
            _ => return Err(doc_missing()),
        };
        self.charge(shift)?;
        if let Some(Value::Array(items)) = walk_mut(&mut self.document, parent)
            && let Some(at) = index(key)
        {
            items.insert(at, value);
        }
        Ok(())
    }

    fn remove(&mut self, kind: &str, path: &Pointer<'_>) -> Result<Value, PatchError> {
        let doc_missing = || {
            let what = if kind == "remove" {
                "path"
            } else {
                "from path"
            };
            missing(format!(
                "{kind} operation does not apply: doc is missing {what}: \"{}\"",
                path.text
            ))
        };
        let (parent, key) = path.split().ok_or_else(doc_missing)?;
        let shift = match walk_mut(&mut self.document, parent).ok_or_else(doc_missing)? {
            Value::Object(fields) => {
                return fields.remove(key).ok_or_else(|| {
                    missing(format!(
                        "error in {kind} for path: '{}': Unable to remove nonexistent key: {key}",
                        path.text
                    ))
                });
            }
            Value::Array(items) => {
                let at = index(key).filter(|&i| i < items.len()).ok_or_else(|| {
                    PatchError::NotApplicable(format!(
                        "error in {kind} for path: '{}': Unable to access invalid index: {key}: invalid index referenced",
                        path.text
                    ))
                })?;
                items.len() - at - 1
            }
            _ => return Err(doc_missing()),
        };
        self.charge(shift)?;
        match (walk_mut(&mut self.document, parent), index(key)) {
            (Some(Value::Array(items)), Some(at)) if at < items.len() => Ok(items.remove(at)),
            _ => Err(doc_missing()),
        }
    }

    fn replace(&mut self, path: &Pointer<'_>, value: Value) -> Result<(), PatchError> {
        let doc_missing = || {
            missing(format!(
                "replace operation does not apply: doc is missing key: {}",
                path.text
            ))
        };
        let Some(target) = walk_mut(&mut self.document, &path.tokens) else {
            return Err(doc_missing());
        };
        *target = value;
        Ok(())
    }

    fn test(&self, path: &Pointer<'_>, expected: Option<&Value>) -> Result<(), PatchError> {
        let failed = || {
            PatchError::NotApplicable(format!("testing value {} failed: test failed", path.text))
        };
        let actual = walk(&self.document, &path.tokens).ok_or_else(|| {
            missing(format!(
                "test operation does not apply: is missing path: {}",
                path.text
            ))
        })?;
        // Equality stops at the first difference and never visits more than the smaller side,
        // so a test costs at most the size of the patch's own value.
        match expected {
            Some(expected) if expected == actual => Ok(()),
            _ => Err(failed()),
        }
    }
}

fn too_expensive() -> PatchError {
    PatchError::NotApplicable(format!(
        "the JSON patch is too expensive to apply: it shifts or moves more than {MAX_PATCH_WORK} values"
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn op(kind: &str, path: &str, value: Value) -> Value {
        json!({"op": kind, "path": path, "value": value})
    }

    fn copy(from: &str, path: &str) -> Value {
        json!({"op": "copy", "from": from, "path": path})
    }

    #[test]
    fn operations_follow_rfc_6902() {
        let doc = json!({"a": {"b": [1, 2, 3]}, "c": "x"});
        let patched = apply(
            &doc,
            &json!([
                op("add", "/a/b/1", json!(9)),
                op("add", "/a/b/-", json!(4)),
                {"op": "remove", "path": "/a/b/0"},
                op("replace", "/c", json!("y")),
                {"op": "move", "from": "/c", "path": "/d"},
                copy("/a/b", "/e"),
                op("test", "/e", json!([9, 2, 3, 4])),
                op("add", "/f~1g", json!({"~": 1})),
                op("test", "/f~1g/~0", json!(1)),
            ]),
        )
        .unwrap();
        assert_eq!(
            patched,
            json!({"a": {"b": [9, 2, 3, 4]}, "d": "y", "e": [9, 2, 3, 4], "f/g": {"~": 1}})
        );
        assert_eq!(
            apply(&doc, &json!([op("add", "", json!([1]))])).unwrap(),
            json!([1])
        );
    }

    #[test]
    fn failures_name_the_operation_as_kube_apiserver_does() {
        let doc = json!({"a": [1], "o": {}});
        let message = |patch: Value| match apply(&doc, &patch) {
            Err(PatchError::NotApplicable(message)) => message,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            message(json!([op("add", "/x/y", json!(1))])),
            "add operation does not apply: doc is missing path: \"/x/y\": missing value"
        );
        assert_eq!(
            message(json!([op("test", "/a/0", json!(2))])),
            "testing value /a/0 failed: test failed"
        );
        assert_eq!(
            message(json!([op("add", "/a/5", json!(2))])),
            "error in add for path: '/a/5': Unable to access invalid index: 5: invalid index referenced"
        );
        assert_eq!(
            message(json!([{"op": "remove", "path": "/o/k"}])),
            "error in remove for path: '/o/k': Unable to remove nonexistent key: k: missing value"
        );
        assert_eq!(
            message(json!([{"op": "explode", "path": "/x"}])),
            "Unexpected kind: explode"
        );
        for leading_zero in ["/a/01", "/a/-1", "/a/+0", "/a/"] {
            assert!(apply(&doc, &json!([op("replace", leading_zero, json!(0))])).is_err());
        }
        assert!(matches!(
            apply(&doc, &json!({"op": "add"})),
            Err(PatchError::Malformed(_))
        ));
        assert!(matches!(
            apply(&doc, &json!([1])),
            Err(PatchError::Malformed(_))
        ));
        // A move into its own child is refused, not looped.
        assert!(apply(&doc, &json!([{"op": "move", "from": "/o", "path": "/o/x"}])).is_err());
    }

    #[test]
    fn more_than_ten_thousand_operations_are_too_large() {
        let ops: Vec<Value> = (0..=MAX_JSON_PATCH_OPERATIONS)
            .map(|_| op("test", "", json!({})))
            .collect();
        assert_eq!(
            apply(&json!({}), &Value::Array(ops.clone())),
            Err(PatchError::TooLarge(
                "The allowed maximum operations in a JSON patch is 10000, got 10001".into()
            ))
        );
        assert!(apply(&json!({}), &Value::Array(ops[1..].to_vec())).is_ok());
    }

    /// The 52 KB patch: copies that nest a value into its own deepest object, each
    /// doubling its depth (the paths grow with it; ~26k levels if nothing stops them).
    #[test]
    fn self_nesting_patches_stop_at_the_depth_limit() {
        let mut ops = vec![op("add", "/x", json!({}))];
        let mut depth = 1;
        while depth < 26_000 {
            ops.push(copy("/x", &format!("/x{}", "/a".repeat(depth))));
            depth *= 2;
        }
        ops.push(op("add", "/y", json!([[[[[[[[{}]]]]]]]])));
        let patch = Value::Array(ops);
        assert!(serde_json::to_vec(&patch).unwrap().len() > 50_000);
        let error = apply(&json!({}), &patch).unwrap_err();
        assert!(
            error.to_string().contains("exceeded max depth of 100"),
            "{error}"
        );
        // Moving a value under itself again and again is the same.
        let mut ops = vec![op("add", "/a", json!({}))];
        for _ in 0..200 {
            ops.push(op("add", "/b", json!({})));
            ops.push(json!({"op": "move", "from": "/a", "path": "/b/a"}));
            ops.push(json!({"op": "move", "from": "/b", "path": "/a"}));
        }
        let error = apply(&json!({}), &Value::Array(ops)).unwrap_err();
        assert!(error.to_string().contains("exceeded max depth"), "{error}");
    }

    #[test]
    fn the_depth_limit_is_exact() {
        let mut nested = json!(1);
        for _ in 0..MAX_DEPTH - 1 {
            nested = json!({ "n": nested });
        }
        // One object at the root plus 99 nested: exactly the limit.
        assert!(apply(&json!({}), &json!([op("add", "/n", nested.clone())])).is_ok());
        let deeper = json!({ "n": nested });
        assert!(apply(&json!({}), &json!([op("add", "/n", deeper.clone())])).is_err());
        assert!(apply(&json!({}), &json!([op("add", "", deeper)])).is_ok());
    }

    /// The 2.3 KB patch: repeated copies that double one object each time.
    #[test]
    fn exponential_copies_stop_at_the_copy_budget() {
        let mut ops = vec![op("add", "/d", json!(["x".repeat(64)]))];
        for _ in 0..60 {
            ops.push(copy("/d", "/e"));
            ops.push(copy("/e", "/d/-"));
        }
        assert!(serde_json::to_vec(&ops).unwrap().len() < 5_000);
        let error = apply(&json!({}), &Value::Array(ops))
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with(
                "Unable to complete the copy, the accumulated size increase of copy is "
            ),
            "{error}"
        );
        assert!(error.ends_with("exceeding the limit 3145728"), "{error}");
    }

    #[test]
    fn array_shifts_share_a_work_budget() {
        let doc = json!({"a": vec![0; 100_000]});
        let ops: Vec<Value> = (0..MAX_JSON_PATCH_OPERATIONS)
            .map(|_| op("add", "/a/0", json!(1)))
            .collect();
        let error = apply(&doc, &Value::Array(ops)).unwrap_err();
        assert!(error.to_string().contains("too expensive"), "{error}");
        // Appends cost nothing.
        let ops: Vec<Value> = (0..MAX_JSON_PATCH_OPERATIONS)
            .map(|_| op("add", "/a/-", json!(1)))
            .collect();
        assert!(apply(&doc, &Value::Array(ops)).is_ok());
    }
}
