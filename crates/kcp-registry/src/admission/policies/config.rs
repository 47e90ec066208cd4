//! ValidatingAdmissionPolicies and their bindings as stored (defaulted and validated), read
//! once and kept with their expressions compiled.

use std::sync::Arc;

use kcp_apimachinery::labels::Selector;
use kcp_apimachinery::schema::cel::Expression;
use serde_json::Value;

use crate::admission::webhooks::config::{Rule, rule_of, selector, strings};

/// The variables a policy's expressions see.
pub(crate) const POLICY_VARIABLES: &[&str] = &[
    "object",
    "oldObject",
    "request",
    "params",
    "namespaceObject",
    "variables",
    "authorizer",
];

/// Which requests a policy (or a binding) matches: `matchConstraints` / `matchResources`.
#[derive(Debug)]
pub(crate) struct MatchResources {
    pub(crate) rules: Vec<Rule>,
    pub(crate) excluded: Vec<Rule>,
    pub(crate) equivalent: bool,
    pub(crate) namespace_selector: Selector,
    pub(crate) object_selector: Selector,
}

impl MatchResources {
    fn of(value: &Value) -> MatchResources {
        let rules = |field: &str| {
            value[field]
                .as_array()
                .map(|rules| rules.iter().map(rule_of).collect())
                .unwrap_or_default()
        };
        MatchResources {
            rules: rules("resourceRules"),
            excluded: rules("excludeResourceRules"),
            equivalent: value["matchPolicy"].as_str() != Some("Exact"),
            namespace_selector: selector(&value["namespaceSelector"]),
            object_selector: selector(&value["objectSelector"]),
        }
    }
}

/// An expression that may not have compiled (a stored policy keeps running; the failure
/// policy decides what a broken expression means).
pub(crate) type Compiled = Result<Expression, String>;

fn compile(source: &str) -> Compiled {
    Expression::compile(source, POLICY_VARIABLES)
}

/// One validation.
#[derive(Debug)]
pub(crate) struct Validation {
    pub(crate) expression: Compiled,
    pub(crate) source: String,
    pub(crate) message: String,
    pub(crate) message_expression: Option<Compiled>,
    /// `Invalid` unless the validation says otherwise.
    pub(crate) reason: String,
}

/// A ValidatingAdmissionPolicy.
#[derive(Debug)]
pub(crate) struct Policy {
    pub(crate) name: String,
    /// `(apiVersion, kind)` of its params.
    pub(crate) param_kind: Option<(String, String)>,
    pub(crate) constraints: MatchResources,
    pub(crate) conditions: Vec<(String, Compiled)>,
    pub(crate) variables: Vec<(String, Compiled)>,
    pub(crate) validations: Vec<Validation>,
    pub(crate) audit_annotations: Vec<(String, Compiled)>,
    /// `failurePolicy: Ignore`.
    pub(crate) fail_open: bool,
    /// The variables its expressions name (the others are not bound).
    pub(crate) names: Vec<&'static str>,
}

/// `paramRef` of a binding.
#[derive(Debug)]
pub(crate) struct ParamRef {
    pub(crate) name: String,
    pub(crate) namespace: String,
    pub(crate) selector: Option<Selector>,
    /// `parameterNotFoundAction: Deny`.
    pub(crate) deny_when_missing: bool,
}

/// A ValidatingAdmissionPolicyBinding.
#[derive(Debug)]
pub(crate) struct Binding {
    pub(crate) name: String,
    pub(crate) policy: String,
    pub(crate) param_ref: Option<ParamRef>,
    pub(crate) resources: Option<MatchResources>,
    pub(crate) deny: bool,
    pub(crate) warn: bool,
    pub(crate) audit: bool,
}

fn named_expressions(list: &Value, name: &str, expression: &str) -> Vec<(String, Compiled)> {
    list.as_array()
        .map(|items| {
            items
                .iter()
                .map(|item| {
                    let source = item[expression].as_str().unwrap_or_default();
                    (
                        item[name].as_str().unwrap_or_default().to_string(),
                        compile(source),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn policy_of(object: &Value) -> Arc<Policy> {
    let spec = &object["spec"];
    let param_kind = spec["paramKind"].as_object().map(|kind| {
        (
            kind.get("apiVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            kind.get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        )
    });
    let validations = spec["validations"]
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|v| {
                    let source = v["expression"]
                        .as_str()
                        .unwrap_or_default()
                        .trim()
                        .to_string();
                    Validation {
                        expression: compile(&source),
                        source,
                        message: v["message"].as_str().unwrap_or_default().trim().to_string(),
                        message_expression: v["messageExpression"]
                            .as_str()
                            .filter(|m| !m.is_empty())
                            .map(compile),
                        reason: v["reason"].as_str().unwrap_or("Invalid").to_string(),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let mut expressions: Vec<&Expression> = Vec::new();
    for validation in &validations {
        let validation: &Validation = validation;
        expressions.extend(validation.expression.as_ref().ok());
        expressions.extend(
            validation
                .message_expression
                .iter()
                .filter_map(|m| m.as_ref().ok()),
        );
    }
    let conditions = named_expressions(&spec["matchConditions"], "name", "expression");
    let variables = named_expressions(&spec["variables"], "name", "expression");
    let audit_annotations = named_expressions(&spec["auditAnnotations"], "key", "valueExpression");
    for (_, expression) in conditions
        .iter()
        .chain(&variables)
        .chain(&audit_annotations)
    {
        expressions.extend(expression.as_ref().ok());
    }
    let names: Vec<&'static str> = POLICY_VARIABLES
        .iter()
        .copied()
        .filter(|name| expressions.iter().any(|e| e.mentions(name)))
        .collect();
    Arc::new(Policy {
        names,
        name: object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        param_kind,
        constraints: MatchResources::of(&spec["matchConstraints"]),
        conditions,
        variables,
        validations,
        audit_annotations,
        fail_open: spec["failurePolicy"].as_str() == Some("Ignore"),
    })
}

pub(crate) fn binding_of(object: &Value) -> Arc<Binding> {
    let spec = &object["spec"];
    let actions = strings(&spec["validationActions"]);
    let param_ref = spec["paramRef"].as_object().map(|r| ParamRef {
        name: r
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        namespace: r
            .get("namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        selector: r.get("selector").filter(|s| !s.is_null()).map(selector),
        deny_when_missing: r.get("parameterNotFoundAction").and_then(Value::as_str) == Some("Deny"),
    });
    Arc::new(Binding {
        name: object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        policy: spec["policyName"].as_str().unwrap_or_default().to_string(),
        param_ref,
        resources: spec
            .get("matchResources")
            .filter(|m| m.is_object())
            .map(MatchResources::of),
        deny: actions.iter().any(|a| a == "Deny"),
        warn: actions.iter().any(|a| a == "Warn"),
        audit: actions.iter().any(|a| a == "Audit"),
    })
}
