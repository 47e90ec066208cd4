//! `list`: one page of a resource (in a namespace, a logical cluster or all of them) from one
//! storage snapshot, filtered by label and field selectors, as the client asked for it. Without
//! a `limit`, the whole collection, streamed ([`super::list_stream`]).

use http::StatusCode;
use kcp_apimachinery::{fields, labels};
use kcp_apis::builtin::Resource;
use kcp_registry::{ListOptions, RegistryError, kinds};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::negotiation;
use crate::scope::{Params, RequestScope};
use crate::status::Body;

pub(super) async fn serve(scope: &RequestScope<'_>) -> Result<http::Response<Body>, ApiError> {
    let params = &scope.params;
    let read_at = crate::resource_version::for_list(params)?;
    let revision = read_at.revision(&scope.registry).await?;
    let filter = selector_filter(params, scope.resource)?;
    let limit = match params.get("limit") {
        Some(limit) => limit
            .parse::<usize>()
            .map_err(|_| RegistryError::BadRequest(format!("invalid limit: {limit}")))?,
        None => 0,
    };
    if limit == 0 {
        return super::list_stream::serve(scope, revision).await;
    }
    let options = ListOptions {
        limit,
        continue_token: params.get("continue").map(str::to_string),
        filter,
        revision,
        skip_count: false,
    };
    let result = match scope.registry.list(scope.target(), options).await {
        Err(RegistryError::Expired(_)) if revision != 0 => {
            return Err(RegistryError::Expired(
                "The resourceVersion for the provided list is too old.".into(),
            )
            .into());
        }
        other => other?,
    };
    let rv = result.resource_version.to_string();
    let mut metadata = json!({"resourceVersion": rv});
    if let Some(token) = &result.continue_token {
        metadata["continue"] = json!(token);
    }
    if let Some(remaining) = result.remaining_item_count {
        metadata["remainingItemCount"] = json!(remaining);
    }
    let list = negotiation::render_list(
        scope.negotiated.conversion,
        scope.resource,
        params,
        result.items,
        metadata,
    )?;
    Ok(scope.document(StatusCode::OK, &list))
}

/// The label and field selectors of a list or watch as one filter, if any was given.
pub(crate) fn selector_filter(
    params: &Params,
    resource: &Resource,
) -> Result<Option<kcp_registry::Filter>, RegistryError> {
    let label_selector =
        match params.get("labelSelector") {
            Some(s) => Some(labels::Selector::parse(s).map_err(|e| {
                RegistryError::BadRequest(format!("unable to parse requirement: {e}"))
            })?),
            None => None,
        };
    let field_selector = match params.get("fieldSelector") {
        Some(s) => {
            Some(fields::Selector::parse(s).map_err(|e| RegistryError::BadRequest(e.to_string()))?)
        }
        None => None,
    };
    if let Some(selector) = &field_selector {
        for requirement in selector.requirements() {
            if !kinds::selectable(resource, requirement.field()) {
                return Err(RegistryError::BadRequest(format!(
                    "field label not supported: {}",
                    requirement.field()
                )));
            }
        }
    }
    if label_selector.is_none() && field_selector.is_none() {
        return Ok(None);
    }
    let kind = kinds::rules(resource);
    Ok(Some(Box::new(move |object: &Value| {
        label_selector
            .as_ref()
            .is_none_or(|s| s.matches(&object["metadata"]["labels"]))
            && field_selector
                .as_ref()
                .is_none_or(|s| s.matches(|field| kind.field_value(object, field)))
    })))
}
