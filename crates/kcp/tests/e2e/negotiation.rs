//! Content negotiation against the real binary: kubectl's Table columns, aggregated discovery,
//! YAML in and out, PartialObjectMetadata, 406 and gzip, driven by kubectl and by curl.

use std::process::{Command, Output};

use super::support::{Kcp, is_namespace_default, without_namespace_defaults, write_file};

/// The URL of the test's home logical cluster (context `root` of its kubeconfig).
fn root_url(kcp: &Kcp) -> String {
    kcp.kubectl_ok(&[
        "config",
        "view",
        "-o",
        "jsonpath={.clusters[?(@.name==\"root\")].cluster.server}",
    ])
}

/// curl against the home logical cluster + `path` over verified TLS with the admin token; `-i` includes headers.
fn curl(kcp: &Kcp, path: &str, args: &[&str]) -> Output {
    let token = kcp_testing::kubeconfig::admin_token(&kcp.root, "kcp-admin");
    Command::new("curl")
        .args(["-sS", "-i", "--cacert"])
        .arg(kcp.root.join("ca.crt"))
        .arg("-H")
        .arg(format!("Authorization: Bearer {}", token.trim()))
        .args(args)
        .arg(format!("{}{path}", root_url(kcp)))
        .output()
        .expect("run curl")
}

/// Status line and headers (lower-cased names), and the body, of a `curl -i` output.
fn split_response(output: &Output) -> (String, Vec<u8>) {
    let bytes = &output.stdout;
    let end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no headers in {}", String::from_utf8_lossy(bytes)));
    let head = String::from_utf8_lossy(&bytes[..end]).to_lowercase();
    (head, bytes[end + 4..].to_vec())
}

#[test]
fn kubectl_get_prints_each_kinds_columns() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("neg-columns");
    kcp.kubectl_ok(&["create", "namespace", "cols"]);
    kcp.kubectl_ok(&[
        "create",
        "configmap",
        "cm1",
        "-n",
        "cols",
        "--from-literal=a=1",
        "--from-literal=b=2",
    ]);
    kcp.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "s1",
        "-n",
        "cols",
        "--from-literal=k=v",
    ]);
    kcp.kubectl_ok(&["create", "serviceaccount", "sa1", "-n", "cols"]);
    kcp.kubectl_ok(&[
        "create",
        "rolebinding",
        "rb1",
        "-n",
        "cols",
        "--clusterrole=view",
        "--user=alice",
        "--group=devs",
        "--serviceaccount=cols:sa1",
    ]);

    let out = kcp.kubectl_ok(&["get", "cm,secrets,sa,ns", "-n", "cols"]);
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(
        lines.contains(&vec!["NAME", "DATA", "AGE"]),
        "configmap header: {out}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with(&["configmap/cm1", "2"])),
        "{out}"
    );
    assert!(
        lines.contains(&vec!["NAME", "TYPE", "DATA", "AGE"]),
        "{out}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&["secret/s1", "Opaque", "1"])),
        "{out}"
    );
    assert!(lines.contains(&vec!["NAME", "SECRETS", "AGE"]), "{out}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&["serviceaccount/sa1", "0"])),
        "{out}"
    );

    assert!(lines.contains(&vec!["NAME", "STATUS", "AGE"]), "{out}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with(&["namespace/cols", "Active"])),
        "{out}"
    );

    let event = write_file(
        dir.path(),
        "event.yaml",
        "apiVersion: v1\nkind: Event\nmetadata:\n  name: ev1\n  namespace: cols\ninvolvedObject:\n  kind: ConfigMap\n  name: cm1\n  namespace: cols\nreason: Tested\nmessage: all good\ntype: Normal\nsource:\n  component: e2e\nfirstTimestamp: \"2024-01-01T00:00:00Z\"\nlastTimestamp: \"2024-01-01T00:00:00Z\"\ncount: 3\n",
    );
    kcp.kubectl_ok(&["create", "-f", &event, "--validate=false"]);
    let out = kcp.kubectl_ok(&["get", "events", "-n", "cols"]);
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
        "{out}"
    );
    assert!(
        out.contains("configmap/cm1") && out.contains("all good"),
        "{out}"
    );
    let wide = kcp.kubectl_ok(&["get", "events", "-n", "cols", "-o", "wide"]);
    let header = wide.lines().next().unwrap();
    for column in ["SUBOBJECT", "SOURCE", "FIRST SEEN", "COUNT", "NAME"] {
        assert!(header.contains(column), "{column} missing: {wide}");
    }
    assert!(wide.contains("e2e") && wide.contains("ev1"), "{wide}");

    let out = kcp.kubectl_ok(&["get", "ns", "cols"]);
    assert!(out.starts_with("NAME"), "{out}");
    assert!(out.lines().next().unwrap().contains("STATUS"), "{out}");
    assert!(out.contains("Active"), "{out}");

    let out = kcp.kubectl_ok(&["get", "rolebindings", "-n", "cols"]);
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "ROLE", "AGE"], "{out}");
    assert!(out.contains("ClusterRole/view"), "{out}");
    let wide = kcp.kubectl_ok(&["get", "rolebindings", "-n", "cols", "-o", "wide"]);
    let header: Vec<&str> = wide.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"],
        "{wide}"
    );
    assert!(wide.contains("alice") && wide.contains("devs") && wide.contains("cols/sa1"));

    kcp.kubectl_ok(&[
        "create",
        "clusterrole",
        "reader",
        "--verb=get",
        "--resource=configmaps",
    ]);
    let out = kcp.kubectl_ok(&["get", "clusterroles"]);
    assert!(out.starts_with("NAME"), "{out}");
    let header: Vec<&str> = out.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "CREATED", "AT"], "{out}");

    // -A adds NAMESPACE from the rows' PartialObjectMetadata.
    let out = kcp.kubectl_ok(&["get", "cm", "-A"]);
    assert!(
        out.lines().any(|l| l
            .split_whitespace()
            .collect::<Vec<_>>()
            .starts_with(&["cols", "cm1", "2"])),
        "{out}"
    );
}

#[test]
fn kubectl_uses_aggregated_discovery() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("neg-discovery");
    let cache = dir.path().join("kube-cache");
    let cache = cache.to_str().unwrap();
    let output = kcp.kubectl(&["api-resources", "--cache-dir", cache, "-v=6"]);
    assert!(output.status.success());
    let stdout = String::from_utf8_lossy(&output.stdout);
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(
        stdout.contains("configmaps") && stdout.contains("cm"),
        "{stdout}"
    );
    assert!(stdout.contains("customresourcedefinitions"), "{stdout}");
    // Aggregated discovery needs only /api and /apis: no per-group-version documents.
    assert!(log.contains("/api?timeout"), "{log}");
    assert!(log.contains("/apis?timeout"), "{log}");
    assert!(
        !log.contains("/api/v1?timeout"),
        "legacy fallback used: {log}"
    );
    assert!(
        !log.contains("/apis/rbac.authorization.k8s.io/v1"),
        "legacy fallback used: {log}"
    );

    let (head, body) = split_response(&curl(
        &kcp,
        "/apis",
        &[
            "-H",
            "Accept: application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json",
        ],
    ));
    assert!(
        head.contains(
            "content-type: application/json;g=apidiscovery.k8s.io;v=v2;as=apigroupdiscoverylist"
        ),
        "{head}"
    );
    let list: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(list["kind"], "APIGroupDiscoveryList");
    // Without the aggregated Accept, the legacy document.
    let legacy = kcp.kubectl_ok(&["get", "--raw", "/api"]);
    assert!(legacy.contains("APIVersions"), "{legacy}");
}

#[test]
fn yaml_round_trip_and_metadata_and_406_over_raw_http() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("neg-yaml");
    kcp.kubectl_ok(&["create", "namespace", "yml"]);
    let body = write_file(
        dir.path(),
        "cm.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: y1\n  labels:\n    app: web\ndata:\n  port: \"8080\"\n  text: |\n    two\n    lines\n",
    );
    let created = curl(
        &kcp,
        "/api/v1/namespaces/yml/configmaps",
        &[
            "-X",
            "POST",
            "-H",
            "Content-Type: application/yaml",
            "-H",
            "Accept: application/yaml",
            "--data-binary",
            &format!("@{body}"),
        ],
    );
    let (head, body) = split_response(&created);
    assert!(
        head.starts_with("http/2 201") || head.contains(" 201"),
        "{head}"
    );
    assert!(head.contains("content-type: application/yaml"), "{head}");
    let text = String::from_utf8(body).unwrap();
    assert!(text.contains("kind: ConfigMap"), "{text}");
    assert!(!text.trim_start().starts_with('{'), "{text}");

    // Read back as YAML and as JSON: the same data.
    let (_, yaml) = split_response(&curl(
        &kcp,
        "/api/v1/namespaces/yml/configmaps/y1",
        &["-H", "Accept: application/yaml"],
    ));
    let yaml = String::from_utf8(yaml).unwrap();
    assert!(yaml.contains("name: y1"), "{yaml}");
    let json: serde_json::Value =
        serde_json::from_str(&kcp.kubectl_ok(&["get", "cm", "y1", "-n", "yml", "-o", "json"]))
            .unwrap();
    assert_eq!(json["data"]["port"], "8080");
    assert_eq!(json["data"]["text"], "two\nlines\n");
    assert_eq!(json["metadata"]["labels"]["app"], "web");

    // Errors come back as a YAML Status too.
    let (head, body) = split_response(&curl(
        &kcp,
        "/api/v1/namespaces/yml/configmaps/missing",
        &["-H", "Accept: application/yaml"],
    ));
    assert!(head.contains(" 404"), "{head}");
    let body = String::from_utf8(body).unwrap();
    assert!(
        body.contains("kind: Status") && body.contains("reason: NotFound"),
        "{body}"
    );

    // Malformed YAML is a 400 Status.
    let (head, body) = split_response(&curl(
        &kcp,
        "/api/v1/namespaces/yml/configmaps",
        &[
            "-X",
            "POST",
            "-H",
            "Content-Type: application/yaml",
            "--data-binary",
            "metadata: [name: x\n",
        ],
    ));
    assert!(head.contains(" 400"), "{head}");
    let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status["reason"], "BadRequest");

    // PartialObjectMetadata and its list.
    let (_, body) = split_response(&curl(
        &kcp,
        "/api/v1/namespaces/yml/configmaps/y1",
        &[
            "-H",
            "Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        ],
    ));
    let partial: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(partial["kind"], "PartialObjectMetadata");
    assert_eq!(partial["metadata"]["name"], "y1");
    assert!(partial.get("data").is_none());
    let (_, body) = split_response(&curl(
        &kcp,
        "/api/v1/namespaces/yml/configmaps",
        &[
            "-H",
            "Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        ],
    ));
    let list: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(list["kind"], "PartialObjectMetadataList");
    assert_eq!(list["items"][0]["kind"], "PartialObjectMetadata");

    // A watch of PartialObjectMetadata.
    let (_, body) = split_response(&curl(
        &kcp,
        "/api/v1/namespaces/yml/configmaps?watch=true&timeoutSeconds=1",
        &[
            "-H",
            "Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        ],
    ));
    let first: serde_json::Value = body
        .split(|b| *b == b'\n')
        .filter(|line| !line.is_empty())
        .map(|line| serde_json::from_slice::<serde_json::Value>(line).unwrap())
        .find(|event| {
            !is_namespace_default(event["object"]["metadata"]["name"].as_str().unwrap_or(""))
        })
        .unwrap();
    assert_eq!(first["type"], "ADDED");
    assert_eq!(first["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(first["object"]["metadata"]["name"], "y1");

    // Nothing acceptable: 406.
    let (head, body) = split_response(&curl(
        &kcp,
        "/api/v1/namespaces/yml/configmaps",
        &[
            "-H",
            "Accept: application/json;as=Widget;g=meta.k8s.io;v=v1",
        ],
    ));
    assert!(head.contains(" 406"), "{head}");
    let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status["reason"], "NotAcceptable");
    assert_eq!(
        status["message"],
        "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"
    );
}

#[test]
fn large_lists_are_gzipped_for_clients_that_ask() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("neg-gzip");
    kcp.kubectl_ok(&["create", "namespace", "big"]);
    let filler = "x".repeat(2048);
    let items: Vec<serde_json::Value> = (0..100)
        .map(|i| {
            serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": format!("cm-{i}"), "namespace": "big"},
                "data": {"filler": filler}})
        })
        .collect();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    let file = write_file(dir.path(), "big.json", &list.to_string());
    kcp.kubectl_ok(&["create", "-f", &file, "--validate=false"]);

    let path = "/api/v1/namespaces/big/configmaps";
    let (head, body) = split_response(&curl(&kcp, path, &["-H", "Accept-Encoding: gzip"]));
    assert!(head.contains("content-encoding: gzip"), "{head}");
    assert!(
        body.len() < 100 * 1024,
        "compressed to {} bytes",
        body.len()
    );
    let (head, body) = split_response(&curl(&kcp, path, &["--compressed"]));
    assert!(head.contains("content-encoding: gzip"), "{head}");
    let decoded: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let ours = decoded["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| !is_namespace_default(item["metadata"]["name"].as_str().unwrap()))
        .count();
    assert_eq!(ours, 100);
    // Without Accept-Encoding: plain.
    let (head, _) = split_response(&curl(&kcp, path, &[]));
    assert!(!head.contains("content-encoding"), "{head}");
    // kubectl (Go's transport asks for gzip) still reads it.
    let names =
        without_namespace_defaults(&kcp.kubectl_ok(&["get", "cm", "-n", "big", "-o", "name"]));
    assert_eq!(names.lines().count(), 100);
}

#[tokio::test]
async fn kube_rs_aggregated_discovery_resolves_built_in_kinds() {
    use kube::discovery::{Discovery, Scope};

    let kcp = tokio::task::spawn_blocking(|| Kcp::shared("neg-kube-rs"))
        .await
        .unwrap();
    let client = kcp.kube_client().await;
    let discovery = Discovery::new(client).run_aggregated().await.unwrap();

    let namespace = kube::api::GroupVersionKind::gvk("", "v1", "Namespace");
    let (resource, capabilities) = discovery.resolve_gvk(&namespace).unwrap();
    assert_eq!(resource.plural, "namespaces");
    assert_eq!(capabilities.scope, Scope::Cluster);
    assert!(
        capabilities
            .subresources
            .iter()
            .any(|(sub, _)| sub.plural == "status"),
        "{:?}",
        capabilities.subresources
    );
    let binding =
        kube::api::GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", "RoleBinding");
    let (_, capabilities) = discovery.resolve_gvk(&binding).unwrap();
    assert_eq!(capabilities.scope, Scope::Namespaced);
    assert!(capabilities.supports_operation("watch"));
}

#[test]
fn an_oversized_body_is_answered_413_over_http2_and_http1() {
    let kcp = Kcp::shared("negotiation-oversized");
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("big.json");
    std::fs::write(&body, vec![b'a'; 4_500_000]).unwrap();
    let data = format!("@{}", body.display());
    for protocol in ["--http2", "--http1.1"] {
        let output = curl(
            &kcp,
            "/api/v1/namespaces/default/configmaps",
            &[
                protocol,
                "-X",
                "POST",
                "-H",
                "Content-Type: application/json",
                // No `100 Continue` before the answer.
                "-H",
                "Expect:",
                "--data-binary",
                &data,
            ],
        );
        let (head, answer) = split_response(&output);
        assert!(head.contains(" 413"), "{protocol}: {head}");
        let status: serde_json::Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(status["reason"], "RequestEntityTooLarge", "{protocol}");
    }
}
