//! Custom resources' schemas kept as their JSON text, parsed while they are used.
//!
//! A schema parsed into `serde_json::Value`s weighs about nine times its text (every JSON
//! object is a B-tree node of some 600 bytes, however few its fields): the 168 CRDs of
//! `kcp-bench crd-corpus` held 75 MiB of parsed schemas for 9 MiB of CRDs. A [`FrozenSchema`]
//! keeps the text and hands out the parsed value, shared by everyone holding it at the same
//! time, and kept parsed while its kind is among the recently used ones: its [`Warm`] set holds
//! parsed schemas within a budget of text bytes and evicts by the clock (second-chance)
//! rule, so the kinds a server is busy with parse once and idle ones cost their text.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use serde_json::Value;

/// The text bytes of the schemas a [`Warm`] set keeps parsed by default (a parsed schema
/// weighs about nine times its text).
pub const WARM_TEXT_BYTES: usize = 2 * 1024 * 1024;

/// Deeper schemas stay parsed: serde_json refuses to parse text nested beyond 128 levels.
const MAX_FROZEN_DEPTH: usize = 100;

/// A schema, frozen as text (or kept parsed when it cannot be).
#[derive(Clone)]
pub struct FrozenSchema(Kept);

#[derive(Clone)]
enum Kept {
    Text(Arc<Text>),
    Parsed(Arc<Value>),
}

struct Text {
    json: Box<[u8]>,
    parsed: Mutex<Parsed>,
    /// Used since the clock last passed it.
    used: AtomicBool,
    warm: Arc<Warm>,
}

#[derive(Default)]
struct Parsed {
    /// Held while the warm set keeps this schema.
    kept: Option<Arc<Value>>,
    /// The value last parsed, while anyone holds it.
    shared: Weak<Value>,
}

impl FrozenSchema {
    /// `schema` frozen, its parsed value kept warm by `warm`.
    pub fn new(schema: &Value, warm: &Arc<Warm>) -> FrozenSchema {
        if depth(schema) > MAX_FROZEN_DEPTH {
            return FrozenSchema::parsed(schema.clone());
        }
        FrozenSchema(Kept::Text(Arc::new(Text {
            // Serializing a `Value` cannot fail.
            json: serde_json::to_vec(schema).unwrap_or_default().into(),
            parsed: Mutex::new(Parsed::default()),
            used: AtomicBool::new(false),
            warm: Arc::clone(warm),
        })))
    }

    /// `schema`, kept parsed for good (a fixed set of kinds, such as kcp's own).
    pub fn parsed(schema: Value) -> FrozenSchema {
        FrozenSchema(Kept::Parsed(Arc::new(schema)))
    }

    /// The schema, parsed, and kept warm.
    pub fn get(&self) -> Arc<Value> {
        match &self.0 {
            Kept::Parsed(value) => Arc::clone(value),
            Kept::Text(text) => text.get(),
        }
    }

    /// The schema, parsed, without warming it: for one-off uses such as building its OpenAPI
    /// text, which must not push the kinds in use out of the warm set.
    pub fn get_once(&self) -> Arc<Value> {
        match &self.0 {
            Kept::Parsed(value) => Arc::clone(value),
            Kept::Text(text) => text.shared(&mut text.lock()),
        }
    }

    /// Whether its parsed value is held (by the warm set or a user): for tests.
    pub fn is_parsed(&self) -> bool {
        match &self.0 {
            Kept::Parsed(_) => true,
            Kept::Text(text) => text.lock().shared.strong_count() > 0,
        }
    }
}

impl Text {
    fn lock(&self) -> MutexGuard<'_, Parsed> {
        self.parsed.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn parse(&self) -> Arc<Value> {
        // The text was written from a `Value` no deeper than serde_json parses.
        Arc::new(serde_json::from_slice(&self.json).unwrap_or(Value::Null))
    }

    /// The value parsed for whoever holds it, or parsed now (and shared while held).
    fn shared(&self, parsed: &mut Parsed) -> Arc<Value> {
        if let Some(value) = parsed.shared.upgrade() {
            return value;
        }
        let value = self.parse();
        parsed.shared = Arc::downgrade(&value);
        value
    }

    fn get(self: &Arc<Self>) -> Arc<Value> {
        let mut parsed = self.lock();
        if let Some(kept) = &parsed.kept {
            self.used.store(true, Ordering::Relaxed);
            return Arc::clone(kept);
        }
        let value = self.shared(&mut parsed);
        parsed.kept = Some(Arc::clone(&value));
        drop(parsed);
        self.warm.admit(Arc::downgrade(self), self.json.len());
        value
    }

    fn evict(&self) {
        self.lock().kept = None;
    }
}

/// How deeply `value` nests.
fn depth(value: &Value) -> usize {
    match value {
        Value::Array(items) => 1 + items.iter().map(depth).max().unwrap_or(0),
        Value::Object(fields) => 1 + fields.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// The frozen schemas kept parsed: a clock over them, within a budget of their text's bytes.
pub struct Warm {
    budget: usize,
    clock: Mutex<Clock>,
}

#[derive(Default)]
struct Clock {
    /// The kept schemas, the hand at the front.
    entries: VecDeque<(Weak<Text>, usize)>,
    /// Their text's bytes.
    bytes: usize,
}

impl Default for Warm {
    fn default() -> Warm {
        Warm::new(WARM_TEXT_BYTES)
    }
}

impl Warm {
    /// A warm set keeping schemas of at most `budget` text bytes parsed (always the last one).
    pub fn new(budget: usize) -> Warm {
        Warm {
            budget,
            clock: Mutex::default(),
        }
    }

    fn admit(&self, text: Weak<Text>, bytes: usize) {
        let mut clock = self.clock.lock().unwrap_or_else(|e| e.into_inner());
        clock.entries.push_back((text, bytes));
        clock.bytes += bytes;
        // Every entry is passed at most twice (once to clear its flag): this ends.
        while clock.bytes > self.budget && clock.entries.len() > 1 {
            let Some((entry, bytes)) = clock.entries.pop_front() else {
                break;
            };
            match entry.upgrade() {
                Some(text) if text.used.swap(false, Ordering::Relaxed) => {
                    clock.entries.push_back((entry, bytes));
                }
                live => {
                    if let Some(text) = live {
                        text.evict();
                    }
                    clock.bytes -= bytes;
                }
            }
        }
    }

    /// How many schemas are kept parsed, and their text's bytes.
    pub fn kept(&self) -> (usize, usize) {
        let clock = self.clock.lock().unwrap_or_else(|e| e.into_inner());
        (clock.entries.len(), clock.bytes)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema(field: &str) -> Value {
        json!({"type": "object", "properties": {field: {"type": "string", "description": "x".repeat(100)}}})
    }

    #[test]
    fn a_frozen_schema_parses_back_to_itself_and_is_shared_while_held() {
        let warm = Arc::new(Warm::default());
        let frozen = FrozenSchema::new(&schema("a"), &warm);
        let first = frozen.get();
        assert_eq!(*first, schema("a"));
        assert!(Arc::ptr_eq(&first, &frozen.get()));
        assert!(Arc::ptr_eq(&first, &frozen.get_once()));
    }

    #[test]
    fn the_warm_set_keeps_the_recently_used_within_its_budget() {
        let one = serde_json::to_vec(&schema("a")).unwrap().len();
        let warm = Arc::new(Warm::new(2 * one));
        let frozen: Vec<FrozenSchema> = ["a", "b", "c"]
            .iter()
            .map(|field| FrozenSchema::new(&schema(field), &warm))
            .collect();
        drop(frozen[0].get());
        drop(frozen[1].get());
        assert!(frozen[0].is_parsed() && frozen[1].is_parsed());
        // `a` used again: the clock passes it over and evicts `b` for `c`.
        drop(frozen[0].get());
        drop(frozen[2].get());
        assert_eq!(warm.kept(), (2, 2 * one));
        assert!(frozen[0].is_parsed() && !frozen[1].is_parsed() && frozen[2].is_parsed());
        // Dropped schemas free their values at once and leave the set as the clock passes.
        let weak = Arc::downgrade(&frozen[0].get());
        drop(frozen);
        assert_eq!(weak.strong_count(), 0);
        let last = FrozenSchema::new(&schema("d"), &warm);
        drop(last.get());
        assert!(last.is_parsed());
        assert_eq!(warm.kept(), (2, 2 * one));
    }

    #[test]
    fn a_one_off_use_does_not_warm_a_schema() {
        let warm = Arc::new(Warm::default());
        let frozen = FrozenSchema::new(&schema("a"), &warm);
        let held = frozen.get_once();
        assert!(frozen.is_parsed());
        drop(held);
        assert!(!frozen.is_parsed());
        assert_eq!(warm.kept(), (0, 0));
    }

    #[test]
    fn too_deep_a_schema_stays_parsed() {
        let mut deep = json!({"type": "string"});
        for _ in 0..150 {
            deep = json!({"type": "object", "properties": {"a": deep}});
        }
        let frozen = FrozenSchema::new(&deep, &Arc::new(Warm::default()));
        assert!(frozen.is_parsed());
        assert_eq!(*frozen.get(), deep);
    }
}
