//! Schema compatibility, as kcp's schema negotiation decides it: whether every object a CRD's
//! existing structural schema accepts is also accepted by a new one (`new` is then a
//! super-schema), and the least common denominator of the two (the existing schema narrowed
//! until the new one accepts all it accepts).
//!
//! kcp's rules: types (an `integer` may become a `number`; narrowing a `number` to the new
//! `integer`), properties (new ones are fine; removed ones are incompatible, or dropped from the
//! LCD), `additionalProperties` (a schema, or `true`), string `enum`s (the new set must contain
//! the old; the LCD keeps the intersection), list and map types, int-or-string and
//! preserve-unknown-fields, `uniqueItems`, `format`. Also checked here, where kcp refused or
//! skipped them: `required` (the new schema may not require more; the LCD requires both sets),
//! numeric and length bounds (`minimum`, `maximum` and their exclusive forms, `multipleOf`,
//! `min/maxLength`, `min/maxItems`, `min/maxProperties`: the new bounds may not be tighter; the
//! LCD takes the tighter of each), `nullable` (may not be taken away; the LCD is nullable only
//! if both are), enums of every scalar type, `x-kubernetes-embedded-resource`. `pattern`,
//! `allOf`, `anyOf` (but int-or-string's own), `oneOf` and `not`, whose languages are not
//! compared here, may stay the same or be dropped (looser), or appear only in the new schema
//! (tighter: the LCD takes them); two different ones are refused by name: a construct not
//! understood is an error, never a silent pass.
//!
//! Must not know: where the schemas come from (CRD files, clusters' OpenAPI), or what a
//! negotiation does with the result.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

/// One incompatible difference, at a field path of the schema, worded as Kubernetes' field
/// errors are (`<path>: Invalid value: ...: <why>`, `<path>: Forbidden: <why>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incompatibility {
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for Incompatibility {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Compares `new` to `existing` (structural schemas, as JSON) at `path` (e.g.
/// `spec.versions[0].schema.openAPIV3Schema`). Without `narrow`, `existing` must be a
/// sub-schema of `new`: the answer is `existing` or every incompatibility. With `narrow`, the
/// answer is the least common denominator where narrowing helps (removed properties, enums,
/// bounds, required fields), and incompatibilities only where it cannot (a type changed).
pub fn compare(
    path: &str,
    existing: &Value,
    new: &Value,
    narrow: bool,
) -> Result<Value, Vec<Incompatibility>> {
    let mut walk = Walk {
        narrow,
        errors: Vec::new(),
    };
    let mut lcd = existing.clone();
    walk.schema(path, existing, new, &mut lcd);
    match walk.errors.is_empty() {
        true => Ok(lcd),
        false => Err(walk.errors),
    }
}

struct Walk {
    narrow: bool,
    errors: Vec<Incompatibility>,
}

fn child(path: &str, name: &str) -> String {
    match path {
        "" => name.to_string(),
        path => format!("{path}.{name}"),
    }
}

fn key(path: &str, name: &str) -> String {
    format!("{path}[{name}]")
}

fn go_quote(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

fn text<'a>(schema: &'a Value, field: &str) -> &'a str {
    schema
        .get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn flag(schema: &Value, field: &str) -> bool {
    schema.get(field).and_then(Value::as_bool).unwrap_or(false)
}

/// Go's `%v`-like rendering of a value in an "Invalid value" message.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => go_quote(s),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

fn strings(value: Option<&Value>) -> BTreeSet<String> {
    value
        .and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The JSON type a schema declares, or `int-or-string` and `preserve` for the two untyped
/// kinds structural schemas allow.
fn kind(schema: &Value) -> &str {
    match text(schema, "type") {
        "" if flag(schema, "x-kubernetes-int-or-string") => "int-or-string",
        "" if flag(schema, "x-kubernetes-preserve-unknown-fields") => "preserve",
        other => other,
    }
}

/// Which bound is the tighter one.
#[derive(Clone, Copy)]
enum Tighter {
    Lower,
    Higher,
}

impl Walk {
    fn invalid(&mut self, field: String, value: &Value, why: &str) {
        self.errors.push(Incompatibility {
            field,
            message: format!("Invalid value: {}: {why}", shown(value)),
        });
    }

    fn forbidden(&mut self, field: String, why: String) {
        self.errors.push(Incompatibility {
            field,
            message: format!("Forbidden: {why}"),
        });
    }

    fn schema(&mut self, path: &str, existing: &Value, new: &Value, lcd: &mut Value) {
        if !new.is_object() {
            self.invalid(
                path.to_string(),
                &Value::Null,
                "new schema doesn't allow anything",
            );
            return;
        }
        let (was, now) = (
            flag(existing, "x-kubernetes-preserve-unknown-fields"),
            flag(new, "x-kubernetes-preserve-unknown-fields"),
        );
        if was != now {
            self.invalid(
                child(path, "x-kubernetes-preserve-unknown-fields"),
                &json!(now),
                &format!(
                    "x-kubernetes-preserve-unknown-fields value changed (was {was}, now {now})"
                ),
            );
            return;
        }
        for construct in ["allOf", "oneOf", "not"] {
            self.construct(path, construct, existing, new, lcd);
        }
        let embedded = "x-kubernetes-embedded-resource";
        if flag(existing, embedded) != flag(new, embedded) {
            self.invalid(
                child(path, embedded),
                &json!(flag(new, embedded)),
                "x-kubernetes-embedded-resource value has been changed in an incompatible way",
            );
        }
        self.nullable(path, existing, new, lcd);
        match kind(existing) {
            "number" => self.number(path, existing, new, lcd),
            "integer" => self.integer(path, existing, new, lcd),
            "string" => {
                if self.same_type(path, existing, new) {
                    self.string(path, existing, new, lcd);
                }
            }
            "boolean" => {
                if self.same_type(path, existing, new) {
                    self.enumeration(path, existing, new, lcd);
                }
            }
            "array" => self.array(path, existing, new, lcd),
            "object" => self.object(path, existing, new, lcd),
            "int-or-string" => self.int_or_string(path, existing, new, lcd),
            "preserve" => {
                self.same_type(path, existing, new);
            }
            other => self.invalid(child(path, "type"), &json!(other), "Invalid type"),
        }
        if kind(existing) != "int-or-string" {
            self.construct(path, "anyOf", existing, new, lcd);
        }
    }

    /// A construct whose languages are not compared here (`allOf`, `anyOf`, `oneOf`, `not`,
    /// `pattern`): the same on both sides, or gone (looser), is fine; one only the new schema
    /// has is tighter (the LCD takes it); two different ones are refused by name.
    fn construct(
        &mut self,
        path: &str,
        name: &str,
        existing: &Value,
        new: &Value,
        lcd: &mut Value,
    ) {
        match (existing.get(name), new.get(name)) {
            (was, now) if was == now || now.is_none() => {}
            (None, Some(now)) => self.tightened(path, name, now, lcd),
            _ => self.unsupported(path, name, kind(existing)),
        }
    }

    fn unsupported(&mut self, path: &str, construct: &str, type_name: &str) {
        self.forbidden(
            path.to_string(),
            format!(
                "The {} JSON Schema construct is not supported by the Schema negotiation for type {}",
                go_quote(construct),
                go_quote(type_name)
            ),
        );
    }

    fn same_type(&mut self, path: &str, existing: &Value, new: &Value) -> bool {
        let (was, now) = (text(existing, "type"), text(new, "type"));
        if was != now {
            self.invalid(
                child(path, "type"),
                &json!(now),
                &format!(
                    "The type changed (was {}, now {})",
                    go_quote(was),
                    go_quote(now)
                ),
            );
            return false;
        }
        true
    }

    /// A nullable value may stay nullable; the LCD is nullable only if both are.
    fn nullable(&mut self, path: &str, existing: &Value, new: &Value, lcd: &mut Value) {
        if flag(existing, "nullable") && !flag(new, "nullable") {
            if !self.narrow {
                self.invalid(
                    child(path, "nullable"),
                    &json!(false),
                    "nullable value has been changed in an incompatible way",
                );
            }
            if let Some(fields) = lcd.as_object_mut() {
                fields.remove("nullable");
            }
        }
    }

    fn number(&mut self, path: &str, existing: &Value, new: &Value, lcd: &mut Value) {
        if text(new, "type") == "integer" {
            // The new type accepts fewer values: fine only in the LCD.
            if !self.narrow {
                self.same_type(path, existing, new);
                return;
            }
            lcd["type"] = json!("integer");
        } else if !self.same_type(path, existing, new) {
            return;
        }
        self.numeric(path, existing, new, lcd);
        self.enumeration(path, existing, new, lcd);
    }

    fn integer(&mut self, path: &str, existing: &Value, new: &Value, lcd: &mut Value) {
        // A `number` accepts every integer: the LCD stays `integer`.
        if text(new, "type") != "number" && !self.same_type(path, existing, new) {
            return;
        }
        self.numeric(path, existing, new, lcd);
        self.enumeration(path, existing, new, lcd);
    }

    fn numeric(&mut self, path: &str, existing: &Value, new: &Value, lcd: &mut Value) {
        self.bound(path, "minimum", Tighter::Higher, existing, new, lcd);
        self.bound(path, "maximum", Tighter::Lower, existing, new, lcd);
        for exclusive in ["exclusiveMinimum", "exclusiveMaximum"] {
            if !flag(existing, exclusive) && flag(new, exclusive) {
                self.tightened(path, exclusive, &json!(true), lcd);
            }
        }
        let (was, now) = (existing.get("multipleOf"), new.get("multipleOf"));
        if was != now {
            let divides = match (was.and_then(Value::as_f64), now.and_then(Value::as_f64)) {
                // Every multiple of `was` is a multiple of `now` when `now` divides it.
                (Some(was), Some(now)) => now != 0.0 && (was / now).fract() == 0.0,
                (_, None) => true,
                (None, Some(_)) => false,
            };
            if !divides {
                self.tightened(path, "multipleOf", now.unwrap_or(&Value::Null), lcd);
            }
        }
    }

    /// A new value of a bound where the old one accepted more: incompatible, or the LCD's.
    fn tightened(&mut self, path: &str, field: &str, value: &Value, lcd: &mut Value) {
        if !self.narrow {
            self.invalid(
                child(path, field),
                value,
                &format!("{field} value has been changed in an incompatible way"),
            );
        }
        lcd[field] = value.clone();
    }

    /// `field` (a number) may not be tighter in the new schema; the LCD has the tighter one.
    fn bound(
        &mut self,
        path: &str,
        field: &str,
        tighter: Tighter,
        existing: &Value,
        new: &Value,
        lcd: &mut Value,
    ) {
        let Some(now) = new.get(field).and_then(Value::as_f64) else {
            return;
        };
        let looser = match existing.get(field).and_then(Value::as_f64) {
            None => false,
            Some(was) => match tighter {
                Tighter::Higher => now <= was,
                Tighter::Lower => now >= was,
            },
        };
        if !looser {
            let value = new.get(field).cloned().unwrap_or(Value::Null);
            self.tightened(path, field, &value, lcd);
        }
    }

    /// The new enum must contain the old one's values; the LCD keeps the common ones.
    fn enumeration(&mut self, path: &str, existing: &Value, new: &Value, lcd: &mut Value) {
        let Some(now) = new.get("enum").and_then(Value::as_array) else {
            return;
        };
        let was: Vec<Value> = match existing.get("enum").and_then(Value::as_array) {
            Some(was) => was.clone(),
            // Anything was allowed: the LCD is the new enum.
            None => {
                if !self.narrow {
                    self.invalid(
                        child(path, "enum"),
                        &Value::Array(now.clone()),
                        "enum value has been changed in an incompatible way",
                    );
                }
                lcd["enum"] = Value::Array(now.clone());
                return;
            }
        };
        let removed: Vec<Value> = was.iter().filter(|v| !now.contains(v)).cloned().collect();
        if removed.is_empty() {
            return;
        }
        if !self.narrow {
            self.invalid(
                child(path, "enum"),
                &Value::Array(removed),
                "enum value has been changed in an incompatible way",
            );
        }
        let common: Vec<Value> = was.into_iter().filter(|v| now.contains(v)).collect();
        lcd["enum"] = Value::Array(common);
    }

    fn string(&mut self, path: &str, existing: &Value, new: &Value, lcd: &mut Value) {
        self.bound(path, "minLength", Tighter::Higher, existing, new, lcd);
        self.bound(path, "maxLength", Tighter::Lower, existing, new, lcd);
        // Whether one pattern's strings are all another's is not decided here.
        self.construct(path, "pattern", existing, new, lcd);
        if existing.get("format") != new.get("format") {
            self.invalid(
                child(path, "format"),
                &json!(text(new, "format")),
                "format value has been changed in an incompatible way",
            );
        }
        self.enumeration(path, existing, new, lcd);
    }

    fn array(&mut self, path: &str, existing: &Value, new: &Value, lcd: &mut Value) {
        if !self.same_type(path, existing, new) {
            return;
        }
        self.bound(path, "minItems", Tighter::Higher, existing, new, lcd);
        self.bound(path, "maxItems", Tighter::Lower, existing, new, lcd);
        if existing.get("enum").is_some() || new.get("enum").is_some() {
            self.unsupported(path, "enum", "array");
        }
        if !flag(existing, "uniqueItems") && flag(new, "uniqueItems") {
            self.tightened(path, "uniqueItems", &json!(true), lcd);
        }
        let items = child(path, "items");
        match (existing.get("items"), new.get("items")) {
            (Some(was), Some(now)) => {
                let mut narrowed = lcd["items"].take();
                self.schema(&items, was, now, &mut narrowed);
                lcd["items"] = narrowed;
            }
            (Some(_), None) => {
                self.invalid(items, &Value::Null, "new schema doesn't allow anything")
            }
            _ => {}
        }
        if existing.get("x-kubernetes-list-type") != new.get("x-kubernetes-list-type") {
            self.invalid(
                child(path, "x-kubernetes-list-type"),
                new.get("x-kubernetes-list-type").unwrap_or(&Value::Null),
                "x-kubernetes-list-type value has been changed in an incompatible way",
            );
        }
        let keys = "x-kubernetes-list-map-keys";
        if strings(existing.get(keys)) != strings(new.get(keys)) {
            self.invalid(
                child(path, keys),
                new.get(keys).unwrap_or(&Value::Null),
                "x-kubernetes-list-map-keys value has been changed in an incompatible way",
            );
        }
    }

    fn object(&mut self, path: &str, existing: &Value, new: &Value, lcd: &mut Value) {
        if !self.same_type(path, existing, new) {
            return;
        }
        if existing.get("x-kubernetes-map-type") != new.get("x-kubernetes-map-type") {
            self.invalid(
                child(path, "x-kubernetes-map-type"),
                new.get("x-kubernetes-map-type").unwrap_or(&Value::Null),
                "x-kubernetes-map-type value has been changed in an incompatible way",
            );
        }
        if existing.get("enum").is_some() || new.get("enum").is_some() {
            self.unsupported(path, "enum", "object");
        }
        self.bound(path, "minProperties", Tighter::Higher, existing, new, lcd);
        self.bound(path, "maxProperties", Tighter::Lower, existing, new, lcd);
        self.required(path, existing, new, lcd);
        let empty = Map::new();
        let was = existing
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let now = new
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let additional = new.get("additionalProperties");
        let properties = child(path, "properties");
        if !was.is_empty() {
            if !now.is_empty() {
                let removed: Vec<&String> = was.keys().filter(|k| !now.contains_key(*k)).collect();
                if !removed.is_empty() {
                    if !self.narrow {
                        let names: Vec<Value> = removed.iter().map(|k| json!(k)).collect();
                        self.invalid(
                            properties.clone(),
                            &Value::Array(names),
                            "properties have been removed in an incompatible way",
                        );
                    }
                    if let Some(kept) = lcd["properties"].as_object_mut() {
                        for name in &removed {
                            kept.remove(*name);
                        }
                    }
                }
                for (name, was_schema) in was.iter().filter(|(k, _)| now.contains_key(*k)) {
                    self.property(&key(&properties, name), name, was_schema, &now[name], lcd);
                }
            } else if let Some(schema) = additional.filter(|a| a.is_object()) {
                // Any property of one schema: each existing one must fit it.
                for (name, was_schema) in was {
                    self.property(&key(&properties, name), name, was_schema, schema, lcd);
                }
            } else if additional.and_then(Value::as_bool) == Some(true) {
                // Any property at all: the existing schema is the LCD.
            } else {
                let names: Vec<Value> = was.keys().map(|k| json!(k)).collect();
                self.invalid(
                    properties,
                    &Value::Array(names),
                    "properties value has been completely cleared in an incompatible way",
                );
            }
        } else if let Some(was_additional) = existing.get("additionalProperties") {
            let at = child(path, "additionalProperties");
            match (was_additional, additional) {
                (Value::Object(_), Some(now @ Value::Object(_))) => {
                    let mut narrowed = lcd["additionalProperties"].take();
                    self.schema(&at, was_additional, now, &mut narrowed);
                    lcd["additionalProperties"] = narrowed;
                }
                (Value::Object(_), Some(Value::Bool(true))) => {}
                (Value::Object(_), now) => {
                    self.invalid(
                        at,
                        now.unwrap_or(&Value::Null),
                        "additionalProperties value has been changed in an incompatible way",
                    );
                }
                (Value::Bool(true), Some(Value::Bool(true))) => {}
                (Value::Bool(true), now) => {
                    if !self.narrow {
                        self.invalid(
                            at,
                            now.unwrap_or(&json!(false)),
                            "additionalProperties value has been changed in an incompatible way",
                        );
                    }
                    match now {
                        Some(schema @ Value::Object(_)) => {
                            lcd["additionalProperties"] = schema.clone()
                        }
                        _ => {
                            if let Some(fields) = lcd.as_object_mut() {
                                fields.remove("additionalProperties");
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// Compares one property, narrowing its LCD in place.
    fn property(&mut self, path: &str, name: &str, was: &Value, now: &Value, lcd: &mut Value) {
        let mut narrowed = lcd["properties"][name].take();
        self.schema(path, was, now, &mut narrowed);
        lcd["properties"][name] = narrowed;
    }

    /// The new schema may not require what the old did not; the LCD requires both.
    fn required(&mut self, path: &str, existing: &Value, new: &Value, lcd: &mut Value) {
        let (was, now) = (
            strings(existing.get("required")),
            strings(new.get("required")),
        );
        let added: Vec<&String> = now.difference(&was).collect();
        if added.is_empty() {
            return;
        }
        if !self.narrow {
            let names: Vec<Value> = added.iter().map(|k| json!(k)).collect();
            self.invalid(
                child(path, "required"),
                &Value::Array(names),
                "required fields have been added in an incompatible way",
            );
        }
        let union: Vec<Value> = was.union(&now).map(|k| json!(k)).collect();
        lcd["required"] = Value::Array(union);
    }

    fn int_or_string(&mut self, path: &str, existing: &Value, new: &Value, lcd: &mut Value) {
        if !flag(new, "x-kubernetes-int-or-string") {
            self.invalid(
                child(path, "x-kubernetes-int-or-string"),
                &json!(false),
                "x-kubernetes-int-or-string value has been changed in an incompatible way",
            );
            return;
        }
        if existing.get("anyOf") != new.get("anyOf") {
            self.invalid(
                child(path, "anyOf"),
                new.get("anyOf").unwrap_or(&Value::Null),
                "anyOf value has been changed in an incompatible way",
            );
        }
        self.string(path, existing, new, lcd);
        self.numeric(path, existing, new, lcd);
    }
}

#[cfg(test)]
mod tests;
