//! One quota recounted: `status.hard` from `spec.hard`, `status.used` from the namespace.

use kcp_registry::quota::{counted_by, resource_quotas};
use kcp_registry::{ListOptions, Registry, RegistryError, Target};
use serde_json::{Map, Value, json};

use crate::driver::{Key, Outcome};

/// Recounts the quota `key` names, or every quota of its namespace when it names none.
pub(crate) async fn reconcile(registry: &Registry, key: &Key) -> Result<Outcome, RegistryError> {
    let quotas = Target {
        cluster: &key.cluster,
        resource: resource_quotas(),
        namespace: Some(&key.namespace),
    };
    let names: Vec<String> = if key.name.is_empty() {
        registry
            .list(quotas, ListOptions::default())
            .await?
            .items
            .iter()
            .filter_map(|quota| quota["metadata"]["name"].as_str().map(str::to_string))
            .collect()
    } else {
        vec![key.name.clone()]
    };
    let mut found = false;
    for name in &names {
        found |= recount(registry, key, quotas, name).await?;
    }
    // A quota of its own is looked at again after a while; a namespace's pass is done.
    Ok(if found && !key.name.is_empty() {
        Outcome::Again(super::RESYNC)
    } else {
        Outcome::Finished
    })
}

/// Recounts the quota `name`; answers whether it exists.
async fn recount(
    registry: &Registry,
    key: &Key,
    quotas: Target<'_>,
    name: &str,
) -> Result<bool, RegistryError> {
    let quota = match registry.get(quotas, name).await {
        Ok(quota) => quota,
        Err(RegistryError::NotFound { .. }) => return Ok(false),
        Err(error) => return Err(error),
    };
    let hard = quota["spec"]["hard"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut used = Map::new();
    for counted in hard.keys() {
        let count = match counted_by(counted) {
            Some((group, plural)) => match registry.resolve_plural(&key.cluster, group, plural) {
                Some(resource) => {
                    registry
                        .count_objects(&key.cluster, &resource, &key.namespace)
                        .await?
                }
                None => 0,
            },
            // Nothing kcp serves consumes compute resources.
            None => 0,
        };
        used.insert(counted.clone(), json!(count.to_string()));
    }
    let status = json!({"hard": Value::Object(hard), "used": Value::Object(used)});
    if quota["status"] == status {
        return Ok(true);
    }
    let Some(status_registry) = registry.subresource("status") else {
        return Ok(true);
    };
    // Written over the revision read before counting: a create that reserved its place since
    // (its object perhaps not counted) makes this a conflict, and the recount runs again.
    let mut next = quota;
    next["status"] = status;
    match status_registry.update(quotas, name, next).await {
        Ok(_) => Ok(true),
        Err(RegistryError::NotFound { .. }) => Ok(false),
        Err(error) => Err(error),
    }
}
