//! `list`: one page of a resource (in a namespace, a logical cluster or all of them) from one
//! storage snapshot, filtered by label and field selectors, as the client asked for it. Without
//! a `limit`, the whole collection, streamed ([`super::list_stream`]). A page in plain JSON
//! without selectors is made of its objects' stored bytes, as the streamed list and a GET are,
//! without decoding them where they allow (what client-go's informers ask for, 500 at a time).

use http::StatusCode;
use kcp_apimachinery::{fields, labels};
use kcp_apis::builtin::Resource;
use kcp_registry::{ListOptions, ListResult, RegistryError, kinds};
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::negotiation::{self, Conversion, Encoding};
use crate::scope::{Params, RequestScope};
use crate::status::{Body, encoded_json, json_bytes};

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
    let too_old = |error: RegistryError| match error {
        RegistryError::Expired(_) if revision != 0 => {
            RegistryError::Expired("The resourceVersion for the provided list is too old.".into())
        }
        other => other,
    };
    let options = |filter| ListOptions {
        limit,
        continue_token: params.get("continue").map(str::to_string),
        filter,
        revision,
        skip_count: false,
    };
    let plain = scope.negotiated.conversion == Conversion::None
        && scope.negotiated.encoding == Encoding::Json
        && filter.is_none();
    if plain {
        let listed = scope.registry.list_json(scope.target(), options(None));
        if let Some(page) = listed.await.map_err(too_old)? {
            let metadata = list_meta(&page);
            let empty = negotiation::render_list(
                Conversion::None,
                scope.resource,
                params,
                Vec::new(),
                metadata,
            )?;
            let body = super::list_stream::joined_json(json_bytes(&empty), &page.items)
                .ok_or_else(|| RegistryError::Internal("a list has no items to fill".into()))?;
            return Ok(encoded_json(StatusCode::OK, body));
        }
    }
    let result = scope
        .registry
        .list(scope.target(), options(filter))
        .await
        .map_err(too_old)?;
    let metadata = list_meta(&result);
    let list = negotiation::render_list(
        scope.negotiated.conversion,
        scope.resource,
        params,
        result.items,
        metadata,
    )?;
    Ok(scope.document(StatusCode::OK, &list))
}

/// The ListMeta of a page: its snapshot, and where the next page starts.
fn list_meta<T>(page: &ListResult<T>) -> Value {
    let mut metadata = json!({"resourceVersion": page.resource_version.to_string()});
    if let Some(token) = &page.continue_token {
        metadata["continue"] = json!(token);
    }
    if let Some(remaining) = page.remaining_item_count {
        metadata["remainingItemCount"] = json!(remaining);
    }
    metadata
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
