//! Protobuf request bodies, as kubectl's typed commands send them (`kubectl create namespace`,
//! `create configmap`, `create secret`, `create serviceaccount`, `create role`, ...).
//!
//! A body is `k8s\0` followed by a `runtime.Unknown` envelope whose `raw` field holds the object.
//! We decode the kinds those commands send with k8s-pb's generated messages and turn them into
//! the same JSON a JSON client would have sent (bytes become base64, times RFC 3339, empty
//! fields omitted). Responses are always JSON.

use std::collections::BTreeMap;

use base64::Engine;
use k8s_pb::api::authentication::v1 as authentication;
use k8s_pb::api::authorization::v1 as authorization;
use k8s_pb::api::certificates::v1 as certificates;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::rbac::v1 as rbac;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
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
    let mut object = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Namespace") => {
            let ns = core::Namespace::decode(raw.as_slice()).map_err(malformed)?;
            let mut object = with_metadata(ns.metadata);
            if let Some(spec) = ns.spec.filter(|s| !s.finalizers.is_empty()) {
                object.insert("spec".into(), json!({"finalizers": spec.finalizers}));
            }
            object
        }
        ("v1", "ConfigMap") => {
            let cm = core::ConfigMap::decode(raw.as_slice()).map_err(malformed)?;
            let mut object = with_metadata(cm.metadata);
            put_map(
                &mut object,
                "data",
                cm.data.into_iter().map(|(k, v)| (k, json!(v))).collect(),
            );
            put_map(&mut object, "binaryData", base64_map(cm.binary_data));
            put(&mut object, "immutable", cm.immutable.map(Value::Bool));
            object
        }
        ("v1", "Secret") => {
            let secret = core::Secret::decode(raw.as_slice()).map_err(malformed)?;
            let mut object = with_metadata(secret.metadata);
            put_map(&mut object, "data", base64_map(secret.data));
            put_map(
                &mut object,
                "stringData",
                secret
                    .string_data
                    .into_iter()
                    .map(|(k, v)| (k, json!(v)))
                    .collect(),
            );
            put(&mut object, "type", secret.r#type.map(Value::String));
            put(&mut object, "immutable", secret.immutable.map(Value::Bool));
            object
        }
        ("v1", "ServiceAccount") => {
            let sa = core::ServiceAccount::decode(raw.as_slice()).map_err(malformed)?;
            let mut object = with_metadata(sa.metadata);
            let secrets: Vec<Value> = sa
                .secrets
                .into_iter()
                .map(|r| {
                    string_fields([
                        ("kind", r.kind),
                        ("namespace", r.namespace),
                        ("name", r.name),
                        ("uid", r.uid),
                        ("apiVersion", r.api_version),
                        ("resourceVersion", r.resource_version),
                        ("fieldPath", r.field_path),
                    ])
                })
                .collect();
            put_list(&mut object, "secrets", secrets);
            let pull: Vec<Value> = sa
                .image_pull_secrets
                .into_iter()
                .map(|r| string_fields([("name", r.name)]))
                .collect();
            put_list(&mut object, "imagePullSecrets", pull);
            put(
                &mut object,
                "automountServiceAccountToken",
                sa.automount_service_account_token.map(Value::Bool),
            );
            object
        }
        ("rbac.authorization.k8s.io/v1", "Role") => {
            let role = rbac::Role::decode(raw.as_slice()).map_err(malformed)?;
            let mut object = with_metadata(role.metadata);
            put_list(
                &mut object,
                "rules",
                role.rules.into_iter().map(policy_rule).collect(),
            );
            object
        }
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => {
            let role = rbac::ClusterRole::decode(raw.as_slice()).map_err(malformed)?;
            let mut object = with_metadata(role.metadata);
            put_list(
                &mut object,
                "rules",
                role.rules.into_iter().map(policy_rule).collect(),
            );
            if let Some(rule) = role.aggregation_rule {
                let selectors: Vec<Value> = rule
                    .cluster_role_selectors
                    .into_iter()
                    .map(label_selector)
                    .collect();
                object.insert(
                    "aggregationRule".into(),
                    json!({"clusterRoleSelectors": selectors}),
                );
            }
            object
        }
        ("v1", "ResourceQuota") => {
            let quota = core::ResourceQuota::decode(raw.as_slice()).map_err(malformed)?;
            let mut object = with_metadata(quota.metadata);
            if let Some(spec) = quota.spec {
                let mut fields = Map::new();
                put_map(&mut fields, "hard", quantities(spec.hard));
                put(&mut fields, "scopes", string_list(spec.scopes));
                if let Some(selector) = spec.scope_selector {
                    let expressions: Vec<Value> = selector
                        .match_expressions
                        .into_iter()
                        .map(|e| {
                            let mut expression = string_fields([
                                ("scopeName", e.scope_name),
                                ("operator", e.operator),
                            ]);
                            if let Some(values) = string_list(e.values) {
                                expression["values"] = values;
                            }
                            expression
                        })
                        .collect();
                    fields.insert(
                        "scopeSelector".into(),
                        json!({"matchExpressions": expressions}),
                    );
                }
                object.insert("spec".into(), Value::Object(fields));
            }
            object
        }
        ("certificates.k8s.io/v1", "CertificateSigningRequest") => {
            let csr = certificates::CertificateSigningRequest::decode(raw.as_slice())
                .map_err(malformed)?;
            let mut object = with_metadata(csr.metadata);
            if let Some(spec) = csr.spec {
                let mut fields = Map::new();
                let encode = |bytes: Vec<u8>| {
                    Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
                };
                put(&mut fields, "request", spec.request.map(encode));
                put(
                    &mut fields,
                    "signerName",
                    spec.signer_name.map(Value::String),
                );
                put(
                    &mut fields,
                    "expirationSeconds",
                    spec.expiration_seconds.map(Value::from),
                );
                put(&mut fields, "usages", string_list(spec.usages));
                put(&mut fields, "username", spec.username.map(Value::String));
                put(&mut fields, "uid", spec.uid.map(Value::String));
                put(&mut fields, "groups", string_list(spec.groups));
                put_map(
                    &mut fields,
                    "extra",
                    spec.extra
                        .into_iter()
                        .map(|(k, v)| (k, json!(v.items)))
                        .collect(),
                );
                object.insert("spec".into(), Value::Object(fields));
            }
            if let Some(status) = csr.status {
                let mut fields = Map::new();
                let conditions: Vec<Value> = status
                    .conditions
                    .into_iter()
                    .map(|c| {
                        let mut condition = Map::new();
                        put(&mut condition, "type", c.r#type.map(Value::String));
                        put(&mut condition, "status", c.status.map(Value::String));
                        put(&mut condition, "reason", c.reason.map(Value::String));
                        put(&mut condition, "message", c.message.map(Value::String));
                        put(
                            &mut condition,
                            "lastUpdateTime",
                            c.last_update_time.and_then(time),
                        );
                        put(
                            &mut condition,
                            "lastTransitionTime",
                            c.last_transition_time.and_then(time),
                        );
                        Value::Object(condition)
                    })
                    .collect();
                put_list(&mut fields, "conditions", conditions);
                put(
                    &mut fields,
                    "certificate",
                    status.certificate.map(|bytes| {
                        Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
                    }),
                );
                object.insert("status".into(), Value::Object(fields));
            }
            object
        }
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => {
            let binding = rbac::RoleBinding::decode(raw.as_slice()).map_err(malformed)?;
            binding_object(binding.metadata, binding.subjects, binding.role_ref)
        }
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            let binding = rbac::ClusterRoleBinding::decode(raw.as_slice()).map_err(malformed)?;
            binding_object(binding.metadata, binding.subjects, binding.role_ref)
        }
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => {
            let review = authorization::SelfSubjectAccessReview::decode(raw.as_slice())
                .map_err(malformed)?;
            let spec = review.spec.unwrap_or_default();
            let mut object = with_metadata(review.metadata);
            object.insert(
                "spec".into(),
                access_attributes(spec.resource_attributes, spec.non_resource_attributes),
            );
            object
        }
        ("authorization.k8s.io/v1", "SubjectAccessReview" | "LocalSubjectAccessReview") => {
            // Both kinds have the same fields.
            let review =
                authorization::SubjectAccessReview::decode(raw.as_slice()).map_err(malformed)?;
            let spec = review.spec.unwrap_or_default();
            let mut object = with_metadata(review.metadata);
            let mut fields =
                access_attributes(spec.resource_attributes, spec.non_resource_attributes);
            if let Value::Object(fields) = &mut fields {
                put(fields, "user", spec.user.map(Value::String));
                put(fields, "uid", spec.uid.map(Value::String));
                put(fields, "groups", string_list(spec.groups));
                let extra: Map<String, Value> = spec
                    .extra
                    .into_iter()
                    .map(|(k, v)| (k, json!(v.items)))
                    .collect();
                put_map(fields, "extra", extra);
            }
            object.insert("spec".into(), fields);
            object
        }
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => {
            let review =
                authorization::SelfSubjectRulesReview::decode(raw.as_slice()).map_err(malformed)?;
            let mut object = with_metadata(review.metadata);
            let namespace = review.spec.and_then(|spec| spec.namespace);
            object.insert("spec".into(), string_fields([("namespace", namespace)]));
            object
        }
        ("authentication.k8s.io/v1", "SelfSubjectReview") => {
            let review =
                authentication::SelfSubjectReview::decode(raw.as_slice()).map_err(malformed)?;
            with_metadata(review.metadata)
        }
        ("authentication.k8s.io/v1", "TokenReview") => {
            let review = authentication::TokenReview::decode(raw.as_slice()).map_err(malformed)?;
            let spec = review.spec.unwrap_or_default();
            let mut object = with_metadata(review.metadata);
            let mut fields = Map::new();
            put(&mut fields, "token", spec.token.map(Value::String));
            put(&mut fields, "audiences", string_list(spec.audiences));
            object.insert("spec".into(), Value::Object(fields));
            object
        }
        ("authentication.k8s.io/v1", "TokenRequest") => {
            let request =
                authentication::TokenRequest::decode(raw.as_slice()).map_err(malformed)?;
            let spec = request.spec.unwrap_or_default();
            let mut object = with_metadata(request.metadata);
            let mut fields = Map::new();
            put(&mut fields, "audiences", string_list(spec.audiences));
            put(
                &mut fields,
                "expirationSeconds",
                spec.expiration_seconds.map(Value::from),
            );
            if let Some(bound) = spec.bound_object_ref {
                let mut reference = Map::new();
                put(&mut reference, "kind", bound.kind.map(Value::String));
                put(
                    &mut reference,
                    "apiVersion",
                    bound.api_version.map(Value::String),
                );
                put(&mut reference, "name", bound.name.map(Value::String));
                put(&mut reference, "uid", bound.u_id.map(Value::String));
                fields.insert("boundObjectRef".into(), Value::Object(reference));
            }
            object.insert("spec".into(), Value::Object(fields));
            object
        }
        _ => {
            return Err(ProtobufError::Unsupported(format!(
                "protobuf bodies of {api_version} {kind} are not supported; send application/json"
            )));
        }
    };
    object.insert("apiVersion".into(), json!(api_version));
    object.insert("kind".into(), json!(kind));
    Ok(Value::Object(object))
}

/// An access review's `resourceAttributes` or `nonResourceAttributes`, as JSON spec fields.
fn access_attributes(
    resource: Option<authorization::ResourceAttributes>,
    non_resource: Option<authorization::NonResourceAttributes>,
) -> Value {
    let mut spec = Map::new();
    if let Some(attributes) = resource {
        spec.insert(
            "resourceAttributes".into(),
            string_fields([
                ("namespace", attributes.namespace),
                ("verb", attributes.verb),
                ("group", attributes.group),
                ("version", attributes.version),
                ("resource", attributes.resource),
                ("subresource", attributes.subresource),
                ("name", attributes.name),
            ]),
        );
    }
    if let Some(attributes) = non_resource {
        spec.insert(
            "nonResourceAttributes".into(),
            string_fields([("path", attributes.path), ("verb", attributes.verb)]),
        );
    }
    Value::Object(spec)
}

/// A `LabelSelector` as JSON.
fn label_selector(selector: meta::LabelSelector) -> Value {
    let mut object = Map::new();
    put_map(
        &mut object,
        "matchLabels",
        selector
            .match_labels
            .into_iter()
            .map(|(k, v)| (k, json!(v)))
            .collect(),
    );
    let expressions: Vec<Value> = selector
        .match_expressions
        .into_iter()
        .map(|e| {
            let mut expression = string_fields([("key", e.key), ("operator", e.operator)]);
            if let Some(values) = string_list(e.values) {
                expression["values"] = values;
            }
            expression
        })
        .collect();
    put_list(&mut object, "matchExpressions", expressions);
    Value::Object(object)
}

/// Resource quantities as their JSON strings.
fn quantities(
    map: BTreeMap<String, k8s_pb::apimachinery::pkg::api::resource::Quantity>,
) -> Map<String, Value> {
    map.into_iter()
        .map(|(k, q)| (k, json!(q.string.unwrap_or_default())))
        .collect()
}

/// A `metav1.Time` as RFC 3339 (seconds, UTC), as Kubernetes writes it in JSON.
fn time(time: meta::Time) -> Option<Value> {
    let at = jiff::Timestamp::from_second(time.seconds?).ok()?;
    Some(Value::String(at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()))
}

fn malformed(error: prost::DecodeError) -> ProtobufError {
    ProtobufError::Malformed(format!("the protobuf body could not be decoded: {error}"))
}

fn put(object: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    if let Some(value) = value {
        object.insert(key.into(), value);
    }
}

fn put_map(object: &mut Map<String, Value>, key: &str, map: Map<String, Value>) {
    if !map.is_empty() {
        object.insert(key.into(), Value::Object(map));
    }
}

fn put_list(object: &mut Map<String, Value>, key: &str, list: Vec<Value>) {
    if !list.is_empty() {
        object.insert(key.into(), Value::Array(list));
    }
}

/// A JSON object of the string fields that are set.
fn string_fields<const N: usize>(fields: [(&str, Option<String>); N]) -> Value {
    let mut object = Map::new();
    for (key, value) in fields {
        put(&mut object, key, value.map(Value::String));
    }
    Value::Object(object)
}

fn base64_map(map: BTreeMap<String, Vec<u8>>) -> Map<String, Value> {
    map.into_iter()
        .map(|(k, v)| {
            (
                k,
                json!(base64::engine::general_purpose::STANDARD.encode(v)),
            )
        })
        .collect()
}

fn string_list(list: Vec<String>) -> Option<Value> {
    (!list.is_empty()).then(|| json!(list))
}

fn policy_rule(rule: rbac::PolicyRule) -> Value {
    let mut object = Map::new();
    // verbs is required, so it is written even when empty.
    object.insert("verbs".into(), json!(rule.verbs));
    put(&mut object, "apiGroups", string_list(rule.api_groups));
    put(&mut object, "resources", string_list(rule.resources));
    put(
        &mut object,
        "resourceNames",
        string_list(rule.resource_names),
    );
    put(
        &mut object,
        "nonResourceURLs",
        string_list(rule.non_resource_ur_ls),
    );
    Value::Object(object)
}

fn binding_object(
    metadata: Option<meta::ObjectMeta>,
    subjects: Vec<rbac::Subject>,
    role_ref: Option<rbac::RoleRef>,
) -> Map<String, Value> {
    let mut object = with_metadata(metadata);
    let subjects = subjects
        .into_iter()
        .map(|s| {
            string_fields([
                ("kind", s.kind),
                ("apiGroup", s.api_group),
                ("name", s.name),
                ("namespace", s.namespace),
            ])
        })
        .collect();
    put_list(&mut object, "subjects", subjects);
    if let Some(r) = role_ref {
        object.insert(
            "roleRef".into(),
            string_fields([
                ("apiGroup", r.api_group),
                ("kind", r.kind),
                ("name", r.name),
            ]),
        );
    }
    object
}

/// An object with the client-settable parts of `metadata`.
fn with_metadata(metadata: Option<meta::ObjectMeta>) -> Map<String, Value> {
    let mut object = Map::new();
    let Some(m) = metadata else {
        object.insert("metadata".into(), json!({}));
        return object;
    };
    let mut out = Map::new();
    for (key, value) in [
        ("name", m.name),
        ("generateName", m.generate_name),
        ("namespace", m.namespace),
        ("uid", m.uid),
        ("resourceVersion", m.resource_version),
    ] {
        put(
            &mut out,
            key,
            value.filter(|v| !v.is_empty()).map(Value::String),
        );
    }
    put_map(
        &mut out,
        "labels",
        m.labels.into_iter().map(|(k, v)| (k, json!(v))).collect(),
    );
    put_map(
        &mut out,
        "annotations",
        m.annotations
            .into_iter()
            .map(|(k, v)| (k, json!(v)))
            .collect(),
    );
    put(&mut out, "finalizers", string_list(m.finalizers));
    let owners: Vec<Value> = m
        .owner_references
        .into_iter()
        .map(|o| {
            let mut owner = string_fields([
                ("apiVersion", o.api_version),
                ("kind", o.kind),
                ("name", o.name),
                ("uid", o.uid),
            ]);
            if let Some(controller) = o.controller {
                owner["controller"] = json!(controller);
            }
            if let Some(block) = o.block_owner_deletion {
                owner["blockOwnerDeletion"] = json!(block);
            }
            owner
        })
        .collect();
    put_list(&mut out, "ownerReferences", owners);
    object.insert("metadata".into(), Value::Object(out));
    object
}

#[cfg(test)]
mod tests {
    use k8s_pb::apimachinery::pkg::runtime::TypeMeta;

    use super::*;

    fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let unknown = Unknown {
            type_meta: Some(TypeMeta {
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
        let pod = envelope("v1", "Pod", Vec::new());
        assert!(matches!(decode(&pod), Err(ProtobufError::Unsupported(_))));
    }
}
