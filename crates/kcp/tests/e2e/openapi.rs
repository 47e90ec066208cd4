//! OpenAPI v3 through kubectl: `explain` walks the served schemas, and `--validate` (strict by
//! default) makes kubectl ask the server to check fields, which it does per `fieldValidation`.

use super::support::{Kcp, write_file};

#[test]
fn kubectl_explain_reads_the_served_schemas() {
    let kcp = Kcp::shared("openapi-explain");

    let data = kcp.kubectl_ok(&["explain", "configmap.data"]);
    assert!(data.contains("FIELD: data <map[string]string>"), "{data}");
    assert!(
        data.contains("Data contains the configuration data."),
        "{data}"
    );

    let rules = kcp.kubectl_ok(&["explain", "roles.rules"]);
    assert!(
        rules.contains("GROUP:      rbac.authorization.k8s.io"),
        "{rules}"
    );
    assert!(rules.contains("verbs\t<[]string> -required-"), "{rules}");

    let metadata = kcp.kubectl_ok(&["explain", "leases.metadata.labels"]);
    assert!(metadata.contains("<map[string]string>"), "{metadata}");
}

const WITH_UNKNOWN_FIELDS: &str = "apiVersion: v1
kind: ConfigMap
metadata:
  name: NAME
  colour: red
data:
  a: \"1\"
bogus: 1
";

#[test]
fn unknown_fields_are_refused_warned_or_dropped_as_kubectl_asks() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("openapi-unknown-fields");
    kcp.kubectl_ok(&["create", "namespace", "fields"]);
    let file = |name: &str| {
        write_file(
            dir.path(),
            &format!("{name}.yaml"),
            &WITH_UNKNOWN_FIELDS.replace("NAME", name),
        )
    };

    // The default, --validate=strict: kubectl sends fieldValidation=Strict and the server refuses.
    let strict = kcp.kubectl(&["create", "-n", "fields", "-f", &file("strict")]);
    assert!(!strict.status.success());
    let stderr = String::from_utf8_lossy(&strict.stderr);
    assert!(
        stderr.contains(
            "Error from server (BadRequest): error when creating \"",
        ) && stderr.contains(
            "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"bogus\", unknown field \"metadata.colour\""
        ),
        "{stderr}"
    );
    assert!(
        !kcp.kubectl(&["get", "cm", "strict", "-n", "fields"])
            .status
            .success()
    );

    // --validate=warn: created without the unknown fields, with a warning per field.
    let warn = kcp.kubectl(&[
        "create",
        "-n",
        "fields",
        "--validate=warn",
        "-f",
        &file("warn"),
    ]);
    assert!(warn.status.success());
    let stderr = String::from_utf8_lossy(&warn.stderr);
    assert!(
        stderr.contains("Warning: unknown field \"bogus\""),
        "{stderr}"
    );
    assert!(
        stderr.contains("Warning: unknown field \"metadata.colour\""),
        "{stderr}"
    );
    let stored: serde_json::Value =
        serde_json::from_str(&kcp.kubectl_ok(&["get", "cm", "warn", "-n", "fields", "-o", "json"]))
            .unwrap();
    assert!(stored.get("bogus").is_none());
    assert!(stored["metadata"].get("colour").is_none());
    assert_eq!(stored["data"]["a"], "1");

    // --validate=false: fieldValidation=Ignore drops them silently.
    let ignore = kcp.kubectl(&[
        "create",
        "-n",
        "fields",
        "--validate=false",
        "-f",
        &file("ignore"),
    ]);
    assert!(ignore.status.success());
    assert!(!String::from_utf8_lossy(&ignore.stderr).contains("Warning"));

    // Patches are checked on the patched object.
    let patch = kcp.kubectl(&[
        "patch",
        "cm",
        "warn",
        "-n",
        "fields",
        "--type=merge",
        "-p",
        r#"{"spec":{"x":1}}"#,
    ]);
    assert!(patch.status.success());
    assert!(
        String::from_utf8_lossy(&patch.stderr).contains("Warning: unknown field \"spec\""),
        "{patch:?}"
    );
}

#[test]
fn openapi_v2_serves_definitions_kubectl_validates_and_explains_with() {
    let kcp = Kcp::shared("openapi-v2");
    let dir = tempfile::tempdir().unwrap();
    let home = kcp.home().to_string();
    // A `kind: List` document: kubectl validates it with the v2 definitions (in protobuf).
    let list = super::support::write_file(
        dir.path(),
        "list.yaml",
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: from-list\n    namespace: default\n  data:\n    a: b\n",
    );
    let applied = kcp.kubectl_in_ok(&home, &["apply", "-f", &list]);
    assert_eq!(applied.trim(), "configmap/from-list created");
    let explained = kcp.kubectl_in_ok(
        &home,
        &["explain", "configmap.data", "--output=plaintext-openapiv2"],
    );
    assert!(
        explained.contains("FIELD:    data <map[string]string>"),
        "{explained}"
    );
    // A review kubectl validates before it creates it: no kind requires its metadata.
    let review = super::support::write_file(
        dir.path(),
        "sar.json",
        r#"{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"nobody","resourceAttributes":{"verb":"get","resource":"configmaps"}}}"#,
    );
    let allowed = kcp.kubectl_in_ok(
        &home,
        &["create", "-f", &review, "-o", "jsonpath={.status.allowed}"],
    );
    assert_eq!(allowed, "false");
    // In JSON, with the group-version-kind extensions kubectl maps kinds by.
    let raw = kcp.kubectl_in_ok(
        &home,
        &["get", "--raw", &format!("/clusters/{home}/openapi/v2")],
    );
    let document = kcp_testing::output::json(&raw);
    assert_eq!(document["swagger"], "2.0");
    let configmap = &document["definitions"]["io.k8s.api.core.v1.ConfigMap"];
    assert_eq!(
        configmap["x-kubernetes-group-version-kind"][0]["kind"],
        "ConfigMap"
    );
    assert_eq!(
        configmap["properties"]["metadata"]["$ref"],
        "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
    );
    let requiring_metadata: Vec<&String> = document["definitions"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, schema)| {
            schema["required"]
                .as_array()
                .is_some_and(|r| r.contains(&serde_json::json!("metadata")))
        })
        .map(|(name, _)| name)
        .collect();
    assert!(requiring_metadata.is_empty(), "{requiring_metadata:?}");
}

/// `/openapi/v2` carries paths with their operations, as kube-apiserver's does (code
/// generators and Kubernetes' own `test/cmd` read them), for custom resources too.
#[test]
fn openapi_v2_has_the_operations_of_every_resource() {
    let kcp = Kcp::shared("openapi-v2-paths");
    let dir = tempfile::tempdir().unwrap();
    let home = kcp.home().to_string();
    let crd = write_file(
        dir.path(),
        "crd.yaml",
        &kcp_testing::crd::sized("gadgets", "Gadget", "integer").yaml(),
    );
    kcp.kubectl_in_ok(&home, &["apply", "-f", &crd]);
    kcp.wait_established(&home, "gadgets.example.com");
    let raw = kcp.kubectl_in_ok(
        &home,
        &["get", "--raw", &format!("/clusters/{home}/openapi/v2")],
    );
    assert!(
        raw.contains("Watch for changes to the described resources"),
        "the watch parameter's description"
    );
    let document = kcp_testing::output::json(&raw);
    let configmaps = &document["paths"]["/api/v1/namespaces/{namespace}/configmaps"];
    assert_eq!(
        configmaps["get"]["description"],
        "list or watch objects of kind ConfigMap"
    );
    assert_eq!(
        configmaps["get"]["responses"]["200"]["schema"]["$ref"],
        "#/definitions/io.k8s.api.core.v1.ConfigMapList"
    );
    assert_eq!(configmaps["post"]["parameters"][0]["in"], "body");
    let gadgets = document["paths"]
        .as_object()
        .unwrap()
        .iter()
        .find(|(path, _)| {
            path.starts_with("/apis/example.com/") && path.ends_with("/gadgets/{name}")
        })
        .map(|(_, item)| item)
        .expect("the custom resource's paths");
    assert_eq!(
        gadgets["patch"]["x-kubernetes-group-version-kind"]["kind"],
        "Gadget"
    );
    // Every reference of the paths points at a definition.
    for (_, item) in document["paths"].as_object().unwrap() {
        for (_, op) in item.as_object().unwrap() {
            let text = op.to_string();
            for reference in text.split("\"#/definitions/").skip(1) {
                let name = &reference[..reference.find('"').unwrap()];
                assert!(
                    document["definitions"].get(name).is_some(),
                    "{name} is referenced"
                );
            }
        }
    }
}

/// kcp's own kinds describe their fields, as kcp's CRDs do.
#[test]
fn kubectl_explain_describes_kcps_kinds() {
    let kcp = Kcp::shared("openapi-explain-kcp");
    let explained = kcp.kubectl_in_ok(kcp.home(), &["explain", "workspace.spec.type"]);
    assert!(
        explained.contains("type defines properties of the workspace both on creation"),
        "{explained}"
    );
    assert!(
        explained.contains("name is the name of the WorkspaceType"),
        "{explained}"
    );
    let explained = kcp.kubectl_in_ok(kcp.home(), &["explain", "logicalcluster.status.URL"]);
    assert!(!explained.contains("<no description>"), "{explained}");
}

/// `kubectl apply -f` of a `kind: List` of custom resources whose schemas keep unknown fields:
/// kubectl validates a List with the v2 definitions, which must not refuse what the server
/// takes (Kubernetes' test/cmd crd.sh applies such a list).
#[test]
fn a_list_of_custom_resources_keeping_unknown_fields_applies_with_default_validation() {
    let kcp = Kcp::shared("openapi-v2-crd-list");
    let dir = tempfile::tempdir().unwrap();
    let home = kcp.home().to_string();
    let crds = write_file(
        dir.path(),
        "crds.yaml",
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: foos.company.com\nspec:\n  group: company.com\n  scope: Namespaced\n  names: {plural: foos, kind: Foo}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        x-kubernetes-preserve-unknown-fields: true\n---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: bars.company.com\nspec:\n  group: company.com\n  scope: Namespaced\n  names: {plural: bars, kind: Bar}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            x-kubernetes-preserve-unknown-fields: true\n",
    );
    kcp.kubectl_in_ok(&home, &["create", "-f", &crds]);
    kcp.wait_established(&home, "foos.company.com");
    kcp.wait_established(&home, "bars.company.com");
    let list = write_file(
        dir.path(),
        "list.yaml",
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: company.com/v1\n  kind: Foo\n  metadata:\n    name: test-list\n    namespace: default\n  someField: field1\n  otherField: field2\n- apiVersion: company.com/v1\n  kind: Bar\n  metadata:\n    name: test-list\n    namespace: default\n  spec:\n    someField: field1\n",
    );
    let applied = kcp.kubectl_in_ok(&home, &["apply", "-f", &list]);
    assert_eq!(
        applied.trim(),
        "foo.company.com/test-list created\nbar.company.com/test-list created"
    );
    let kept = kcp.kubectl_in_ok(
        &home,
        &[
            "get",
            "foo",
            "test-list",
            "-n",
            "default",
            "-o",
            "jsonpath={.someField}",
        ],
    );
    assert_eq!(kept, "field1");
}
