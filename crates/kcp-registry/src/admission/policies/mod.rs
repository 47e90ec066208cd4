//! ValidatingAdmissionPolicies, as kube-apiserver enforces them, per logical cluster: a policy
//! applies through its bindings in the same workspace; for a resource bound from an
//! APIExport, the policies and bindings of the export's workspace apply instead, with params
//! read there and namespace selectors matching the consumer's namespaces (kcp's rule).
//!
//! A policy matches a write by its `matchConstraints` (resource rules with `resourceNames`,
//! exclusions, `matchPolicy`, namespace and object selectors), a binding further by its
//! `matchResources`; its params are collected by the binding's `paramRef` (by name or
//! selector, namespaced or not, `parameterNotFoundAction`). For each param the match
//! conditions, variables, validations and audit annotations are evaluated in CEL over
//! `object`, `oldObject`, `request`, `params`, `namespaceObject` and `variables`, charging
//! one budget per evaluation (Kubernetes' runtime budget). `authorizer` is not offered: an
//! expression naming it fails, and the failure policy decides.
//!
//! A failed validation acts as its binding says: Deny refuses the write (`<resource> "<name>"
//! is forbidden: ValidatingAdmissionPolicy 'P' with binding 'B' denied request: <message>`,
//! with the validation's reason and its code: 422 for Invalid), Warn adds kube's warning,
//! Audit the `validation.policy.admission.k8s.io/validation_failure` annotation. Audit
//! annotations are published as `<policy>/<key>`. Errors and misconfigurations (a param kind
//! the workspace does not serve, a missing param with `Deny`) refuse the write under
//! `failurePolicy: Fail` and are ignored under `Ignore`.

pub(crate) mod config;

use std::sync::Arc;

use kcp_apimachinery::schema::cel::{Evaluation, Outcome};
use serde_json::{Map, Value, json};

use crate::admission::webhooks::matching::rules_match;
use crate::admission::webhooks::{Write, is_namespace, other_versions, own_labels, selects};
use crate::error::RegistryError;
use crate::list::ListOptions;
use crate::store::{Registry, Target};
use config::{Binding, MatchResources, Policy};

/// Longest audit annotation value kept (Kubernetes' 10 KiB).
const MAX_AUDIT_ANNOTATION_BYTES: usize = 10 * 1024;

/// A failed validation, or an error the failure policy made one.
#[derive(Debug)]
struct Denial {
    message: String,
    reason: String,
    /// The validation's index (for the audit annotation).
    index: usize,
}

/// What evaluating one binding with one param found.
#[derive(Debug, Default)]
struct Outcomes {
    denials: Vec<Denial>,
    audit_annotations: Vec<(String, String)>,
}

/// What a policy's expressions see besides the object: the request, the namespace, a param.
struct Inputs<'a> {
    object: &'a Value,
    old: &'a Value,
    request: &'a Value,
    namespace: &'a Value,
}

impl Registry {
    /// Enforces the ValidatingAdmissionPolicies that apply to `write` (`object` absent for
    /// deletes).
    pub(crate) async fn call_policies(
        &self,
        write: &Write<'_>,
        object: Option<&Value>,
    ) -> Result<(), RegistryError> {
        let Some(configured_in) = self.configured_in(write.target) else {
            return Ok(());
        };
        let configurations = self
            .admission_configurations()
            .of(self, &configured_in)
            .await?;
        if configurations.policies.is_empty() {
            return Ok(());
        }
        let target = write.target;
        let resource = target.resource;
        let other_versions = other_versions(resource);
        let asked = self.asked(write, &other_versions);
        let namespace = asked.namespace;
        let namespace_itself = is_namespace(resource);
        // The namespace is read only when a selector or an expression looks at it.
        let needs_namespace = configurations.policies.iter().any(|(policy, bindings)| {
            policy.names.contains(&"namespaceObject")
                || !policy.constraints.namespace_selector.is_empty()
                || bindings.iter().any(|b| {
                    b.resources
                        .as_ref()
                        .is_some_and(|r| !r.namespace_selector.is_empty())
                })
        });
        let namespaced_object = !namespace.is_empty() && !namespace_itself && needs_namespace;
        let namespace_object = match namespaced_object {
            true => self.namespace_object(target, namespace).await?,
            false => Value::Null,
        };
        let namespace_labels = match namespace_itself {
            true => own_labels(object, write.old),
            false => namespace_object["metadata"]["labels"].clone(),
        };
        let matches = |resources: &MatchResources| -> Option<String> {
            if !namespace.is_empty() && !resources.namespace_selector.matches(&namespace_labels) {
                return None;
            }
            if !selects(&resources.object_selector, object, write.old) {
                return None;
            }
            if rules_match(&resources.excluded, resources.equivalent, &asked).is_some() {
                return None;
            }
            if resources.rules.is_empty() {
                return Some(asked.version.to_string());
            }
            rules_match(&resources.rules, resources.equivalent, &asked).map(str::to_string)
        };
        let mut denied: Vec<(Arc<Policy>, Option<Arc<Binding>>, Denial)> = Vec::new();
        for (policy, bindings) in &configurations.policies {
            let Some(version) = matches(&policy.constraints) else {
                continue;
            };
            let sent_object = self
                .admitted_object(write, &version, object)
                .await
                .unwrap_or(Value::Null);
            let sent_old = match policy.names.contains(&"oldObject") {
                true => self
                    .admitted_object(write, &version, write.old)
                    .await
                    .unwrap_or(Value::Null),
                false => Value::Null,
            };
            let request = match policy.names.contains(&"request") {
                true => {
                    let mut request =
                        self.admission_request(write, &version, Value::Null, Value::Null);
                    request.remove("object");
                    request.remove("oldObject");
                    Value::Object(request)
                }
                false => Value::Null,
            };
            let inputs = Inputs {
                object: &sent_object,
                old: &sent_old,
                request: &request,
                namespace: &namespace_object,
            };
            let mut annotations: Vec<(String, String)> = Vec::new();
            for binding in bindings {
                if let Some(resources) = &binding.resources
                    && matches(resources).is_none()
                {
                    continue;
                }
                let params = match self
                    .policy_params(&configured_in, policy, binding, namespace)
                    .await
                {
                    Ok(params) => params,
                    Err(error) => {
                        if !policy.fail_open {
                            let denial = Denial {
                                message: format!("failed to configure binding: {error}"),
                                reason: "Invalid".into(),
                                index: 0,
                            };
                            denied.push((policy.clone(), Some(binding.clone()), denial));
                        }
                        continue;
                    }
                };
                for param in &params {
                    let outcomes = evaluate(policy, &inputs, param);
                    annotations.extend(outcomes.audit_annotations);
                    for denial in outcomes.denials {
                        self.act_on(policy, binding, &denial);
                        if binding.deny {
                            denied.push((policy.clone(), Some(binding.clone()), denial));
                        }
                    }
                }
            }
            if let Some(notes) = self.notes() {
                let mut published: Vec<(String, String)> = Vec::new();
                for (key, value) in annotations {
                    let key = format!("{}/{key}", policy.name);
                    match published.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, values)) if !values.split(", ").any(|v| v == value) => {
                            values.push_str(", ");
                            values.push_str(&value);
                        }
                        Some(_) => {}
                        None => published.push((key, value)),
                    }
                }
                for (key, value) in published {
                    notes.annotate(key, value);
                }
            }
        }
        let Some((policy, binding, denial)) = denied.into_iter().next() else {
            return Ok(());
        };
        let reason = match denial.reason.as_str() {
            "" => "Invalid".to_string(),
            reason => reason.to_string(),
        };
        let code = match reason.as_str() {
            "Unauthorized" => 401,
            "Forbidden" => 403,
            "RequestEntityTooLarge" => 413,
            _ => 422,
        };
        let by = match &binding {
            Some(binding) => format!(
                "ValidatingAdmissionPolicy '{}' with binding '{}' denied request: {}",
                policy.name, binding.name, denial.message
            ),
            None => format!(
                "ValidatingAdmissionPolicy '{}' denied request: {}",
                policy.name, denial.message
            ),
        };
        let qualified = target.qualified_resource();
        let message = match write.name {
            "" => format!("{qualified} is forbidden: {by}"),
            name => format!("{qualified} {} is forbidden: {by}", go_quote(name)),
        };
        Err(RegistryError::Refused {
            code,
            reason,
            message,
            details: Some(json!({
                "name": write.name,
                "group": resource.group,
                "kind": resource.name,
                "causes": [{"message": by}],
            })),
        })
    }

    /// What a failed validation's binding says besides Deny: a warning, an audit annotation.
    fn act_on(&self, policy: &Policy, binding: &Binding, denial: &Denial) {
        let Some(notes) = self.notes() else { return };
        if binding.warn {
            notes.warn(format!(
                "Validation failed for ValidatingAdmissionPolicy '{}' with binding '{}': {}",
                policy.name, binding.name, denial.message
            ));
        }
        if binding.audit {
            let mut actions = Vec::new();
            for (on, action) in [
                (binding.deny, "Deny"),
                (binding.warn, "Warn"),
                (binding.audit, "Audit"),
            ] {
                if on {
                    actions.push(action);
                }
            }
            let value = json!([{
                "message": denial.message,
                "policy": policy.name,
                "binding": binding.name,
                "expressionIndex": denial.index,
                "validationActions": actions,
            }]);
            notes.annotate(
                "validation.policy.admission.k8s.io/validation_failure".into(),
                value.to_string(),
            );
        }
    }

    /// The params of `binding` for a write in `namespace` ("" for cluster-scoped objects),
    /// read in `cluster` (where the policy is): `[null]` for a policy without params.
    async fn policy_params(
        &self,
        cluster: &str,
        policy: &Policy,
        binding: &Binding,
        namespace: &str,
    ) -> Result<Vec<Value>, String> {
        let (Some((api_version, kind)), Some(param_ref)) = (&policy.param_kind, &binding.param_ref)
        else {
            return Ok(vec![Value::Null]);
        };
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let Some(resource) = self.serves_in_group(cluster, group, |r| {
            r.version == version && r.kind == kind.as_str()
        }) else {
            return Err(format!(
                "paramKind kind `{api_version}, Kind={kind}` not known"
            ));
        };
        let params_namespace = if resource.namespaced {
            match (param_ref.namespace.as_str(), namespace) {
                ("", "") => {
                    return Err("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources".into());
                }
                ("", namespace) => Some(namespace),
                (namespace, _) => Some(namespace),
            }
        } else if !param_ref.namespace.is_empty() {
            return Err(
                "paramRef.namespace must not be provided for a cluster-scoped `paramKind`".into(),
            );
        } else {
            None
        };
        let target = Target {
            cluster,
            resource: &resource,
            namespace: params_namespace,
        };
        let params = match (&param_ref.selector, param_ref.name.as_str()) {
            (Some(_), name) if !name.is_empty() => {
                return Err("paramRef.name and paramRef.selector are mutually exclusive".into());
            }
            (None, "") => return Err("one of name or selector must be provided".into()),
            (None, name) => match self.get(target, name).await {
                Ok(param) => vec![param],
                Err(RegistryError::NotFound { .. }) => Vec::new(),
                Err(error) => return Err(error.to_string()),
            },
            (Some(selector), _) => self
                .list(target, ListOptions::default())
                .await
                .map_err(|e| e.to_string())?
                .items
                .into_iter()
                .filter(|p| selector.matches(&p["metadata"]["labels"]))
                .collect(),
        };
        if params.is_empty() && param_ref.deny_when_missing {
            return Err(
                "no params found for policy binding with `Deny` parameterNotFoundAction".into(),
            );
        }
        Ok(params)
    }
}

fn go_quote(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_default()
}

/// Runs `policy` for one param: its match conditions, variables, validations and audit
/// annotations. Errors become denials unless the policy fails open.
fn evaluate(policy: &Policy, inputs: &Inputs<'_>, param: &Value) -> Outcomes {
    let mut outcomes = Outcomes::default();
    let mut evaluation = Evaluation::new();
    for name in &policy.names {
        let value = match *name {
            "object" => inputs.object,
            "oldObject" => inputs.old,
            "request" => inputs.request,
            "params" => param,
            "namespaceObject" => inputs.namespace,
            _ => continue,
        };
        evaluation.bind(name, value);
    }
    if !policy.variables.is_empty() {
        evaluation.bind("variables", &Value::Object(Map::new()));
    }
    let error = |outcomes: &mut Outcomes, message: String, index: usize| {
        if !policy.fail_open {
            outcomes.denials.push(Denial {
                message,
                reason: "Invalid".into(),
                index,
            });
        }
    };
    for (name, condition) in &policy.conditions {
        let outcome = match condition {
            Ok(expression) => evaluation.run(expression),
            Err(e) => Outcome::Failed(e.clone()),
        };
        match outcome {
            Outcome::Bool(true) => {}
            Outcome::Bool(false) => return outcomes,
            Outcome::Failed(e) | Outcome::Exceeded(e) => {
                error(
                    &mut outcomes,
                    format!("failed to evaluate match condition {name:?}: {e}"),
                    0,
                );
                return outcomes;
            }
            _ => {
                error(
                    &mut outcomes,
                    format!("match condition {name:?} did not return a bool"),
                    0,
                );
                return outcomes;
            }
        }
    }
    for (name, expression) in &policy.variables {
        // A variable that fails stays unset: only the expressions that use it fail.
        if let Ok(expression) = expression {
            evaluation.define("variables", name, expression);
        }
    }
    for (index, validation) in policy.validations.iter().enumerate() {
        let outcome = match &validation.expression {
            Ok(expression) => evaluation.run(expression),
            Err(e) => Outcome::Failed(e.clone()),
        };
        match outcome {
            Outcome::Bool(true) => {}
            Outcome::Bool(false) => {
                let from_expression = validation.message_expression.as_ref().and_then(|m| {
                    let Ok(m) = m else { return None };
                    match evaluation.run(m) {
                        Outcome::String(s) => Some(s.trim().to_string())
                            .filter(|s| !s.is_empty() && !s.contains('\n') && s.len() <= 5 * 1024),
                        _ => None,
                    }
                });
                let message = from_expression
                    .or_else(|| Some(validation.message.clone()).filter(|m| !m.is_empty()))
                    .unwrap_or_else(|| format!("failed expression: {}", validation.source));
                outcomes.denials.push(Denial {
                    message,
                    reason: validation.reason.clone(),
                    index,
                });
            }
            Outcome::Failed(e) | Outcome::Exceeded(e) => error(&mut outcomes, e, index),
            Outcome::String(_) | Outcome::Other(_) => error(
                &mut outcomes,
                format!(
                    "validation expression '{}' did not return a bool",
                    validation.source
                ),
                index,
            ),
        }
    }
    for (key, expression) in &policy.audit_annotations {
        let outcome = match expression {
            Ok(expression) => evaluation.run(expression),
            Err(e) => Outcome::Failed(e.clone()),
        };
        match outcome {
            Outcome::String(value) => {
                let mut value = value.trim().to_string();
                if !value.is_empty() {
                    value.truncate(MAX_AUDIT_ANNOTATION_BYTES);
                    outcomes.audit_annotations.push((key.clone(), value));
                }
            }
            Outcome::Other(ty) if ty.contains("Null") => {}
            Outcome::Failed(e) | Outcome::Exceeded(e) => error(&mut outcomes, e, 0),
            other => error(
                &mut outcomes,
                format!(
                    "valueExpression resulted in unsupported return type: {other:?}. Return type must be either string or null."
                ),
                0,
            ),
        }
    }
    outcomes
}
