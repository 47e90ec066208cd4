//! How server-side apply sees a value: a scalar, a map (granular or atomic), or a list (atomic,
//! a set, or a map keyed by some of its items' fields), read from an OpenAPI v3 schema and its
//! extensions (`x-kubernetes-list-type`, `-list-map-keys`, `-map-type`, and the strategic
//! merge patch's `-patch-strategy`/`-patch-merge-key` where no list type is given).
//!
//! Without a schema (no schema at all, `x-kubernetes-preserve-unknown-fields` with no
//! properties, `x-kubernetes-int-or-string`) the shape is deduced from the value, as
//! structured-merge-diff's `deduced` type does: objects are granular maps, lists atomic.

use serde_json::Value;

/// Finds the schemas `$ref`s name (`#/components/schemas/<name>` or another prefix the
/// documents use).
pub trait Resolve: Sync {
    fn resolve(&self, reference: &str) -> Option<&Value>;
}

/// Schemas without references (a CRD's structural schema).
pub struct NoReferences;

impl Resolve for NoReferences {
    fn resolve(&self, _reference: &str) -> Option<&Value> {
        None
    }
}

/// How a value is merged and owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    /// A leaf: replaced whole, owned whole.
    Scalar,
    /// An object: field by field, or whole (`x-kubernetes-map-type: atomic`).
    Map { atomic: bool },
    /// A list.
    List(ListType),
}

/// How a list's items are told apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType {
    /// The list is one value.
    Atomic,
    /// Scalar items, each by its value (`v:`).
    Set,
    /// Object items, each by these fields (`k:`).
    Map(Vec<String>),
}

/// A position in a schema, or no schema (deduced from values).
#[derive(Clone, Copy)]
pub struct Schema<'a> {
    /// The schema as written where it is used (may be a `$ref` or an `allOf` wrapper with
    /// extensions beside it).
    node: Option<&'a Value>,
    refs: &'a dyn Resolve,
    /// The schema of `metadata` when this is an object's root (custom resources' schemas
    /// leave ObjectMeta out).
    metadata: Option<&'a Value>,
}

const MAX_REFERENCE_HOPS: usize = 8;

impl<'a> Schema<'a> {
    /// The schema `node`, resolving references with `refs`.
    pub fn new(node: &'a Value, refs: &'a dyn Resolve) -> Schema<'a> {
        Schema {
            node: Some(node),
            refs,
            metadata: None,
        }
    }

    /// No schema: every shape deduced from the values.
    pub fn deduced() -> Schema<'static> {
        Schema {
            node: None,
            refs: &NoReferences,
            metadata: None,
        }
    }

    /// This root schema with `metadata` read by ObjectMeta's schema `metadata`.
    pub fn with_metadata(self, metadata: &'a Value) -> Schema<'a> {
        Schema {
            metadata: Some(metadata),
            ..self
        }
    }

    fn with(&self, node: Option<&'a Value>) -> Schema<'a> {
        Schema {
            node,
            refs: self.refs,
            metadata: None,
        }
    }

    /// The schemas this position stands for, the one written here first and then each one a
    /// `$ref` (directly or as a single `allOf` entry) leads to.
    fn chain(&self) -> impl Iterator<Item = &'a Value> + 'a {
        let refs = self.refs;
        std::iter::successors(self.node, move |node| {
            let reference = node.get("$ref").and_then(Value::as_str).or_else(|| {
                match node.get("allOf").and_then(Value::as_array)?.as_slice() {
                    [only] => only.get("$ref").and_then(Value::as_str),
                    _ => None,
                }
            })?;
            refs.resolve(reference)
        })
        .take(MAX_REFERENCE_HOPS)
    }

    /// The first value of `key` along the chain.
    fn extension(&self, key: &str) -> Option<&'a Value> {
        self.chain().find_map(|node| node.get(key))
    }

    /// The schema that declares the type (the end of the reference chain).
    fn target(&self) -> Option<&'a Value> {
        self.chain().last()
    }

    /// The shape `value` has here. The reference chain is walked once: this runs for every
    /// value of every object written (managed fields), and each step of a walk looks keys up in
    /// the schema's maps.
    pub fn shape(&self, value: &Value) -> Shape {
        let mut target = None;
        let mut int_or_string = None;
        let mut map_type = None;
        for node in self.chain() {
            target = Some(node);
            int_or_string = int_or_string.or_else(|| node.get("x-kubernetes-int-or-string"));
            if value.is_object() {
                map_type = map_type.or_else(|| node.get("x-kubernetes-map-type"));
            }
        }
        let deduced = || match value {
            Value::Object(_) => Shape::Map { atomic: false },
            Value::Array(_) => Shape::List(ListType::Atomic),
            _ => Shape::Scalar,
        };
        let Some(target) = target else {
            return deduced();
        };
        if int_or_string == Some(&Value::Bool(true)) {
            return Shape::Scalar;
        }
        // Nothing known here: shapes come from the values.
        if ["type", "properties", "items", "additionalProperties"]
            .iter()
            .all(|key| target.get(*key).is_none())
        {
            return deduced();
        }
        let declared = target.get("type").and_then(Value::as_str);
        match value {
            Value::Object(_) if matches!(declared, None | Some("object")) => Shape::Map {
                atomic: map_type.and_then(Value::as_str) == Some("atomic"),
            },
            Value::Array(_) if matches!(declared, None | Some("array")) => {
                Shape::List(self.list_type())
            }
            _ => Shape::Scalar,
        }
    }

    fn list_type(&self) -> ListType {
        match self
            .extension("x-kubernetes-list-type")
            .and_then(Value::as_str)
        {
            Some("map") => ListType::Map(
                self.extension("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|keys| {
                        keys.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            Some("set") => ListType::Set,
            Some(_) => ListType::Atomic,
            None => {
                let merges = self
                    .extension("x-kubernetes-patch-strategy")
                    .and_then(Value::as_str)
                    .is_some_and(|s| s.split(',').any(|s| s == "merge"));
                let key = self
                    .extension("x-kubernetes-patch-merge-key")
                    .and_then(Value::as_str);
                match (merges, key) {
                    (true, Some(key)) => ListType::Map(vec![key.to_string()]),
                    (true, None) => ListType::Set,
                    _ => ListType::Atomic,
                }
            }
        }
    }

    /// The schema of field `name` of an object here, and whether the schema names it (a
    /// struct's field) rather than allowing any key (a map's entry).
    pub fn field(&self, name: &str) -> (Schema<'a>, bool) {
        if let (Some(metadata), "metadata") = (self.metadata, name) {
            return (self.with(Some(metadata)), true);
        }
        let Some(target) = self.target() else {
            return (self.with(None), false);
        };
        if let Some(property) = target.get("properties").and_then(|p| p.get(name)) {
            return (self.with(Some(property)), true);
        }
        match target.get("additionalProperties") {
            Some(schema @ Value::Object(_)) => (self.with(Some(schema)), false),
            _ => (self.with(None), false),
        }
    }

    /// The schema of a list's items here.
    pub fn items(&self) -> Schema<'a> {
        self.with(self.target().and_then(|t| t.get("items")))
    }

    /// The default of field `name` of the items here (a list-map key an item leaves out).
    pub fn item_default(&self, name: &str) -> Option<&'a Value> {
        let (field, _) = self.items().field(name);
        field.extension("default")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Definitions by `$ref`, as an OpenAPI document's `components/schemas`.
    struct Definitions(Value);

    impl Resolve for Definitions {
        fn resolve(&self, reference: &str) -> Option<&Value> {
            self.0.get(reference.strip_prefix("#/d/")?)
        }
    }

    #[test]
    fn shapes_follow_references_and_the_first_extension_along_them() {
        let refs = Definitions(json!({
            "Plain": {"type": "object", "properties": {"a": {"type": "string"}}},
            "Atomic": {"type": "object", "x-kubernetes-map-type": "atomic"},
            "Keyed": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["name"], "items": {"type": "object"}},
            "ToAtomic": {"$ref": "#/d/Atomic"},
        }));
        let shape = |node: Value, value: Value| Schema::new(&node, &refs).shape(&value);
        let object = json!({"a": "b"});

        // Beside an `allOf` wrapper, the wrapper's own extension comes first.
        let wrapped = json!({"allOf": [{"$ref": "#/d/Plain"}], "x-kubernetes-map-type": "atomic"});
        assert_eq!(shape(wrapped, object.clone()), Shape::Map { atomic: true });
        let overridden =
            json!({"allOf": [{"$ref": "#/d/Atomic"}], "x-kubernetes-map-type": "granular"});
        assert_eq!(
            shape(overridden, object.clone()),
            Shape::Map { atomic: false }
        );
        assert_eq!(
            shape(json!({"$ref": "#/d/Plain"}), object.clone()),
            Shape::Map { atomic: false }
        );
        // Two hops: the extension at the end of the chain.
        assert_eq!(
            shape(json!({"$ref": "#/d/ToAtomic"}), object.clone()),
            Shape::Map { atomic: true }
        );
        assert_eq!(
            shape(json!({"$ref": "#/d/Keyed"}), json!([{"name": "x"}])),
            Shape::List(ListType::Map(vec!["name".into()]))
        );
        // A declared type the value does not have: a leaf.
        assert_eq!(
            shape(json!({"type": "string"}), object.clone()),
            Shape::Scalar
        );
        // int-or-string is a leaf whatever the value, though it declares no type.
        assert_eq!(
            shape(json!({"x-kubernetes-int-or-string": true}), object.clone()),
            Shape::Scalar
        );
    }

    #[test]
    fn without_a_schema_shapes_come_from_the_values() {
        let refs = Definitions(json!({}));
        for node in [
            None,
            Some(json!({"description": "nothing declared"})),
            Some(json!({"$ref": "#/d/Missing"})),
            Some(json!({"x-kubernetes-preserve-unknown-fields": true})),
        ] {
            let schema = match &node {
                Some(node) => Schema::new(node, &refs),
                None => Schema::deduced(),
            };
            assert_eq!(schema.shape(&json!({"a": 1})), Shape::Map { atomic: false });
            assert_eq!(schema.shape(&json!([1, 2])), Shape::List(ListType::Atomic));
            assert_eq!(schema.shape(&json!("s")), Shape::Scalar);
        }
    }
}
