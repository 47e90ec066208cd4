//! `delete`: the object goes, or is marked for deletion while finalizers hold it (then the
//! answer is the object; otherwise a Success Status naming it).

use http::StatusCode;
use kcp_apis::builtin::Resource;
use kcp_registry::DeleteOutcome;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::scope::RequestScope;
use crate::status::Body;

pub(super) async fn serve(
    scope: &RequestScope<'_>,
    name: &str,
) -> Result<http::Response<Body>, ApiError> {
    match scope
        .registry
        .delete_with(scope.target(), name, &scope.delete_options()?)
        .await?
    {
        DeleteOutcome::Pending(object) => scope.object(StatusCode::OK, object),
        DeleteOutcome::Deleted(object) => {
            Ok(scope.document(StatusCode::OK, &deleted_status(scope.resource, &object)))
        }
    }
}

fn deleted_status(resource: &Resource, object: &Value) -> Value {
    let mut status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {
            "name": object["metadata"]["name"],
            "group": resource.group,
            "kind": resource.name,
            "uid": object["metadata"]["uid"],
        },
    });
    crate::error::omit_empty_details(&mut status);
    status
}
