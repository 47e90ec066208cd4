//! Resource requests: from a parsed [`ResourceRequest`] to a [`RequestScope`] (worked out once)
//! and the verb's handler, one file per verb. Bodies come in as JSON, YAML or protobuf; what
//! goes out is the representation the router negotiated (JSON or YAML; the object, a Table or
//! PartialObjectMetadata), encoded once.

mod apply;
mod create;
mod delete;
mod delete_collection;
mod get;
mod list;
mod list_stream;
mod options;
mod patch;
mod scale;
mod update;

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use http::HeaderMap;
use kcp_registry::{ALL_CLUSTERS, Registry};

use crate::error::ApiError;
use crate::field_validation::FieldValidation;
use crate::negotiation::{self, Answer, Encoding, Negotiated, NotAcceptable};
use crate::request_info::ResourceRequest;
use crate::scope::{Params, RequestScope, delete_options, dry_run};
use crate::status::Body;

pub(crate) use list::selector_filter;
pub(crate) use patch::{patch_error, patch_type};

/// Answers a resource request for an authenticated user, in the representation the router
/// negotiated for it (or the 406 of none).
pub async fn serve(
    registry: &Registry,
    info: &ResourceRequest,
    query: Option<&str>,
    headers: &HeaderMap,
    body: Bytes,
    negotiated: Result<Negotiated, NotAcceptable>,
) -> http::Response<Body> {
    let encoding = negotiated.as_ref().map_or(Encoding::Json, |n| n.encoding);
    match serve_in_scope(registry, info, query, headers, body, negotiated).await {
        Ok(response) => response,
        Err(error) => error.into_response(encoding),
    }
}

/// What the answer to a request is: one object, a list or a watch stream.
pub(crate) fn answer_of(info: &ResourceRequest) -> Answer {
    match (info.verb.as_str(), info.name.as_deref()) {
        ("list", None) => Answer::List,
        ("watch", None) => Answer::Watch,
        _ => Answer::Object,
    }
}

async fn serve_in_scope(
    registry: &Registry,
    info: &ResourceRequest,
    query: Option<&str>,
    headers: &HeaderMap,
    body: Bytes,
    negotiated: Result<Negotiated, NotAcceptable>,
) -> Result<http::Response<Body>, ApiError> {
    let Some(cluster) = info.cluster.as_deref() else {
        return Err(ApiError::NoSuchResource);
    };
    if cluster == ALL_CLUSTERS
        && let Some(refused) = crate::wildcard::refuse_verb(info)
    {
        return Err(refused);
    }
    let resolved = registry
        .resolve(cluster, &info.group, &info.version, &info.resource)
        .await;
    let resource = resolved
        .or_else(|| {
            let conversion = negotiated.as_ref().ok()?.conversion;
            crate::wildcard::metadata_only_resource(registry, info, cluster, conversion)
        })
        .ok_or_else(|| crate::wildcard::not_found(registry, info, cluster))?;
    let mut params = Params::parse(query);
    params.restrict = info.restrict.clone();
    let delete_options = match info.verb.as_str() {
        "delete" | "deletecollection" => {
            let content_type = headers
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok());
            Some(delete_options(content_type, &body, &params)?)
        }
        _ => None,
    };
    let registry = match dry_run(&params, delete_options.as_ref())? {
        true => Cow::Owned(registry.dry_run()),
        false => Cow::Borrowed(registry),
    };
    let field_validation = FieldValidation::parse(params.get("fieldValidation"))?;
    let registry = match info.subresource.as_deref() {
        None => registry,
        Some(sub) => Cow::Owned(crate::subresource::registry_for(
            &registry, &resource, sub, &info.verb,
        )?),
    };
    // Admission's warnings (and audit annotations) for this request: the router's, if it
    // keeps them.
    let writes = matches!(
        info.verb.as_str(),
        "create" | "update" | "patch" | "delete" | "deletecollection"
    );
    let (registry, notes) = match registry.shared_notes() {
        Some(notes) => (registry, Some(notes)),
        None if writes => {
            let notes = Arc::new(kcp_registry::admission::webhooks::Notes::default());
            (Cow::Owned(registry.noting(Arc::clone(&notes))), Some(notes))
        }
        None => (registry, None),
    };
    let registry = match info.verb.as_str() {
        "create" | "update" | "patch" => {
            let apply = info.verb == "patch"
                && patch::patch_type(headers, &resource).ok()
                    == Some(kcp_apimachinery::patch::PatchType::Apply);
            let manager = options::field_manager(&info.verb, &params, headers, apply)?;
            Cow::Owned(registry.managed_by(&manager))
        }
        _ => registry,
    };
    let answer = answer_of(info);
    let negotiated =
        match negotiated.and_then(|n| negotiation::check_fits(&n, &resource, answer).map(|()| n)) {
            Ok(negotiated) => negotiated,
            Err(not_acceptable) => return Ok(not_acceptable.into_response()),
        };
    let mut scope = RequestScope {
        registry,
        cluster,
        resource: &resource,
        namespace: info.namespace.as_deref().filter(|_| resource.namespaced),
        name: info.name.as_deref(),
        verb: &info.verb,
        subresource: info.subresource.as_deref(),
        params,
        headers,
        body,
        negotiated,
        field_validation,
        delete_options,
        warnings: Vec::new(),
    };
    // A deprecated version is warned about whatever the answer, failures included.
    let deprecation = resource
        .custom()
        .and_then(|custom| custom.deprecation_warning.clone());
    let response = match answer_verb(&mut scope).await {
        Ok(response) => response,
        Err(error) => error.into_response(scope.negotiated.encoding),
    };
    if let Some(notes) = notes {
        scope.warnings.extend(notes.take_warnings());
    }
    scope.warnings.extend(deprecation);
    Ok(scope.finish(response))
}

/// Performs the request's verb.
async fn answer_verb(scope: &mut RequestScope<'_>) -> Result<http::Response<Body>, ApiError> {
    let scale = scope.resource.custom().and_then(|c| c.scale.as_ref());
    if let (Some("scale"), Some(scale), Some(name)) = (scope.subresource, scale, scope.name) {
        return scale::serve(scope, scale, name).await;
    }
    match (scope.verb, scope.name) {
        ("get", Some(name)) => get::serve(scope, name).await,
        ("list", None) => list::serve(scope).await,
        ("watch", None) => Ok(crate::watch::serve(
            &scope.registry,
            scope.target(),
            scope.resource,
            &scope.params,
            scope.negotiated.conversion,
        )
        .await?),
        ("create", None) => create::serve(scope).await,
        ("update", Some(name)) => update::serve(scope, name).await,
        ("patch", Some(name)) => patch::serve(scope, name).await,
        ("delete", Some(name)) => delete::serve(scope, name).await,
        ("deletecollection", None) => delete_collection::serve(scope).await,
        (verb, _) => Err(ApiError::MethodNotAllowed(format!(
            "the server does not allow this method on the requested resource ({verb} is not served yet)"
        ))),
    }
}
