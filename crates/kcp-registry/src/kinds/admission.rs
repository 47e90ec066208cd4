//! Mutating and validating webhook configurations: each webhook needs a fully qualified unique
//! name, exactly one of `clientConfig.url` (https, a host, no user, query or fragment) and
//! `clientConfig.service`, a side-effect class (`None` or `NoneOnDryRun` on create),
//! admission review versions including `v1` or `v1beta1`, known rules and policies. Defaults as
//! in `admissionregistration/v1`.

use jiff::Timestamp;
use kcp_apimachinery::dns::dns1035_label_errors;
use kcp_apimachinery::object::{self, strings, text};
use kcp_apimachinery::patch::strategic::ListStrategy;
use kcp_apis::builtin::Resource;
use serde_json::{Value, json};

use crate::error::RegistryError;
use crate::kinds::printing::{self, Column, col};
use crate::kinds::{Generation, Kind, metadata_list_strategy};
use crate::validation::field::{
    Bad, Errors, duplicate, forbidden as forbidden_field, go_strings, index, invalid,
    not_supported, required,
};
use crate::validation::formats::fully_qualified_name_error;

const GROUP: &str = "admissionregistration.k8s.io";

/// Mutating and validating webhook configurations.
pub(crate) struct WebhookConfiguration {
    kind: &'static str,
    mutating: bool,
}
pub(crate) static MUTATING_WEBHOOK_CONFIGURATION: WebhookConfiguration = WebhookConfiguration {
    kind: "MutatingWebhookConfiguration",
    mutating: true,
};
pub(crate) static VALIDATING_WEBHOOK_CONFIGURATION: WebhookConfiguration = WebhookConfiguration {
    kind: "ValidatingWebhookConfiguration",
    mutating: false,
};
/// ValidatingAdmissionPolicies (enforced by `crate::admission::policies`).
pub(crate) struct ValidatingAdmissionPolicy;
pub(crate) static VALIDATING_ADMISSION_POLICY: ValidatingAdmissionPolicy =
    ValidatingAdmissionPolicy;
/// ValidatingAdmissionPolicyBindings.
pub(crate) struct ValidatingAdmissionPolicyBinding;
pub(crate) static VALIDATING_ADMISSION_POLICY_BINDING: ValidatingAdmissionPolicyBinding =
    ValidatingAdmissionPolicyBinding;

const WEBHOOK_COLUMNS: &[Column] = &[
    printing::NAME,
    col(
        "Webhooks",
        "integer",
        "Webhooks indicates the number of webhooks registered in this configuration",
    ),
    printing::AGE,
];
const POLICY_COLUMNS: &[Column] = &[
    printing::NAME,
    col(
        "Validations",
        "integer",
        "Validations indicates the number of validation rules defined in this configuration",
    ),
    col(
        "ParamKind",
        "string",
        "ParamKind specifies the kind of resources used to parameterize this policy",
    ),
    printing::AGE,
];
const BINDING_COLUMNS: &[Column] = &[
    printing::NAME,
    col(
        "PolicyName",
        "string",
        "PolicyName indicates the policy definition which the policy binding binded to",
    ),
    col(
        "ParamRef",
        "string",
        "ParamRef indicates the param resource which sets the configration param",
    ),
    printing::AGE,
];

impl Kind for WebhookConfiguration {
    fn group_kind(&self) -> (&'static str, &'static str) {
        (GROUP, self.kind)
    }

    fn decode(&self, _: &Resource, object: &mut Value) -> Result<(), RegistryError> {
        default_webhooks(object, self.mutating);
        Ok(())
    }

    fn validate(&self, object: &Value, old: Option<&Value>, errs: &mut Errors) {
        validate(object, old, self.mutating, errs);
    }

    fn generation(&self, _: &Resource) -> Generation {
        Generation::Fields(&["webhooks"])
    }

    fn list_strategy(&self, path: &[&str]) -> ListStrategy {
        match path {
            ["webhooks"] => ListStrategy::MergeByKey("name"),
            _ => metadata_list_strategy(path),
        }
    }

    fn columns(&self) -> &'static [Column] {
        WEBHOOK_COLUMNS
    }

    fn cells(&self, object: &Value, now: Timestamp) -> Vec<Value> {
        vec![
            printing::name(object),
            json!(printing::count(object, &["webhooks"])),
            printing::age(object, now),
        ]
    }
}

impl Kind for ValidatingAdmissionPolicy {
    fn group_kind(&self) -> (&'static str, &'static str) {
        (GROUP, "ValidatingAdmissionPolicy")
    }

    fn decode(&self, _: &Resource, object: &mut Value) -> Result<(), RegistryError> {
        if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
            spec.entry("failurePolicy").or_insert(json!("Fail"));
            if let Some(constraints) = spec.get_mut("matchConstraints") {
                default_match_resources(constraints);
            }
        }
        Ok(())
    }

    fn validate(&self, object: &Value, _: Option<&Value>, errs: &mut Errors) {
        validate_policy(&object["spec"], errs);
    }

    fn generation(&self, _: &Resource) -> Generation {
        Generation::Fields(&["spec"])
    }

    fn columns(&self) -> &'static [Column] {
        POLICY_COLUMNS
    }

    fn cells(&self, object: &Value, now: Timestamp) -> Vec<Value> {
        let param_kind = match object::at(object, &["spec", "paramKind"]) {
            Some(kind) if kind.is_object() => format!(
                "{}/{}",
                object::str_at(kind, &["apiVersion"]),
                object::str_at(kind, &["kind"])
            ),
            _ => "<unset>".to_string(),
        };
        vec![
            printing::name(object),
            json!(printing::count(object, &["spec", "validations"])),
            json!(param_kind),
            printing::age(object, now),
        ]
    }
}

impl Kind for ValidatingAdmissionPolicyBinding {
    fn group_kind(&self) -> (&'static str, &'static str) {
        (GROUP, "ValidatingAdmissionPolicyBinding")
    }

    fn decode(&self, _: &Resource, object: &mut Value) -> Result<(), RegistryError> {
        if let Some(resources) = object
            .get_mut("spec")
            .and_then(|s| s.get_mut("matchResources"))
        {
            default_match_resources(resources);
        }
        Ok(())
    }

    fn validate(&self, object: &Value, _: Option<&Value>, errs: &mut Errors) {
        validate_policy_binding(&object["spec"], errs);
    }

    fn generation(&self, _: &Resource) -> Generation {
        Generation::Fields(&["spec"])
    }

    fn columns(&self) -> &'static [Column] {
        BINDING_COLUMNS
    }

    fn cells(&self, object: &Value, now: Timestamp) -> Vec<Value> {
        vec![
            printing::name(object),
            json!(object::str_at(object, &["spec", "policyName"])),
            json!(param_ref(object)),
            printing::age(object, now),
        ]
    }
}

const REVIEW_VERSIONS: &[&str] = &["v1", "v1beta1"];
const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];
const MATCH_POLICIES: &[&str] = &["Equivalent", "Exact"];
const NO_SIDE_EFFECTS: &[&str] = &["None", "NoneOnDryRun"];
const ALL_SIDE_EFFECTS: &[&str] = &["None", "NoneOnDryRun", "Some", "Unknown"];
const OPERATIONS: &[&str] = &["*", "CONNECT", "CREATE", "DELETE", "UPDATE"];
const SCOPES: &[&str] = &["*", "Cluster", "Namespaced"];
const REINVOCATION_POLICIES: &[&str] = &["IfNeeded", "Never"];
const URL_FORM: &str = "; desired format: https://host[/path]";

/// Fills in the `v1` defaults: failure and match policy, timeout, selectors, rule scope,
/// service port and (mutating) reinvocation policy.
fn default_webhooks(object: &mut Value, mutating: bool) {
    let Some(webhooks) = object["webhooks"].as_array_mut() else {
        return;
    };
    for hook in webhooks.iter_mut().filter(|h| h.is_object()) {
        let defaults = [
            ("failurePolicy", json!("Fail")),
            ("matchPolicy", json!("Equivalent")),
            ("timeoutSeconds", json!(10)),
            ("namespaceSelector", json!({})),
            ("objectSelector", json!({})),
        ];
        for (field, value) in defaults {
            if hook[field].is_null() {
                hook[field] = value;
            }
        }
        if mutating && hook["reinvocationPolicy"].is_null() {
            hook["reinvocationPolicy"] = json!("Never");
        }
        if let Some(rules) = hook["rules"].as_array_mut() {
            for rule in rules.iter_mut().filter(|r| r.is_object()) {
                if rule["scope"].is_null() {
                    rule["scope"] = json!("*");
                }
            }
        }
        // Read without `IndexMut`, which would panic on a `clientConfig` that is not an object
        // (and insert nulls into one that has no `service`).
        if let Some(service) = hook
            .get_mut("clientConfig")
            .and_then(|config| config.get_mut("service"))
            .and_then(Value::as_object_mut)
            && service.get("port").is_none_or(Value::is_null)
        {
            service.insert("port".into(), json!(443));
        }
    }
}

/// The webhooks of a configuration; `old` is the stored configuration on update (whose own
/// looser values stay allowed).
fn validate(object: &Value, old: Option<&Value>, mutating: bool, errs: &mut Errors) {
    let old_hooks = old
        .and_then(|o| o["webhooks"].as_array().cloned())
        .unwrap_or_default();
    let require_no_side_effects = old.is_none()
        || old_hooks
            .iter()
            .all(|h| NO_SIDE_EFFECTS.contains(&text(h, "sideEffects")));
    let hooks = object["webhooks"].as_array().cloned().unwrap_or_default();
    let mut seen_names: Vec<&str> = Vec::new();
    for (i, hook) in hooks.iter().enumerate() {
        let path = index("webhooks", i);
        validate_webhook(hook, &path, mutating, require_no_side_effects, errs);
        validate_review_versions(&hook["admissionReviewVersions"], &path, errs);
        let name = text(hook, "name");
        if !name.is_empty() {
            if seen_names.contains(&name) {
                errs.push(duplicate(format!("{path}.name"), Bad::Str(name)));
            } else {
                seen_names.push(name);
            }
        }
    }
}

fn validate_webhook(
    hook: &Value,
    path: &str,
    mutating: bool,
    require_no_side_effects: bool,
    errs: &mut Errors,
) {
    let name = text(hook, "name");
    if name.is_empty() {
        errs.push(required(format!("{path}.name"), ""));
    } else if let Some(message) = fully_qualified_name_error(name) {
        errs.push(invalid(format!("{path}.name"), Bad::Str(name), &message));
    }
    let rules = hook["rules"].as_array().cloned().unwrap_or_default();
    for (i, rule) in rules.iter().enumerate() {
        validate_rule(rule, &format!("{path}.rules[{i}]"), errs);
    }
    let enums: [(&str, &[&str]); 2] = [
        ("failurePolicy", FAILURE_POLICIES),
        ("matchPolicy", MATCH_POLICIES),
    ];
    for (field, allowed) in enums {
        if let Some(value) = hook[field].as_str().filter(|v| !allowed.contains(v)) {
            errs.push(not_supported(
                format!("{path}.{field}"),
                Bad::Str(value),
                allowed,
            ));
        }
    }
    let allowed = if require_no_side_effects {
        NO_SIDE_EFFECTS
    } else {
        ALL_SIDE_EFFECTS
    };
    match hook["sideEffects"].as_str() {
        None => errs.push(required(
            format!("{path}.sideEffects"),
            &format!("must specify one of {}", allowed.join(", ")),
        )),
        Some(value) if !allowed.contains(&value) => errs.push(not_supported(
            format!("{path}.sideEffects"),
            Bad::Str(value),
            allowed,
        )),
        Some(_) => {}
    }
    if let Some(timeout) = hook["timeoutSeconds"]
        .as_i64()
        .filter(|t| !(1..=30).contains(t))
    {
        errs.push(invalid(
            format!("{path}.timeoutSeconds"),
            Bad::Int(timeout),
            "the timeout value must be between 1 and 30 seconds",
        ));
    }
    if mutating
        && let Some(value) = hook["reinvocationPolicy"]
            .as_str()
            .filter(|v| !REINVOCATION_POLICIES.contains(v))
    {
        errs.push(not_supported(
            format!("{path}.reinvocationPolicy"),
            Bad::Str(value),
            REINVOCATION_POLICIES,
        ));
    }
    validate_client_config(&hook["clientConfig"], &format!("{path}.clientConfig"), errs);
    validate_match_conditions(
        &hook["matchConditions"],
        &format!("{path}.matchConditions"),
        errs,
    );
}

/// At most this many match conditions per webhook.
const MAX_MATCH_CONDITIONS: usize = 64;

/// A webhook's `matchConditions`: named (qualified names, unique), each a CEL expression that
/// compiles, at most 64.
fn validate_match_conditions(conditions: &Value, path: &str, errs: &mut Errors) {
    let Some(conditions) = conditions.as_array() else {
        return;
    };
    if conditions.len() > MAX_MATCH_CONDITIONS {
        errs.push(crate::Cause {
            reason: "FieldValueTooMany",
            field: path.to_string(),
            message: format!(
                "Too many: {}: must have at most {MAX_MATCH_CONDITIONS} items",
                conditions.len()
            ),
        });
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, condition) in conditions.iter().enumerate() {
        let at = index(path, i);
        let expression = text(condition, "expression").trim();
        if expression.is_empty() {
            errs.push(required(format!("{at}.expression"), ""));
        } else if let Err(error) = kcp_apimachinery::schema::cel::Expression::compile(
            expression,
            crate::admission::webhooks::CONDITION_VARIABLES,
        ) {
            errs.push(invalid(
                format!("{at}.expression"),
                Bad::Str(expression),
                &format!("compilation failed: {error}"),
            ));
        }
        let name = text(condition, "name");
        if name.is_empty() {
            errs.push(required(format!("{at}.name"), ""));
            continue;
        }
        let problems = crate::validation::formats::qualified_name_errors(name);
        if !problems.is_empty() {
            errs.push(invalid(
                format!("{at}.name"),
                Bad::Str(name),
                &problems.join(", "),
            ));
        }
        if names.contains(&name) {
            errs.push(duplicate(format!("{at}.name"), Bad::Str(name)));
        } else {
            names.push(name);
        }
    }
}

fn validate_rule(rule: &Value, path: &str, errs: &mut Errors) {
    let operations = strings(&rule["operations"]);
    if operations.is_empty() {
        errs.push(required(format!("{path}.operations"), ""));
    }
    if operations.len() > 1 && operations.iter().any(|o| o == "*") {
        errs.push(invalid(
            format!("{path}.operations"),
            Bad::Go(go_strings(&operations)),
            "if '*' is present, must not specify other operations",
        ));
    }
    for (i, operation) in operations.iter().enumerate() {
        if !OPERATIONS.contains(&operation.as_str()) {
            errs.push(not_supported(
                index(&format!("{path}.operations"), i),
                Bad::Str(operation),
                OPERATIONS,
            ));
        }
    }
    for (field, what) in [("apiGroups", "API groups"), ("apiVersions", "API versions")] {
        let values = strings(&rule[field]);
        if values.is_empty() {
            errs.push(required(format!("{path}.{field}"), ""));
        }
        if values.len() > 1 && values.iter().any(|v| v == "*") {
            errs.push(invalid(
                format!("{path}.{field}"),
                Bad::Go(go_strings(&values)),
                &format!("if '*' is present, must not specify other {what}"),
            ));
        }
    }
    let resources = strings(&rule["resources"]);
    if resources.is_empty() {
        errs.push(required(format!("{path}.resources"), ""));
    }
    for (i, resource) in resources.iter().enumerate() {
        if resource.is_empty() {
            errs.push(required(index(&format!("{path}.resources"), i), ""));
        }
    }
    if let Some(scope) = rule["scope"].as_str().filter(|s| !SCOPES.contains(s)) {
        errs.push(not_supported(
            format!("{path}.scope"),
            Bad::Str(scope),
            SCOPES,
        ));
    }
}

fn validate_review_versions(versions: &Value, path: &str, errs: &mut Errors) {
    let path = format!("{path}.admissionReviewVersions");
    let versions = strings(versions);
    if versions.is_empty() {
        errs.push(required(
            &path,
            &format!("must specify one of {}", REVIEW_VERSIONS.join(", ")),
        ));
        return;
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, version) in versions.iter().enumerate() {
        if seen.contains(&version.as_str()) {
            errs.push(invalid(
                index(&path, i),
                Bad::Str(version),
                "duplicate version",
            ));
            continue;
        }
        seen.push(version);
        for message in dns1035_label_errors(version) {
            errs.push(invalid(index(&path, i), Bad::Str(version), &message));
        }
    }
    if !versions
        .iter()
        .any(|v| REVIEW_VERSIONS.contains(&v.as_str()))
    {
        errs.push(invalid(
            &path,
            Bad::Go(go_strings(&versions)),
            &format!(
                "must include at least one of {}",
                REVIEW_VERSIONS.join(", ")
            ),
        ));
    }
}

/// `clientConfig` of a webhook (also used by CRD conversion webhooks).
pub(crate) fn validate_client_config(config: &Value, path: &str, errs: &mut Errors) {
    let url = config["url"].as_str();
    let service = config["service"].as_object();
    match (url, service) {
        (Some(url), None) => validate_url(url, &format!("{path}.url"), errs),
        (None, Some(_)) => {
            let service = &config["service"];
            let path = format!("{path}.service");
            for field in ["name", "namespace"] {
                if text(service, field).is_empty() {
                    errs.push(required(format!("{path}.{field}"), ""));
                }
            }
            if let Some(port) = service["port"]
                .as_i64()
                .filter(|p| !(1..=65535).contains(p))
            {
                errs.push(invalid(
                    format!("{path}.port"),
                    Bad::Int(port),
                    "port is not valid: must be between 1 and 65535, inclusive",
                ));
            }
            if let Some(service_path) = service["path"].as_str().filter(|p| !p.is_empty())
                && !service_path.starts_with('/')
            {
                errs.push(invalid(
                    format!("{path}.path"),
                    Bad::Str(service_path),
                    "must start with a '/'",
                ));
            }
        }
        _ => errs.push(required(path, "exactly one of url or service is required")),
    }
}

fn validate_url(url: &str, path: &str, errs: &mut Errors) {
    let Some((scheme, rest)) = url.split_once("://") else {
        errs.push(invalid(
            path,
            Bad::Str(""),
            &format!("'https' is the only allowed URL scheme{URL_FORM}"),
        ));
        errs.push(invalid(
            path,
            Bad::Str(""),
            &format!("host must be specified{URL_FORM}"),
        ));
        return;
    };
    if scheme != "https" {
        errs.push(invalid(
            path,
            Bad::Str(scheme),
            &format!("'https' is the only allowed URL scheme{URL_FORM}"),
        ));
    }
    let (rest, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let authority = rest.split('/').next().unwrap_or_default();
    let (user, host) = match authority.rsplit_once('@') {
        Some((user, host)) => (Some(user), host),
        None => (None, authority),
    };
    if host.is_empty() {
        errs.push(invalid(
            path,
            Bad::Str(""),
            &format!("host must be specified{URL_FORM}"),
        ));
    }
    if let Some(user) = user {
        errs.push(invalid(
            path,
            Bad::Str(user),
            "user information is not permitted in the URL",
        ));
    }
    if !fragment.is_empty() {
        errs.push(invalid(
            path,
            Bad::Str(fragment),
            "fragments are not permitted in the URL",
        ));
    }
    if !query.is_empty() {
        errs.push(invalid(
            path,
            Bad::Str(query),
            "query parameters are not permitted in the URL",
        ));
    }
}

/// A ValidatingAdmissionPolicyBinding's ParamRef cell.
fn param_ref(binding: &Value) -> String {
    let Some(reference) = object::at(binding, &["spec", "paramRef"]).filter(|r| r.is_object())
    else {
        return "<unset>".to_string();
    };
    let name = object::str_at(reference, &["name"]);
    let namespace = object::str_at(reference, &["namespace"]);
    if !name.is_empty() {
        return match namespace {
            "" => format!("*/{name}"),
            namespace => format!("{namespace}/{name}"),
        };
    }
    match reference["selector"]["matchLabels"].as_object() {
        Some(labels) => labels
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
            .collect::<Vec<_>>()
            .join(","),
        None => "<unset>".to_string(),
    }
}

/// Kubernetes' defaults of a policy's `matchConstraints` or a binding's `matchResources`.
fn default_match_resources(resources: &mut Value) {
    let Some(fields) = resources.as_object_mut() else {
        return;
    };
    fields.entry("matchPolicy").or_insert(json!("Equivalent"));
    fields.entry("namespaceSelector").or_insert(json!({}));
    fields.entry("objectSelector").or_insert(json!({}));
    for list in ["resourceRules", "excludeResourceRules"] {
        if let Some(rules) = fields.get_mut(list).and_then(Value::as_array_mut) {
            for rule in rules.iter_mut().filter_map(Value::as_object_mut) {
                rule.entry("scope").or_insert(json!("*"));
            }
        }
    }
}

const VALIDATION_ACTIONS: &[&str] = &["Audit", "Deny", "Warn"];
const PARAMETER_NOT_FOUND_ACTIONS: &[&str] = &["Allow", "Deny"];
const VALIDATION_REASONS: &[&str] = &[
    "Unauthorized",
    "Forbidden",
    "Invalid",
    "RequestEntityTooLarge",
];

/// A CEL expression of a policy at `path`: required, and compiling.
fn validate_expression(expression: &Value, path: String, errs: &mut Errors) {
    let source = expression.as_str().unwrap_or_default().trim();
    if source.is_empty() {
        errs.push(required(path, ""));
        return;
    }
    if let Err(error) = kcp_apimachinery::schema::cel::Expression::compile(
        source,
        crate::admission::policies::config::POLICY_VARIABLES,
    ) {
        errs.push(invalid(
            path,
            Bad::Str(source),
            &format!("compilation failed: {error}"),
        ));
    }
}

fn validate_match_resources(resources: &Value, path: &str, require_rules: bool, errs: &mut Errors) {
    let rules = resources["resourceRules"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if require_rules && rules.is_empty() {
        errs.push(required(format!("{path}.resourceRules"), ""));
    }
    for list in ["resourceRules", "excludeResourceRules"] {
        for (i, rule) in resources[list].as_array().into_iter().flatten().enumerate() {
            validate_rule(rule, &format!("{path}.{list}[{i}]"), errs);
        }
    }
    if let Some(value) = resources["matchPolicy"]
        .as_str()
        .filter(|v| !MATCH_POLICIES.contains(v))
    {
        errs.push(not_supported(
            format!("{path}.matchPolicy"),
            Bad::Str(value),
            MATCH_POLICIES,
        ));
    }
}

/// A ValidatingAdmissionPolicy's spec, as kube-apiserver validates it.
fn validate_policy(spec: &Value, errs: &mut Errors) {
    match spec.get("matchConstraints").filter(|m| m.is_object()) {
        Some(constraints) => {
            validate_match_resources(constraints, "spec.matchConstraints", true, errs)
        }
        None => errs.push(required("spec.matchConstraints", "")),
    }
    if let Some(value) = spec["failurePolicy"]
        .as_str()
        .filter(|v| !FAILURE_POLICIES.contains(v))
    {
        errs.push(not_supported(
            "spec.failurePolicy",
            Bad::Str(value),
            FAILURE_POLICIES,
        ));
    }
    if let Some(kind) = spec.get("paramKind").filter(|k| k.is_object()) {
        for field in ["apiVersion", "kind"] {
            if text(kind, field).is_empty() {
                errs.push(required(format!("spec.paramKind.{field}"), ""));
            }
        }
    }
    let validations = spec["validations"].as_array().cloned().unwrap_or_default();
    let audits = spec["auditAnnotations"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if validations.is_empty() && audits.is_empty() {
        errs.push(required(
            "spec.validations",
            "validations or auditAnnotations must contain at least one item",
        ));
    }
    for (i, validation) in validations.iter().enumerate() {
        let path = index("spec.validations", i);
        validate_expression(
            &validation["expression"],
            format!("{path}.expression"),
            errs,
        );
        if let Some(message) = validation["messageExpression"]
            .as_str()
            .filter(|m| !m.trim().is_empty())
        {
            validate_expression(&json!(message), format!("{path}.messageExpression"), errs);
        }
        let message = text(validation, "message");
        if message.contains('\n') {
            errs.push(invalid(
                format!("{path}.message"),
                Bad::Str(message),
                "message must not contain line breaks",
            ));
        }
        if let Some(reason) = validation["reason"]
            .as_str()
            .filter(|r| !VALIDATION_REASONS.contains(r))
        {
            errs.push(not_supported(
                format!("{path}.reason"),
                Bad::Str(reason),
                VALIDATION_REASONS,
            ));
        }
    }
    let mut keys: Vec<&str> = Vec::new();
    for (i, audit) in audits.iter().enumerate() {
        let path = index("spec.auditAnnotations", i);
        let key = text(audit, "key");
        if key.is_empty() {
            errs.push(required(format!("{path}.key"), ""));
        } else if keys.contains(&key) {
            errs.push(duplicate(format!("{path}.key"), Bad::Str(key)));
        } else {
            keys.push(key);
        }
        validate_expression(
            &audit["valueExpression"],
            format!("{path}.valueExpression"),
            errs,
        );
    }
    let mut names: Vec<&str> = Vec::new();
    for (i, variable) in spec["variables"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let path = index("spec.variables", i);
        let name = text(variable, "name");
        let identifier = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if name.is_empty() {
            errs.push(required(format!("{path}.name"), ""));
        } else if !identifier {
            errs.push(invalid(
                format!("{path}.name"),
                Bad::Str(name),
                "name is not a valid CEL identifier",
            ));
        } else if names.contains(&name) {
            errs.push(duplicate(format!("{path}.name"), Bad::Str(name)));
        } else {
            names.push(name);
        }
        validate_expression(&variable["expression"], format!("{path}.expression"), errs);
    }
    validate_match_conditions(&spec["matchConditions"], "spec.matchConditions", errs);
}

/// A ValidatingAdmissionPolicyBinding's spec, as kube-apiserver validates it.
fn validate_policy_binding(spec: &Value, errs: &mut Errors) {
    if text(spec, "policyName").is_empty() {
        errs.push(required("spec.policyName", ""));
    }
    let actions = strings(&spec["validationActions"]);
    if actions.is_empty() {
        errs.push(required(
            "spec.validationActions",
            "at least one validation action is required",
        ));
    }
    let mut seen: Vec<&str> = Vec::new();
    for (i, action) in actions.iter().enumerate() {
        let path = index("spec.validationActions", i);
        if !VALIDATION_ACTIONS.contains(&action.as_str()) {
            errs.push(not_supported(path, Bad::Str(action), VALIDATION_ACTIONS));
        } else if seen.contains(&action.as_str()) {
            errs.push(duplicate(path, Bad::Str(action)));
        } else {
            seen.push(action);
        }
    }
    if seen.contains(&"Deny") && seen.contains(&"Warn") {
        errs.push(invalid(
            "spec.validationActions",
            Bad::Go(go_strings(&actions)),
            "must not contain both Deny and Warn (repeating the same validation failure information in the API response and headers serves no purpose)",
        ));
    }
    if let Some(param_ref) = spec.get("paramRef").filter(|p| p.is_object()) {
        let named = !text(param_ref, "name").is_empty();
        let selected = param_ref.get("selector").is_some_and(|s| !s.is_null());
        if named && selected {
            errs.push(forbidden_field(
                "spec.paramRef.name",
                "name and selector are mutually exclusive",
            ));
        }
        if !named && !selected {
            errs.push(required(
                "spec.paramRef",
                "one of name or selector must be specified",
            ));
        }
        match param_ref["parameterNotFoundAction"].as_str() {
            None => errs.push(required("spec.paramRef.parameterNotFoundAction", "")),
            Some(action) if !PARAMETER_NOT_FOUND_ACTIONS.contains(&action) => {
                errs.push(not_supported(
                    "spec.paramRef.parameterNotFoundAction",
                    Bad::Str(action),
                    PARAMETER_NOT_FOUND_ACTIONS,
                ))
            }
            Some(_) => {}
        }
    }
    if let Some(resources) = spec.get("matchResources").filter(|m| m.is_object()) {
        validate_match_resources(resources, "spec.matchResources", false, errs);
    }
}
