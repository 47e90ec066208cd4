//! One pass over a namespace: if it is terminating, delete every object of every built-in
//! namespaced resource and of every namespaced custom resource its logical cluster serves in
//! it (custom resources as stored: an unreachable conversion webhook does not hold the
//! namespace up); while finalizers hold some, say what in its conditions ([`conditions`]);
//! once nothing is left, remove the `kubernetes` finalizer through the `finalize` subresource.

use kcp_apimachinery::object;
use kcp_apis::builtin::{RESOURCES, Resource, ResourceRef};
use kcp_registry::kinds::core::{NAMESPACE_FINALIZER, spec_finalizers};
use kcp_registry::{DeleteOptions, Propagation, Registry, RegistryError, Target};
use serde_json::json;

use super::conditions::{self, Remaining};
use super::{CONTENT_REMAINING_DELAY, namespaces};
pub use crate::driver::Outcome;

/// The built-in namespaced resources whose objects a namespace holds (each storage once).
fn namespaced_resources() -> impl Iterator<Item = &'static Resource> {
    RESOURCES
        .iter()
        .enumerate()
        .filter_map(|(index, resource)| {
            let stored = resource.namespaced && resource.verbs.contains(&"deletecollection");
            let first = !RESOURCES[..index]
                .iter()
                .any(|r| r.group == resource.group && r.name == resource.name);
            (stored && first).then_some(resource)
        })
}

/// The namespaced custom resources `cluster` serves, one version per CRD (its versions share
/// one storage).
fn namespaced_custom_resources(registry: &Registry, cluster: &str) -> Vec<ResourceRef> {
    let mut resources: Vec<ResourceRef> = Vec::new();
    for resource in registry.custom_resources(cluster) {
        let seen = resources
            .iter()
            .any(|r| r.group == resource.group && r.name == resource.name);
        if resource.namespaced && !seen {
            resources.push(resource);
        }
    }
    resources
}

/// Reconciles the namespace `name` of `cluster`.
pub async fn reconcile(
    registry: &Registry,
    cluster: &str,
    name: &str,
) -> Result<Outcome, RegistryError> {
    let target = Target {
        cluster,
        resource: namespaces(),
        namespace: None,
    };
    let namespace = match registry.get(target, name).await {
        Ok(namespace) => namespace,
        Err(RegistryError::NotFound { .. }) => return Ok(Outcome::Finished),
        Err(other) => return Err(other),
    };
    if !namespace["metadata"]["deletionTimestamp"].is_string() {
        return Ok(Outcome::Finished);
    }
    let finalizers = spec_finalizers(&namespace);
    if !finalizers.iter().any(|f| f == NAMESPACE_FINALIZER) {
        if finalizers.is_empty() {
            // Finalized, but a delete found it with finalizers: a delete now removes it (or
            // leaves it to its metadata.finalizers).
            return match registry.delete(target, name).await {
                Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(Outcome::Finished),
                Err(other) => Err(other),
            };
        }
        return Ok(Outcome::Finished);
    }

    let mut remaining = Remaining::default();
    for resource in namespaced_resources() {
        let content = Target {
            cluster,
            resource,
            namespace: Some(name),
        };
        // In the background, as Kubernetes' namespace deleter: it clears `orphan` and
        // `foregroundDeletion`, so they never hold the namespace up.
        let held = registry
            .delete_content(
                content,
                &DeleteOptions::propagating(Propagation::Background),
            )
            .await?;
        remaining.add(&resource.name, &resource.group, held);
    }
    for resource in namespaced_custom_resources(registry, cluster) {
        let held = registry
            .delete_custom_resources_as_stored(
                cluster,
                &resource.group,
                &resource.name,
                resource.identity(),
                Some(name),
            )
            .await?;
        remaining.add(&resource.name, &resource.group, held);
    }
    if remaining.held.objects > 0 {
        tracing::debug!(
            cluster,
            namespace = name,
            remaining = remaining.held.objects,
            "namespace content remaining"
        );
        conditions::report(registry, target, &namespace, &remaining).await?;
        return Ok(Outcome::Again(CONTENT_REMAINING_DELAY));
    }

    let mut finalized = namespace;
    let kept: Vec<_> = finalizers
        .into_iter()
        .filter(|f| f != NAMESPACE_FINALIZER)
        .collect();
    object::set(&mut finalized, &["spec", "finalizers"], json!(kept))
        .map_err(|e| RegistryError::Internal(format!("namespace {name} of {cluster}: {e}")))?;
    let finalize = registry
        .subresource("finalize")
        .expect("the registry serves namespaces/finalize");
    match finalize.update(target, name, finalized).await {
        Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(Outcome::Finished),
        Err(other) => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stored_namespaced_resource_once() {
        let names: Vec<_> = namespaced_resources()
            .map(|r| format!("{}/{}", r.group, r.name))
            .collect();
        assert!(names.contains(&"/configmaps".to_string()), "{names:?}");
        assert!(names.contains(&"rbac.authorization.k8s.io/roles".to_string()));
        assert!(
            !names
                .iter()
                .any(|n| n.ends_with("localsubjectaccessreviews"))
        );
        let mut unique = names.clone();
        unique.dedup();
        assert_eq!(unique.len(), names.len());
    }
}
