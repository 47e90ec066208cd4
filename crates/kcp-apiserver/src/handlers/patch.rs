//! `patch`: JSON patch, merge patch, or strategic merge patch with the list rules of the kind,
//! applied to the current object (off the worker threads when object or patch is large), its
//! undeclared fields handled as `fieldValidation` says; server-side apply is `apply`'s.

use http::{HeaderMap, StatusCode, header};
use kcp_apimachinery::patch::{self, PatchError, PatchType};
use kcp_apis::builtin::Resource;
use kcp_registry::{RegistryError, kinds};
use serde_json::Value;

use crate::error::ApiError;
use crate::field_validation::duplicate_fields;
use crate::scope::RequestScope;
use crate::status::Body;

pub(super) async fn serve(
    scope: &mut RequestScope<'_>,
    name: &str,
) -> Result<http::Response<Body>, ApiError> {
    let patch_type = patch_type(scope.headers, scope.resource)?;
    if patch_type == PatchType::Apply {
        return super::apply::serve(scope, name).await;
    }
    let document = crate::body::decode_patch(&scope.body)?;
    let prefix = if patch_type == PatchType::Json {
        "json patch "
    } else {
        ""
    };
    let duplicates = duplicate_fields(prefix, &document.duplicates);
    let (validation, resource) = (scope.field_validation, scope.resource);
    let (object, warnings) = apply(scope, name, patch_type, document.value, |patched| {
        validation.apply(resource, patched, &duplicates)
    })
    .await?;
    scope.warnings.extend(warnings);
    scope.object(StatusCode::OK, object)
}

/// JSON patches of at most this many operations are applied on the worker thread (unless the
/// object is large): each reads or compares at most the object, and their copies stop at
/// `patch::json::MAX_COPY_BYTES` in all.
const FEW_OPERATIONS: usize = 16;

/// Applies a PATCH by its content type: JSON patch, merge patch, or strategic merge patch with
/// the list rules of the kind. Each keeps the result within the nesting limit (422). `check`
/// runs on every patched object and says what to warn about; the warnings of the attempt
/// that was stored come back with the object.
async fn apply(
    scope: &RequestScope<'_>,
    name: &str,
    patch_type: PatchType,
    document: Value,
    check: impl Fn(&mut Value) -> Result<Vec<String>, RegistryError> + Send + Sync,
) -> Result<(Value, Vec<String>), RegistryError> {
    let kind = kinds::rules(scope.resource);
    // Patches of large objects, large patches and JSON patches of many operations (copies,
    // tests of large values) may take a while: off the worker threads.
    let large_patch = scope.body.len() >= crate::cpu::LARGE_BODY
        || (patch_type == PatchType::Json
            && document
                .as_array()
                .is_none_or(|ops| ops.len() > FEW_OPERATIONS));
    let apply = move |current: &Value| -> Result<(Value, Vec<String>), RegistryError> {
        let large = large_patch
            || kcp_apimachinery::json::holds_at_least(current, crate::cpu::LARGE_OBJECT_VALUES);
        crate::cpu::heavy_if(large, || {
            let patched = match patch_type {
                PatchType::Json => patch::json_patch(current, &document),
                PatchType::Merge => patch::merge_patch(current, &document),
                _ => {
                    let strategies = |path: &[&str]| kind.list_strategy(path);
                    patch::strategic::apply(current, &document, &strategies)
                }
            };
            let mut patched = patched.map_err(patch_error)?;
            let warnings = check(&mut patched)?;
            Ok((patched, warnings))
        })
    };
    scope
        .registry
        .patch_with(scope.target(), name, &apply)
        .await
}

/// A patch failure as the registry error kube-apiserver answers with.
pub(crate) fn patch_error(error: PatchError) -> RegistryError {
    match error {
        PatchError::Malformed(message) => RegistryError::BadRequest(message),
        PatchError::NotApplicable(message) => RegistryError::Unprocessable(message),
        PatchError::TooLarge(message) => RegistryError::RequestEntityTooLarge(message),
    }
}

/// The patch type a PATCH request's Content-Type names, if the server applies it to
/// `resource` (custom resources take no strategic merge patch; CBOR apply configurations are
/// not served).
pub(crate) fn patch_type(headers: &HeaderMap, resource: &Resource) -> Result<PatchType, ApiError> {
    let media = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap_or_default()
        .trim()
        .to_string();
    let patch_type = PatchType::from_media_type(&media)
        .filter(|_| media != "application/apply-patch+cbor")
        .ok_or_else(|| {
            let accepted = if resource.custom.is_some() {
                "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
            } else {
                "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml"
            };
            ApiError::UnsupportedMediaType(format!(
                "the body of the request was in an unknown format - accepted media types include: {accepted} (got {media})"
            ))
        })?;
    if patch_type == PatchType::Strategic && resource.custom.is_some() {
        return Err(ApiError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {media})"
        )));
    }
    Ok(patch_type)
}
