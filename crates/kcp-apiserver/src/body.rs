//! Request bodies as the API server decodes them: objects in JSON, YAML or protobuf, and patch
//! documents. One pass over the bytes gives the value and the keys an object repeated (for
//! `fieldValidation`); nothing a client sends can take the decoders past
//! [`MAX_DEPTH`](kcp_apimachinery::json::MAX_DEPTH) levels (serde_json's and serde-saphyr's
//! recursion stop there too), and the body itself is at most the router's 3 MiB.
//!
//! Must not know: the registry's rules for what is stored.

use kcp_apimachinery::json::{self, BodyError, Decoded, MAX_DEPTH};
use kcp_apis::builtin::Resource;
use kcp_registry::RegistryError;

use crate::error::ApiError;

/// The media types objects may be sent in.
const OBJECT_MEDIA_TYPES: &str =
    "application/json, application/yaml, application/vnd.kubernetes.protobuf";

/// The object in a request body of `content_type` (JSON when absent). `resource` names the
/// kind in the message of a body too deep to be decoded.
pub fn decode_object(
    content_type: Option<&str>,
    body: &[u8],
    resource: Option<&Resource>,
) -> Result<Decoded, ApiError> {
    if body.len() >= crate::cpu::LARGE_BODY {
        return crate::cpu::heavy(|| decode_object_here(content_type, body, resource));
    }
    decode_object_here(content_type, body, resource)
}

fn decode_object_here(
    content_type: Option<&str>,
    body: &[u8],
    resource: Option<&Resource>,
) -> Result<Decoded, ApiError> {
    let media = content_type
        .unwrap_or("application/json")
        .split(';')
        .next()
        .unwrap_or_default()
        .trim();
    let too_deep = || match resource {
        Some(resource) => RegistryError::BadRequest(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: {message}",
            kind = resource.kind,
            version = resource.version,
            message = json::depth_message(),
        )),
        None => RegistryError::BadRequest(format!(
            "the object provided is unrecognized: {}",
            json::depth_message()
        )),
    };
    match media {
        "application/json" => json::decode_body(body).map_err(|error| {
            ApiError::from(match error {
                BodyError::TooDeep => too_deep(),
                BodyError::Syntax(message) => RegistryError::BadRequest(format!(
                    "the object provided is unrecognized: {message}"
                )),
            })
        }),
        "application/yaml" => crate::yaml::decode(body).map_err(|error| {
            ApiError::from(match error {
                BodyError::TooDeep => too_deep(),
                BodyError::Syntax(message) => {
                    RegistryError::BadRequest(format!("error converting YAML to JSON: {message}"))
                }
            })
        }),
        // Protobuf messages have fixed shapes (the reader stops at 100 nested messages), and
        // their maps cannot repeat keys once decoded.
        "application/vnd.kubernetes.protobuf" => crate::protobuf::decode(body)
            .map(|value| Decoded {
                value,
                duplicates: Vec::new(),
            })
            .map_err(|error| match error {
                crate::protobuf::ProtobufError::Malformed(message) => {
                    RegistryError::BadRequest(message).into()
                }
                crate::protobuf::ProtobufError::Unsupported(message) => {
                    ApiError::UnsupportedMediaType(message)
                }
            }),
        _ => Err(ApiError::UnsupportedMediaType(format!(
            "the body of the request was in an unknown format - accepted media types include: {OBJECT_MEDIA_TYPES} (got {media})"
        ))),
    }
}

/// The DeleteOptions in a delete's body of `content_type` (JSON when absent; YAML and protobuf
/// too), as kube-apiserver reads them: of kind `DeleteOptions` under any group's version (the
/// group of the resource, `v1`, `meta.k8s.io/v1`; client-go sends its client's), or without a
/// kind. Another option kind cannot be converted to DeleteOptions, and kinds of objects are not
/// options at all (400 either way).
pub fn decode_delete_options(
    content_type: Option<&str>,
    body: &[u8],
) -> Result<serde_json::Value, ApiError> {
    let options = decode_object(content_type, body, None)?.value;
    if !options.is_object() {
        return Err(
            RegistryError::BadRequest("the DeleteOptions body is not an object".into()).into(),
        );
    }
    let api_version = kcp_apimachinery::object::str_at(&options, &["apiVersion"]);
    match kcp_apimachinery::object::str_at(&options, &["kind"]) {
        "" | "DeleteOptions" => Ok(options),
        "CreateOptions" | "UpdateOptions" | "PatchOptions" | "GetOptions" | "ListOptions" => Err(
            RegistryError::BadRequest("decoded object cannot be converted to DeleteOptions".into())
                .into(),
        ),
        kind => Err(RegistryError::BadRequest(format!(
            "no kind {kind:?} is registered for version {api_version:?} in scheme \"{META_SCHEME}\""
        ))
        .into()),
    }
}

/// The scheme kube-apiserver reads request options with, as its errors name it.
const META_SCHEME: &str = "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme/register.go:28";

/// A patch document (JSON for every patch type). It may be two levels deeper than an object
/// (a JSON patch's list and operation wrap the values it inserts); what it produces is held to
/// the limit when it is applied.
pub fn decode_patch(body: &[u8]) -> Result<Decoded, RegistryError> {
    let decode = || json::decode_document(body, MAX_DEPTH + 2);
    let decoded = match body.len() >= crate::cpu::LARGE_BODY {
        true => crate::cpu::heavy(decode),
        false => decode(),
    };
    decoded.map_err(|error| match error {
        BodyError::TooDeep => RegistryError::Unprocessable(json::depth_message()),
        BodyError::Syntax(message) => {
            RegistryError::BadRequest(format!("error decoding patch: {message}"))
        }
    })
}

/// A server-side apply configuration (`application/apply-patch+yaml`): JSON when it reads as
/// JSON (as kubectl and kube-rs send it), else YAML.
pub fn decode_apply(body: &[u8]) -> Result<Decoded, RegistryError> {
    if body.trim_ascii_start().starts_with(b"{")
        && let Ok(decoded) = decode_patch(body)
    {
        return Ok(decoded);
    }
    let decoded = match body.len() >= crate::cpu::LARGE_BODY {
        true => crate::cpu::heavy(|| crate::yaml::decode(body)),
        false => crate::yaml::decode(body),
    };
    decoded.map_err(|error| match error {
        BodyError::TooDeep => RegistryError::Unprocessable(json::depth_message()),
        BodyError::Syntax(message) => {
            RegistryError::BadRequest(format!("error decoding YAML: {message}"))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_decode_with_their_duplicates() {
        let decoded = decode_object(
            Some("application/json; charset=utf-8"),
            br#"{"metadata": {"name": "a", "name": "b"}}"#,
            None,
        )
        .unwrap();
        assert_eq!(decoded.value["metadata"]["name"], "b");
        assert_eq!(decoded.duplicates, ["metadata.name"]);
        let decoded = decode_object(
            Some("application/yaml"),
            b"metadata:\n  name: a\n  name: b\ndata:\n  x: '1'\n",
            None,
        )
        .unwrap();
        assert_eq!(decoded.value["metadata"]["name"], "b");
        assert_eq!(decoded.duplicates, ["metadata.name"]);
    }

    #[test]
    fn deep_bodies_are_bad_requests_in_every_format() {
        let configmaps = kcp_apis::builtin::in_group_version("", "v1")
            .find(|r| r.kind == "ConfigMap")
            .unwrap();
        let json_body = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        let yaml_body = format!(
            "a:\n{}",
            (1..=MAX_DEPTH + 1)
                .map(|i| format!("{}- \n", "  ".repeat(i)))
                .collect::<String>()
        );
        let flow_yaml = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        for (media, body) in [
            ("application/json", json_body.as_str()),
            ("application/yaml", flow_yaml.as_str()),
            ("application/json", &"{\"a\":".repeat(200_000)),
        ] {
            match decode_object(Some(media), body.as_bytes(), Some(configmaps)) {
                Err(ApiError::Registry(RegistryError::BadRequest(message))) => assert!(
                    message.contains("exceeded max depth of 100")
                        || message.starts_with("error converting YAML to JSON"),
                    "{media}: {message}"
                ),
                other => panic!("{media}: {other:?}"),
            }
        }
        let error = decode_object(
            Some("application/json"),
            json_body.as_bytes(),
            Some(configmaps),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: exceeded max depth of 100"
        );
        assert!(decode_object(Some("application/yaml"), yaml_body.as_bytes(), None).is_err());
        assert!(matches!(
            decode_patch(json_body.as_bytes()),
            Ok(Decoded { .. })
        ));
        let deeper = format!("{}{}", "[".repeat(MAX_DEPTH + 3), "]".repeat(MAX_DEPTH + 3));
        assert!(matches!(
            decode_patch(deeper.as_bytes()),
            Err(RegistryError::Unprocessable(_))
        ));
    }
}
