//! The request scope: what a resource request asks, worked out once before any verb runs —
//! the logical cluster and resource, namespace and name, query parameters, the negotiated
//! representation, `dryRun` (a registry that stores nothing), `fieldValidation`, the
//! subresource's registry — and the warnings the answer will carry. Verbs read it; answers go
//! out through it, encoded once in the negotiated format.

use std::borrow::Cow;

use bytes::Bytes;
use http::{HeaderMap, StatusCode, header};
use kcp_apis::builtin::ResourceRef;
use kcp_registry::{DeleteOptions, Registry, RegistryError, Target};
use serde_json::Value;

use crate::error::ApiError;
use crate::field_validation::{FieldValidation, duplicate_fields, with_warnings};
use crate::negotiation::{self, Negotiated};
use crate::status::{Body, encoded};

/// One resource request, resolved.
pub(crate) struct RequestScope<'a> {
    /// The registry the verb runs against: dry-run and subresource variants already chosen
    /// (borrowed when neither applies, as for most requests).
    pub registry: Cow<'a, Registry>,
    pub cluster: &'a str,
    pub resource: &'a ResourceRef,
    /// The namespace of a namespaced resource (`None` for cluster-scoped ones).
    pub namespace: Option<&'a str>,
    pub name: Option<&'a str>,
    pub verb: &'a str,
    pub subresource: Option<&'a str>,
    pub params: Params,
    pub headers: &'a HeaderMap,
    pub body: Bytes,
    pub negotiated: Negotiated,
    pub field_validation: FieldValidation,
    /// A delete's DeleteOptions as sent ([`delete_options`]); `None` for other verbs.
    pub delete_options: Option<Value>,
    /// `Warning` headers of the answer, in the order they were found.
    pub warnings: Vec<String>,
}

impl RequestScope<'_> {
    /// Where the verb reads and writes.
    pub fn target(&self) -> Target<'_> {
        Target {
            cluster: self.cluster,
            resource: self.resource,
            namespace: self.namespace,
        }
    }

    /// The request's `Content-Type`, if it is text.
    pub fn content_type(&self) -> Option<&str> {
        self.headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
    }

    /// The object in the request body (create, update), its undeclared and repeated fields
    /// handled as `fieldValidation` says: dropped with a warning, dropped, or refused.
    pub fn object_from_body(&mut self) -> Result<Value, ApiError> {
        let decoded =
            crate::body::decode_object(self.content_type(), &self.body, Some(self.resource))?;
        let mut object = decoded.value;
        let duplicates = duplicate_fields("", &decoded.duplicates);
        let warnings = self
            .field_validation
            .apply(self.resource, &mut object, &duplicates)?;
        self.warnings.extend(warnings);
        Ok(object)
    }

    /// The DeleteOptions of a delete or deletecollection, checked.
    pub fn delete_options(&self) -> Result<DeleteOptions, ApiError> {
        let options = self.delete_options.as_ref().ok_or_else(|| {
            ApiError::from(RegistryError::Internal(
                "DeleteOptions asked of a request that is not a delete".into(),
            ))
        })?;
        Ok(DeleteOptions::from_value(options)?)
    }

    /// One object, as the client asked for it (the object, a Table, PartialObjectMetadata).
    pub fn object(
        &self,
        code: StatusCode,
        object: Value,
    ) -> Result<http::Response<Body>, ApiError> {
        let rendered = negotiation::render_object(
            self.negotiated.conversion,
            self.resource,
            &self.params,
            object,
        )?;
        Ok(self.document(code, &rendered))
    }

    /// A document answered as it is (a list already rendered, a Status).
    pub fn document(&self, code: StatusCode, document: &Value) -> http::Response<Body> {
        encoded(self.negotiated.encoding, code, document)
    }

    /// The answer with the scope's warnings.
    pub fn finish(&self, response: http::Response<Body>) -> http::Response<Body> {
        with_warnings(response, &self.warnings)
    }
}

/// Decoded query parameters.
#[derive(Clone)]
pub(crate) struct Params {
    pairs: Vec<(String, String)>,
    /// Which objects a view lets the request see besides its selectors (a virtual
    /// workspace's), set by the server, never from the query.
    pub(crate) restrict: Option<crate::request_info::Restriction>,
}

impl Params {
    pub(crate) fn parse(query: Option<&str>) -> Self {
        Params {
            pairs: form_urlencoded::parse(query.unwrap_or_default().as_bytes())
                .into_owned()
                .collect(),
            restrict: None,
        }
    }

    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }
}

/// The DeleteOptions of a delete or deletecollection: its body (see
/// [`crate::body::decode_delete_options`]), or without one its query parameters
/// (`propagationPolicy`, `orphanDependents`, `dryRun`), as kube-apiserver reads them.
pub(crate) fn delete_options(
    content_type: Option<&str>,
    body: &[u8],
    params: &Params,
) -> Result<Value, ApiError> {
    if !body.is_empty() {
        return crate::body::decode_delete_options(content_type, body);
    }
    let mut options = serde_json::Map::new();
    if let Some(policy) = params.get("propagationPolicy") {
        options.insert("propagationPolicy".into(), policy.into());
    }
    if let Some(orphan) = params.get("orphanDependents") {
        let orphan = orphan.parse::<bool>().map_err(|_| {
            RegistryError::BadRequest(format!("invalid value for orphanDependents: {orphan:?}"))
        })?;
        options.insert("orphanDependents".into(), orphan.into());
    }
    if let Some(dry_run) = params.get("dryRun") {
        options.insert("dryRun".into(), serde_json::json!([dry_run]));
    }
    Ok(Value::Object(options))
}

/// Whether a request is a dry run: as its DeleteOptions say (a delete's, from [`delete_options`],
/// which fall back on the query's), or as the query's `dryRun` says.
pub(crate) fn dry_run(params: &Params, delete_options: Option<&Value>) -> Result<bool, ApiError> {
    let named = match delete_options.and_then(|options| options.get("dryRun")) {
        Some(Value::Array(values)) if !values.is_empty() => Some(
            values
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(","),
        ),
        _ => params.get("dryRun").map(str::to_string),
    };
    match named.as_deref() {
        None => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(RegistryError::BadRequest(format!(
            "Invalid dry run value: {other}: supported values: \"All\""
        ))
        .into()),
    }
}
