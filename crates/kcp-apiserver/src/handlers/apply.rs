//! Server-side apply: a PATCH with `application/apply-patch+yaml`. The configuration (YAML or
//! JSON) is merged into the current object by the registry's field manager (off the worker
//! threads when either is large); absent objects are created (201). `fieldManager` is
//! required; `force` takes over fields other managers own instead of answering their
//! conflicts (409).

use http::StatusCode;
use kcp_registry::RegistryError;
use serde_json::Value;

use crate::error::ApiError;
use crate::field_validation::duplicate_fields;
use crate::scope::RequestScope;
use crate::status::Body;

pub(super) async fn serve(
    scope: &mut RequestScope<'_>,
    name: &str,
) -> Result<http::Response<Body>, ApiError> {
    if scope
        .params
        .get("fieldManager")
        .unwrap_or_default()
        .is_empty()
    {
        return Err(super::options::invalid(
            "PatchOptions",
            "fieldManager",
            "FieldValueRequired",
            "Required value: is required for apply patch".into(),
        )
        .into());
    }
    let force = scope
        .params
        .get("force")
        .is_some_and(crate::request_info::query_bool);
    let document = crate::body::decode_apply(&scope.body)?;
    if !document.value.is_object() {
        return Err(RegistryError::BadRequest(
            "error decoding YAML: the configuration must be an object".into(),
        )
        .into());
    }
    let duplicates = duplicate_fields("", &document.duplicates);
    let (validation, resource, registry) =
        (scope.field_validation, scope.resource, &*scope.registry);
    let config = document.value;
    // Large configurations and large objects take a while to merge: off the worker threads.
    let large_configuration = scope.body.len() >= crate::cpu::LARGE_BODY;
    let apply = |current: Option<&Value>| -> Result<(Value, Vec<String>), RegistryError> {
        let large = large_configuration
            || current.is_some_and(|current| {
                kcp_apimachinery::json::holds_at_least(current, crate::cpu::LARGE_OBJECT_VALUES)
            });
        crate::cpu::heavy_if(large, || {
            let mut object = registry.apply_config(resource, current, &config, force)?;
            let warnings = validation.apply(resource, &mut object, &duplicates)?;
            Ok((object, warnings))
        })
    };
    let (object, warnings, created) = scope
        .registry
        .apply_with(scope.target(), name, &apply)
        .await?;
    scope.warnings.extend(warnings);
    let code = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    scope.object(code, object)
}
