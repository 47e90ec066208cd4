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

/// What writing a CRD with `schema` is refused for ([`CelValidator::check`]).
fn write_errors(schema: Value) -> Vec<String> {
    CelValidator::check(&schema)
        .into_iter()
        .map(|e| format!("{} {}: {}", e.reason, e.field, e.message))
        .collect()
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
        {"rule": "self.a < self.b", "message": "static", "messageExpression": "string(self.a / 0)"},
        {"rule": "self.a < self.b", "message": "static", "messageExpression": "'  '"},
        // Not a string when it runs: its type (`dyn`) is not known when it is compiled.
        {"rule": "self.a < self.b", "messageExpression": "dyn(self.a)"},
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
fn rules_must_be_bool_and_message_expressions_strings() {
    let schema = json!({
        "type": "object",
        "properties": {"spec": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "name": {"type": "string"}},
            "x-kubernetes-validations": [
                {"rule": "self.name"},
                {"rule": "self.a > 0", "messageExpression": "self.a"},
                {"rule": "self.a > 0", "messageExpression": "self.name"},
            ],
        }},
    });
    // A stored CRD's rules still run (an older server accepted them); a new one is refused.
    let stored = validator(schema.clone());
    assert_eq!(
        failures(&stored, json!({"spec": {"a": 0, "name": "n"}}), None).len(),
        3
    );
    let refused = write_errors(schema);
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(refused[0].contains("x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:\"self.name\""), "{refused:?}");
    assert!(
        refused[0].ends_with(": cel expression must evaluate to a bool"),
        "{refused:?}"
    );
    assert!(
        refused[1].contains("x-kubernetes-validations[1].messageExpression: Invalid value:"),
        "{refused:?}"
    );
    assert!(
        refused[1].ends_with(": messageExpression must evaluate to a string"),
        "{refused:?}"
    );
}

/// What writing `rules` is refused for on a `spec` with integers `replicas` and `max`, a string
/// `name`, a boolean `enabled`, a list `items` and a map `labels` of strings, an
/// `x-kubernetes-int-or-string` `port`, and an `x-kubernetes-preserve-unknown-fields` object
/// `loose` that declares a string `a`.
fn typed_spec_errors(rules: Value) -> Vec<String> {
    let mut errors = write_errors(json!({
        "type": "object",
        "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": rules,
            "properties": {
                "replicas": {"type": "integer"},
                "max": {"type": "integer"},
                "name": {"type": "string"},
                "enabled": {"type": "boolean"},
                "items": {"type": "array", "items": {"type": "string"}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "port": {"x-kubernetes-int-or-string": true},
                "loose": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {"a": {"type": "string"}},
                },
            },
        }},
    }));
    // The schema bounds no list or string: costs are not what these tests are about.
    errors.retain(|error| !error.contains(" cost "));
    errors
}

#[test]
fn composite_expressions_of_another_type_are_refused() {
    let rules = [
        "self.replicas * 2",
        "self.items",
        "self.items.map(x, x == 'a')",
        "self.replicas > 1 ? 1 : 2",
        "size(self.items)",
        "timestamp('2024-01-01T00:00:00Z') - timestamp('2024-01-01T00:00:00Z')",
        "self.labels['a']",
        "self.name.lowerAscii()",
    ];
    let messages = [
        "self.replicas + 1",
        "size(self.items)",
        "self.name == 'x'",
        "self.items.exists_one(x, x == 'a')",
        "self.items.map(x, x)",
        "self.name.split(',')",
        "self.replicas > 1 ? 1 : 2",
        "-dyn(self.replicas)",
        "dyn(self.replicas) * 2",
        "self.port + 1",
        "quantity(self.name)",
        "isQuantity(self.name)",
        "self.items.indexOf('a')",
        "null",
        "self.loose",
        "[self.name]",
    ];
    let refused = typed_spec_errors(rules_and_messages(&rules, &messages));
    assert_eq!(refused.len(), rules.len() + messages.len(), "{refused:#?}");
    for (i, rule) in rules.iter().enumerate() {
        let error = &refused[i];
        let at = format!(
            "FieldValueInvalid properties[spec].x-kubernetes-validations[{i}].rule: Invalid value: apiextensions.ValidationRule{{Rule:{rule:?}, "
        );
        assert!(error.starts_with(&at), "{error}");
        assert!(
            error.ends_with("}: cel expression must evaluate to a bool"),
            "{error}"
        );
    }
    for (j, message) in messages.iter().enumerate() {
        let error = &refused[rules.len() + j];
        let at = format!(
            "FieldValueInvalid properties[spec].x-kubernetes-validations[{}].messageExpression: Invalid value: ",
            rules.len() + j
        );
        assert!(error.starts_with(&at), "{message}: {error}");
        assert!(
            error.ends_with("}: messageExpression must evaluate to a string"),
            "{message}: {error}"
        );
    }
    assert_eq!(
        refused[rules.len()],
        "FieldValueInvalid properties[spec].x-kubernetes-validations[8].messageExpression: Invalid value: apiextensions.ValidationRule{Rule:\"self.replicas > 0\", Message:\"\", MessageExpression:\"self.replicas + 1\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: messageExpression must evaluate to a string"
    );
}

/// `rules` as rules and `messages` as message expressions of valid rules, in that order.
fn rules_and_messages(rules: &[&str], messages: &[&str]) -> Value {
    let mut all: Vec<Value> = rules.iter().map(|r| json!({"rule": r})).collect();
    all.extend(
        messages
            .iter()
            .map(|m| json!({"rule": "self.replicas > 0", "messageExpression": m})),
    );
    Value::Array(all)
}

#[test]
fn right_typed_expressions_are_accepted() {
    let rules = [
        "self.name == 'x'",
        "self.items.exists_one(x, x == 'a')",
        "self.items.all(x, x.startsWith('a')) && self.labels.exists(k, k == 'a')",
        "has(self.name) ? self.enabled : self.replicas > 0",
        "self.items.map(x, x == 'a')[0]",
        "isQuantity(self.name)",
        "!dyn(self.enabled)",
    ];
    let messages = [
        "'x must be ' + string(self.max)",
        "self.name",
        "'%d replicas'.format([self.replicas])",
        "self.replicas > 1 ? 'many' : 'one'",
        "has(self.name) ? self.name : 'none'",
        "self.labels['a']",
        "self.items.map(x, x + '!')[0]",
        "self.labels.map(k, k + '=' + self.labels[k]).join(',')",
        "self.loose.a",
        "'a' + dyn(self.name)",
        "self.port + 'x'",
        "-dyn(self.replicas) + 'x'",
        "optional.none().orValue(self.name)",
        "optional.of(self.name).value()",
    ];
    let errors = typed_spec_errors(rules_and_messages(&rules, &messages));
    assert_eq!(errors, Vec::<String>::new());
}

/// What cel-go types `dyn` (a `dyn(...)` call, an `x-kubernetes-int-or-string` value), and
/// what is not known here, passes: kube-apiserver refuses a `dyn` result too, but here it
/// cannot be told from a result whose type is not known.
#[test]
fn expressions_of_unknown_type_are_let_through() {
    let rules = ["dyn(self.enabled)", "self.port", "self.unknownFunction()"];
    let messages = ["dyn(self.replicas)", "self.port", "self.unknownFunction()"];
    let errors = typed_spec_errors(rules_and_messages(&rules, &messages));
    assert_eq!(errors, Vec::<String>::new());
}

#[test]
fn an_optional_old_self_is_an_optional() {
    let accepted = typed_spec_errors(json!([
        {"rule": "!oldSelf.hasValue() || oldSelf.value().enabled", "optionalOldSelf": true},
        {"rule": "oldSelf.hasValue()", "optionalOldSelf": true,
            "messageExpression": "oldSelf.orValue(self).name"},
        {"rule": "oldSelf.enabled"},
    ]));
    assert_eq!(accepted, Vec::<String>::new());
    let refused = typed_spec_errors(json!([
        {"rule": "oldSelf.enabled", "optionalOldSelf": true},
        {"rule": "oldSelf.hasValue()", "optionalOldSelf": true, "messageExpression": "oldSelf.name"},
    ]));
    assert_eq!(refused.len(), 3, "{refused:#?}");
    assert!(
        refused[0]
            .starts_with("FieldValueInvalid properties[spec].x-kubernetes-validations[0].rule: ")
            && refused[0].ends_with("cel expression must evaluate to a bool"),
        "{refused:#?}"
    );
    // Kubernetes takes a rule that does not compile for one that does not use `oldSelf`.
    assert_eq!(
        refused[1],
        "FieldValueInvalid properties[spec].x-kubernetes-validations[0].optionalOldSelf: Invalid value: true: may not be set if oldSelf is not used in rule"
    );
    assert!(
        refused[2].starts_with(
            "FieldValueInvalid properties[spec].x-kubernetes-validations[1].messageExpression: "
        ) && refused[2].ends_with("messageExpression must evaluate to a string"),
        "{refused:#?}"
    );
}

#[test]
fn the_message_expression_of_a_rule_that_does_not_compile_is_not_compiled() {
    let refused = typed_spec_errors(json!([
        {"rule": "self.replicas * 2", "messageExpression": "self.replicas + 1"},
    ]));
    assert_eq!(refused.len(), 1, "{refused:#?}");
    assert!(
        refused[0]
            .starts_with("FieldValueInvalid properties[spec].x-kubernetes-validations[0].rule: ")
            && refused[0].ends_with("cel expression must evaluate to a bool"),
        "{refused:#?}"
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
            {"rule": "self.kind == 'Widget'"},
        ],
        "properties": {"metadata": {"type": "object"}},
    }));
    let object = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "bob", "labels": {"x": "y"}}});
    assert_eq!(
        failures(&v, object, None),
        ["<nil>: Invalid value: \"object\": name must start with a"]
    );
    // Other metadata is not declared to CEL: naming it does not compile, as in cel-go.
    let refused = compile_errors(json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": "!has(self.metadata.labels)"}],
        "properties": {"metadata": {"type": "object"}},
    }));
    assert_eq!(refused.len(), 1);
    assert!(
        refused[0].ends_with("compilation failed: ERROR: <input>:1:19: undefined field 'labels'\n | !has(self.metadata.labels)\n | ..................^"),
        "{refused:?}"
    );
}

#[test]
fn rules_naming_undeclared_fields_do_not_compile() {
    let refused = compile_errors(json!({
        "type": "object",
        "properties": {"spec": {
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "x-kubernetes-validations": [
                {"rule": "self.a > 0 && self.b > 0"},
                {"rule": "self.a > 0", "messageExpression": "'b is ' + string(self.b)"},
                {"rule": "self.a > 0 && 'self.b' != ''"},
            ],
        }},
    }));
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert!(
        refused[0].ends_with("rule: Invalid value: apiextensions.ValidationRule{Rule:\"self.a > 0 && self.b > 0\", Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\", OptionalOldSelf:(*bool)(nil)}: compilation failed: ERROR: <input>:1:19: undefined field 'b'\n | self.a > 0 && self.b > 0\n | ..................^"),
        "{refused:?}"
    );
    assert!(
        refused[1].contains(
            "messageExpression compilation failed: ERROR: <input>:1:22: undefined field 'b'"
        ),
        "{refused:?}"
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

/// `reason field: message` of everything CRD validation refuses in `schema`'s rules.
fn check(schema: Value) -> Vec<String> {
    CelValidator::check(&schema)
        .into_iter()
        .map(|e| format!("{} {}: {}", e.reason, e.field, e.message))
        .collect()
}

/// A root schema whose `spec.items` is a list of strings with the given bounds and the
/// given rules on `spec`.
fn items_schema(max_items: Option<u64>, max_length: Option<u64>, rules: Value) -> Value {
    let mut item = json!({"type": "string"});
    if let Some(n) = max_length {
        item["maxLength"] = json!(n);
    }
    let mut items = json!({"type": "array", "items": item});
    if let Some(n) = max_items {
        items["maxItems"] = json!(n);
    }
    json!({
        "type": "object",
        "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": rules,
            "properties": {"items": items},
        }},
    })
}

const HINT: &str = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";

#[test]
fn nested_loops_over_unbounded_lists_are_refused_when_the_crd_is_written() {
    let rule = json!([{"rule": "self.items.all(x, self.items.all(y, x == y))"}]);
    assert_eq!(
        check(items_schema(None, None, rule.clone())),
        [
            format!(
                "FieldValueForbidden properties[spec].x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x {HINT}"
            ),
            "FieldValueForbidden properties[spec].x-kubernetes-validations[0].rule: Forbidden: contributed to estimated rule & messageExpression cost total exceeding cost limit for entire OpenAPIv3 schema".to_string(),
            format!(
                "FieldValueForbidden : Forbidden: x-kubernetes-validations estimated rule & messageExpression cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x {HINT}"
            ),
        ]
    );
    // Stored CRDs are still served: the estimate is only held against new rules.
    assert!(CelValidator::compile(&items_schema(None, None, rule.clone())).is_ok());
    // With bounds the same rule is cheap enough.
    assert!(check(items_schema(Some(100), Some(64), rule)).is_empty());
}

#[test]
fn ordinary_rules_are_within_the_estimate() {
    // Cheap per element: fine even over an unbounded list of unbounded strings.
    let rules = json!([
        {"rule": "self.items.all(x, x.size() < 100)"},
        {"rule": "self.items.exists(x, x == 'a') || size(self.items) == 0"},
    ]);
    assert_eq!(check(items_schema(None, None, rules)), Vec::<String>::new());
    // String functions over every element want bounds, as in Kubernetes.
    let rules = json!([
        {"rule": "self.items.map(x, x.lowerAscii()).all(x, x.startsWith('a'))"},
        {"rule": "!has(self.items) || self.items.filter(x, x.matches('^[a-z]+$')).size() >= 0"},
        {"rule": "self.items.all(x, self.items.exists_one(y, x == y))"},
    ]);
    assert_eq!(
        check(items_schema(Some(100), Some(253), rules)),
        Vec::<String>::new()
    );
}

#[test]
fn rules_under_unbounded_lists_count_once_per_possible_element() {
    // One cheap rule on each item of an unbounded list of objects with a long string: the
    // rule's estimate is multiplied by how many items fit in a request.
    let schema = |max_items: Option<u64>| {
        let mut list = json!({"type": "array", "items": {
            "type": "object",
            "x-kubernetes-validations": [{"rule": "self.name.matches('^[a-z]+$')"}],
            "properties": {"name": {"type": "string", "maxLength": 253}},
        }});
        if let Some(n) = max_items {
            list["maxItems"] = json!(n);
        }
        json!({"type": "object", "properties": {"list": list}})
    };
    let refused = check(schema(None));
    assert!(
        refused[0].starts_with("FieldValueForbidden properties[list].items.x-kubernetes-validations[0].rule: Forbidden: estimated rule cost exceeds budget by factor of "),
        "{refused:?}"
    );
    assert!(check(schema(Some(100))).is_empty());
}

#[test]
fn the_total_of_a_schema_is_limited_too() {
    // Each rule is just under the per-rule limit (0.1 × 28000 bytes, squared), thirteen of
    // them are over the per-CRD one.
    let rules: Vec<Value> = (0..13)
        .map(|_| json!({"rule": "self.s.contains(self.t)"}))
        .collect();
    let schema = json!({
        "type": "object",
        "properties": {"spec": {
            "type": "object",
            "x-kubernetes-validations": rules,
            "properties": {
                "s": {"type": "string", "maxLength": 7000},
                "t": {"type": "string", "maxLength": 7000},
            },
        }},
    });
    let mut expected: Vec<String> = (0..4)
        .map(|i| format!("FieldValueForbidden properties[spec].x-kubernetes-validations[{i}].rule: Forbidden: contributed to estimated rule & messageExpression cost total exceeding cost limit for entire OpenAPIv3 schema"))
        .collect();
    expected.push(format!("FieldValueForbidden : Forbidden: x-kubernetes-validations estimated rule & messageExpression cost total for entire OpenAPIv3 schema exceeds budget by factor of 1.019201x {HINT}"));
    assert_eq!(check(schema), expected);
}

#[test]
fn message_expressions_are_estimated_too() {
    let rules = json!([{
        "rule": "size(self.items) < 5",
        "messageExpression": "self.items.map(x, self.items.map(y, x + y)).join(',')",
    }]);
    let found = check(items_schema(None, None, rules));
    assert!(
        found[0].starts_with("FieldValueForbidden properties[spec].x-kubernetes-validations[0].messageExpression: Forbidden: estimated messageExpression cost exceeds budget by factor of more than 100x"),
        "{found:?}"
    );
}

#[test]
fn a_rule_past_its_cost_limit_stops_validation() {
    // Compiled as a stored CRD would be (no estimate), then run on a large list.
    let v = validator(items_schema(
        None,
        None,
        json!([
            {"rule": "self.items.all(x, self.items.all(y, x == y || true))"},
            {"rule": "false", "message": "never reached"},
        ]),
    ));
    let items: Vec<String> = (0..600).map(|i| i.to_string()).collect();
    assert_eq!(
        failures(&v, json!({"spec": {"items": items}}), None),
        [
            "spec: Invalid value: \"object\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: self.items.all(x, self.items.all(y, x == y || true))"
        ]
    );
    // Small objects are unaffected.
    assert_eq!(
        failures(&v, json!({"spec": {"items": ["a", "a"]}}), None),
        ["spec: Invalid value: \"object\": never reached"]
    );
}

#[test]
fn functions_that_outgrow_their_inputs_are_charged_before_they_run() {
    let v = validator(json!({
        "type": "object",
        "properties": {"spec": {
            "type": "object",
            "properties": {
                "s": {"type": "string", "x-kubernetes-validations": [
                    {"rule": "self.replace('', self).size() > 0"},
                ]},
                "n": {"type": "integer", "x-kubernetes-validations": [
                    {"rule": "lists.range(self).size() > 0"},
                ]},
                "p": {"type": "integer", "x-kubernetes-validations": [
                    {"rule": "('%.' + string(self) + 'f').format([1.0]) != ''"},
                ]},
            },
        }},
    }));
    let cancelled = |rule: &str, path: &str, ty: &str| {
        format!(
            "{path}: Invalid value: \"{ty}\": 'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {rule}"
        )
    };
    // Each would allocate gigabytes.
    assert_eq!(
        failures(&v, json!({"spec": {"s": "x".repeat(100_000)}}), None),
        [cancelled(
            "self.replace('', self).size() > 0",
            "spec.s",
            "string"
        )]
    );
    assert_eq!(
        failures(&v, json!({"spec": {"n": 1_000_000_000_000i64}}), None),
        [cancelled(
            "lists.range(self).size() > 0",
            "spec.n",
            "integer"
        )]
    );
    assert_eq!(
        failures(&v, json!({"spec": {"p": 999_999_999}}), None),
        [cancelled(
            "('%.' + string(self) + 'f').format([1.0]) != ''",
            "spec.p",
            "integer"
        )]
    );
    // Within the limits they run as before.
    assert!(failures(&v, json!({"spec": {"s": "ab", "n": 3, "p": 2}}), None).is_empty());
}

#[test]
fn the_budget_of_an_object_is_shared_by_its_rules() {
    let v = validator(json!({
        "type": "object",
        "properties": {"list": {"type": "array", "items": {
            "type": "object",
            "x-kubernetes-validations": [{"rule": "self.tags.all(t, t != '')", "message": "empty tag"}],
            "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
        }}},
    }));
    // Each item's rule costs about 450 units: the seventh one runs out.
    let limits = super::evaluate::Limits {
        per_call: 1_000,
        budget: 3_000,
    };
    let item = json!({"tags": (0..50).map(|i| i.to_string()).collect::<Vec<_>>()});
    let object = json!({"list": vec![item; 20]});
    let found: Vec<String> = v
        .validate_within(&object, None, limits)
        .into_iter()
        .map(|e| format!("{}: {}", e.field, e.message))
        .collect();
    assert_eq!(
        found,
        [
            "list[6]: Invalid value: \"object\": validation failed due to running out of cost budget, no further validation rules will be run"
        ]
    );
}

#[test]
fn a_message_expression_past_its_limit_stops_validation() {
    let v = validator(items_schema(
        None,
        None,
        json!([{
            "rule": "size(self.items) < 2",
            "messageExpression": "self.items.map(x, self.items.map(y, x + y)).join(',')",
        }]),
    ));
    let items: Vec<String> = (0..2000).map(|i| i.to_string()).collect();
    assert_eq!(
        failures(&v, json!({"spec": {"items": items}}), None),
        [
            "spec: Invalid value: \"object\": no further validation rules will be run due to call cost exceeds limit for messageExpression: \"self.items.map(x, self.items.map(y, x + y)).join(',')\""
        ]
    );
}

#[test]
fn rules_the_interpreter_cannot_run_are_refused_when_compiled() {
    let struct_literal = compile_errors(items_schema(
        None,
        None,
        json!([{"rule": "Foo{a: 1} == self"}]),
    ));
    assert_eq!(struct_literal.len(), 1, "{struct_literal:?}");
    assert!(
        struct_literal[0].ends_with("compilation failed: ERROR: <input>:1:4: undeclared reference to 'Foo' (in container '')\n | Foo{a: 1} == self\n | ...^"),
        "{struct_literal:?}"
    );
    let deep = format!(
        "{}true{}",
        "(".repeat(100_000 / 2 - 10),
        ")".repeat(100_000 / 2 - 10)
    );
    let chain = format!("self.items.size(){}", " + 1".repeat(20_000));
    let ternary = format!("{}true", "true ? false : ".repeat(5_000));
    let list = format!("{}1{} == 1", "[".repeat(1_000), "][0]".repeat(1_000));
    for (rule, message) in [
        (deep, "expression recursion limit exceeded: 250"),
        (chain, "max recursion depth exceeded"),
        (ternary, "max recursion depth exceeded"),
        (list, "expression recursion limit exceeded: 250"),
    ] {
        let errors = compile_errors(items_schema(None, None, json!([{"rule": rule}])));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].ends_with(&format!(
                "compilation failed: ERROR: <input>:-1:0: {message}"
            )),
            "{}",
            &errors[0][errors[0].len().saturating_sub(200)..]
        );
    }
    // Almost as deep as Kubernetes allows still works, compiled and run.
    let parens = format!(
        "{}size(self.items) >= 0{}",
        "(".repeat(240),
        ")".repeat(240)
    );
    let lists = format!("{}1{} == 1", "[".repeat(120), "][0]".repeat(120));
    let ternary = format!("{}size(self.items) >= 0", "false ? false : ".repeat(240));
    let chain = format!("size(self.items){} > 0", " + 1".repeat(240));
    let v = validator(items_schema(
        None,
        None,
        json!([{"rule": parens}, {"rule": lists}, {"rule": ternary}, {"rule": chain}]),
    ));
    assert!(failures(&v, json!({"spec": {"items": ["a"]}}), None).is_empty());
}

#[test]
fn a_rule_that_panics_the_interpreter_is_an_internal_error() {
    let mut v = spec_with(json!([{"rule": "self.a > 0"}, {"rule": "self.a < 0"}]));
    // Compiling refuses what the interpreter cannot evaluate; make one slip through.
    let compiled = std::sync::Arc::get_mut(&mut v.inner).expect("not shared yet");
    let spec = &mut compiled.root.properties[0].1;
    spec.rules[0].runnable.expression = kube_cel::cel::IdedExpr::default();
    assert_eq!(
        v.validate(&json!({"spec": {"a": 1}}), None)
            .into_iter()
            .map(|e| format!("{} {}: {}", e.reason, e.field, e.message))
            .collect::<Vec<_>>(),
        [
            "InternalError spec: Internal error: the interpreter failed evaluating rule: self.a > 0",
            "FieldValueInvalid spec: Invalid value: \"object\": failed rule: self.a < 0",
        ]
    );
}
