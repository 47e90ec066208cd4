//! Custom resource schemas end to end: a cluster-scoped CRD using every structural-schema
//! feature, objects refused with all their problems at once (Kubernetes' paths and messages),
//! and a valid object pruned (except where unknown fields are preserved) and kept as sent.

use kcp_testing::crd::Crd;

use super::support::{Kcp, write_file};

fn shapes_crd() -> String {
    Crd::cluster_scoped("shapes", "Shape")
        .singular("shape")
        .storage_version(
            "v1",
            r#"
            type: object
            properties:
              spec:
                type: object
                required: [name]
                properties:
                  name: {type: string, minLength: 2, maxLength: 8, pattern: '^[a-z]+$'}
                  ratio: {type: number, minimum: 0, maximum: 1, exclusiveMaximum: true}
                  port: {x-kubernetes-int-or-string: true}
                  tags: {type: array, maxItems: 3, items: {type: string}, x-kubernetes-list-type: set}
                  ports:
                    type: array
                    x-kubernetes-list-type: map
                    x-kubernetes-list-map-keys: [name]
                    items: {type: object, required: [name], properties: {name: {type: string}, port: {type: integer}}}
                  labels: {type: object, additionalProperties: {type: string}, maxProperties: 2}
                  nickname: {type: string, nullable: true}
                  when: {type: string, format: date-time}
                  template: {type: object, x-kubernetes-embedded-resource: true, x-kubernetes-preserve-unknown-fields: true}
                  free: {type: object, x-kubernetes-preserve-unknown-fields: true}
                  selector: {type: object, x-kubernetes-map-type: atomic, additionalProperties: {type: string}}
            "#,
        )
        .yaml()
}

const BAD: &str = r#"apiVersion: example.com/v1
kind: Shape
metadata: {name: bad}
spec:
  name: "A"
  ratio: 1
  port: true
  tags: [a, b, a, c]
  ports: [{name: x, port: 1}, {name: x, port: 2}]
  labels: {a: "1", b: "2", c: "3"}
  nickname: null
  when: yesterday
  template: {spec: {}}
"#;

const GOOD: &str = r#"apiVersion: example.com/v1
kind: Shape
metadata: {name: good}
spec:
  name: ok
  ratio: 0.5
  port: http
  tags: [a, b]
  ports: [{name: x, port: 1}, {name: z, port: 2}]
  nickname: null
  when: "2026-01-02T03:04:05Z"
  template: {apiVersion: v1, kind: ConfigMap, metadata: {name: t}, data: {k: v}}
  free: {anything: {goes: [1, 2]}}
  selector: {app: web}
  unknown: dropped
"#;

#[test]
fn schemas_validate_prune_and_preserve_as_kubernetes_does() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("crd-schemas");
    let cluster = &kcp.home().to_string();
    let crd = write_file(dir.path(), "shapes.yaml", &shapes_crd());
    kcp.kubectl_in_ok(cluster, &["apply", "-f", &crd]);
    kcp.wait_established(cluster, "shapes.example.com");

    let bad = write_file(dir.path(), "bad.yaml", BAD);
    let output = kcp.kubectl_in(cluster, &["create", "-f", &bad]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let expected = [
        "The Shape \"bad\" is invalid: ",
        "* spec.labels: Too many: 3: must have at most 2 items",
        "* spec.name: Invalid value: \"A\": spec.name in body should be at least 2 chars long",
        "* spec.name: Invalid value: \"A\": spec.name in body should match '^[a-z]+$'",
        "* spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
        "* spec.ports[1]: Duplicate value: {\"name\":\"x\"}",
        "* spec.ratio: Invalid value: 1: spec.ratio in body should be less than 1",
        "* spec.tags: Too many: 4: must have at most 3 items",
        "* spec.tags[2]: Duplicate value: \"a\"",
        "* spec.template.apiVersion: Required value: must not be empty",
        "* spec.template.kind: Required value: must not be empty",
        "* spec.when: Invalid value: \"yesterday\": spec.when in body must be of type date-time: \"yesterday\"",
    ];
    assert_eq!(stderr.trim(), expected.join("\n"), "{stderr}");

    // Cluster-scoped: no namespace; unknown fields dropped with a warning, except where the
    // schema preserves them (and inside embedded resources that do).
    let good = write_file(dir.path(), "good.yaml", GOOD);
    let output = kcp.kubectl_in(cluster, &["create", "-f", &good, "--validate=warn"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("unknown field \"spec.unknown\""),
        "{stderr}"
    );
    let spec = kcp.kubectl_in_ok(cluster, &["get", "shape", "good", "-o", "jsonpath={.spec}"]);
    let spec: serde_json::Value = serde_json::from_str(&spec).unwrap();
    assert_eq!(
        spec,
        serde_json::json!({
            "name": "ok", "ratio": 0.5, "port": "http", "tags": ["a", "b"],
            "ports": [{"name": "x", "port": 1}, {"name": "z", "port": 2}],
            "nickname": null, "when": "2026-01-02T03:04:05Z",
            "template": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "t"}, "data": {"k": "v"}},
            "free": {"anything": {"goes": [1, 2]}},
            "selector": {"app": "web"},
        })
    );
    let names = kcp.kubectl_in_ok(cluster, &["get", "shapes", "-o", "name"]);
    assert_eq!(names.trim(), "shape.example.com/good");
    let stderr = String::from_utf8_lossy(
        &kcp.kubectl_in(
            cluster,
            &["get", "shapes", "-n", "default", "good", "-o", "name"],
        )
        .stdout,
    )
    .to_string();
    assert_eq!(
        stderr.trim(),
        "shape.example.com/good",
        "a namespace is ignored for cluster-scoped kinds"
    );
}
