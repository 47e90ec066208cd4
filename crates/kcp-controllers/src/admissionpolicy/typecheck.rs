//! One policy's type check: the kinds it matches exactly, each one's schema, and the
//! warnings of its expressions against them.

use std::sync::Arc;

use kcp_apis::builtin::Resource;
use kcp_registry::{Registry, RegistryError, Target};
use serde_json::{Value, json};

use super::{policies, unchecked};
use crate::driver::{Key, Outcome};

/// How deep a built-in kind's schema references are followed.
const SCHEMA_DEPTH: usize = 8;

pub(crate) async fn reconcile(registry: &Registry, key: &Key) -> Result<Outcome, RegistryError> {
    let target = Target {
        cluster: &key.cluster,
        resource: policies(),
        namespace: None,
    };
    let policy = match registry.get(target, &key.name).await {
        Ok(policy) => policy,
        Err(RegistryError::NotFound { .. }) => return Ok(Outcome::Finished),
        Err(error) => return Err(error),
    };
    if !unchecked(&policy) {
        return Ok(Outcome::Finished);
    }
    let spec = &policy["spec"];
    let kinds: Vec<(String, Arc<Value>)> = matched(registry, &key.cluster, spec)
        .iter()
        .filter_map(|resource| Some((gvk(resource), schema(resource)?)))
        .collect();
    let params = param_schema(registry, &key.cluster, spec);
    let warnings = warnings(spec, &kinds, params.as_deref());
    let generation = policy["metadata"]["generation"].clone();
    let checked = json!({"expressionWarnings": warnings});
    registry
        .privileged()
        .patch(target, &key.name, &|current: &Value| {
            let mut next = current.clone();
            next["status"]["observedGeneration"] = generation.clone();
            next["status"]["typeChecking"] = match warnings.is_empty() {
                true => json!({}),
                false => checked.clone(),
            };
            Ok(next)
        })
        .await?;
    Ok(Outcome::Finished)
}

fn strings(value: &Value) -> Vec<&str> {
    value
        .as_array()
        .map(|items| items.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// The resources `cluster` serves that the policy's resource rules name exactly (none when a
/// rule has a wildcard: the types are open then).
fn matched(
    registry: &Registry,
    cluster: &str,
    spec: &Value,
) -> Vec<kcp_apis::builtin::ResourceRef> {
    let mut found = Vec::new();
    for rule in spec["matchConstraints"]["resourceRules"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let (groups, versions, resources) = (
            strings(&rule["apiGroups"]),
            strings(&rule["apiVersions"]),
            strings(&rule["resources"]),
        );
        let wild = |list: &[&str]| list.iter().any(|v| v.contains('*'));
        if wild(&groups) || wild(&versions) || wild(&resources) {
            return Vec::new();
        }
        for group in &groups {
            for version in &versions {
                for resource in &resources {
                    let plural = resource.split('/').next().unwrap_or_default();
                    if let Some(served) = registry.serves(cluster, group, version, plural)
                        && !found.iter().any(|r: &kcp_apis::builtin::ResourceRef| {
                            r.group == served.group
                                && r.version == served.version
                                && r.name == served.name
                        })
                    {
                        found.push(served);
                    }
                }
            }
        }
    }
    found
}

/// `apps/v1, Kind=Deployment`, as Go prints a GroupVersionKind.
fn gvk(resource: &Resource) -> String {
    format!(
        "{}/{}, Kind={}",
        resource.group, resource.version, resource.kind
    )
}

/// The schema of a resource's objects: a CRD version's, or the built-in kind's with its
/// references inlined.
fn schema(resource: &Resource) -> Option<Arc<Value>> {
    match resource.custom() {
        Some(custom) => custom.schema(),
        None => kcp_apis::schema::catalogue()
            .inlined(&kcp_apis::schema::component_name(resource), SCHEMA_DEPTH)
            .map(Arc::new),
    }
}

/// The schema of the policy's params, if it has a param kind the cluster serves.
fn param_schema(registry: &Registry, cluster: &str, spec: &Value) -> Option<Arc<Value>> {
    let kind = spec["paramKind"]["kind"].as_str()?;
    let api_version = spec["paramKind"]["apiVersion"].as_str()?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let resource =
        registry.serves_in_group(cluster, group, |r| r.version == version && r.kind == kind)?;
    schema(&resource)
}

/// The warnings of the policy's validations and message expressions.
fn warnings(spec: &Value, kinds: &[(String, Arc<Value>)], params: Option<&Value>) -> Vec<Value> {
    if kinds.is_empty() {
        return Vec::new();
    }
    let mut warnings = Vec::new();
    for (i, validation) in spec["validations"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        for field in ["expression", "messageExpression"] {
            let Some(source) = validation[field].as_str().filter(|s| !s.trim().is_empty()) else {
                continue;
            };
            let found: Vec<String> = kinds
                .iter()
                .filter_map(|(gvk, schema)| {
                    let mut typed: Vec<(&str, &Value)> =
                        vec![("object", schema.as_ref()), ("oldObject", schema.as_ref())];
                    if let Some(params) = params {
                        typed.push(("params", params));
                    }
                    let issue = kcp_apimachinery::schema::cel::undefined_field(source, &typed)?;
                    Some(format!("{gvk}: {issue}\n"))
                })
                .collect();
            if !found.is_empty() {
                warnings.push(json!({
                    "fieldRef": format!("spec.validations[{i}].{field}"),
                    "warning": found.join("\n"),
                }));
            }
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undeclared_fields_are_warned_about_per_kind() {
        let schema = Arc::new(json!({"type": "object", "properties": {
            "data": {"type": "object", "additionalProperties": {"type": "string"}},
        }}));
        let spec = json!({"validations": [
            {"expression": "object.data.size() < 10"},
            {"expression": "object.spec.replicas < 10", "messageExpression": "'x' + object.dataa.a"},
        ]});
        let kinds = vec![("/v1, Kind=ConfigMap".to_string(), schema)];
        let found = warnings(&spec, &kinds, None);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0]["fieldRef"], "spec.validations[1].expression");
        let text = found[0]["warning"].as_str().unwrap();
        assert!(
            text.starts_with("/v1, Kind=ConfigMap: ERROR: <input>:1:7: undefined field 'spec'"),
            "{text}"
        );
        assert_eq!(
            found[1]["fieldRef"],
            "spec.validations[1].messageExpression"
        );
        assert!(warnings(&spec, &[], None).is_empty());
    }

    #[test]
    fn built_in_schemas_are_inlined() {
        let configmaps = kcp_apis::builtin::core("configmaps");
        let schema = schema(configmaps).unwrap();
        let issue = kcp_apimachinery::schema::cel::undefined_field(
            "object.metadata.name == 'a' && object.data.x == 'b' && object.spec.x == 1",
            &[("object", &schema)],
        );
        assert!(issue.unwrap().contains("undefined field 'spec'"));
    }
}
