//! `deletecollection`: DELETE on a collection URL deletes what its label and field selectors
//! match (finalizers only mark objects) and answers the matching objects as a List, as
//! kube-apiserver does. Only namespaced URLs of namespaced resources take it.

use http::StatusCode;
use serde_json::json;

use super::selector_filter;
use crate::error::ApiError;
use crate::scope::RequestScope;
use crate::status::Body;

pub(super) async fn serve(scope: &RequestScope<'_>) -> Result<http::Response<Body>, ApiError> {
    let resource = scope.resource;
    let served = resource.verbs.contains(&"deletecollection")
        && (!resource.namespaced || scope.namespace.is_some());
    if !served {
        return Err(ApiError::MethodNotAllowed(
            "the server does not allow this method on the requested resource".into(),
        ));
    }
    let filter = selector_filter(&scope.params, resource)?;
    let deleted = scope
        .registry
        .delete_collection(scope.target(), filter, &scope.delete_options()?)
        .await?;
    let list = json!({
        "kind": format!("{}List", resource.kind),
        "apiVersion": resource.group_version(),
        "metadata": {"resourceVersion": deleted.resource_version.to_string()},
        "items": deleted.items,
    });
    Ok(scope.document(StatusCode::OK, &list))
}
