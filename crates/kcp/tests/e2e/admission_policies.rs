//! ValidatingAdmissionPolicies, as kube-apiserver enforces them, per workspace: a policy with a
//! ConfigMap param denies through one binding and warns through another (kubectl shows the
//! warning), namespace selectors pick the bindings, a missing param with `Deny` refuses; a
//! policy in a provider's workspace applies to its exported resource in every consumer.

use super::api_sharing::{bind, export_widgets};
use super::support::{Kcp, write_file};

/// A policy limiting names of configmaps to the param's `maxLength`, bound with Deny in
/// namespaces labelled `policy: deny` and with Warn and Audit in those labelled `policy: warn`.
const NAME_LENGTH: &str = "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: name-length}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}
  matchConditions:
  - {name: not-the-params, expression: \"object.metadata.name != 'limits'\"}
  variables:
  - {name: max, expression: \"int(params.data.maxLength)\"}
  validations:
  - expression: \"object.metadata.name.size() <= variables.max\"
    messageExpression: \"'name ' + object.metadata.name + ' is longer than ' + string(variables.max)\"
  auditAnnotations:
  - {key: checked, valueExpression: \"'name of ' + string(object.metadata.name.size())\"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: deny-long}
spec:
  policyName: name-length
  validationActions: [Deny]
  paramRef: {name: limits, namespace: default, parameterNotFoundAction: Deny}
  matchResources:
    namespaceSelector: {matchLabels: {policy: deny}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: warn-long}
spec:
  policyName: name-length
  validationActions: [Warn, Audit]
  paramRef: {name: limits, namespace: default, parameterNotFoundAction: Allow}
  matchResources:
    namespaceSelector: {matchLabels: {policy: warn}}
";

#[test]
fn a_policy_with_a_configmap_param_denies_and_warns() {
    let kcp = Kcp::shared("admission-policies");
    let dir = tempfile::tempdir().unwrap();
    let ws = kcp.workspace("policed");
    let sibling = kcp.workspace("unpoliced");
    for (namespace, label) in [("strict", "deny"), ("lenient", "warn")] {
        kcp.kubectl_in_ok(&ws, &["create", "namespace", namespace]);
        kcp.kubectl_in_ok(
            &ws,
            &["label", "namespace", namespace, &format!("policy={label}")],
        );
    }
    let policy = write_file(dir.path(), "policy.yaml", NAME_LENGTH);
    kcp.kubectl_in_ok(&ws, &["apply", "-f", &policy]);

    // Without its param, the Deny binding refuses (parameterNotFoundAction: Deny).
    kcp_testing::wait::until("the binding wants its param", || {
        kcp.kubectl_in_err(&ws, &["-n", "strict", "create", "configmap", "a"]).contains(
            "ValidatingAdmissionPolicy 'name-length' with binding 'deny-long' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction",
        )
    });
    kcp.kubectl_in_ok(
        &ws,
        &[
            "-n",
            "default",
            "create",
            "configmap",
            "limits",
            "--from-literal=maxLength=5",
        ],
    );

    kcp_testing::wait::until("the param is read", || {
        kcp.kubectl_in(&ws, &["-n", "strict", "create", "configmap", "short"])
            .status
            .success()
    });
    let refused = kcp.kubectl_in(
        &ws,
        &[
            "-n",
            "strict",
            "create",
            "configmap",
            "much-too-long",
            "-v=8",
        ],
    );
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("configmaps \\\"much-too-long\\\" is forbidden: ValidatingAdmissionPolicy 'name-length' with binding 'deny-long' denied request: name much-too-long is longer than 5")
            || said.contains("configmaps \"much-too-long\" is forbidden: ValidatingAdmissionPolicy 'name-length' with binding 'deny-long' denied request: name much-too-long is longer than 5"),
        "{said}"
    );
    assert!(said.contains("422 Unprocessable Entity"), "{said}");

    // The Warn binding lets it through with kube's warning.
    let warned = kcp.kubectl_in(
        &ws,
        &["-n", "lenient", "create", "configmap", "much-too-long"],
    );
    assert!(warned.status.success());
    let warning = String::from_utf8_lossy(&warned.stderr);
    assert!(
        warning.contains("Warning: Validation failed for ValidatingAdmissionPolicy 'name-length' with binding 'warn-long': name much-too-long is longer than 5"),
        "{warning}"
    );
    // Namespaces no binding selects, and sibling workspaces, are not policed.
    kcp.kubectl_in_ok(
        &ws,
        &["-n", "default", "create", "configmap", "much-too-long"],
    );
    kcp.kubectl_in_ok(&sibling, &["create", "configmap", "much-too-long"]);

    // Policies and bindings are validated when written.
    let broken = write_file(
        dir.path(),
        "broken.yaml",
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: broken}
spec: {policyName: name-length, validationActions: [Deny, Warn]}
",
    );
    let refused = kcp.kubectl_in_err(&ws, &["apply", "-f", &broken]);
    assert!(
        refused.contains("must not contain both Deny and Warn"),
        "{refused}"
    );

    // Type checking: a field the matched kind does not declare is warned about in the
    // policy's status, and the checked generation recorded.
    kcp_testing::wait::until("the policy is checked", || {
        kcp.kubectl_in_ok(
            &ws,
            &[
                "get",
                "validatingadmissionpolicy",
                "name-length",
                "-o",
                "jsonpath={.status.observedGeneration}",
            ],
        ) == "1"
    });
    let typo = write_file(
        dir.path(),
        "typo.yaml",
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: typo}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [\"\"], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  validations:
  - expression: \"object.metadata.name != ''\"
  - expression: \"object.spec.size() < 3\"
",
    );
    kcp.kubectl_in_ok(&ws, &["apply", "-f", &typo]);
    let mut warnings = String::new();
    kcp_testing::wait::until("the typo is warned about", || {
        warnings = kcp.kubectl_in_ok(
            &ws,
            &[
                "get",
                "validatingadmissionpolicy",
                "typo",
                "-o",
                "jsonpath={.status.typeChecking.expressionWarnings}",
            ],
        );
        !warnings.is_empty()
    });
    let warnings: serde_json::Value = serde_json::from_str(&warnings).unwrap();
    assert_eq!(warnings[0]["fieldRef"], "spec.validations[1].expression");
    let text = warnings[0]["warning"].as_str().unwrap();
    assert!(
        text.starts_with("/v1, Kind=ConfigMap: ERROR: <input>:1:7: undefined field 'spec'"),
        "{text}"
    );
    assert_eq!(warnings.as_array().unwrap().len(), 1);
}

#[test]
fn a_providers_policy_applies_to_its_resource_in_every_consumer() {
    let kcp = Kcp::shared("admission-provider-policies");
    let dir = tempfile::tempdir().unwrap();
    let provider = kcp.workspace("provider");
    export_widgets(&kcp, dir.path(), &provider, "red, blue");
    kcp.kubectl_in_ok(
        &provider,
        &[
            "-n",
            "default",
            "create",
            "configmap",
            "widget-limits",
            "--from-literal=size=5",
        ],
    );
    let policy = write_file(
        dir.path(),
        "widget-policy.yaml",
        "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: small-widgets}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: [example.io], apiVersions: [\"*\"], operations: [CREATE, UPDATE], resources: [widgets]}
  validations:
  - {expression: \"object.spec.size <= int(params.data.size)\", message: widgets are small here, reason: Forbidden}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: small-widgets}
spec:
  policyName: small-widgets
  validationActions: [Deny]
  paramRef: {name: widget-limits, namespace: default, parameterNotFoundAction: Deny}
",
    );
    kcp.kubectl_in_ok(&provider, &["apply", "-f", &policy]);
    let widget = |name: &str, size: u32| {
        write_file(
            dir.path(),
            &format!("{name}.yaml"),
            &format!(
                "apiVersion: example.io/v1\nkind: Widget\nmetadata: {{name: {name}, namespace: default}}\nspec: {{color: red, size: {size}}}\n"
            ),
        )
    };
    for consumer in [kcp.workspace("consumer-a"), kcp.workspace("consumer-b")] {
        bind(
            &kcp,
            dir.path(),
            &consumer,
            &format!("{provider}:widgets"),
            &[],
        );
        kcp_testing::wait::until("the provider's policy refuses big widgets", || {
            let refused = kcp.kubectl_in(&consumer, &["create", "-f", &widget("big", 7)]);
            String::from_utf8_lossy(&refused.stderr).contains(
                "widgets.example.io \"big\" is forbidden: ValidatingAdmissionPolicy 'small-widgets' with binding 'small-widgets' denied request: widgets are small here",
            )
        });
        kcp.kubectl_in_ok(&consumer, &["create", "-f", &widget("small", 2)]);
    }
}
