//! CEL validation rules of custom resources with kubectl: `message`, `messageExpression`,
//! `reason`, `fieldPath` and a transition rule with `oldSelf`, reported as kube-apiserver
//! reports them; and a rule that does not compile refused when the CRD is created.

use super::support::{Kcp, write_file};

const CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: pools.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: pools, singular: pool, kind: Pool}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - rule: "self.min <= self.max"
              message: "min must not exceed max"
            - rule: "self.replicas < 10"
              messageExpression: "'replicas ' + string(self.replicas) + ' is too many'"
              reason: FieldValueForbidden
              fieldPath: .replicas
            properties:
              min: {type: integer}
              max: {type: integer}
              replicas: {type: integer}
              mode:
                type: string
                x-kubernetes-validations:
                - rule: "self == oldSelf"
                  message: "mode is immutable"
"#;

fn pool(min: i64, max: i64, replicas: i64, mode: &str) -> String {
    format!(
        "apiVersion: example.com/v1\nkind: Pool\nmetadata:\n  name: p\n  namespace: default\nspec:\n  min: {min}\n  max: {max}\n  replicas: {replicas}\n  mode: {mode}\n"
    )
}

#[test]
fn cel_rules_validate_custom_resources() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::start(&dir.path().join("root"), &[]);
    let cluster = &kcp.workspace("crd-cel");
    let crd = write_file(dir.path(), "crd.yaml", CRD);
    kcp.kubectl_in_ok(cluster, &["apply", "-f", &crd]);
    kcp.wait_established(cluster, "pools.example.com");

    let bad = write_file(dir.path(), "bad.yaml", &pool(5, 1, 12, "fast"));
    let output = kcp.kubectl_in(cluster, &["create", "-f", &bad]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.trim(),
        "The Pool \"p\" is invalid: \n* spec: Invalid value: \"object\": min must not exceed max\n* spec.replicas: Forbidden: replicas 12 is too many",
        "{stderr}"
    );

    // A transition rule holds on updates only.
    let good = write_file(dir.path(), "good.yaml", &pool(1, 5, 3, "fast"));
    kcp.kubectl_in_ok(cluster, &["create", "-f", &good]);
    let changed = write_file(dir.path(), "changed.yaml", &pool(1, 5, 3, "slow"));
    let output = kcp.kubectl_in(cluster, &["replace", "-f", &changed]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(
        stderr.trim(),
        "The Pool \"p\" is invalid: spec.mode: Invalid value: \"string\": mode is immutable",
        "{stderr}"
    );
    let same = write_file(dir.path(), "same.yaml", &pool(2, 5, 4, "fast"));
    kcp.kubectl_in_ok(cluster, &["replace", "-f", &same]);

    // A rule that does not compile keeps the CRD out.
    let broken = CRD
        .replace("pools.example.com", "tanks.example.com")
        .replace(
            "plural: pools, singular: pool, kind: Pool",
            "plural: tanks, singular: tank, kind: Tank",
        )
        .replace("self.min <= self.max", "self.min <=");
    let broken = write_file(dir.path(), "broken.yaml", &broken);
    let output = kcp.kubectl_in(cluster, &["create", "-f", &broken]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value:")
            && stderr.contains("compilation failed"),
        "{stderr}"
    );
}
