//! Resource requests: from a parsed [`ResourceRequest`] and a body to a registry call and back
//! to a response. Bodies come in as JSON, YAML or protobuf; what goes out is negotiated in
//! [`crate::negotiation`] (JSON or YAML, the object, a Table or PartialObjectMetadata).

use bytes::Bytes;
use http::{HeaderMap, StatusCode, header};
use kcp_apimachinery::patch::{self, PatchError, PatchType};
use kcp_apimachinery::{fields, labels};
use kcp_apis::builtin::Resource;
use kcp_registry::kinds;
use kcp_registry::{ALL_CLUSTERS, DeleteOutcome, ListOptions, Registry, RegistryError, Target};
use serde_json::{Value, json};

use std::sync::Mutex;

use crate::field_validation::{FieldValidation, duplicate_fields, with_warnings};
use crate::negotiation::{self, Answer, Negotiated};
use crate::request_info::ResourceRequest;
use crate::status::{Body, failure, from_registry_error, json_response};

/// Answers a resource request for an authenticated user.
pub async fn serve(
    registry: &Registry,
    info: &ResourceRequest,
    query: Option<&str>,
    headers: &HeaderMap,
    body: Bytes,
) -> http::Response<Body> {
    match serve_inner(registry, info, query, headers, body).await {
        Ok(response) => response,
        Err(error) => from_registry_error(&error),
    }
}

fn not_found() -> http::Response<Body> {
    failure(
        StatusCode::NOT_FOUND,
        "NotFound",
        "the server could not find the requested resource",
    )
}

async fn serve_inner(
    registry: &Registry,
    info: &ResourceRequest,
    query: Option<&str>,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<http::Response<Body>, RegistryError> {
    let Some(cluster) = info.cluster.as_deref() else {
        return Ok(not_found());
    };
    if cluster == ALL_CLUSTERS
        && let Some(refused) = crate::wildcard::refuse_verb(info)
    {
        return Ok(refused);
    }
    let resolved = registry
        .resolve(cluster, &info.group, &info.version, &info.resource)
        .await;
    let Some(resource) = resolved
        .or_else(|| crate::wildcard::metadata_only_resource(registry, info, cluster, headers))
    else {
        return Ok(not_found());
    };
    let namespace = if resource.namespaced {
        info.namespace.as_deref()
    } else {
        None
    };
    let target = Target {
        cluster,
        resource: &resource,
        namespace,
    };
    let params = Params::parse(query);
    // dryRun comes in the query, or for deletes in the DeleteOptions body.
    let body_dry_run =
        if matches!(info.verb.as_str(), "delete" | "deletecollection") && !body.is_empty() {
            delete_options_dry_run(&body)?
        } else {
            None
        };
    let dry_run_registry;
    let registry = match body_dry_run.as_deref().or(params.get("dryRun")) {
        None => registry,
        Some("All") => {
            dry_run_registry = registry.dry_run();
            &dry_run_registry
        }
        Some(other) => {
            return Err(RegistryError::BadRequest(format!(
                "Invalid dry run value: {other}: supported values: \"All\""
            )));
        }
    };
    let validation = FieldValidation::parse(params.get("fieldValidation"))?;
    let subresource_registry;
    let registry = match info.subresource.as_deref() {
        None => registry,
        Some(sub) => match crate::subresource::registry_for(registry, &resource, sub, &info.verb) {
            Ok(served) => {
                subresource_registry = served;
                &subresource_registry
            }
            Err(refused) => return Ok(*refused),
        },
    };
    let name = info.name.as_deref();
    let answer = match (info.verb.as_str(), name) {
        ("list", None) => Answer::List,
        ("watch", None) => Answer::Watch,
        _ => Answer::Object,
    };
    let negotiated = match negotiation::negotiate(headers, answer)
        .and_then(|n| negotiation::check_fits(&n, &resource, answer).map(|()| n))
    {
        Ok(negotiated) => negotiated,
        Err(not_acceptable) => return Ok(not_acceptable.into_response()),
    };
    let respond =
        |code: StatusCode, object: Value| -> Result<http::Response<Body>, RegistryError> {
            let rendered =
                negotiation::render_object(negotiated.conversion, &resource, &params, object)?;
            Ok(json_response(code, &rendered))
        };
    let deprecation: Vec<String> = resource
        .custom()
        .and_then(|custom| custom.deprecation_warning.clone())
        .into_iter()
        .collect();
    // A deprecated version is warned about whatever the answer, failures included.
    let scale = resource.custom().and_then(|custom| custom.scale.as_ref());
    if let (Some("scale"), Some(scale), Some(name)) =
        (info.subresource.as_deref(), scale, info.name.as_deref())
    {
        let response = crate::scale::serve(
            registry, target, scale, &info.verb, name, headers, &body, &respond,
        )
        .await
        .unwrap_or_else(|error| from_registry_error(&error));
        return Ok(with_warnings(response, &deprecation));
    }
    let response = answer_verb(
        registry,
        info,
        target,
        &params,
        headers,
        &body,
        validation,
        &negotiated,
        &respond,
    )
    .await
    .unwrap_or_else(|error| from_registry_error(&error));
    Ok(with_warnings(response, &deprecation))
}

/// Performs the request's verb.
#[allow(clippy::too_many_arguments)]
async fn answer_verb(
    registry: &Registry,
    info: &ResourceRequest,
    target: Target<'_>,
    params: &Params,
    headers: &HeaderMap,
    body: &Bytes,
    validation: FieldValidation,
    negotiated: &Negotiated,
    respond: &(dyn Fn(StatusCode, Value) -> Result<http::Response<Body>, RegistryError> + Sync),
) -> Result<http::Response<Body>, RegistryError> {
    let resource = target.resource;
    let namespace = target.namespace;
    let name = info.name.as_deref();
    match (info.verb.as_str(), name) {
        ("get", Some(name)) => {
            crate::resource_version::for_get(params)?
                .revision(registry)
                .await?;
            let object = registry.get(target, name).await?;
            respond(StatusCode::OK, object)
        }
        ("list", None) => list(registry, target, params, negotiated).await,
        ("watch", None) => {
            crate::watch::serve(registry, target, params, negotiated.conversion).await
        }
        ("create", None) => {
            if resource.namespaced && namespace.is_none() {
                return Ok(not_found());
            }
            let decoded = crate::body::decode_object(content_type(headers), body, Some(resource))?;
            let mut object = decoded.value;
            let duplicates = duplicate_fields("", &decoded.duplicates);
            let warnings = validation.apply(resource, &mut object, &duplicates)?;
            let object = registry.create(target, object).await?;
            Ok(with_warnings(
                respond(StatusCode::CREATED, object)?,
                &warnings,
            ))
        }
        ("update", Some(name)) => {
            let decoded = crate::body::decode_object(content_type(headers), body, Some(resource))?;
            let mut object = decoded.value;
            let duplicates = duplicate_fields("", &decoded.duplicates);
            let warnings = validation.apply(resource, &mut object, &duplicates)?;
            let object = registry.update(target, name, object).await?;
            Ok(with_warnings(respond(StatusCode::OK, object)?, &warnings))
        }
        ("patch", Some(name)) => {
            let patch_type = patch_type(headers, resource)?;
            let document = crate::body::decode_patch(body)?;
            let prefix = if patch_type == PatchType::Json {
                "json patch "
            } else {
                ""
            };
            let duplicates = duplicate_fields(prefix, &document.duplicates);
            let warnings = Mutex::new(Vec::new());
            let object = patch(
                registry,
                target,
                name,
                patch_type,
                document.value,
                |patched| {
                    let found = validation.apply(resource, patched, &duplicates)?;
                    *warnings.lock().unwrap_or_else(|e| e.into_inner()) = found;
                    Ok(())
                },
            )
            .await?;
            let warnings = warnings.into_inner().unwrap_or_else(|e| e.into_inner());
            Ok(with_warnings(respond(StatusCode::OK, object)?, &warnings))
        }
        ("delete", Some(name)) => match registry.delete(target, name).await? {
            DeleteOutcome::Pending(object) => respond(StatusCode::OK, object),
            DeleteOutcome::Deleted(object) => Ok(json_response(
                StatusCode::OK,
                &deleted_status(resource, &object),
            )),
        },
        ("deletecollection", None) => {
            crate::delete_collection::serve(registry, target, params).await
        }
        (verb, _) => Ok(failure(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            &format!(
                "the server does not allow this method on the requested resource ({verb} is not served yet)"
            ),
        )),
    }
}

/// The label and field selectors of a list or watch as one filter, if any was given.
pub(crate) fn selector_filter(
    params: &Params,
    resource: &Resource,
) -> Result<Option<kcp_registry::Filter>, RegistryError> {
    let label_selector =
        match params.get("labelSelector") {
            Some(s) => Some(labels::Selector::parse(s).map_err(|e| {
                RegistryError::BadRequest(format!("unable to parse requirement: {e}"))
            })?),
            None => None,
        };
    let field_selector = match params.get("fieldSelector") {
        Some(s) => {
            Some(fields::Selector::parse(s).map_err(|e| RegistryError::BadRequest(e.to_string()))?)
        }
        None => None,
    };
    if let Some(selector) = &field_selector {
        for requirement in selector.requirements() {
            if !kinds::selectable(resource, requirement.field()) {
                return Err(RegistryError::BadRequest(format!(
                    "field label not supported: {}",
                    requirement.field()
                )));
            }
        }
    }
    if label_selector.is_none() && field_selector.is_none() {
        return Ok(None);
    }
    let kind = kinds::rules(resource);
    Ok(Some(Box::new(move |object: &Value| {
        label_selector
            .as_ref()
            .is_none_or(|s| s.matches(&object["metadata"]["labels"]))
            && field_selector
                .as_ref()
                .is_none_or(|s| s.matches(|field| kind.field_value(object, field)))
    })))
}

async fn list(
    registry: &Registry,
    target: Target<'_>,
    params: &Params,
    negotiated: &Negotiated,
) -> Result<http::Response<Body>, RegistryError> {
    let read_at = crate::resource_version::for_list(params)?;
    let revision = read_at.revision(registry).await?;
    let filter = selector_filter(params, target.resource)?;
    let limit = match params.get("limit") {
        Some(limit) => limit
            .parse::<usize>()
            .map_err(|_| RegistryError::BadRequest(format!("invalid limit: {limit}")))?,
        None => 0,
    };
    let options = ListOptions {
        limit,
        continue_token: params.get("continue").map(str::to_string),
        filter,
        revision,
    };
    let result = match registry.list(target, options).await {
        Err(RegistryError::Expired(_)) if revision != 0 => {
            return Err(RegistryError::Expired(
                "The resourceVersion for the provided list is too old.".into(),
            ));
        }
        other => other?,
    };
    let rv = result.resource_version.to_string();
    let mut metadata = json!({"resourceVersion": rv});
    if let Some(token) = &result.continue_token {
        metadata["continue"] = json!(token);
    }
    if let Some(remaining) = result.remaining_item_count {
        metadata["remainingItemCount"] = json!(remaining);
    }
    let list = negotiation::render_list(
        negotiated.conversion,
        target.resource,
        params,
        result.items,
        metadata,
    )?;
    Ok(json_response(StatusCode::OK, &list))
}

fn deleted_status(resource: &Resource, object: &Value) -> Value {
    json!({
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
    })
}

/// Applies a PATCH by its content type: JSON patch, merge patch, or strategic merge patch with
/// the list rules of the built-in kind. Each keeps the result within the nesting limit (422).
async fn patch(
    registry: &Registry,
    target: Target<'_>,
    name: &str,
    patch_type: PatchType,
    document: Value,
    check: impl Fn(&mut Value) -> Result<(), RegistryError> + Send + Sync,
) -> Result<Value, RegistryError> {
    let kind = kinds::rules(target.resource);
    // Patches may take a while (copies, list merges): off the worker threads.
    let apply = move |current: &Value| -> Result<Value, RegistryError> {
        crate::cpu::heavy(|| {
            let patched = match patch_type {
                PatchType::Json => patch::json_patch(current, &document),
                PatchType::Merge => patch::merge_patch(current, &document),
                _ => {
                    let strategies = |path: &[&str]| kind.list_strategy(path);
                    patch::strategic::apply(current, &document, &strategies)
                }
            };
            let mut patched = patched.map_err(patch_error)?;
            check(&mut patched)?;
            Ok(patched)
        })
    };
    registry.patch(target, name, &apply).await
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
/// `resource` (custom resources take no strategic merge patch; server-side apply is not
/// served yet).
pub(crate) fn patch_type(
    headers: &HeaderMap,
    resource: &Resource,
) -> Result<PatchType, RegistryError> {
    let media = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap_or_default()
        .trim()
        .to_string();
    let patch_type = PatchType::from_media_type(&media).ok_or_else(|| {
        RegistryError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {media})"
        ))
    })?;
    if patch_type == PatchType::Strategic && resource.custom.is_some() {
        return Err(RegistryError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {media})"
        )));
    }
    if patch_type == PatchType::Apply {
        return Err(RegistryError::UnsupportedMediaType(
            "server-side apply is not served yet".into(),
        ));
    }
    Ok(patch_type)
}

/// The object in a request body: JSON, YAML, or protobuf for the kinds kubectl's typed commands
/// send (see [`crate::body`]; repeated keys are not reported here).
pub(crate) fn parse_body(headers: &HeaderMap, body: &Bytes) -> Result<Value, RegistryError> {
    crate::body::decode_object(content_type(headers), body, None).map(|decoded| decoded.value)
}

/// The request's `Content-Type`, if it is text.
fn content_type(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
}

/// The `dryRun` value of a DeleteOptions body, if it names one.
fn delete_options_dry_run(body: &Bytes) -> Result<Option<String>, RegistryError> {
    let options: Value = serde_json::from_slice(body).map_err(|e| {
        RegistryError::BadRequest(format!("the DeleteOptions body could not be decoded: {e}"))
    })?;
    Ok(match options.get("dryRun").and_then(Value::as_array) {
        Some(values) if !values.is_empty() => Some(
            values
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(","),
        ),
        _ => None,
    })
}

/// Decoded query parameters.
#[derive(Clone)]
pub(crate) struct Params(Vec<(String, String)>);

impl Params {
    pub(crate) fn parse(query: Option<&str>) -> Self {
        Params(
            form_urlencoded::parse(query.unwrap_or_default().as_bytes())
                .into_owned()
                .collect(),
        )
    }

    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }
}
