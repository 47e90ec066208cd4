//! `create`: a new object from the body (JSON, YAML or protobuf), its undeclared fields
//! handled as `fieldValidation` says.

use http::StatusCode;

use crate::error::ApiError;
use crate::scope::RequestScope;
use crate::status::Body;

pub(super) async fn serve(scope: &mut RequestScope<'_>) -> Result<http::Response<Body>, ApiError> {
    if scope.resource.namespaced && scope.namespace.is_none() {
        return Err(ApiError::NoSuchResource);
    }
    let object = scope.object_from_body()?;
    let object = scope.registry.create(scope.target(), object).await?;
    scope.object(StatusCode::CREATED, object)
}
