//! `update` (PUT): the object replaced by the body, its undeclared fields handled as
//! `fieldValidation` says.

use http::StatusCode;

use crate::error::ApiError;
use crate::scope::RequestScope;
use crate::status::Body;

pub(super) async fn serve(
    scope: &mut RequestScope<'_>,
    name: &str,
) -> Result<http::Response<Body>, ApiError> {
    let object = scope.object_from_body()?;
    let object = scope.registry.update(scope.target(), name, object).await?;
    scope.object(StatusCode::OK, object)
}
