//! Wildcard requests, `/clusters/*/...`: lists and watches across every logical cluster, as
//! kcp serves them. Only `list` and `watch` are allowed (other verbs answer 405 with kcp's
//! message); every object carries its `kcp.io/cluster`. Built-in resources and kcp's own kinds
//! are served whole; custom resources, whose CRDs may differ from cluster to cluster, only as
//! `PartialObjectMetadata` (a full-object request finds no resource, as in kcp).

use kcp_apis::builtin::ResourceRef;
use kcp_registry::Registry;

use crate::error::ApiError;
use crate::negotiation::Conversion;
use crate::request_info::ResourceRequest;

/// The 405 for a verb other than list and watch, or `None` when the verb is allowed.
pub fn refuse_verb(info: &ResourceRequest) -> Option<ApiError> {
    if matches!(info.verb.as_str(), "list" | "watch") {
        return None;
    }
    let qualified = if info.group.is_empty() {
        info.resource.clone()
    } else {
        format!("{}.{}", info.resource, info.group)
    };
    Some(ApiError::MethodNotAllowed(format!(
        "{} is not supported on resources of kind \"{qualified}\" in the `*` logical cluster",
        info.verb
    )))
}

/// For a wildcard request that negotiated `PartialObjectMetadata` (`conversion`), a custom
/// resource of that name as any cluster defines it.
pub fn metadata_only_resource(
    registry: &Registry,
    info: &ResourceRequest,
    cluster: &str,
    conversion: Conversion,
) -> Option<ResourceRef> {
    if cluster != kcp_registry::ALL_CLUSTERS {
        return None;
    }
    matches!(
        conversion,
        Conversion::PartialObjectMetadata(_) | Conversion::PartialObjectMetadataList(_)
    )
    .then(|| registry.serves_anywhere(&info.group, &info.version, &info.resource))
    .flatten()
}

/// Why nothing serves `info`'s resource in `cluster`: for a wildcard request of a bound
/// resource without its right identity (`widgets`, `widgets:<other hash>`) kcp's plain-text
/// `404 page not found`; otherwise the usual 404 Status.
pub fn not_found(registry: &Registry, info: &ResourceRequest, cluster: &str) -> ApiError {
    let plural = info.resource.split(':').next().unwrap_or_default();
    let bound = cluster == kcp_registry::ALL_CLUSTERS
        && (plural.len() < info.resource.len()
            || registry
                .bound_anywhere(&info.group, &info.version, plural)
                .is_some());
    match bound {
        true => ApiError::PageNotFound,
        false => ApiError::NoSuchResource,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_list_and_watch_are_served() {
        let mut info = ResourceRequest {
            cluster: Some("*".into()),
            version: "v1".into(),
            resource: "configmaps".into(),
            verb: "list".into(),
            ..ResourceRequest::default()
        };
        assert!(refuse_verb(&info).is_none());
        info.verb = "watch".into();
        assert!(refuse_verb(&info).is_none());
        info.verb = "create".into();
        assert_eq!(
            refuse_verb(&info).unwrap().status().0,
            http::StatusCode::METHOD_NOT_ALLOWED
        );
    }
}
