//! One pass over a logical cluster: every aggregating ClusterRole gets the rules its selectors
//! pick.

use kcp_apimachinery::labels::Selector;
use kcp_registry::{ListOptions, Registry, RegistryError, Target};
use serde_json::Value;

use super::cluster_roles;
use crate::driver::Outcome;

/// Recomputes the rules of every aggregating ClusterRole of `cluster`.
pub(crate) async fn reconcile(
    registry: &Registry,
    cluster: &str,
) -> Result<Outcome, RegistryError> {
    let target = Target {
        cluster,
        resource: cluster_roles(),
        namespace: None,
    };
    let mut roles = registry.list(target, ListOptions::default()).await?.items;
    roles.sort_by(|a, b| name(a).cmp(name(b)));
    for role in roles.iter().filter(|r| aggregates(r)) {
        let rules = aggregated_rules(role, &roles);
        if role["rules"].as_array().unwrap_or(&Vec::new()) == &rules {
            continue;
        }
        let role_name = name(role).to_string();
        let result = registry
            .patch(target, &role_name, &|current: &Value| {
                let mut next = current.clone();
                next["rules"] = Value::Array(rules.clone());
                Ok(next)
            })
            .await;
        match result {
            // Gone meanwhile: its deletion queued this cluster again if it mattered.
            Ok(_) | Err(RegistryError::NotFound { .. }) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(Outcome::Finished)
}

fn name(role: &Value) -> &str {
    role["metadata"]["name"].as_str().unwrap_or_default()
}

fn aggregates(role: &Value) -> bool {
    role["aggregationRule"]["clusterRoleSelectors"].is_array()
}

/// The rules of the roles (sorted by name) that `aggregator`'s selectors pick, each once.
fn aggregated_rules(aggregator: &Value, roles: &[Value]) -> Vec<Value> {
    let selectors: Vec<Selector> = aggregator["aggregationRule"]["clusterRoleSelectors"]
        .as_array()
        .into_iter()
        .flatten()
        // A selector that does not parse selects nothing (validation refuses it on write).
        .filter_map(|selector| Selector::from_label_selector(selector).ok())
        .collect();
    let mut rules: Vec<Value> = Vec::new();
    for role in roles {
        if name(role) == name(aggregator) {
            continue;
        }
        let labels = &role["metadata"]["labels"];
        if !labels.is_object() || !selectors.iter().any(|s| s.matches(labels)) {
            continue;
        }
        for rule in role["rules"].as_array().into_iter().flatten() {
            if !rules.contains(rule) {
                rules.push(rule.clone());
            }
        }
    }
    rules
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn role(name: &str, labels: Value, rules: Value) -> Value {
        json!({"metadata": {"name": name, "labels": labels}, "rules": rules})
    }

    #[test]
    fn an_aggregator_gets_the_selected_roles_rules_in_name_order_once() {
        let get = json!({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]});
        let list = json!({"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]});
        let aggregator = json!({
            "metadata": {"name": "view", "labels": {"agg": "view"}},
            "aggregationRule": {"clusterRoleSelectors": [
                {"matchLabels": {"agg": "view"}},
                {"matchExpressions": [{"key": "extra", "operator": "Exists"}]},
            ]},
            "rules": [],
        });
        let roles = vec![
            role("b", json!({"agg": "view"}), json!([list, get])),
            role("a", json!({"extra": "1"}), json!([get])),
            role("c", json!({"agg": "edit"}), json!([{"verbs": ["delete"]}])),
            aggregator.clone(),
        ];
        let mut sorted = roles.clone();
        sorted.sort_by(|x, y| name(x).cmp(name(y)));
        assert_eq!(aggregated_rules(&aggregator, &sorted), vec![get, list]);
    }
}
