//! Rules as kube-apiserver runs them: exact paths and messages.

use serde_json::{Value, json};

use super::CelValidator;

fn validator(schema: Value) -> CelValidator {
    CelValidator::compile(&schema)
        .expect("compiles")
        .expect("has rules")
}

/// `field: message` of each failure.
fn failures(validator: &CelValidator, new: Value, old: Option<Value>) -> Vec<String> {
    validator
        .validate(&new, old.as_ref())
        .into_iter()
        .map(|e| format!("{}: {}", e.field, e.message))
        .collect()
}

fn compile_errors(schema: Value) -> Vec<String> {
    match CelValidator::compile(&schema) {
        Err(errors) => errors
            .into_iter()
            .map(|e| format!("{} {}: {}", e.reason, e.field, e.message))
            .collect(),
        Ok(_) => Vec::new(),
    }
}

/// A root schema whose `spec` has integer fields `a` and `b`, a string `name` and the
/// given rules.
fn spec_with(rules: Value) -> CelValidator {
    validator(json!({
        "type": "object",
        "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": rules,
            "properties": {
                "a": {"type": "integer"},
                "b": {"type": "integer"},
                "name": {"type": "string"},
                "replicas": {"type": "integer"},
            },
        }},
    }))
}

#[test]
fn no_rules_is_none() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object"}}});
    assert!(CelValidator::compile(&schema).expect("compiles").is_none());
}

#[test]
fn a_failing_rule_names_the_rule_and_shows_the_schema_type() {
    let v = spec_with(json!([{"rule": "self.a < self.b"}]));
    assert!(failures(&v, json!({"spec": {"a": 1, "b": 2}}), None).is_empty());
    assert_eq!(
        failures(&v, json!({"spec": {"a": 3, "b": 2}}), None),
        ["spec: Invalid value: \"object\": failed rule: self.a < self.b"]
    );
}

#[test]
fn message_replaces_the_default() {
    let v = spec_with(json!([{"rule": "self.a < self.b", "message": " a must be below b "}]));
    assert_eq!(
        failures(&v, json!({"spec": {"a": 3, "b": 2}}), None),
        ["spec: Invalid value: \"object\": a must be below b"]
    );
}

#[test]
fn message_expression_is_evaluated_and_falls_back_when_unusable() {
    let v = spec_with(json!([
        {"rule": "self.a < self.b", "messageExpression": "'a is ' + string(self.a) + ', b is ' + string(self.b)"},
        {"rule": "self.a < self.b", "message": "static", "messageExpression": "self.missing"},
        {"rule": "self.a < self.b", "message": "static", "messageExpression": "'  '"},
        {"rule": "self.a < self.b", "messageExpression": "self.a"},
    ]));
    assert_eq!(
        failures(&v, json!({"spec": {"a": 3, "b": 2}}), None),
        [
            "spec: Invalid value: \"object\": a is 3, b is 2",
            "spec: Invalid value: \"object\": static",
            "spec: Invalid value: \"object\": static",
            "spec: Invalid value: \"object\": failed rule: self.a < self.b",
        ]
    );
}

#[test]
fn reason_picks_the_kind_of_error() {
    let v = spec_with(json!([
        {"rule": "false", "message": "no", "reason": "FieldValueForbidden"},
        {"rule": "false", "message": "need it", "reason": "FieldValueRequired"},
        {"rule": "false", "message": "twice", "reason": "FieldValueDuplicate"},
        {"rule": "false", "message": "bad", "reason": "FieldValueInvalid"},
    ]));
    let errors = v.validate(&json!({"spec": {}}), None);
    let got: Vec<(&str, &str)> = errors
        .iter()
        .map(|e| (e.reason, e.message.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("FieldValueForbidden", "Forbidden: no"),
            ("FieldValueRequired", "Required value: need it"),
            ("FieldValueDuplicate", "Duplicate value: \"object\""),
            ("FieldValueInvalid", "Invalid value: \"object\": bad"),
        ]
    );
}

#[test]
fn field_path_is_appended_to_the_rule_node() {
    let v = spec_with(json!([
        {"rule": "self.replicas >= 0", "fieldPath": ".replicas", "message": "must not be negative"},
    ]));
    assert_eq!(
        failures(&v, json!({"spec": {"replicas": -1}}), None),
        ["spec.replicas: Invalid value: \"object\": must not be negative"]
    );
}

#[test]
fn transition_rules_run_only_on_update() {
    let v = spec_with(json!([
        {"rule": "self.name == oldSelf.name", "message": "name is immutable"},
        {"rule": "oldSelf.hasValue() || self.a == 1", "optionalOldSelf": true, "message": "a starts at 1"},
    ]));
    assert_eq!(
        failures(&v, json!({"spec": {"name": "x", "a": 2}}), None),
        ["spec: Invalid value: \"object\": a starts at 1"]
    );
    assert!(failures(&v, json!({"spec": {"name": "x", "a": 1}}), None).is_empty());
    assert_eq!(
        failures(
            &v,
            json!({"spec": {"name": "y", "a": 2}}),
            Some(json!({"spec": {"name": "x", "a": 2}}))
        ),
        ["spec: Invalid value: \"object\": name is immutable"]
    );
    assert!(
        failures(
            &v,
            json!({"spec": {"name": "x", "a": 5}}),
            Some(json!({"spec": {"name": "x", "a": 2}}))
        )
        .is_empty()
    );
}

#[test]
fn unchanged_values_are_forgiven_on_update() {
    let v = validator(json!({
        "type": "object",
        "properties": {
            "spec": {"type": "object", "x-kubernetes-validations": [{"rule": "self.a > 0"}],
                     "properties": {"a": {"type": "integer"}}},
            "status": {"type": "object", "properties": {"x": {"type": "string"}}},
        },
    }));
    let old = json!({"spec": {"a": 0}, "status": {"x": "1"}});
    assert!(
        failures(
            &v,
            json!({"spec": {"a": 0}, "status": {"x": "2"}}),
            Some(old.clone())
        )
        .is_empty()
    );
    assert_eq!(
        failures(&v, json!({"spec": {"a": -1}}), Some(old)),
        ["spec: Invalid value: \"object\": failed rule: self.a > 0"]
    );
}

#[test]
fn rules_on_list_items_and_map_values() {
    let v = validator(json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {
            "items": {"type": "array", "items": {
                "type": "object",
                "x-kubernetes-validations": [{"rule": "self.name.size() <= 3", "message": "name too long"}],
                "properties": {"name": {"type": "string"}},
            }},
            "limits": {"type": "object", "additionalProperties": {
                "type": "integer",
                "x-kubernetes-validations": [{"rule": "self < 10"}],
            }},
        }}},
    }));
    let object = json!({"spec": {
        "items": [{"name": "a"}, {"name": "b"}, {"name": "long"}],
        "limits": {"cpu": 5, "memory": 11},
    }});
    assert_eq!(
        failures(&v, object, None),
        [
            "spec.items[2]: Invalid value: \"object\": name too long",
            "spec.limits[memory]: Invalid value: \"integer\": failed rule: self < 10",
        ]
    );
}

#[test]
fn map_list_items_meet_their_old_selves_by_key() {
    let v = validator(json!({
        "type": "object",
        "properties": {"ports": {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "items": {
                "type": "object",
                "x-kubernetes-validations": [{"rule": "self.port == oldSelf.port", "message": "port is immutable"}],
                "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
            },
        }},
    }));
    let old = json!({"ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}]});
    let new = json!({"ports": [{"name": "https", "port": 8443}, {"name": "http", "port": 80}, {"name": "x", "port": 1}]});
    assert_eq!(
        failures(&v, new, Some(old)),
        ["ports[0]: Invalid value: \"object\": port is immutable"]
    );
}

#[test]
fn root_rules_see_name_and_kind_but_not_other_metadata() {
    let v = validator(json!({
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.metadata.name.startsWith('a')", "message": "name must start with a"},
            {"rule": "self.kind == 'Widget' && !has(self.metadata.labels)"},
        ],
        "properties": {"metadata": {"type": "object"}},
    }));
    let object = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "bob", "labels": {"x": "y"}}});
    assert_eq!(
        failures(&v, object, None),
        ["<nil>: Invalid value: \"object\": name must start with a"]
    );
}

#[test]
fn escaped_property_names() {
    let v = spec_with_property("x-prop", json!([{"rule": "self.x__dash__prop > 0"}]));
    assert_eq!(
        failures(&v, json!({"spec": {"x-prop": 0}}), None),
        ["spec: Invalid value: \"object\": failed rule: self.x__dash__prop > 0"]
    );
}

fn spec_with_property(name: &str, rules: Value) -> CelValidator {
    validator(json!({
        "type": "object",
        "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": rules,
            "properties": {name: {"type": "integer"}},
        }},
    }))
}

#[test]
fn evaluation_errors_are_reported_not_raised() {
    let v = spec_with(json!([
        {"rule": "self.name == 'x'"},
        {"rule": "self.a / self.b > 0", "message": "ratio"},
        {"rule": "self.a + 'x' == 'y'"},
    ]));
    assert_eq!(
        failures(&v, json!({"spec": {"a": 1, "b": 0}}), None),
        [
            "spec: Invalid value: \"object\": no such key: name evaluating rule: self.name == 'x'",
            "spec: Invalid value: \"object\": division by zero evaluating rule: ratio",
            "spec: Invalid value: \"object\": 'no such overload': call arguments did not match a supported operator, function or macro signature for rule: self.a + 'x' == 'y'",
        ]
    );
}

#[test]
fn kubernetes_libraries() {
    let v = validator(json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {
            "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self.matches('^a')"}]},
            "memory": {"type": "string", "x-kubernetes-validations": [
                {"rule": "quantity(self).isLessThan(quantity('1Gi'))", "message": "at most 1Gi"}]},
            "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-validations": [
                {"rule": "size(self) <= 2"}, {"rule": "self.all(t, t.lowerAscii() == t)"}]},
            "timeout": {"type": "string", "format": "duration", "x-kubernetes-validations": [
                {"rule": "self < duration('1h')"}]},
        }}},
    }));
    let good = json!({"spec": {"name": "abc", "memory": "512Mi", "tags": ["x"], "timeout": "30m"}});
    assert!(failures(&v, good, None).is_empty());
    let bad =
        json!({"spec": {"name": "bcd", "memory": "2Gi", "tags": ["a", "B", "c"], "timeout": "2h"}});
    assert_eq!(
        failures(&v, bad, None),
        [
            "spec.memory: Invalid value: \"string\": at most 1Gi",
            "spec.name: Invalid value: \"string\": failed rule: self.matches('^a')",
            "spec.tags: Invalid value: \"array\": failed rule: size(self) <= 2",
            "spec.tags: Invalid value: \"array\": failed rule: self.all(t, t.lowerAscii() == t)",
            "spec.timeout: Invalid value: \"string\": failed rule: self < duration('1h')",
        ]
    );
}

#[test]
fn null_values_are_not_validated() {
    let v = spec_with(json!([{"rule": "false"}]));
    assert!(failures(&v, json!({"spec": null}), None).is_empty());
    assert!(failures(&v, json!({}), None).is_empty());
}

#[test]
fn compile_errors_carry_the_rule_path() {
    let schema = json!({
        "type": "object",
        "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": [{"rule": "self.a < self.b"}, {"rule": "self.a <"}],
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        }},
    });
    let errors = compile_errors(schema);
    assert_eq!(errors.len(), 1, "{errors:?}");
    let prefix = "FieldValueInvalid properties[spec].x-kubernetes-validations[1].rule: Invalid value: apiextensions.ValidationRule{Rule:\"self.a <\", Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:";
    assert!(errors[0].starts_with(prefix), "{}", errors[0]);
}

#[test]
fn rule_fields_are_checked_before_compiling() {
    let schema = json!({
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": " "},
            {"rule": "true", "reason": "Nope"},
            {"rule": "true", "fieldPath": ".missing"},
            {"rule": "true", "message": "a\nb"},
        ],
        "items": {},
        "properties": {"list": {"type": "array", "items": {"type": "integer",
            "x-kubernetes-validations": [{"rule": "self > 0", "optionalOldSelf": true}]}}},
    });
    assert_eq!(
        compile_errors(schema),
        [
            "FieldValueRequired x-kubernetes-validations[0].rule: Required value: rule is not specified",
            "FieldValueNotSupported x-kubernetes-validations[1].reason: Unsupported value: \"Nope\": supported values: \"FieldValueDuplicate\", \"FieldValueForbidden\", \"FieldValueInvalid\", \"FieldValueRequired\"",
            "FieldValueInvalid x-kubernetes-validations[2].fieldPath: Invalid value: \".missing\": fieldPath must be a valid path",
            "FieldValueInvalid x-kubernetes-validations[3].message: Invalid value: \"a\\nb\": message must not contain line breaks",
            "FieldValueInvalid properties[list].items.x-kubernetes-validations[0].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule",
        ]
    );
}

#[test]
fn shared_between_threads() {
    let v = std::sync::Arc::new(spec_with(json!([{"rule": "self.a < self.b"}])));
    let handles: Vec<_> = (0..2)
        .map(|i| {
            let v = v.clone();
            std::thread::spawn(move || v.validate(&json!({"spec": {"a": i, "b": 1}}), None).len())
        })
        .collect();
    let counts: Vec<usize> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(counts, [0, 1]);
}
