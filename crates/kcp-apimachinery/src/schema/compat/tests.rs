//! Golden cases: an existing and a new schema, whether the LCD is asked for, and the expected
//! LCD or incompatibilities. The first sixteen follow the scenarios kcp's schema negotiation
//! was tested with; the rest cover the rules added here.

use serde_json::{Value, json};

use super::compare;

const PATH: &str = "schema.openAPIV3Schema";

struct Case {
    name: String,
    existing: Value,
    new: Value,
    narrow: bool,
    /// The LCD, or the incompatibilities (`<field>: <message>`).
    want: Result<Value, Vec<&'static str>>,
}

fn object(properties: Value) -> Value {
    json!({"type": "object", "properties": properties})
}

fn with_more(existing: Value) -> Value {
    let mut new = existing.clone();
    new["properties"]["added"] = json!({"type": "string"});
    new
}

fn cases() -> Vec<Case> {
    let sub = |names: &[&str]| {
        let mut properties = serde_json::Map::new();
        for name in names {
            properties.insert(name.to_string(), json!({"type": "string"}));
        }
        json!({"type": "object", "properties": properties})
    };
    let two = object(json!({"prop1": sub(&["subProp1"]), "prop2": sub(&["subProp1", "subProp2"])}));
    let mut kcp_scenarios = vec![
        Case {
            name: "new has more properties".into(),
            existing: object(json!({"existing": {"type": "string"}})),
            new: object(json!({"existing": {"type": "string"}, "new": {"type": "string"}})),
            narrow: false,
            want: Ok(object(json!({"existing": {"type": "string"}}))),
        },
        Case {
            name: "new has fewer properties".into(),
            existing: object(json!({"existing": {"type": "string"}, "gone": {"type": "string"}})),
            new: object(json!({"existing": {"type": "string"}})),
            narrow: false,
            want: Err(vec![
                "schema.openAPIV3Schema.properties: Invalid value: [\"gone\"]: properties have been removed in an incompatible way",
            ]),
        },
        Case {
            name: "new has fewer properties, narrowed".into(),
            existing: object(json!({"existing": {"type": "string"}, "gone": {"type": "string"}})),
            new: object(json!({"existing": {"type": "string"}})),
            narrow: true,
            want: Ok(object(json!({"existing": {"type": "string"}}))),
        },
        Case {
            name: "new allows any property of a schema the existing properties fit".into(),
            existing: two.clone(),
            new: json!({"type": "object", "additionalProperties": sub(&["subProp1", "subProp2"])}),
            narrow: false,
            want: Ok(two.clone()),
        },
        Case {
            name: "new allows any property of a schema the existing properties do not fit".into(),
            existing: two.clone(),
            new: json!({"type": "object", "additionalProperties": sub(&["subProp1"])}),
            narrow: false,
            want: Err(vec![
                "schema.openAPIV3Schema.properties[prop2].properties: Invalid value: [\"subProp2\"]: properties have been removed in an incompatible way",
            ]),
        },
        Case {
            name: "new allows any property".into(),
            existing: object(json!({"existing": {"type": "string"}})),
            new: json!({"type": "object", "additionalProperties": true}),
            narrow: false,
            want: Ok(object(json!({"existing": {"type": "string"}}))),
        },
    ];
    for (scenario, inner) in [
        ("number", json!({"type": "number"})),
        ("integer", json!({"type": "integer"})),
        (
            "int-or-string",
            json!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}),
        ),
        (
            "preserve-unknown-fields",
            json!({"x-kubernetes-preserve-unknown-fields": true}),
        ),
        ("boolean", json!({"type": "boolean"})),
        (
            "array",
            json!({"type": "array", "items": {"type": "string"}}),
        ),
        (
            "additional properties",
            json!({"type": "object", "additionalProperties": {"type": "string"}}),
        ),
    ] {
        let existing = object(json!({"existing": inner}));
        kcp_scenarios.push(Case {
            name: format!("new has more properties, existing holds {scenario}"),
            new: with_more(existing.clone()),
            want: Ok(existing.clone()),
            existing,
            narrow: false,
        });
    }
    kcp_scenarios.extend([
        Case {
            name: "new allows any additional property, existing a schema of them".into(),
            existing: json!({"type": "object", "additionalProperties": {"type": "string"}}),
            new: json!({"type": "object", "additionalProperties": true}),
            narrow: false,
            want: Ok(json!({"type": "object", "additionalProperties": {"type": "string"}})),
        },
        Case {
            name: "new allows additional properties of a schema, existing any".into(),
            existing: json!({"type": "object", "additionalProperties": true}),
            new: json!({"type": "object", "additionalProperties": {"type": "string"}}),
            narrow: false,
            want: Err(vec![
                "schema.openAPIV3Schema.additionalProperties: Invalid value: {\"type\":\"string\"}: additionalProperties value has been changed in an incompatible way",
            ]),
        },
        Case {
            name: "new has neither properties nor additional properties".into(),
            existing: object(json!({"existing": {"type": "string"}})),
            new: json!({"type": "object"}),
            narrow: false,
            want: Err(vec![
                "schema.openAPIV3Schema.properties: Invalid value: [\"existing\"]: properties value has been completely cleared in an incompatible way",
            ]),
        },
    ]);
    assert_eq!(kcp_scenarios.len(), 16);
    let added = vec![
        Case {
            name: "a type change is incompatible either way".into(),
            existing: object(json!({"a": {"type": "string"}})),
            new: object(json!({"a": {"type": "boolean"}})),
            narrow: true,
            want: Err(vec![
                "schema.openAPIV3Schema.properties[a].type: Invalid value: \"boolean\": The type changed (was \"string\", now \"boolean\")",
            ]),
        },
        Case {
            name: "an integer may become a number".into(),
            existing: json!({"type": "integer"}),
            new: json!({"type": "number"}),
            narrow: false,
            want: Ok(json!({"type": "integer"})),
        },
        Case {
            name: "a number narrowed to the new integer".into(),
            existing: json!({"type": "number"}),
            new: json!({"type": "integer"}),
            narrow: true,
            want: Ok(json!({"type": "integer"})),
        },
        Case {
            name: "a number that became an integer is incompatible".into(),
            existing: json!({"type": "number"}),
            new: json!({"type": "integer"}),
            narrow: false,
            want: Err(vec![
                "schema.openAPIV3Schema.type: Invalid value: \"integer\": The type changed (was \"number\", now \"integer\")",
            ]),
        },
        Case {
            name: "more required fields".into(),
            existing: json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}),
            new: json!({"type": "object", "required": ["a", "b"], "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}),
            narrow: false,
            want: Err(vec![
                "schema.openAPIV3Schema.required: Invalid value: [\"b\"]: required fields have been added in an incompatible way",
            ]),
        },
        Case {
            name: "more required fields, narrowed".into(),
            existing: json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}),
            new: json!({"type": "object", "required": ["b"], "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}),
            narrow: true,
            want: Ok(
                json!({"type": "object", "required": ["a", "b"], "properties": {"a": {"type": "string"}, "b": {"type": "string"}}}),
            ),
        },
        Case {
            name: "fewer required fields are fine".into(),
            existing: json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}}),
            new: json!({"type": "object", "properties": {"a": {"type": "string"}}}),
            narrow: false,
            want: Ok(
                json!({"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}}),
            ),
        },
        Case {
            name: "tighter numeric bounds".into(),
            existing: json!({"type": "integer", "minimum": 0, "maximum": 10}),
            new: json!({"type": "integer", "minimum": 1, "maximum": 5, "exclusiveMaximum": true}),
            narrow: false,
            want: Err(vec![
                "schema.openAPIV3Schema.minimum: Invalid value: 1: minimum value has been changed in an incompatible way",
                "schema.openAPIV3Schema.maximum: Invalid value: 5: maximum value has been changed in an incompatible way",
                "schema.openAPIV3Schema.exclusiveMaximum: Invalid value: true: exclusiveMaximum value has been changed in an incompatible way",
            ]),
        },
        Case {
            name: "tighter numeric bounds, narrowed".into(),
            existing: json!({"type": "integer", "minimum": 0, "maximum": 10}),
            new: json!({"type": "integer", "minimum": 1, "maximum": 20}),
            narrow: true,
            want: Ok(json!({"type": "integer", "minimum": 1, "maximum": 10})),
        },
        Case {
            name: "looser bounds are fine".into(),
            existing: json!({"type": "string", "minLength": 2, "maxLength": 8}),
            new: json!({"type": "string", "minLength": 1}),
            narrow: false,
            want: Ok(json!({"type": "string", "minLength": 2, "maxLength": 8})),
        },
        Case {
            name: "a new length bound".into(),
            existing: json!({"type": "string"}),
            new: json!({"type": "string", "maxLength": 63}),
            narrow: false,
            want: Err(vec![
                "schema.openAPIV3Schema.maxLength: Invalid value: 63: maxLength value has been changed in an incompatible way",
            ]),
        },
        Case {
            name: "a new item bound, narrowed".into(),
            existing: json!({"type": "array", "items": {"type": "string"}}),
            new: json!({"type": "array", "maxItems": 3, "items": {"type": "string"}}),
            narrow: true,
            want: Ok(json!({"type": "array", "maxItems": 3, "items": {"type": "string"}})),
        },
        Case {
            name: "multipleOf dividing the old one is fine".into(),
            existing: json!({"type": "integer", "multipleOf": 4}),
            new: json!({"type": "integer", "multipleOf": 2}),
            narrow: false,
            want: Ok(json!({"type": "integer", "multipleOf": 4})),
        },
        Case {
            name: "nullable taken away".into(),
            existing: json!({"type": "string", "nullable": true}),
            new: json!({"type": "string"}),
            narrow: false,
            want: Err(vec![
                "schema.openAPIV3Schema.nullable: Invalid value: false: nullable value has been changed in an incompatible way",
            ]),
        },
        Case {
            name: "nullable taken away, narrowed".into(),
            existing: json!({"type": "string", "nullable": true}),
            new: json!({"type": "string"}),
            narrow: true,
            want: Ok(json!({"type": "string"})),
        },
        Case {
            name: "a changed pattern is not decided".into(),
            existing: json!({"type": "string", "pattern": "^a+$"}),
            new: json!({"type": "string", "pattern": "^[ab]+$"}),
            narrow: true,
            want: Err(vec![
                "schema.openAPIV3Schema: Forbidden: The \"pattern\" JSON Schema construct is not supported by the Schema negotiation for type \"string\"",
            ]),
        },
        Case {
            name: "a pattern only the new schema has".into(),
            existing: json!({"type": "string"}),
            new: json!({"type": "string", "pattern": "^a+$"}),
            narrow: false,
            want: Err(vec![
                "schema.openAPIV3Schema.pattern: Invalid value: \"^a+$\": pattern value has been changed in an incompatible way",
            ]),
        },
        Case {
            name: "a pattern only the new schema has, narrowed".into(),
            existing: json!({"type": "string"}),
            new: json!({"type": "string", "pattern": "^a+$"}),
            narrow: true,
            want: Ok(json!({"type": "string", "pattern": "^a+$"})),
        },
        Case {
            name: "an enum losing values".into(),
            existing: json!({"type": "string", "enum": ["a", "b", "c"]}),
            new: json!({"type": "string", "enum": ["a", "c", "d"]}),
            narrow: false,
            want: Err(vec![
                "schema.openAPIV3Schema.enum: Invalid value: [\"b\"]: enum value has been changed in an incompatible way",
            ]),
        },
        Case {
            name: "an enum losing values, narrowed".into(),
            existing: json!({"type": "string", "enum": ["a", "b", "c"]}),
            new: json!({"type": "string", "enum": ["a", "c", "d"]}),
            narrow: true,
            want: Ok(json!({"type": "string", "enum": ["a", "c"]})),
        },
        Case {
            name: "an integer enum growing".into(),
            existing: json!({"type": "integer", "enum": [1, 2]}),
            new: json!({"type": "integer", "enum": [1, 2, 3]}),
            narrow: false,
            want: Ok(json!({"type": "integer", "enum": [1, 2]})),
        },
        Case {
            name: "a format change".into(),
            existing: json!({"type": "string", "format": "date-time"}),
            new: json!({"type": "string"}),
            narrow: true,
            want: Err(vec![
                "schema.openAPIV3Schema.format: Invalid value: \"\": format value has been changed in an incompatible way",
            ]),
        },
        Case {
            name: "list types and keys".into(),
            existing: json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                              "items": {"type": "object", "properties": {"name": {"type": "string"}}}}),
            new: json!({"type": "array", "x-kubernetes-list-type": "atomic",
                         "items": {"type": "object", "properties": {"name": {"type": "string"}}}}),
            narrow: false,
            want: Err(vec![
                "schema.openAPIV3Schema.x-kubernetes-list-type: Invalid value: \"atomic\": x-kubernetes-list-type value has been changed in an incompatible way",
                "schema.openAPIV3Schema.x-kubernetes-list-map-keys: Invalid value: null: x-kubernetes-list-map-keys value has been changed in an incompatible way",
            ]),
        },
        Case {
            name: "unique items, narrowed".into(),
            existing: json!({"type": "array", "items": {"type": "string"}}),
            new: json!({"type": "array", "uniqueItems": true, "items": {"type": "string"}}),
            narrow: true,
            want: Ok(json!({"type": "array", "uniqueItems": true, "items": {"type": "string"}})),
        },
        Case {
            name: "a map type change".into(),
            existing: json!({"type": "object", "x-kubernetes-map-type": "atomic", "additionalProperties": {"type": "string"}}),
            new: json!({"type": "object", "x-kubernetes-map-type": "granular", "additionalProperties": {"type": "string"}}),
            narrow: false,
            want: Err(vec![
                "schema.openAPIV3Schema.x-kubernetes-map-type: Invalid value: \"granular\": x-kubernetes-map-type value has been changed in an incompatible way",
            ]),
        },
        Case {
            name: "int-or-string that became a string".into(),
            existing: json!({"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}),
            new: json!({"type": "string"}),
            narrow: false,
            want: Err(vec![
                "schema.openAPIV3Schema.x-kubernetes-int-or-string: Invalid value: false: x-kubernetes-int-or-string value has been changed in an incompatible way",
            ]),
        },
        Case {
            name: "preserved unknown fields no more".into(),
            existing: json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            new: json!({"type": "object"}),
            narrow: true,
            want: Err(vec![
                "schema.openAPIV3Schema.x-kubernetes-preserve-unknown-fields: Invalid value: false: x-kubernetes-preserve-unknown-fields value changed (was true, now false)",
            ]),
        },
        Case {
            name: "an embedded resource no more".into(),
            existing: json!({"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}),
            new: json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            narrow: false,
            want: Err(vec![
                "schema.openAPIV3Schema.x-kubernetes-embedded-resource: Invalid value: false: x-kubernetes-embedded-resource value has been changed in an incompatible way",
            ]),
        },
        Case {
            name: "a oneOf only the existing schema has is dropped".into(),
            existing: json!({"type": "object", "properties": {"a": {"type": "string"}}, "oneOf": [{"required": ["a"]}]}),
            new: json!({"type": "object", "properties": {"a": {"type": "string"}}}),
            narrow: false,
            want: Ok(
                json!({"type": "object", "properties": {"a": {"type": "string"}}, "oneOf": [{"required": ["a"]}]}),
            ),
        },
        Case {
            name: "the same allOf on both sides".into(),
            existing: json!({"type": "string", "allOf": [{"minLength": 1}]}),
            new: json!({"type": "string", "allOf": [{"minLength": 1}]}),
            narrow: false,
            want: Ok(json!({"type": "string", "allOf": [{"minLength": 1}]})),
        },
        Case {
            name: "a changed oneOf is refused by name".into(),
            existing: json!({"type": "object", "properties": {"a": {"type": "string"}}, "oneOf": [{"required": ["a"]}]}),
            new: json!({"type": "object", "properties": {"a": {"type": "string"}}, "oneOf": [{"required": ["a"]}, {"required": []}]}),
            narrow: true,
            want: Err(vec![
                "schema.openAPIV3Schema: Forbidden: The \"oneOf\" JSON Schema construct is not supported by the Schema negotiation for type \"object\"",
            ]),
        },
        Case {
            name: "an anyOf only the new schema has".into(),
            existing: json!({"type": "object", "properties": {"a": {"type": "string"}}}),
            new: json!({"type": "object", "properties": {"a": {"type": "string"}}, "anyOf": [{"required": ["a"]}]}),
            narrow: false,
            want: Err(vec![
                "schema.openAPIV3Schema.anyOf: Invalid value: [{\"required\":[\"a\"]}]: anyOf value has been changed in an incompatible way",
            ]),
        },
        Case {
            name: "nested properties narrowed deep down".into(),
            existing: object(
                json!({"spec": object(json!({"a": {"type": "string", "enum": ["x", "y"]}, "b": {"type": "integer"}}))}),
            ),
            new: object(json!({"spec": object(json!({"a": {"type": "string", "enum": ["x"]}}))})),
            narrow: true,
            want: Ok(object(
                json!({"spec": object(json!({"a": {"type": "string", "enum": ["x"]}}))}),
            )),
        },
    ];
    kcp_scenarios.into_iter().chain(added).collect()
}

#[test]
fn golden_cases() {
    let mut failed = Vec::new();
    for case in cases() {
        let got = compare(PATH, &case.existing, &case.new, case.narrow);
        let got = got.map_err(|errors| errors.iter().map(ToString::to_string).collect::<Vec<_>>());
        let want = case
            .want
            .map_err(|errors| errors.iter().map(|e| e.to_string()).collect::<Vec<_>>());
        if got != want {
            failed.push(format!("{}:\n  got  {got:?}\n  want {want:?}", case.name));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn an_lcd_is_a_sub_schema_of_both() {
    // The LCD of two schemas compares compatibly with each of them.
    for case in cases().into_iter().filter(|c| c.narrow) {
        let Ok(lcd) = compare(PATH, &case.existing, &case.new, true) else {
            continue;
        };
        assert!(
            compare(PATH, &lcd, &case.new, false).is_ok(),
            "{}: LCD vs new",
            case.name
        );
        assert!(
            compare(PATH, &lcd, &case.existing, false).is_ok(),
            "{}: LCD vs existing",
            case.name
        );
    }
}
