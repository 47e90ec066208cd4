//! `update` (PUT): the object replaced by the body, its undeclared fields handled as
//! `fieldValidation` says.

use http::StatusCode;

use crate::error::ApiError;
use crate::field_validation::duplicate_fields;
use crate::scope::RequestScope;
use crate::status::Body;

pub(super) async fn serve(
    scope: &mut RequestScope<'_>,
    name: &str,
) -> Result<http::Response<Body>, ApiError> {
    let decoded =
        crate::body::decode_object(scope.content_type(), &scope.body, Some(scope.resource))?;
    let mut object = decoded.value;
    let duplicates = duplicate_fields("", &decoded.duplicates);
    let warnings = scope
        .field_validation
        .apply(scope.resource, &mut object, &duplicates)?;
    scope.warnings.extend(warnings);
    let object = scope.registry.update(scope.target(), name, object).await?;
    scope.object(StatusCode::OK, object)
}
