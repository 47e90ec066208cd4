//! `deletecollection`: DELETE on a collection URL deletes what its label and field selectors
//! match (finalizers only mark objects) and answers the matching objects as a List, as
//! kube-apiserver does. Only namespaced URLs of namespaced resources take it.

use http::StatusCode;
use kcp_registry::{Registry, RegistryError, Target};
use serde_json::json;

use crate::handlers::{Params, selector_filter};
use crate::status::{Body, failure, json_response};

pub(crate) async fn serve(
    registry: &Registry,
    target: Target<'_>,
    params: &Params,
) -> Result<http::Response<Body>, RegistryError> {
    let resource = target.resource;
    let served = resource.verbs.contains(&"deletecollection")
        && (!resource.namespaced || target.namespace.is_some());
    if !served {
        return Ok(failure(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        ));
    }
    let filter = selector_filter(params, resource)?;
    let deleted = registry.delete_collection(target, filter).await?;
    let list = json!({
        "kind": format!("{}List", resource.kind),
        "apiVersion": resource.group_version(),
        "metadata": {"resourceVersion": deleted.resource_version.to_string()},
        "items": deleted.items,
    });
    Ok(json_response(StatusCode::OK, &list))
}
