//! Nesting limits of JSON values: the one depth limit every write obeys, the tolerant decoder
//! every stored object is read with, and the request-body decoder that reports duplicate keys.
//!
//! Depth counts nested containers: `"x"` has depth 0, `{}` 1, `{"a": []}` 2. An object may be
//! stored only up to [`MAX_DEPTH`], chosen so that the object wrapped in a List, a Table row
//! or a watch event (up to four more levels) still decodes in serde_json-based clients such as
//! kube-rs, whose recursion limit refuses a 128th level.
//!
//! Reading must never fail, whatever an older server stored: [`decode_stored`] reads any depth
//! without recursion on the input beyond [`MAX_READ_DEPTH`] (see there for what it does with
//! deeper parts). Nothing in this module recurses on user data: depth checks, sizes and the
//! byte scanner are loops over explicit stacks.
//!
//! Must not know: HTTP, storage, which kinds exist.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

mod projected;
mod served;
pub use projected::{Projection, project};
pub use served::{KeyOrder, listed_from_stored, served_from_stored, served_from_stored_in};

/// An object's key, borrowed from the input unless it holds an escape.
pub(crate) struct Key<'de>(pub(crate) std::borrow::Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: de::Deserializer<'de>>(reader: D) -> Result<Self, D::Error> {
        struct Text;
        impl<'de> Visitor<'de> for Text {
            type Value = std::borrow::Cow<'de, str>;

            fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
                formatter.write_str("a key")
            }

            fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<Self::Value, E> {
                Ok(std::borrow::Cow::Borrowed(key))
            }

            fn visit_str<E: de::Error>(self, key: &str) -> Result<Self::Value, E> {
                Ok(std::borrow::Cow::Owned(key.to_string()))
            }
        }
        reader.deserialize_str(Text).map(Key)
    }
}

/// The deepest an object may be to be stored (create, update, patch results, controllers).
pub const MAX_DEPTH: usize = 100;

/// The deepest a stored object is read back as it is. Deeper parts can only come from servers
/// older than the write limit; each container that would sit below this level is answered as a
/// string holding its JSON text instead, so that nothing downstream (clones, comparisons,
/// encoding, drops, all recursive in serde_json) runs out of stack on it. The stored bytes are
/// untouched until the object is replaced or deleted.
pub const MAX_READ_DEPTH: usize = 256;

/// The name Go's JSON decoder gives a JSON value's type in its errors (`string`, `object`, ...).
pub fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The error text of a value deeper than [`MAX_DEPTH`], as Kubernetes' JSON utilities word it.
pub fn depth_message() -> String {
    format!("exceeded max depth of {MAX_DEPTH}")
}

/// Whether `value` nests more than `limit` containers anywhere; stops at the first path that
/// does.
pub fn exceeds_depth(value: &Value, limit: usize) -> bool {
    let mut stack: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((value, above)) = stack.pop() {
        let level = above + 1;
        match value {
            Value::Array(_) | Value::Object(_) if level > limit => return true,
            Value::Array(items) => {
                stack.extend(items.iter().filter(is_container).map(|v| (v, level)))
            }
            Value::Object(fields) => {
                stack.extend(fields.values().filter(is_container).map(|v| (v, level)))
            }
            _ => {}
        }
    }
    false
}

/// Whether `value` holds at least `limit` values (itself, fields, items and scalars, counted
/// alike); looks at no more than `limit` of them, so a large object costs no more than a small
/// one.
pub fn holds_at_least(value: &Value, limit: usize) -> bool {
    let mut seen = 0;
    let mut stack: Vec<&Value> = vec![value];
    while let Some(value) = stack.pop() {
        seen += 1;
        if seen >= limit {
            return true;
        }
        match value {
            Value::Array(items) => stack.extend(items),
            Value::Object(fields) => stack.extend(fields.values()),
            _ => {}
        }
    }
    false
}

fn is_container(value: &&Value) -> bool {
    matches!(value, Value::Array(_) | Value::Object(_))
}

/// The depth of `value` (0 for scalars).
pub fn depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((value, above)) = stack.pop() {
        let level = above + 1;
        match value {
            Value::Array(items) => {
                deepest = deepest.max(level);
                stack.extend(items.iter().map(|item| (item, level)));
            }
            Value::Object(fields) => {
                deepest = deepest.max(level);
                stack.extend(fields.values().map(|field| (field, level)));
            }
            _ => {}
        }
    }
    deepest
}

/// The length of `value`'s compact JSON encoding, or `None` once it passes `budget` bytes
/// (counting stops there).
pub fn encoded_len_within(value: &Value, budget: usize) -> Option<usize> {
    let mut total: usize = 0;
    let mut stack: Vec<&Value> = vec![value];
    while let Some(value) = stack.pop() {
        let here = match value {
            Value::Null | Value::Bool(true) => 4,
            Value::Bool(false) => 5,
            Value::Number(number) => number.to_string().len(),
            Value::String(text) => string_len(text),
            Value::Array(items) => {
                stack.extend(items.iter());
                2 + items.len().saturating_sub(1)
            }
            Value::Object(fields) => {
                let keys: usize = fields.keys().map(|key| string_len(key) + 1).sum();
                stack.extend(fields.values());
                2 + fields.len().saturating_sub(1) + keys
            }
        };
        total = total.saturating_add(here);
        if total > budget {
            return None;
        }
    }
    Some(total)
}

/// The encoded length of a JSON string, quotes and escapes included.
fn string_len(text: &str) -> usize {
    2 + text
        .chars()
        .map(|c| match c {
            '"' | '\\' | '\u{08}' | '\u{0c}' | '\n' | '\r' | '\t' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        })
        .sum::<usize>()
}

/// Why stored bytes could not be read as JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredDecodeError(String);

impl fmt::Display for StoredDecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StoredDecodeError {}

/// Decodes an object read back from storage, whatever its depth: up to [`MAX_READ_DEPTH`] as
/// it is, deeper containers as strings of their JSON text. Only bytes that are not JSON fail.
pub fn decode_stored(bytes: &[u8]) -> Result<Value, StoredDecodeError> {
    let error = |e: serde_json::Error| StoredDecodeError(e.to_string());
    // Nearly every stored object is shallow enough for serde_json's own recursion limit (127
    // levels): one pass, no scan. Only what that limit refuses is scanned and read as below.
    let recursion_limit = match serde_json::from_slice(bytes) {
        Ok(value) => return Ok(value),
        Err(e) if e.to_string().starts_with("recursion limit exceeded") => e,
        Err(e) => return Err(error(e)),
    };
    let deepest = scan_depth(bytes);
    if deepest < 128 {
        return Err(error(recursion_limit));
    }
    let folded;
    let bytes = if deepest > MAX_READ_DEPTH {
        folded = fold_below(bytes, MAX_READ_DEPTH)?;
        &folded[..]
    } else {
        bytes
    };
    // The scan bounds the depth the parser can reach before it fails, so its recursion is safe.
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    deserializer.disable_recursion_limit();
    let value = Value::deserialize(&mut deserializer).map_err(error)?;
    deserializer.end().map_err(error)?;
    Ok(value)
}

/// The deepest container nesting in JSON text (brackets inside strings do not count). For
/// text that is not JSON the figure is an upper bound of what a parser reaches before failing.
fn scan_depth(bytes: &[u8]) -> usize {
    let mut deepest = 0;
    let mut level: usize = 0;
    let mut scanner = Scanner::default();
    for &byte in bytes {
        match scanner.step(byte) {
            Some(Bracket::Open) => {
                level += 1;
                deepest = deepest.max(level);
            }
            Some(Bracket::Close) => level = level.saturating_sub(1),
            None => {}
        }
    }
    deepest
}

/// Rewrites JSON text so that every container opening below `keep` levels becomes a JSON
/// string of its text.
fn fold_below(bytes: &[u8], keep: usize) -> Result<Vec<u8>, StoredDecodeError> {
    let mut out = Vec::with_capacity(bytes.len() + 64);
    let mut level: usize = 0;
    let mut scanner = Scanner::default();
    let mut folding_from: Option<usize> = None;
    let mut copied_to = 0;
    for (at, &byte) in bytes.iter().enumerate() {
        match scanner.step(byte) {
            Some(Bracket::Open) => {
                level += 1;
                if level == keep + 1 && folding_from.is_none() {
                    out.extend_from_slice(&bytes[copied_to..at]);
                    folding_from = Some(at);
                }
            }
            Some(Bracket::Close) => {
                if level == keep + 1
                    && let Some(start) = folding_from.take()
                {
                    let text = std::str::from_utf8(&bytes[start..=at]).map_err(|e| {
                        StoredDecodeError(format!("stored object is not UTF-8: {e}"))
                    })?;
                    let quoted = serde_json::to_string(text)
                        .map_err(|e| StoredDecodeError(e.to_string()))?;
                    out.extend_from_slice(quoted.as_bytes());
                    copied_to = at + 1;
                }
                level = level.saturating_sub(1);
            }
            None => {}
        }
    }
    if folding_from.is_some() {
        return Err(StoredDecodeError(
            "EOF while parsing a value: unbalanced brackets".into(),
        ));
    }
    out.extend_from_slice(&bytes[copied_to..]);
    Ok(out)
}

enum Bracket {
    Open,
    Close,
}

/// Finds the brackets of JSON text outside strings.
#[derive(Default)]
struct Scanner {
    in_string: bool,
    escaped: bool,
}

impl Scanner {
    fn step(&mut self, byte: u8) -> Option<Bracket> {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if byte == b'\\' {
                self.escaped = true;
            } else if byte == b'"' {
                self.in_string = false;
            }
            return None;
        }
        match byte {
            b'"' => {
                self.in_string = true;
                None
            }
            b'[' | b'{' => Some(Bracket::Open),
            b']' | b'}' => Some(Bracket::Close),
            _ => None,
        }
    }
}

/// A request body decoded in one pass: the value, and the paths of the keys that were repeated
/// in some object (the last one wins, as in Kubernetes).
#[derive(Debug, Clone, PartialEq)]
pub struct Decoded {
    pub value: Value,
    /// `metadata.name`, `data.a`, `rules[0].verbs`: at most [`MAX_DUPLICATES`], each once.
    pub duplicates: Vec<String>,
}

/// How many duplicate keys are reported at most (as sigs.k8s.io/json keeps strict errors).
pub const MAX_DUPLICATES: usize = 100;

/// Why a request body could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// Not JSON (or YAML): the decoder's message.
    Syntax(String),
    /// Deeper than [`MAX_DEPTH`].
    TooDeep,
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BodyError::Syntax(message) => f.write_str(message),
            BodyError::TooDeep => f.write_str(&depth_message()),
        }
    }
}

impl std::error::Error for BodyError {}

/// Decodes a JSON request body, refusing more than [`MAX_DEPTH`] levels and noting duplicate
/// keys.
pub fn decode_body(bytes: &[u8]) -> Result<Decoded, BodyError> {
    decode_document(bytes, MAX_DEPTH)
}

/// Decodes a JSON document (a patch, whose operations wrap the values they insert) as
/// [`decode_body`] does, refusing more than `limit` levels (at most 127, serde_json's own
/// recursion limit).
pub fn decode_document(bytes: &[u8], limit: usize) -> Result<Decoded, BodyError> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let mut state = State {
        limit,
        ..State::default()
    };
    let result = Node {
        state: &mut state,
        level: 0,
    }
    .deserialize(&mut deserializer);
    let value = match result {
        Ok(value) => value,
        Err(_) if state.too_deep => return Err(BodyError::TooDeep),
        Err(error) => return Err(BodyError::Syntax(error.to_string())),
    };
    deserializer
        .end()
        .map_err(|e| BodyError::Syntax(e.to_string()))?;
    Ok(Decoded {
        value,
        duplicates: state.duplicates,
    })
}

/// A value decoded by any serde data format (YAML bodies) with [`decode_body`]'s checks. A
/// value deeper than [`MAX_DEPTH`] fails with an error whose text contains
/// [`depth_message`]; the format's deserializer must bound its own recursion.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked(pub Decoded);

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: de::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut state = State::default();
        let value = Node {
            state: &mut state,
            level: 0,
        }
        .deserialize(deserializer)?;
        Ok(Checked(Decoded {
            value,
            duplicates: state.duplicates,
        }))
    }
}

struct State {
    path: Vec<Segment>,
    duplicates: Vec<String>,
    too_deep: bool,
    limit: usize,
}

impl Default for State {
    fn default() -> Self {
        State {
            path: Vec::new(),
            duplicates: Vec::new(),
            too_deep: false,
            limit: MAX_DEPTH,
        }
    }
}

enum Segment {
    Key(String),
    Index(usize),
}

impl State {
    fn path_text(&self) -> String {
        let mut text = String::new();
        for segment in &self.path {
            match segment {
                Segment::Key(key) => {
                    if !text.is_empty() {
                        text.push('.');
                    }
                    text.push_str(key);
                }
                Segment::Index(index) => text.push_str(&format!("[{index}]")),
            }
        }
        text
    }

    fn note_duplicate(&mut self) {
        let path = self.path_text();
        if self.duplicates.len() < MAX_DUPLICATES && !self.duplicates.contains(&path) {
            self.duplicates.push(path);
        }
    }
}

/// Deserializes one value at `level` containers below the root.
struct Node<'s> {
    state: &'s mut State,
    level: usize,
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl Node<'_> {
    fn enter<E: de::Error>(&mut self) -> Result<usize, E> {
        let level = self.level + 1;
        if level > self.state.limit {
            self.state.too_deep = true;
            return Err(E::custom(depth_message()));
        }
        Ok(level)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<Value, A::Error> {
        let level = self.enter()?;
        let mut items = Vec::new();
        loop {
            self.state.path.push(Segment::Index(items.len()));
            let item = seq.next_element_seed(Node {
                state: self.state,
                level,
            });
            self.state.path.pop();
            match item? {
                Some(item) => items.push(item),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<Value, A::Error> {
        let level = self.enter()?;
        let mut fields = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            self.state.path.push(Segment::Key(key.clone()));
            if fields.contains_key(&key) {
                self.state.note_duplicate();
            }
            let value = map.next_value_seed(Node {
                state: self.state,
                level,
            });
            self.state.path.pop();
            fields.insert(key, value?);
        }
        Ok(Value::Object(fields))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn holds_at_least_counts_every_value_up_to_its_limit() {
        let object = serde_json::json!({"a": [1, 2, {"b": null}], "c": "d"});
        // The object, a, its three items, b, c: seven values.
        assert!(holds_at_least(&object, 7));
        assert!(!holds_at_least(&object, 8));
        assert!(holds_at_least(&serde_json::json!(1), 1));
        assert!(!holds_at_least(&serde_json::json!(1), 2));
        let long = Value::Array(vec![Value::Null; 1_000_000]);
        assert!(holds_at_least(&long, 1_000));
    }

    /// `levels` nested containers, alternating objects and arrays, around a string.
    pub(crate) fn nested(levels: usize) -> Value {
        let mut value = json!("core");
        for level in 0..levels {
            value = if level % 2 == 0 {
                json!({ "n": value })
            } else {
                json!([value])
            };
        }
        value
    }

    /// The JSON text of `levels` nested arrays, built without a deep `Value`.
    fn nested_text(levels: usize) -> String {
        format!(
            "{{\"metadata\":{{\"name\":\"deep\"}},\"x\":{}1{}}}",
            "[".repeat(levels),
            "]".repeat(levels)
        )
    }

    #[test]
    fn depth_counts_containers_and_the_limit_is_exact() {
        assert_eq!(depth(&json!("x")), 0);
        assert_eq!(depth(&json!({})), 1);
        assert_eq!(depth(&json!({"a": [1, {"b": []}]})), 4);
        assert_eq!(depth(&nested(MAX_DEPTH)), MAX_DEPTH);
        assert!(!exceeds_depth(&nested(MAX_DEPTH), MAX_DEPTH));
        assert!(exceeds_depth(&nested(MAX_DEPTH + 1), MAX_DEPTH));
        assert!(!exceeds_depth(&json!(3), 0));
        assert!(exceeds_depth(&json!([]), 0));
    }

    #[test]
    fn an_object_at_the_limit_still_decodes_in_serde_json_when_wrapped() {
        // A Table of a watch event: event -> Table -> rows -> row -> object.
        let wrapped = json!({"object": {"rows": [{"object": nested(MAX_DEPTH)}]}});
        let text = serde_json::to_string(&wrapped).unwrap();
        assert!(serde_json::from_str::<Value>(&text).is_ok());
    }

    #[test]
    fn encoded_length_matches_serde_json_and_stops_at_the_budget() {
        let value = json!({"a": [1, -2.5, null, true, false, "q\"\n\u{1}é"], "": {}});
        let text = serde_json::to_string(&value).unwrap();
        assert_eq!(encoded_len_within(&value, usize::MAX), Some(text.len()));
        assert_eq!(encoded_len_within(&value, text.len()), Some(text.len()));
        assert_eq!(encoded_len_within(&value, text.len() - 1), None);
    }

    #[test]
    fn stored_objects_read_at_any_depth() {
        // At the limit and a little deeper: as they are.
        for levels in [10, 127, 128, 200, MAX_READ_DEPTH - 1] {
            let text = nested_text(levels);
            let value = decode_stored(text.as_bytes()).unwrap();
            assert_eq!(depth(&value), levels + 1, "{levels}");
            assert_eq!(value["metadata"]["name"], "deep");
        }
        // Thousands of levels: the part below MAX_READ_DEPTH becomes its text.
        for levels in [MAX_READ_DEPTH, 5_000, 100_000] {
            let text = nested_text(levels);
            let value = decode_stored(text.as_bytes()).unwrap();
            assert_eq!(depth(&value), MAX_READ_DEPTH, "{levels}");
            let mut inner = &value["x"];
            while let Value::Array(items) = inner {
                inner = &items[0];
            }
            let folded = inner.as_str().unwrap();
            assert_eq!(folded.len(), 2 * (levels + 1 - MAX_READ_DEPTH) + 1);
            // Everything that holds a read object can clone, compare, encode and drop it.
            let copy = value.clone();
            assert_eq!(copy, value);
            assert!(serde_json::to_vec(&value).is_ok());
        }
    }

    #[test]
    fn numbers_read_back_exactly_as_written() {
        // Found by the merge_patch fuzz target: without exact float parsing, this number
        // moved by one unit in the last place on every write and read.
        let text = format!("[{}, 0.1, 1e-300, 123456789.123456789]", "1".repeat(136));
        let value = decode_stored(text.as_bytes()).unwrap();
        let again = decode_stored(&serde_json::to_vec(&value).unwrap()).unwrap();
        assert_eq!(again, value);
    }

    #[test]
    fn brackets_in_strings_do_not_count_and_garbage_fails() {
        let text = format!(
            "{{\"a\":\"{}\\\"[\",\"b\":{}0{}}}",
            "[".repeat(1000),
            "[".repeat(300),
            "]".repeat(300)
        );
        let value = decode_stored(text.as_bytes()).unwrap();
        assert!(value["a"].as_str().unwrap().starts_with("[[["));
        assert_eq!(depth(&value), MAX_READ_DEPTH);
        for bad in [&b"{"[..], b"[[[[", b"\xff", b"{\"a\":1}x", b"]]]]"] {
            assert!(decode_stored(bad).is_err());
        }
        let unbalanced = "[".repeat(MAX_READ_DEPTH + 5);
        assert!(decode_stored(unbalanced.as_bytes()).is_err());
    }

    #[test]
    fn request_bodies_note_duplicates_and_refuse_depth() {
        let decoded = decode_body(
            br#"{"metadata": {"name": "a", "name": "b"}, "data": {"k": "1", "k": "2"},
                "rules": [{"verbs": [], "verbs": ["get"]}], "data": {"z": "1"}}"#,
        )
        .unwrap();
        assert_eq!(decoded.value["metadata"]["name"], "b");
        assert_eq!(decoded.value["data"], json!({"z": "1"}));
        assert_eq!(decoded.value["rules"][0]["verbs"], json!(["get"]));
        assert_eq!(
            decoded.duplicates,
            vec!["metadata.name", "data.k", "rules[0].verbs", "data"]
        );
        let at_limit = serde_json::to_vec(&nested(MAX_DEPTH)).unwrap();
        assert!(decode_body(&at_limit).is_ok());
        let over = serde_json::to_vec(&nested(MAX_DEPTH + 1)).unwrap();
        assert_eq!(decode_body(&over), Err(BodyError::TooDeep));
        let far_over = "[".repeat(1_000_000);
        assert_eq!(decode_body(far_over.as_bytes()), Err(BodyError::TooDeep));
        assert!(matches!(decode_body(b"{} x"), Err(BodyError::Syntax(_))));
        assert!(decode_document(&over, MAX_DEPTH + 1).is_ok());
        assert!(matches!(decode_body(b""), Err(BodyError::Syntax(_))));
    }
}
