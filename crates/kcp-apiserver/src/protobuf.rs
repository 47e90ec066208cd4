//! Protobuf request bodies, as kubectl's typed commands send them (`kubectl create namespace`,
//! `create configmap`, `create secret`, `create serviceaccount`, `create role`, ...).
//!
//! A body is `k8s\0` followed by a `runtime.Unknown` envelope (read with k8s-pb) whose `raw`
//! field holds the object, of any built-in kind kcp serves. `protobuf_generic` reads it by
//! Kubernetes' own message definitions into the same JSON a JSON client would have sent
//! (bytes become base64, times RFC 3339, empty fields omitted). Responses are always JSON.

use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message;
use serde_json::{Map, Value, json};

/// The magic prefix of Kubernetes protobuf bodies.
const MAGIC: &[u8] = b"k8s\0";

/// Why a protobuf body cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtobufError {
    /// Broken bytes (400).
    #[error("{0}")]
    Malformed(String),
    /// A kind we do not decode from protobuf (415).
    #[error("{0}")]
    Unsupported(String),
}

/// Decodes a protobuf body into the object's JSON form.
pub fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    let raw_envelope = body.strip_prefix(MAGIC).ok_or_else(|| {
        ProtobufError::Malformed("protobuf body does not start with the k8s magic prefix".into())
    })?;
    let envelope = Unknown::decode(raw_envelope).map_err(malformed)?;
    let type_meta = envelope.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    let raw = envelope.raw.unwrap_or_default();
    let message = kcp_apis::messages::of_kind(&api_version, &kind).ok_or_else(|| {
        ProtobufError::Unsupported(format!(
            "protobuf bodies of {api_version} {kind} are not supported; send application/json"
        ))
    })?;
    let mut object = match crate::protobuf_generic::decode(&message, &raw) {
        Ok(Value::Object(object)) => object,
        Ok(_) => Map::new(),
        Err(error) => return Err(ProtobufError::Malformed(error)),
    };
    object.insert("apiVersion".into(), json!(api_version));
    object.insert("kind".into(), json!(kind));
    Ok(Value::Object(object))
}

/// The body a client sends for the protobuf message `raw` of `kind` in `api_version`: what
/// [`decode`] reads (client-go's typed clients, and tests that play them).
pub fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(k8s_pb::apimachinery::pkg::runtime::TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = MAGIC.to_vec();
    body.extend(unknown.encode_to_vec());
    body
}

fn malformed(error: prost::DecodeError) -> ProtobufError {
    ProtobufError::Malformed(format!("the protobuf body could not be decoded: {error}"))
}

#[cfg(test)]
mod tests {
    use k8s_pb::api::core::v1 as core;
    use k8s_pb::api::rbac::v1 as rbac;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;

    use super::*;

    #[test]
    fn configmaps_and_secrets_become_their_json_form() {
        let cm = core::ConfigMap {
            metadata: Some(meta::ObjectMeta {
                name: Some("cm".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            }),
            data: [("k".to_string(), "v".to_string())].into(),
            binary_data: [("b".to_string(), vec![0u8, 255])].into(),
            ..Default::default()
        };
        let object = decode(&envelope("v1", "ConfigMap", cm.encode_to_vec())).unwrap();
        assert_eq!(
            object,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"}, "data": {"k": "v"}, "binaryData": {"b": "AP8="}})
        );
        let secret = core::Secret {
            metadata: Some(meta::ObjectMeta {
                name: Some("s".into()),
                ..Default::default()
            }),
            data: [("password".to_string(), b"hunter2".to_vec())].into(),
            r#type: Some("Opaque".into()),
            ..Default::default()
        };
        let object = decode(&envelope("v1", "Secret", secret.encode_to_vec())).unwrap();
        assert_eq!(object["data"]["password"], "aHVudGVyMg==");
        assert_eq!(object["type"], "Opaque");
    }

    #[test]
    fn rbac_rules_and_bindings() {
        let role = rbac::Role {
            metadata: Some(meta::ObjectMeta {
                name: Some("r".into()),
                ..Default::default()
            }),
            rules: vec![rbac::PolicyRule {
                verbs: vec!["get".into()],
                api_groups: vec!["".into()],
                resources: vec!["pods".into()],
                ..Default::default()
            }],
        };
        let object = decode(&envelope(
            "rbac.authorization.k8s.io/v1",
            "Role",
            role.encode_to_vec(),
        ))
        .unwrap();
        assert_eq!(
            object["rules"],
            json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}])
        );
        let binding = rbac::RoleBinding {
            metadata: Some(meta::ObjectMeta {
                name: Some("b".into()),
                ..Default::default()
            }),
            subjects: vec![rbac::Subject {
                kind: Some("User".into()),
                name: Some("alice".into()),
                api_group: Some("rbac.authorization.k8s.io".into()),
                namespace: None,
            }],
            role_ref: Some(rbac::RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: Some("Role".into()),
                name: Some("r".into()),
            }),
        };
        let object = decode(&envelope(
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            binding.encode_to_vec(),
        ))
        .unwrap();
        assert_eq!(object["subjects"][0]["name"], "alice");
        assert_eq!(object["roleRef"]["kind"], "Role");
    }

    #[test]
    fn broken_and_unknown_bodies_are_refused() {
        assert!(matches!(decode(b"{}"), Err(ProtobufError::Malformed(_))));
        assert!(matches!(
            decode(b"k8s\0\xff\xff\xff"),
            Err(ProtobufError::Malformed(_))
        ));
        // Nodes are served neither built in nor as a workload CRD.
        let node = envelope("v1", "Node", Vec::new());
        assert!(matches!(decode(&node), Err(ProtobufError::Unsupported(_))));
    }

    #[test]
    fn every_served_kind_reads_from_protobuf() {
        // Field 1 of every kind's message is its ObjectMeta.
        let metadata = meta::ObjectMeta {
            name: Some("sample".into()),
            labels: [("app".to_string(), "x".to_string())].into(),
            ..Default::default()
        };
        let mut raw = vec![0x0a];
        prost::encoding::encode_varint(metadata.encoded_len() as u64, &mut raw);
        raw.extend(metadata.encode_to_vec());
        for resource in kcp_apis::builtin::RESOURCES {
            let api_version = resource.group_version();
            let body = envelope(&api_version, &resource.kind, raw.clone());
            let decoded =
                decode(&body).unwrap_or_else(|e| panic!("{api_version} {}: {e}", resource.kind));
            assert_eq!(decoded["apiVersion"], api_version);
            assert_eq!(decoded["kind"], *resource.kind);
            assert_eq!(
                decoded["metadata"],
                json!({"name": "sample", "labels": {"app": "x"}}),
                "{}",
                resource.kind
            );
        }
    }
}
