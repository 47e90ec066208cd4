//! Built-in resources through kubectl: create, get in its output formats, label selectors,
//! replace with a stale object, delete, and the Status errors kubectl prints.

use super::support::{Kcp, without_namespace_defaults, write_file};

const CONFIGMAP: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: demo
  labels: {app: web}
data:
  greeting: hello
";

#[test]
fn configmaps_round_trip_through_kubectl() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("res-configmaps");
    let file = write_file(dir.path(), "cm.yaml", CONFIGMAP);
    assert_eq!(
        kcp.kubectl_ok(&["create", "-f", &file]).trim(),
        "configmap/demo created"
    );

    let object: serde_json::Value =
        serde_json::from_str(&kcp.kubectl_ok(&["get", "configmap", "demo", "-o", "json"])).unwrap();
    assert_eq!(object["data"]["greeting"], "hello");
    assert_eq!(object["metadata"]["namespace"], "default");
    assert!(object["metadata"]["uid"].is_string());
    assert!(object["metadata"]["resourceVersion"].is_string());

    let table = kcp.kubectl_ok(&["get", "cm"]);
    let mut lines = table.lines();
    assert_eq!(
        lines.next().unwrap().split_whitespace().collect::<Vec<_>>(),
        ["NAME", "DATA", "AGE"]
    );
    assert_eq!(
        lines.next().unwrap().split_whitespace().next(),
        Some("demo")
    );
    assert_eq!(
        kcp.kubectl_ok(&["get", "cm", "-l", "app=web", "-o", "name"])
            .trim(),
        "configmap/demo"
    );
    assert_eq!(
        without_namespace_defaults(&kcp.kubectl_ok(&["get", "cm", "-l", "app!=web", "-o", "name"])),
        ""
    );
    assert_eq!(
        kcp.kubectl_ok(&[
            "get",
            "cm",
            "--field-selector",
            "metadata.name=demo",
            "-o",
            "name"
        ])
        .trim(),
        "configmap/demo"
    );
    let jsonpath = kcp.kubectl_ok(&["get", "cm", "demo", "-o", "jsonpath={.data.greeting}"]);
    assert_eq!(jsonpath, "hello");

    // A replace carrying an old resourceVersion loses against a newer write.
    let stale = write_file(
        dir.path(),
        "stale.json",
        &kcp.kubectl_ok(&["get", "cm", "demo", "-o", "json"]),
    );
    // A replace that changes nothing writes nothing, as kube-apiserver: the version stays.
    kcp.kubectl_ok(&["replace", "-f", &stale]);
    let version = || {
        kcp.kubectl_ok(&[
            "get",
            "cm",
            "demo",
            "-o",
            "jsonpath={.metadata.resourceVersion}",
        ])
    };
    let before = version();
    kcp.kubectl_ok(&["replace", "-f", &stale]);
    assert_eq!(version(), before);
    kcp.kubectl_ok(&["label", "cm", "demo", "newer=write"]);
    let conflict = kcp.kubectl(&["replace", "-f", &stale]);
    assert!(!conflict.status.success());
    let stderr = String::from_utf8_lossy(&conflict.stderr);
    assert!(
        stderr.contains("Error from server (Conflict)")
            && stderr.contains("the object has been modified"),
        "{stderr}"
    );

    let duplicate = kcp.kubectl(&["create", "-f", &file]);
    assert!(
        String::from_utf8_lossy(&duplicate.stderr)
            .contains("Error from server (AlreadyExists): error when creating")
    );

    assert_eq!(
        kcp.kubectl_ok(&["delete", "cm", "demo"]).trim(),
        "configmap \"demo\" deleted"
    );
    let missing = kcp.kubectl(&["get", "cm", "demo"]);
    assert_eq!(
        String::from_utf8_lossy(&missing.stderr).trim(),
        "Error from server (NotFound): configmaps \"demo\" not found"
    );
}

#[test]
fn invalid_names_and_missing_namespaces_are_refused_with_kubernetes_messages() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("res-invalid");
    let bad = write_file(
        dir.path(),
        "bad.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Bad_Name\n",
    );
    let output = kcp.kubectl(&["create", "-f", &bad]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // kubectl words a 422 with causes itself: `The ConfigMap "Bad_Name" is invalid: ...`.
    assert!(
        stderr.contains("The ConfigMap \"Bad_Name\" is invalid"),
        "{stderr}"
    );
    assert!(
        stderr
            .contains("metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain"),
        "{stderr}"
    );

    let elsewhere = write_file(
        dir.path(),
        "ns.yaml",
        &CONFIGMAP.replace("name: demo", "name: demo\n  namespace: nowhere"),
    );
    let output = kcp.kubectl(&["create", "-f", &elsewhere]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("namespaces \"nowhere\" not found"),
        "{stderr}"
    );
}

#[test]
fn objects_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let kcp = Kcp::start(&root, &[]);
    let file = write_file(dir.path(), "cm.yaml", CONFIGMAP);
    kcp.kubectl_ok(&["create", "-f", &file]);
    let before = kcp.kubectl_ok(&["get", "cm", "demo", "-o", "json"]);
    kcp.stop();
    let kcp = Kcp::start(&root, &[]);
    assert_eq!(kcp.kubectl_ok(&["get", "cm", "demo", "-o", "json"]), before);
    kcp.stop();
}

#[test]
fn typed_create_commands_send_protobuf_and_work() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("res-protobuf");
    assert_eq!(
        kcp.kubectl_ok(&["create", "namespace", "team"]).trim(),
        "namespace/team created"
    );
    kcp.kubectl_ok(&[
        "create",
        "configmap",
        "literal",
        "--from-literal=a=b",
        "-n",
        "team",
    ]);
    let file = write_file(dir.path(), "greeting.txt", "hello\n");
    kcp.kubectl_ok(&[
        "create",
        "configmap",
        "fromfile",
        &format!("--from-file={file}"),
        "-n",
        "team",
    ]);
    let binary: Vec<u8> = (0..=255u8).collect();
    let binary_path = dir.path().join("blob");
    std::fs::write(&binary_path, &binary).unwrap();
    kcp.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "blob",
        &format!("--from-file={}", binary_path.display()),
        "-n",
        "team",
    ]);
    kcp.kubectl_ok(&["create", "serviceaccount", "robot", "-n", "team"]);
    kcp.kubectl_ok(&[
        "create",
        "role",
        "reader",
        "--verb=get,list",
        "--resource=configmaps",
        "-n",
        "team",
    ]);
    kcp.kubectl_ok(&[
        "create",
        "rolebinding",
        "reader",
        "--role=reader",
        "--user=alice",
        "-n",
        "team",
    ]);
    kcp.kubectl_ok(&[
        "create",
        "clusterrole",
        "lister",
        "--verb=list",
        "--resource=secrets",
    ]);

    assert_eq!(
        kcp.kubectl_ok(&[
            "get",
            "cm",
            "literal",
            "-n",
            "team",
            "-o",
            "jsonpath={.data.a}"
        ]),
        "b"
    );
    assert_eq!(
        kcp.kubectl_ok(&[
            "get",
            "cm",
            "fromfile",
            "-n",
            "team",
            "-o",
            "jsonpath={.data.greeting\\.txt}"
        ]),
        "hello\n"
    );
    let encoded = kcp.kubectl_ok(&[
        "get",
        "secret",
        "blob",
        "-n",
        "team",
        "-o",
        "jsonpath={.data.blob}",
    ]);
    use base64::Engine;
    assert_eq!(
        base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .unwrap(),
        binary,
        "binary data survives"
    );
    let rules = kcp.kubectl_ok(&[
        "get",
        "role",
        "reader",
        "-n",
        "team",
        "-o",
        "jsonpath={.rules[0].verbs}",
    ]);
    assert_eq!(rules, r#"["get","list"]"#);
    let subject = kcp.kubectl_ok(&[
        "get",
        "rolebinding",
        "reader",
        "-n",
        "team",
        "-o",
        "jsonpath={.subjects[0].name}/{.roleRef.name}",
    ]);
    assert_eq!(subject, "alice/reader");
    assert_eq!(
        without_namespace_defaults(&kcp.kubectl_ok(&["get", "sa", "-n", "team", "-o", "name"])),
        "serviceaccount/robot"
    );
    assert!(
        kcp.kubectl_ok(&["get", "clusterroles", "-o", "name"])
            .contains("clusterrole.rbac.authorization.k8s.io/lister")
    );

    // describe looks up events with involvedObject field selectors.
    let described = kcp.kubectl_ok(&["describe", "configmap", "literal", "-n", "team"]);
    assert!(
        described.contains("Name:") && described.contains("literal"),
        "{described}"
    );
}

/// A CertificateSigningRequest of a fresh key for `name`, as YAML.
fn csr_yaml(name: &str) -> String {
    use base64::Engine;
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    format!(
        "apiVersion: certificates.k8s.io/v1\nkind: CertificateSigningRequest\nmetadata:\n  name: {name}\nspec:\n  request: {}\n  signerName: example.com/signer\n  usages: [client auth]\n",
        base64::engine::general_purpose::STANDARD.encode(pem)
    )
}

#[test]
fn certificate_signing_requests_are_approved_through_their_approval_subresource() {
    let kcp = Kcp::shared("resources-csr-approval");
    let dir = tempfile::tempdir().unwrap();
    let home = kcp.home().to_string();
    let file = super::support::write_file(dir.path(), "csr.yaml", &csr_yaml("alpha"));
    kcp.kubectl_in_ok(&home, &["create", "-f", &file]);
    let csrs = format!("/clusters/{home}/apis/certificates.k8s.io/v1/certificatesigningrequests");
    let approval = &format!("{csrs}/alpha/approval");
    let status = &format!("{csrs}/alpha/status");
    let with_conditions = |conditions: serde_json::Value| {
        let mut csr = kcp_testing::output::json(
            &kcp.kubectl_in_ok(&home, &["get", "csr", "alpha", "-o", "json"]),
        );
        csr["status"] = serde_json::json!({"conditions": conditions});
        csr["spec"]["signerName"] = serde_json::json!("example.com/changed");
        super::support::write_file(dir.path(), "next.json", &csr.to_string())
    };
    let approved = serde_json::json!([{"type": "Approved", "status": "True", "reason": "Test", "message": "ok"}]);
    // Not through status: approval is a separate concern.
    let refused = kcp.kubectl_in_err(
        &home,
        &[
            "replace",
            "--raw",
            status,
            "-f",
            &with_conditions(approved.clone()),
        ],
    );
    assert!(
        refused.contains(
            r#"status.conditions: Forbidden: updates may not add a condition of type "Approved""#
        ),
        "{refused}"
    );
    // Through approval: only the conditions change, stamped with their times.
    kcp.kubectl_in_ok(
        &home,
        &[
            "replace",
            "--raw",
            approval,
            "-f",
            &with_conditions(approved),
        ],
    );
    let csr = kcp_testing::output::json(
        &kcp.kubectl_in_ok(&home, &["get", "csr", "alpha", "-o", "json"]),
    );
    assert_eq!(csr["spec"]["signerName"], "example.com/signer");
    let condition = &csr["status"]["conditions"][0];
    assert_eq!(condition["type"], "Approved");
    assert!(condition["lastUpdateTime"].is_string());
    assert!(condition["lastTransitionTime"].is_string());
    let table = kcp.kubectl_in_ok(&home, &["get", "csr", "alpha"]);
    assert!(table.contains("Approved"), "{table}");
    // Approved and Denied exclude each other, and an approval is never taken back.
    let both = kcp.kubectl_in_err(
        &home,
        &[
            "replace",
            "--raw",
            approval,
            "-f",
            &with_conditions(serde_json::json!([
                {"type": "Approved", "status": "True"},
                {"type": "Denied", "status": "True"},
            ])),
        ],
    );
    assert!(
        both.contains(r#"status.conditions[1].type: Invalid value: "Denied": Approved and Denied conditions are mutually exclusive"#),
        "{both}"
    );
    let removed = kcp.kubectl_in_err(
        &home,
        &[
            "replace",
            "--raw",
            approval,
            "-f",
            &with_conditions(serde_json::json!([])),
        ],
    );
    assert!(
        removed.contains(r#"updates may not remove a condition of type "Approved""#),
        "{removed}"
    );
}

#[test]
fn typed_kubectl_commands_send_protobuf_the_server_reads() {
    let kcp = Kcp::shared("resources-protobuf-commands");
    let dir = tempfile::tempdir().unwrap();
    let home = kcp.home().to_string();
    // kubectl create quota: a ResourceQuota in protobuf.
    kcp.kubectl_in_ok(
        &home,
        &[
            "create",
            "quota",
            "q",
            "-n",
            "default",
            "--hard=cpu=1,pods=2",
            "--scopes=NotBestEffort",
        ],
    );
    let hard = kcp.kubectl_in_ok(
        &home,
        &[
            "get",
            "quota",
            "q",
            "-n",
            "default",
            "-o",
            "jsonpath={.spec.hard.pods}/{.spec.scopes[0]}",
        ],
    );
    assert_eq!(hard, "2/NotBestEffort");
    // kubectl create clusterrole --aggregation-rule: an aggregated ClusterRole in protobuf.
    kcp.kubectl_in_ok(
        &home,
        &[
            "create",
            "clusterrole",
            "monitoring",
            "--aggregation-rule=example.com/aggregate-to-monitoring=true",
        ],
    );
    let selector = kcp.kubectl_in_ok(
        &home,
        &[
            "get",
            "clusterrole",
            "monitoring",
            "-o",
            "jsonpath={.aggregationRule.clusterRoleSelectors[0].matchLabels}",
        ],
    );
    assert_eq!(
        kcp_testing::output::json(&selector),
        serde_json::json!({"example.com/aggregate-to-monitoring": "true"})
    );
    // kubectl certificate approve and deny: CertificateSigningRequests in protobuf, through
    // the approval subresource.
    for name in ["beta", "gamma"] {
        let file = super::support::write_file(dir.path(), &format!("{name}.yaml"), &csr_yaml(name));
        kcp.kubectl_in_ok(&home, &["create", "-f", &file]);
    }
    kcp.kubectl_in_ok(&home, &["certificate", "approve", "beta"]);
    kcp.kubectl_in_ok(&home, &["certificate", "deny", "gamma"]);
    let conditions = |name: &str| {
        kcp.kubectl_in_ok(
            &home,
            &[
                "get",
                "csr",
                name,
                "-o",
                "jsonpath={.status.conditions[*].type}",
            ],
        )
    };
    assert_eq!(conditions("beta"), "Approved");
    assert_eq!(conditions("gamma"), "Denied");
}

/// A protobuf request body as client-go sends one: `k8s\0` and a `runtime.Unknown` envelope.
fn protobuf_body(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
    use prost::Message;
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(raw),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    let mut body = b"k8s\0".to_vec();
    body.extend(unknown.encode_to_vec());
    body
}

#[tokio::test]
async fn kinds_no_kubectl_command_sends_are_created_from_protobuf_bodies() {
    use k8s_pb::api::coordination::v1 as coordination;
    use k8s_pb::api::flowcontrol::v1 as flowcontrol;
    use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
    use prost::Message;

    let kcp = tokio::task::spawn_blocking(|| Kcp::shared("protobuf-generic"))
        .await
        .unwrap();
    let client = kcp.kube_client().await;
    let create = |path: &'static str, body: Vec<u8>| {
        let client = client.clone();
        async move {
            let request = http::Request::post(path)
                .header("Content-Type", "application/vnd.kubernetes.protobuf")
                .header("Accept", "application/json")
                .body(kube::client::Body::from(body))
                .unwrap();
            let response = client.send(request).await.unwrap();
            let code = response.status().as_u16();
            let body = http_body_util::BodyExt::collect(response.into_body())
                .await
                .unwrap()
                .to_bytes();
            (
                code,
                serde_json::from_slice::<serde_json::Value>(&body).unwrap(),
            )
        }
    };
    let lease = coordination::Lease {
        metadata: Some(meta::ObjectMeta {
            name: Some("leader".into()),
            ..Default::default()
        }),
        spec: Some(coordination::LeaseSpec {
            holder_identity: Some("me".into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(meta::MicroTime {
                seconds: Some(1_700_000_000),
                nanos: Some(5_000),
            }),
            ..Default::default()
        }),
    };
    let (code, answer) = create(
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        protobuf_body("coordination.k8s.io/v1", "Lease", lease.encode_to_vec()),
    )
    .await;
    assert_eq!(code, 201, "{answer}");
    assert_eq!(answer["spec"]["holderIdentity"], "me");
    assert_eq!(answer["spec"]["renewTime"], "2023-11-14T22:13:20.000005Z");

    let schema = flowcontrol::FlowSchema {
        metadata: Some(meta::ObjectMeta {
            name: Some("from-protobuf".into()),
            ..Default::default()
        }),
        spec: Some(flowcontrol::FlowSchemaSpec {
            priority_level_configuration: Some(flowcontrol::PriorityLevelConfigurationReference {
                name: Some("global-default".into()),
            }),
            matching_precedence: Some(500),
            rules: vec![flowcontrol::PolicyRulesWithSubjects {
                subjects: vec![flowcontrol::Subject {
                    kind: Some("Group".into()),
                    group: Some(flowcontrol::GroupSubject {
                        name: Some("system:authenticated".into()),
                    }),
                    ..Default::default()
                }],
                non_resource_rules: vec![flowcontrol::NonResourcePolicyRule {
                    verbs: vec!["get".into()],
                    non_resource_ur_ls: vec!["/healthz".into()],
                }],
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: None,
    };
    let (code, answer) = create(
        "/apis/flowcontrol.apiserver.k8s.io/v1/flowschemas",
        protobuf_body(
            "flowcontrol.apiserver.k8s.io/v1",
            "FlowSchema",
            schema.encode_to_vec(),
        ),
    )
    .await;
    assert_eq!(code, 201, "{answer}");
    assert_eq!(
        answer["spec"]["rules"][0]["nonResourceRules"],
        serde_json::json!([{"verbs": ["get"], "nonResourceURLs": ["/healthz"]}])
    );
    // Broken bytes of such a kind are a 400, not a 415 or a 500.
    let (code, answer) = create(
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        protobuf_body("coordination.k8s.io/v1", "Lease", vec![0x0a, 0x7f]),
    )
    .await;
    assert_eq!(code, 400, "{answer}");
}
