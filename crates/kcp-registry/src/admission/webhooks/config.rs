//! Webhooks as their configurations declare them (Validating- and
//! MutatingWebhookConfigurations, already defaulted and validated when stored), read once per
//! configuration and kept: rules, selectors, compiled match conditions, how to reach them.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use kcp_apimachinery::labels::Selector;
use kcp_apimachinery::schema::cel::Expression;
use serde_json::Value;

/// The variables match conditions see.
pub(crate) const CONDITION_VARIABLES: &[&str] = &["object", "oldObject", "request", "authorizer"];

/// One rule: the operations and the group, version, resource and scope it matches.
#[derive(Debug, Default)]
pub(crate) struct Rule {
    pub(crate) operations: Vec<String>,
    pub(crate) groups: Vec<String>,
    pub(crate) versions: Vec<String>,
    pub(crate) resources: Vec<String>,
    /// `*`, `Cluster` or `Namespaced`.
    pub(crate) scope: String,
    /// The objects' names it is limited to (admission policies' rules; empty: any).
    pub(crate) resource_names: Vec<String>,
}

/// A rule as a configuration writes it (`rules[]`, `resourceRules[]`).
pub(crate) fn rule_of(rule: &Value) -> Rule {
    Rule {
        operations: strings(&rule["operations"]),
        groups: strings(&rule["apiGroups"]),
        versions: strings(&rule["apiVersions"]),
        resources: strings(&rule["resources"]),
        scope: rule["scope"].as_str().unwrap_or("*").to_string(),
        resource_names: strings(&rule["resourceNames"]),
    }
}

/// Where a webhook is.
#[derive(Debug, Clone)]
pub(crate) enum Location {
    Url(String),
    Service {
        namespace: String,
        name: String,
        path: String,
        port: u16,
    },
}

/// One webhook of a configuration.
#[derive(Debug)]
pub(crate) struct Webhook {
    pub(crate) name: String,
    /// The configuration's name (webhooks run in the order of their configurations' names).
    pub(crate) configuration: String,
    pub(crate) rules: Vec<Rule>,
    /// `matchPolicy: Equivalent`: other versions of a rule's resource match too.
    pub(crate) equivalent: bool,
    pub(crate) namespace_selector: Selector,
    pub(crate) object_selector: Selector,
    /// `(name, expression)`; an expression that did not compile is kept as its error.
    pub(crate) conditions: Vec<(String, Result<Expression, String>)>,
    /// `failurePolicy: Ignore`.
    pub(crate) fail_open: bool,
    pub(crate) timeout: Duration,
    /// `sideEffects` is `None` or `NoneOnDryRun`: dry-run requests may call it.
    pub(crate) dry_run_safe: bool,
    /// `reinvocationPolicy: IfNeeded` (mutating webhooks).
    pub(crate) reinvoke: bool,
    /// The AdmissionReview version sent: `v1`, else `v1beta1`; `None` when it accepts neither.
    pub(crate) review_version: Option<&'static str>,
    pub(crate) location: Location,
    pub(crate) ca_bundle: Option<Arc<[u8]>>,
}

pub(crate) fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn selector(value: &Value) -> Selector {
    match value {
        Value::Null => Selector::everything(),
        selector => Selector::from_label_selector(selector).unwrap_or_else(|_| Selector::nothing()),
    }
}

/// The webhooks of one configuration object.
pub(crate) fn webhooks_of(configuration: &Value, mutating: bool) -> Vec<Arc<Webhook>> {
    let name = configuration["metadata"]["name"]
        .as_str()
        .unwrap_or_default();
    let Some(hooks) = configuration["webhooks"].as_array() else {
        return Vec::new();
    };
    hooks
        .iter()
        .filter_map(|hook| webhook(hook, name, mutating).map(Arc::new))
        .collect()
}

fn webhook(hook: &Value, configuration: &str, mutating: bool) -> Option<Webhook> {
    let client = &hook["clientConfig"];
    let location = match (client["url"].as_str(), client.get("service")) {
        (Some(url), _) => Location::Url(url.to_string()),
        (None, Some(service)) if service.is_object() => Location::Service {
            namespace: service["namespace"].as_str()?.to_string(),
            name: service["name"].as_str()?.to_string(),
            path: service["path"].as_str().unwrap_or_default().to_string(),
            port: service["port"]
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .unwrap_or(443),
        },
        _ => return None,
    };
    let ca_bundle = client["caBundle"]
        .as_str()
        .filter(|b| !b.is_empty())
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .map(Arc::from);
    let rules = hook["rules"]
        .as_array()
        .map(|rules| rules.iter().map(rule_of).collect())
        .unwrap_or_default();
    let conditions = hook["matchConditions"]
        .as_array()
        .map(|conditions| {
            conditions
                .iter()
                .map(|c| {
                    let name = c["name"].as_str().unwrap_or_default().to_string();
                    let expression = c["expression"].as_str().unwrap_or_default();
                    (name, Expression::compile(expression, CONDITION_VARIABLES))
                })
                .collect()
        })
        .unwrap_or_default();
    let versions = strings(&hook["admissionReviewVersions"]);
    let review_version = ["v1", "v1beta1"]
        .into_iter()
        .find(|v| versions.iter().any(|w| w == v));
    Some(Webhook {
        name: hook["name"].as_str().unwrap_or_default().to_string(),
        configuration: configuration.to_string(),
        rules,
        equivalent: hook["matchPolicy"].as_str() != Some("Exact"),
        namespace_selector: selector(&hook["namespaceSelector"]),
        object_selector: selector(&hook["objectSelector"]),
        conditions,
        fail_open: hook["failurePolicy"].as_str() == Some("Ignore"),
        timeout: Duration::from_secs(hook["timeoutSeconds"].as_u64().unwrap_or(10).clamp(1, 30)),
        dry_run_safe: matches!(hook["sideEffects"].as_str(), Some("None" | "NoneOnDryRun")),
        reinvoke: mutating && hook["reinvocationPolicy"].as_str() == Some("IfNeeded"),
        review_version,
        location,
        ca_bundle,
    })
}
