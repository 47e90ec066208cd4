//! `get`: one object, at the resourceVersion the request asks for. Plain JSON answers are
//! made from the stored bytes without decoding them, unless a custom resource reads
//! differently from how it is stored.

use http::StatusCode;

use crate::error::ApiError;
use crate::negotiation::{Conversion, Encoding};
use crate::scope::RequestScope;
use crate::status::Body;

pub(super) async fn serve(
    scope: &RequestScope<'_>,
    name: &str,
) -> Result<http::Response<Body>, ApiError> {
    crate::resource_version::for_get(&scope.params)?
        .revision(&scope.registry)
        .await?;
    let plain_json = scope.negotiated.encoding == Encoding::Json
        && scope.negotiated.conversion == Conversion::None;
    if !plain_json {
        let object = scope.registry.get(scope.target(), name).await?;
        return scope.object(StatusCode::OK, object);
    }
    // The object as JSON: the stored bytes with the served fields added where they allow.
    match scope.registry.get_json(scope.target(), name).await? {
        Ok(mut bytes) => {
            bytes.push(b'\n');
            Ok(crate::status::encoded_json(StatusCode::OK, bytes))
        }
        Err(object) => scope.object(StatusCode::OK, object),
    }
}
