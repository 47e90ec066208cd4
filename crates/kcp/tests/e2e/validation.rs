//! Validation of built-in kinds as kubectl shows it: Kubernetes' field paths and messages for
//! bad config keys, immutable ConfigMaps, roles without verbs, changed role references, and a
//! 400 for Secret data that is not base64.

use kcp_testing::crd::Crd;
use kcp_testing::output::stderr;

use super::support::{Kcp, write_file};

fn stderr_of(kcp: &Kcp, args: &[&str]) -> String {
    stderr(&kcp.kubectl(args))
}

#[test]
fn kubectl_shows_kubernetes_validation_messages() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("validation-messages");
    kcp.kubectl_ok(&["create", "namespace", "valid"]);

    // kubectl checks `--from-literal` keys itself, so send the object as a file.
    let bad_key = write_file(
        dir.path(),
        "bad-key.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\n  namespace: valid\ndata:\n  a b: \"1\"\n",
    );
    let stderr = stderr_of(&kcp, &["create", "-f", &bad_key, "--validate=false"]);
    assert!(
        stderr.ends_with(
            "The ConfigMap \"bad\" is invalid: data[a b]: Invalid value: \"a b\": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')"
        ),
        "{stderr}"
    );

    // An immutable ConfigMap keeps its data, and stays immutable.
    let frozen = write_file(
        dir.path(),
        "frozen.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: frozen\n  namespace: valid\nimmutable: true\ndata:\n  k: \"1\"\n",
    );
    kcp.kubectl_ok(&["create", "-f", &frozen, "--validate=false"]);
    let stderr = stderr_of(
        &kcp,
        &[
            "patch",
            "configmap",
            "frozen",
            "-n",
            "valid",
            "-p",
            r#"{"data":{"k":"2"}}"#,
        ],
    );
    assert_eq!(
        stderr,
        "The ConfigMap \"frozen\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
    );
    let stderr = stderr_of(
        &kcp,
        &[
            "patch",
            "configmap",
            "frozen",
            "-n",
            "valid",
            "-p",
            r#"{"immutable":false}"#,
        ],
    );
    assert_eq!(
        stderr,
        "The ConfigMap \"frozen\" is invalid: immutable: Forbidden: field is immutable when `immutable` is set"
    );

    // A role's rules need verbs.
    let role = write_file(
        dir.path(),
        "role.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: no-verbs\n  namespace: valid\nrules:\n- apiGroups: [\"\"]\n  resources: [pods]\n",
    );
    let stderr = stderr_of(&kcp, &["create", "-f", &role, "--validate=false"]);
    assert!(
        stderr.ends_with(
            "The Role \"no-verbs\" is invalid: rules[0].verbs: Required value: verbs must contain at least one value"
        ),
        "{stderr}"
    );

    // A binding's role reference never changes.
    kcp.kubectl_ok(&[
        "create",
        "rolebinding",
        "readers",
        "-n",
        "valid",
        "--clusterrole=view",
        "--user=alice",
    ]);
    let stderr = stderr_of(
        &kcp,
        &[
            "patch",
            "rolebinding",
            "readers",
            "-n",
            "valid",
            "--type=merge",
            "-p",
            r#"{"roleRef":{"name":"edit"}}"#,
        ],
    );
    assert_eq!(
        stderr,
        "The RoleBinding \"readers\" is invalid: roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"ClusterRole\", Name:\"edit\"}: cannot change roleRef"
    );
    // Subjects may change.
    kcp.kubectl_ok(&[
        "patch",
        "rolebinding",
        "readers",
        "-n",
        "valid",
        "--type=merge",
        "-p",
        r#"{"subjects":[{"kind":"Group","name":"devs"}]}"#,
    ]);
    let group = kcp.kubectl_ok(&[
        "get",
        "rolebinding",
        "readers",
        "-n",
        "valid",
        "-o",
        "jsonpath={.subjects[0].apiGroup}",
    ]);
    assert_eq!(
        group, "rbac.authorization.k8s.io",
        "defaulted like Kubernetes"
    );

    // Secret data must be base64: a decoding error, 400.
    let secret = write_file(
        dir.path(),
        "secret.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\n  namespace: valid\ndata:\n  k: not-base64\n",
    );
    let stderr = stderr_of(&kcp, &["create", "-f", &secret, "--validate=false"]);
    assert!(
        stderr.starts_with("Error from server (BadRequest): error when creating")
            && stderr.ends_with(
                "Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at input byte 3"
            ),
        "{stderr}"
    );
    // stringData is folded into data.
    kcp.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "plain",
        "-n",
        "valid",
        "--from-literal=k=v",
    ]);
    kcp.kubectl_ok(&[
        "patch",
        "secret",
        "plain",
        "-n",
        "valid",
        "-p",
        r#"{"stringData":{"extra":"x"}}"#,
    ]);
    let data = kcp.kubectl_ok(&[
        "get",
        "secret",
        "plain",
        "-n",
        "valid",
        "-o",
        "jsonpath={.data.extra} {.type} {.stringData}",
    ]);
    assert_eq!(data.trim(), "eA== Opaque");
}

/// `widgets.example.com` whose `spec` schema is the placeholder `SPEC`, for the test to fill in.
fn widgets_crd() -> String {
    Crd::namespaced("widgets", "Widget")
        .singular("widget")
        .list_kind("WidgetList")
        .storage_version(
            "v1",
            "
            type: object
            properties:
              spec:
                SPEC
            ",
        )
        .yaml()
}

#[test]
fn crds_need_structural_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("validation-structural");
    let bad = write_file(
        dir.path(),
        "bad.yaml",
        &widgets_crd().replace("SPEC", "properties: {size: {type: array}}"),
    );
    let refused = kcp.kubectl(&["create", "-f", &bad]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("The CustomResourceDefinition \"widgets.example.com\" is invalid:")
            && stderr.contains("* spec.versions[0].schema.openAPIV3Schema.properties[spec].properties[size].items: Required value: must be specified")
            && stderr.contains("* spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields"),
        "{stderr}"
    );
    let good = write_file(
        dir.path(),
        "good.yaml",
        &widgets_crd().replace(
            "SPEC",
            "type: object\n            x-kubernetes-preserve-unknown-fields: true",
        ),
    );
    assert_eq!(
        kcp.kubectl_ok(&["create", "-f", &good]).trim(),
        "customresourcedefinition.apiextensions.k8s.io/widgets.example.com created"
    );
}
