use k8s_pb::api::coordination::v1 as coordination;
use k8s_pb::api::flowcontrol::v1 as flowcontrol;
use k8s_pb::apiextensions_apiserver::pkg::apis::apiextensions::v1 as extensions;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use prost::Message;
use serde_json::json;

use super::*;

fn metadata(name: &str) -> Option<meta::ObjectMeta> {
    Some(meta::ObjectMeta {
        name: Some(name.into()),
        namespace: Some(String::new()),
        labels: [("app".to_string(), "x".to_string())].into(),
        creation_timestamp: Some(meta::Time {
            seconds: Some(GO_ZERO_TIME),
            nanos: Some(0),
        }),
        ..Default::default()
    })
}

#[test]
fn every_served_kind_has_a_message() {
    for resource in kcp_apis::builtin::RESOURCES {
        let component = kcp_apis::schema::component_name(resource);
        assert!(
            kcp_apis::messages::of_component(&component).is_some(),
            "{component} has no protobuf definition"
        );
    }
}

#[test]
fn a_lease_reads_with_micro_times_and_without_empty_fields() {
    let lease = coordination::Lease {
        metadata: metadata("holder"),
        spec: Some(coordination::LeaseSpec {
            holder_identity: Some("me".into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(meta::MicroTime {
                seconds: Some(1_700_000_000),
                nanos: Some(123_456_000),
            }),
            ..Default::default()
        }),
    };
    let decoded = decode("k8s.io.api.coordination.v1.Lease", &lease.encode_to_vec()).unwrap();
    assert_eq!(
        decoded,
        json!({
            "metadata": {"name": "holder", "labels": {"app": "x"}},
            "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15,
                     "renewTime": "2023-11-14T22:13:20.123456Z"}
        })
    );
}

#[test]
fn a_flow_schema_reads_nested_lists_and_negative_numbers() {
    let schema = flowcontrol::FlowSchema {
        metadata: metadata("fs"),
        spec: Some(flowcontrol::FlowSchemaSpec {
            priority_level_configuration: Some(flowcontrol::PriorityLevelConfigurationReference {
                name: Some("global-default".into()),
            }),
            matching_precedence: Some(-5),
            rules: vec![flowcontrol::PolicyRulesWithSubjects {
                subjects: vec![flowcontrol::Subject {
                    kind: Some("Group".into()),
                    group: Some(flowcontrol::GroupSubject {
                        name: Some("system:authenticated".into()),
                    }),
                    ..Default::default()
                }],
                resource_rules: vec![flowcontrol::ResourcePolicyRule {
                    verbs: vec!["get".into(), "list".into()],
                    api_groups: vec!["*".into()],
                    resources: vec!["*".into()],
                    cluster_scope: Some(true),
                    namespaces: vec![],
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    };
    let decoded = decode(
        "k8s.io.api.flowcontrol.v1.FlowSchema",
        &schema.encode_to_vec(),
    )
    .unwrap();
    assert_eq!(decoded["spec"]["matchingPrecedence"], -5);
    assert_eq!(
        decoded["spec"]["rules"][0],
        json!({
            "subjects": [{"kind": "Group", "group": {"name": "system:authenticated"}}],
            "resourceRules": [{"verbs": ["get", "list"], "apiGroups": ["*"],
                               "resources": ["*"], "clusterScope": true}]
        })
    );
}

#[test]
fn a_crd_schema_reads_its_unions_and_json_names() {
    let string = extensions::JsonSchemaProps {
        r#type: Some("string".into()),
        ..Default::default()
    };
    let schema = extensions::JsonSchemaProps {
        r#type: Some("object".into()),
        x_kubernetes_preserve_unknown_fields: Some(true),
        properties: [("name".to_string(), string.clone())].into(),
        additional_properties: Some(Box::new(extensions::JsonSchemaPropsOrBool {
            allows: Some(true),
            schema: Some(Box::new(string)),
        })),
        default: Some(extensions::Json {
            raw: Some(br#"{"name":"x"}"#.to_vec()),
        }),
        ..Default::default()
    };
    let decoded = decode(
        &format!("{EXTENSIONS}.JSONSchemaProps"),
        &schema.encode_to_vec(),
    )
    .unwrap();
    assert_eq!(
        decoded,
        json!({
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"name": {"type": "string"}},
            "additionalProperties": {"type": "string"},
            "default": {"name": "x"}
        })
    );
}

#[test]
fn broken_bytes_are_errors() {
    for bytes in [&[0x0a, 0x05, b'a'][..], &[0xff; 12][..], &[0x0b][..]] {
        assert!(
            decode("k8s.io.api.coordination.v1.Lease", bytes).is_err(),
            "{bytes:?}"
        );
    }
    // Nesting deeper than the limit is refused, not recursed into.
    let mut deep = extensions::JsonSchemaProps::default();
    for _ in 0..150 {
        deep = extensions::JsonSchemaProps {
            items: Some(Box::new(extensions::JsonSchemaPropsOrArray {
                schema: Some(Box::new(deep)),
                j_son_schemas: vec![],
            })),
            ..Default::default()
        };
    }
    assert!(
        decode(
            &format!("{EXTENSIONS}.JSONSchemaProps"),
            &deep.encode_to_vec()
        )
        .is_err()
    );
    assert_eq!(go_duration(90_500_000_000), "1m30.5s");
    assert_eq!(go_duration(3_600_000_000_000), "1h0m0s");
}
