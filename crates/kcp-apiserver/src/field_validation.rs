//! `fieldValidation`: what happens to fields of a written object its kind does not declare.
//!
//! As in kube-apiserver: `Ignore` drops them silently, `Warn` (the default) drops them and says
//! so in `Warning` headers, `Strict` refuses the request with 400 naming every one of them.
//! Keys an object repeats are treated alike (`duplicate field "metadata.name"`, as
//! sigs.k8s.io/json's strict decoding says; `json patch duplicate field ...` in a JSON patch),
//! the last value winning when they are allowed.
//! (Values of the wrong JSON type are refused by the registry, which decodes every write.)

use http::{HeaderValue, Response};
use kcp_apis::builtin::Resource;
use kcp_registry::RegistryError;
use serde_json::Value;

use crate::status::Body;

/// The `fieldValidation` query parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FieldValidation {
    Ignore,
    Warn,
    Strict,
}

impl FieldValidation {
    pub(crate) fn parse(value: Option<&str>) -> Result<Self, RegistryError> {
        match value {
            None | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(RegistryError::BadRequest(format!(
                "fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\" (got {other:?})"
            ))),
        }
    }

    /// Drops the undeclared fields of `object`, and returns the warnings to send, or the
    /// error in strict mode. `duplicates` are the strict errors of decoding the body
    /// ([`duplicate_fields`]), reported first.
    pub(crate) fn apply(
        self,
        resource: &Resource,
        object: &mut Value,
        duplicates: &[String],
    ) -> Result<Vec<String>, RegistryError> {
        let unknown = kcp_apis::schema::catalogue().prune_unknown(resource, object);
        if (unknown.is_empty() && duplicates.is_empty()) || self == FieldValidation::Ignore {
            return Ok(Vec::new());
        }
        let fields: Vec<String> = duplicates
            .iter()
            .cloned()
            .chain(unknown.iter().map(|path| format!("unknown field {path:?}")))
            .collect();
        if self == FieldValidation::Strict {
            let kind: &str = &resource.kind;
            return Err(RegistryError::BadRequest(format!(
                "{kind} in version {:?} cannot be handled as a {kind}: strict decoding error: {}",
                resource.version,
                fields.join(", ")
            )));
        }
        Ok(fields)
    }
}

/// The strict decoding errors of the keys a body repeated: `duplicate field "<path>"`, with
/// `prefix` before them (`json patch ` for JSON patches).
pub(crate) fn duplicate_fields(prefix: &str, paths: &[String]) -> Vec<String> {
    paths
        .iter()
        .map(|path| format!("{prefix}duplicate field {path:?}"))
        .collect()
}

/// Adds one `Warning: 299 - "<text>"` header per warning, as clients print them (characters a
/// header cannot carry become spaces or `?`).
pub(crate) fn with_warnings(mut response: Response<Body>, warnings: &[String]) -> Response<Body> {
    for warning in warnings {
        let text: String = warning
            .chars()
            .map(|c| match c {
                c if c.is_control() => ' ',
                c if c.is_ascii() => c,
                _ => '?',
            })
            .collect();
        let text = text.replace('\\', "\\\\").replace('"', "\\\"");
        if let Ok(value) = HeaderValue::from_str(&format!("299 - \"{text}\"")) {
            response.headers_mut().append("warning", value);
        }
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config_map() -> &'static Resource {
        kcp_apis::builtin::in_group_version("", "v1")
            .find(|r| r.kind == "ConfigMap")
            .unwrap()
    }

    #[test]
    fn modes_drop_warn_or_refuse() {
        let object = json!({"metadata": {"name": "c"}, "data": {"a": "1"}, "spec": {"x": 1}});

        let mut ignored = object.clone();
        let warnings = FieldValidation::Ignore
            .apply(config_map(), &mut ignored, &[])
            .unwrap();
        assert!(warnings.is_empty());
        assert!(ignored.get("spec").is_none());

        let mut warned = object.clone();
        let warnings = FieldValidation::Warn
            .apply(config_map(), &mut warned, &[])
            .unwrap();
        assert_eq!(warnings, vec!["unknown field \"spec\""]);
        assert!(warned.get("spec").is_none());

        let mut strict = object;
        let error = FieldValidation::Strict
            .apply(config_map(), &mut strict, &[])
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"spec\""
        );
    }

    #[test]
    fn duplicate_keys_are_warned_about_or_refused() {
        let duplicates = duplicate_fields("", &["metadata.name".to_string()]);
        let object = json!({"metadata": {"name": "c"}, "spec": 1});
        let warnings = FieldValidation::Warn
            .apply(config_map(), &mut object.clone(), &duplicates)
            .unwrap();
        assert_eq!(
            warnings,
            [
                "duplicate field \"metadata.name\"",
                "unknown field \"spec\""
            ]
        );
        let error = FieldValidation::Strict
            .apply(config_map(), &mut object.clone(), &duplicates)
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: duplicate field \"metadata.name\", unknown field \"spec\""
        );
        assert!(
            FieldValidation::Ignore
                .apply(config_map(), &mut object.clone(), &duplicates)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            duplicate_fields("json patch ", &["[0].op".to_string()]),
            ["json patch duplicate field \"[0].op\""]
        );
    }

    #[test]
    fn unknown_values_are_refused() {
        assert!(FieldValidation::parse(Some("Loose")).is_err());
        assert_eq!(FieldValidation::parse(None).unwrap(), FieldValidation::Warn);
    }

    #[test]
    fn warnings_become_quoted_headers() {
        let response = with_warnings(
            Response::new(crate::status::full(bytes::Bytes::new())),
            &["unknown field \"spec\"".to_string()],
        );
        assert_eq!(
            response.headers()["warning"],
            "299 - \"unknown field \\\"spec\\\"\""
        );
        let response = with_warnings(
            Response::new(crate::status::full(bytes::Bytes::new())),
            &["line 1:\n  key \"é\"".to_string()],
        );
        assert_eq!(
            response.headers()["warning"],
            "299 - \"line 1:   key \\\"?\\\"\""
        );
    }
}
