//! Requests for a subresource (`namespaces/<name>/status`, `namespaces/<name>/finalize`, the
//! `status` of other kinds, the `scale` of custom resources): which are served, with which
//! verbs, and the registry mode that makes updates and patches change only the subresource's
//! part of the object (for `scale`, the whole-object registry: the scale handler narrows
//! writes).

use kcp_apis::builtin::Resource;
use kcp_registry::Registry;

use crate::error::ApiError;

/// The registry serving `verb` on the subresource `name` of `resource`, or the response that
/// refuses it: 404 for a subresource the resource does not have (or the server does not serve
/// yet), 405 for a verb the subresource does not take.
pub(crate) fn registry_for(
    registry: &Registry,
    resource: &Resource,
    name: &str,
    verb: &str,
) -> Result<Registry, ApiError> {
    let not_found = || ApiError::NoSuchResource;
    let Some((_, verbs)) = resource.subresources.iter().find(|(sub, _)| *sub == name) else {
        return Err(not_found());
    };
    // The scale of a custom resource is served by `crate::scale` on the whole object.
    let scale = name == "scale" && resource.custom().is_some_and(|c| c.scale.is_some());
    let Some(subresource_registry) = registry
        .subresource(name)
        .or_else(|| scale.then(|| registry.clone()))
    else {
        return Err(not_found());
    };
    if !verbs.contains(&verb) {
        return Err(ApiError::MethodNotAllowed(format!(
            "the server does not allow this method on the requested resource ({verb} on {}/{name})",
            resource.name
        )));
    }
    Ok(subresource_registry)
}
