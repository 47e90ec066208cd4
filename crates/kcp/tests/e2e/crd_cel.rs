//! CEL validation rules of custom resources with kubectl: `message`, `messageExpression`,
//! `reason`, `fieldPath` and a transition rule with `oldSelf`, reported as kube-apiserver
//! reports them; a rule that does not compile refused when the CRD is created; a rule whose
//! estimated cost is over Kubernetes' limits refused likewise; and expensive rules evaluated
//! without holding up the server.

use std::time::{Duration, Instant};

use kcp_testing::crd::Crd;

use super::support::{Kcp, write_file};

/// `pools.example.com`: CEL rules with `message`, `messageExpression`, `reason` and `fieldPath`,
/// and a transition rule.
fn pools_crd() -> String {
    Crd::namespaced("pools", "Pool")
        .singular("pool")
        .storage_version(
            "v1",
            r#"
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
            "#,
        )
        .yaml()
}

fn pool(min: i64, max: i64, replicas: i64, mode: &str) -> String {
    format!(
        "apiVersion: example.com/v1\nkind: Pool\nmetadata:\n  name: p\n  namespace: default\nspec:\n  min: {min}\n  max: {max}\n  replicas: {replicas}\n  mode: {mode}\n"
    )
}

#[test]
fn cel_rules_validate_custom_resources() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("crd-cel");
    let cluster = &kcp.home().to_string();
    let crd = write_file(dir.path(), "crd.yaml", &pools_crd());
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
    let broken = pools_crd()
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

/// The rule of the issue: a loop in a loop over a list nothing bounds.
pub(crate) fn costly_crd() -> String {
    Crd::namespaced("bombs", "Bomb")
        .singular("bomb")
        .storage_version(
            "v1",
            r#"
            type: object
            properties:
              spec:
                type: object
                x-kubernetes-validations:
                - rule: "self.items.all(x, self.items.all(y, x == y || x != y))"
                properties:
                  items:
                    type: array
                    items: {type: string}
            "#,
        )
        .yaml()
}

#[test]
fn rules_over_the_estimated_cost_limits_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("crd-cel-cost");
    let cluster = &kcp.home().to_string();
    let crd = write_file(dir.path(), "crd.yaml", &costly_crd());
    let stderr = kcp.kubectl_in_err(cluster, &["apply", "-f", &crd]);
    let rule =
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule";
    let hint = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";
    assert_eq!(
        stderr,
        format!(
            "The CustomResourceDefinition \"bombs.example.com\" is invalid: \n\
             * {rule}: Forbidden: estimated rule cost exceeds budget by factor of more than 100x {hint}\n\
             * {rule}: Forbidden: contributed to estimated rule & messageExpression cost total exceeding cost limit for entire OpenAPIv3 schema\n\
             * spec.versions[0].schema.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule & messageExpression cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x {hint}"
        )
    );
    // Bounded, the same rule is accepted.
    let bounded = costly_crd().replace(
        "                type: array\n                items: {type: string}",
        "                type: array\n                maxItems: 100\n                items: {type: string, maxLength: 16}",
    );
    let bounded = write_file(dir.path(), "bounded.yaml", &bounded);
    kcp.kubectl_in_ok(cluster, &["apply", "-f", &bounded]);
}

/// [`costly_crd`] with twelve rules, each a loop in a loop: within the estimate thanks to the
/// bounds (`maxItems: 300`), and together close to the runtime budget on a full list.
pub(crate) fn expensive_crd() -> String {
    let rules: String = (0..12)
        .map(|i| format!("            - rule: \"self.items.all(x, self.items.all(y, x == y || x != y || {i} < 0))\"\n"))
        .collect();
    costly_crd()
        .replace(
            "            - rule: \"self.items.all(x, self.items.all(y, x == y || x != y))\"\n",
            &rules,
        )
        .replace(
            "                type: array\n                items: {type: string}",
            "                type: array\n                maxItems: 300\n                items: {type: string, maxLength: 8}",
        )
}

#[test]
fn expensive_rules_do_not_hold_up_other_requests() {
    let crd = expensive_crd();
    let dir = tempfile::tempdir().unwrap();
    // A server of its own: what is measured is the process's responsiveness.
    let kcp = Kcp::start(&dir.path().join("root"), &[]);
    let cluster = "root";
    let crd = write_file(dir.path(), "crd.yaml", &crd);
    kcp.kubectl_in_ok(cluster, &["apply", "-f", &crd]);
    kcp.wait_established(cluster, "bombs.example.com");

    let items: Vec<String> = (0..200).map(|i| format!("i{i:03}")).collect();
    // Twice as many writes at once as the server has worker threads, and then some.
    let writers = 2 * std::thread::available_parallelism().map_or(2, |n| n.get()) + 2;
    let files: Vec<String> = (0..writers)
        .map(|w| {
            let object = serde_json::json!({
                "apiVersion": "example.com/v1",
                "kind": "Bomb",
                "metadata": {"name": format!("b{w}"), "namespace": "default"},
                "spec": {"items": items},
            });
            write_file(dir.path(), &format!("b{w}.json"), &object.to_string())
        })
        .collect();
    let kcp = std::sync::Arc::new(kcp);
    let handles: Vec<_> = files
        .into_iter()
        .map(|file| {
            let kcp = kcp.clone();
            std::thread::spawn(move || kcp.kubectl_in(cluster, &["create", "-f", &file]))
        })
        .collect();

    // Meanwhile, from a connection of its own, /readyz answers promptly.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let client = runtime.block_on(kcp.kube_client());
    let mut probes = 0;
    while !handles.iter().all(|h| h.is_finished()) {
        let started = Instant::now();
        let request = hyper::Request::get("/readyz").body(Vec::new()).unwrap();
        let answer = runtime.block_on(client.request_text(request)).unwrap();
        let took = started.elapsed();
        assert_eq!(answer, "ok");
        assert!(took < Duration::from_secs(1), "/readyz took {took:?}");
        probes += 1;
        // The probes' pace while the creates run, not a wait for them.
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(probes > 0);
    for handle in handles {
        let output = handle.join().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// A message expression must evaluate to a string and a rule to a bool, whatever their shape
/// (kube-apiserver type-checks them; composite ones of the wrong type were accepted before).
#[test]
fn rules_and_message_expressions_of_the_wrong_type_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("crd-cel-types");
    let cluster = &kcp.home().to_string();
    let crd = Crd::namespaced("typos", "Typo")
        .storage_version(
            "v1",
            r#"
            type: object
            properties:
              spec:
                type: object
                x-kubernetes-validations:
                - rule: "self.replicas * 2"
                - rule: "self.replicas > 0"
                  messageExpression: "size(self.name) + 1"
                properties:
                  replicas: {type: integer}
                  name: {type: string, maxLength: 64}
            "#,
        )
        .yaml();
    let file = write_file(dir.path(), "typos.yaml", &crd);
    let stderr = kcp.kubectl_in_err(cluster, &["apply", "-f", &file]);
    let at = "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations";
    assert!(
        stderr.contains(&format!("* {at}[0].rule: Invalid value: "))
            && stderr.contains(": cel expression must evaluate to a bool"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("* {at}[1].messageExpression: Invalid value: "))
            && stderr.contains(": messageExpression must evaluate to a string"),
        "{stderr}"
    );
    // The same rules of the right types are accepted.
    let fixed = crd
        .replace("self.replicas * 2", "self.replicas * 2 > 0")
        .replace(
            "size(self.name) + 1",
            "'name of ' + string(size(self.name))",
        );
    let fixed = write_file(dir.path(), "fixed.yaml", &fixed);
    kcp.kubectl_in_ok(cluster, &["apply", "-f", &fixed]);
}
