//! Sets of field paths, as server-side apply tracks who owns what (structured-merge-diff's
//! `fieldpath.Set`), and their `FieldsV1` form in `metadata.managedFields`.
//!
//! A path is a sequence of elements: a field of an object (`f:name`), an item of an
//! associative list by its keys (`k:{"name":"a","port":80}`), an item of a set by its value
//! (`v:"x"`), or an item of an atomic list by its index (`i:0`). A set holds paths as a tree:
//! each node knows the elements that are members themselves and the elements with children.
//! In `FieldsV1` each element is a key whose value is the subtree (`{}` for a leaf), and `"."`
//! inside a subtree says that the element is a member itself as well.
//!
//! Must not know: objects' schemas or how a set is computed from an object (that is the
//! caller's walk).

#[cfg(test)]
mod tests;

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

/// One step of a path.
#[derive(Debug, Clone, PartialEq)]
pub enum PathElement {
    /// A field of an object.
    Field(String),
    /// An item of an associative list, by its key fields (sorted by name).
    Key(Vec<(String, Value)>),
    /// An item of a set, by its value.
    Value(Value),
    /// An item of an atomic list, by its position.
    Index(usize),
}

impl Eq for PathElement {}

impl PathElement {
    /// The item of an associative list with these key fields (any order).
    pub fn key(fields: impl IntoIterator<Item = (String, Value)>) -> PathElement {
        let mut fields: Vec<(String, Value)> = fields.into_iter().collect();
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        PathElement::Key(fields)
    }

    /// The element's `FieldsV1` key: `f:name`, `k:{...}`, `v:...` or `i:N`.
    pub fn to_key(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(fields) => {
                let object: Map<String, Value> = fields.iter().cloned().collect();
                format!("k:{}", Value::Object(object))
            }
            PathElement::Value(value) => format!("v:{value}"),
            PathElement::Index(index) => format!("i:{index}"),
        }
    }

    /// The element a `FieldsV1` key names.
    pub fn from_key(key: &str) -> Result<PathElement, String> {
        let (kind, rest) = key
            .split_once(':')
            .ok_or_else(|| format!("unknown path element type in {key:?}"))?;
        let json = |text: &str| -> Result<Value, String> {
            serde_json::from_str(text).map_err(|e| format!("invalid path element {key:?}: {e}"))
        };
        match kind {
            "f" => Ok(PathElement::Field(rest.to_string())),
            "k" => match json(rest)? {
                Value::Object(fields) => Ok(PathElement::key(fields)),
                _ => Err(format!(
                    "invalid path element {key:?}: not an object of keys"
                )),
            },
            "v" => Ok(PathElement::Value(json(rest)?)),
            "i" => rest
                .parse()
                .map(PathElement::Index)
                .map_err(|_| format!("invalid path element {key:?}: not an index")),
            _ => Err(format!("unknown path element type in {key:?}")),
        }
    }

    fn rank(&self) -> u8 {
        match self {
            PathElement::Field(_) => 0,
            PathElement::Key(_) => 1,
            PathElement::Value(_) => 2,
            PathElement::Index(_) => 3,
        }
    }
}

impl Ord for PathElement {
    /// Fields, then keys, then values, then indexes, each in their own order (as
    /// structured-merge-diff orders them).
    fn cmp(&self, other: &Self) -> Ordering {
        match (self, other) {
            (PathElement::Field(a), PathElement::Field(b)) => a.cmp(b),
            (PathElement::Key(a), PathElement::Key(b)) => {
                for ((a_name, a_value), (b_name, b_value)) in a.iter().zip(b) {
                    let order = a_name
                        .cmp(b_name)
                        .then_with(|| compare_values(a_value, b_value));
                    if order != Ordering::Equal {
                        return order;
                    }
                }
                a.len().cmp(&b.len())
            }
            (PathElement::Value(a), PathElement::Value(b)) => compare_values(a, b),
            (PathElement::Index(a), PathElement::Index(b)) => a.cmp(b),
            _ => self.rank().cmp(&other.rank()),
        }
    }
}

impl PartialOrd for PathElement {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A total order on JSON values: null, booleans, numbers, strings, lists, objects.
pub fn compare_values(a: &Value, b: &Value) -> Ordering {
    fn rank(value: &Value) -> u8 {
        match value {
            Value::Null => 0,
            Value::Bool(_) => 1,
            Value::Number(_) => 2,
            Value::String(_) => 3,
            Value::Array(_) => 4,
            Value::Object(_) => 5,
        }
    }
    match (a, b) {
        (Value::Bool(a), Value::Bool(b)) => a.cmp(b),
        (Value::Number(a), Value::Number(b)) => {
            let (a, b) = (a.as_f64().unwrap_or(0.0), b.as_f64().unwrap_or(0.0));
            a.total_cmp(&b)
        }
        (Value::String(a), Value::String(b)) => a.cmp(b),
        (Value::Array(a), Value::Array(b)) => a
            .iter()
            .zip(b)
            .map(|(a, b)| compare_values(a, b))
            .find(|order| *order != Ordering::Equal)
            .unwrap_or_else(|| a.len().cmp(&b.len())),
        (Value::Object(a), Value::Object(b)) => a
            .iter()
            .zip(b)
            .map(|((ak, av), (bk, bv))| ak.cmp(bk).then_with(|| compare_values(av, bv)))
            .find(|order| *order != Ordering::Equal)
            .unwrap_or_else(|| a.len().cmp(&b.len())),
        _ => rank(a).cmp(&rank(b)),
    }
}

/// A set of paths.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Set {
    /// Elements that are members here.
    pub(crate) members: BTreeSet<PathElement>,
    /// Elements with members below them.
    pub(crate) children: BTreeMap<PathElement, Set>,
}

impl Set {
    pub fn new() -> Set {
        Set::default()
    }

    /// Whether the set holds no path.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.values().all(Set::is_empty)
    }

    /// Adds `path` (an empty path adds nothing).
    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Whether `path` is a member.
    pub fn has(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.has(rest)),
        }
    }

    /// The set below `element`, if it has members below it.
    pub fn child(&self, element: &PathElement) -> Option<&Set> {
        self.children.get(element)
    }

    /// Every path in the set, in order (a member before what is below it).
    pub fn paths(&self) -> Vec<Vec<PathElement>> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Vec<PathElement>>) {
        let elements: BTreeSet<&PathElement> =
            self.members.iter().chain(self.children.keys()).collect();
        for element in elements {
            prefix.push(element.clone());
            if self.members.contains(element) {
                out.push(prefix.clone());
            }
            if let Some(child) = self.children.get(element) {
                child.collect(prefix, out);
            }
            prefix.pop();
        }
    }

    /// The paths in either set.
    pub fn union(&self, other: &Set) -> Set {
        let mut out = self.clone();
        out.add(other);
        out
    }

    /// Adds the paths of `other` (a union in place: what is already here is not copied).
    pub fn add(&mut self, other: &Set) {
        self.members.extend(other.members.iter().cloned());
        for (element, child) in &other.children {
            match self.children.get_mut(element) {
                Some(mine) => mine.add(child),
                None => {
                    self.children.insert(element.clone(), child.clone());
                }
            }
        }
    }

    /// The paths in this set and not in `other`.
    pub fn difference(&self, other: &Set) -> Set {
        let mut out = Set::new();
        out.members = self.members.difference(&other.members).cloned().collect();
        for (element, child) in &self.children {
            let rest = match other.children.get(element) {
                Some(theirs) => child.difference(theirs),
                None => child.clone(),
            };
            if !rest.is_empty() {
                out.children.insert(element.clone(), rest);
            }
        }
        out
    }

    /// The paths in both sets.
    pub fn intersection(&self, other: &Set) -> Set {
        let mut out = Set::new();
        out.members = self.members.intersection(&other.members).cloned().collect();
        for (element, child) in &self.children {
            if let Some(theirs) = other.children.get(element) {
                let both = child.intersection(theirs);
                if !both.is_empty() {
                    out.children.insert(element.clone(), both);
                }
            }
        }
        out
    }

    /// The set as `FieldsV1` JSON.
    pub fn to_fields_v1(&self) -> Value {
        let mut object = Map::new();
        for element in &self.members {
            if !self.children.contains_key(element) {
                object.insert(element.to_key(), Value::Object(Map::new()));
            }
        }
        for (element, child) in &self.children {
            if child.is_empty() && !self.members.contains(element) {
                continue;
            }
            let mut below = match child.to_fields_v1() {
                Value::Object(below) => below,
                _ => Map::new(),
            };
            if self.members.contains(element) {
                below.insert(".".into(), Value::Object(Map::new()));
            }
            object.insert(element.to_key(), Value::Object(below));
        }
        Value::Object(object)
    }

    /// The set `FieldsV1` JSON states.
    pub fn from_fields_v1(fields: &Value) -> Result<Set, String> {
        let object = fields.as_object().ok_or("FieldsV1 must be a JSON object")?;
        let mut set = Set::new();
        for (key, below) in object {
            if key == "." {
                continue;
            }
            let element = PathElement::from_key(key)?;
            let below_object = below
                .as_object()
                .ok_or_else(|| format!("the value of {key:?} must be a JSON object"))?;
            if below_object.is_empty() || below_object.contains_key(".") {
                set.members.insert(element.clone());
            }
            let child = Set::from_fields_v1(below)?;
            if !child.is_empty() {
                set.children.insert(element, child);
            }
        }
        Ok(set)
    }
}
