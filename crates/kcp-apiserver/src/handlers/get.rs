//! `get`: one object, at the resourceVersion the request asks for.

use http::StatusCode;

use crate::error::ApiError;
use crate::scope::RequestScope;
use crate::status::Body;

pub(super) async fn serve(
    scope: &RequestScope<'_>,
    name: &str,
) -> Result<http::Response<Body>, ApiError> {
    crate::resource_version::for_get(&scope.params)?
        .revision(&scope.registry)
        .await?;
    let object = scope.registry.get(scope.target(), name).await?;
    scope.object(StatusCode::OK, object)
}
