//! CustomResourceDefinitions with kubectl: a CRD serves its resources in its own logical cluster
//! only, once Established; the same CRD name with different schemas in two clusters validates
//! and defaults by each cluster's own schema; unknown fields are refused or warned about; the
//! status subresource and generation behave as in Kubernetes.

use kcp_testing::crd::Crd;

use super::support::{Kcp, write_file};

/// A `widgets.example.com` CRD whose `spec` is `spec_schema`.
fn widget_crd(spec_schema: &str, short_name: &str) -> String {
    Crd::namespaced("widgets", "Widget")
        .singular("widget")
        .short_names(&[short_name])
        .version(&format!(
            "
            name: v1
            served: true
            storage: true
            subresources: {{status: {{}}}}
            schema:
              openAPIV3Schema:
                type: object
                properties:
                  spec: {spec_schema}
                  status:
                    type: object
                    properties:
                      ready: {{type: boolean}}
            "
        ))
        .yaml()
}

#[test]
fn the_same_crd_validates_and_defaults_by_each_clusters_schema() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("crds");
    let (a, b) = (&kcp.workspace("a"), &kcp.workspace("b"));
    let crd_a = write_file(
        dir.path(),
        "a.yaml",
        &widget_crd(
            "{type: object, properties: {size: {type: integer, minimum: 1, default: 3}, color: {type: string, enum: [red, blue]}}}",
            "wa",
        ),
    );
    let crd_b = write_file(
        dir.path(),
        "b.yaml",
        &widget_crd(
            "{type: object, properties: {size: {type: string, default: big}, color: {type: string}}}",
            "wb",
        ),
    );
    for (cluster, crd) in [(a, &crd_a), (b, &crd_b)] {
        kcp.kubectl_in_ok(cluster, &["create", "namespace", "crds"]);
        kcp.kubectl_in_ok(cluster, &["apply", "-f", crd]);
        kcp.wait_established(cluster, "widgets.example.com");
    }
    let conditions = kcp.kubectl_in_ok(
        a,
        &[
            "get",
            "crd",
            "widgets.example.com",
            "-o",
            r#"jsonpath={range .status.conditions[*]}{.type}={.status}/{.reason} {end}"#,
        ],
    );
    assert_eq!(
        conditions.trim(),
        "NamesAccepted=True/NoConflicts Established=True/InitialNamesAccepted"
    );

    // Discovery in each cluster names its own short name; the root cluster has no widgets.
    let resources = kcp.kubectl_in_ok(a, &["api-resources", "--api-group=example.com"]);
    assert!(
        resources.contains("widgets") && resources.contains("wa"),
        "{resources}"
    );
    assert!(!resources.contains("wb"), "{resources}");
    let stderr = kcp.kubectl_in_err(kcp.home(), &["get", "widgets"]);
    assert!(
        stderr.contains("the server doesn't have a resource type \"widgets\""),
        "{stderr}"
    );

    // Defaults come from each cluster's schema.
    let plain = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: plain\n  namespace: crds\nspec:\n  color: red\n";
    let plain = write_file(dir.path(), "plain.yaml", plain);
    for (cluster, size) in [(a, "3"), (b, "big")] {
        kcp.kubectl_in_ok(cluster, &["apply", "-f", &plain]);
        let got = kcp.kubectl_in_ok(
            cluster,
            &[
                "get",
                "widget",
                "plain",
                "-n",
                "crds",
                "-o",
                "jsonpath={.spec.size}",
            ],
        );
        assert_eq!(got, size, "in {cluster}");
    }

    // Validation too: every problem at once, with Kubernetes' paths and messages.
    let odd = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: odd\n  namespace: crds\nspec:\n  size: 0\n  color: green\n";
    let odd = write_file(dir.path(), "odd.yaml", odd);
    let stderr = kcp.kubectl_in_err(a, &["create", "-f", &odd]);
    assert!(
        stderr.contains("The Widget \"odd\" is invalid: \n* spec.color: Unsupported value: \"green\": supported values: \"red\", \"blue\"\n* spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1"),
        "{stderr}"
    );
    let stderr = kcp.kubectl_in_err(b, &["create", "-f", &odd]);
    assert!(
        stderr.contains("spec.size: Invalid value: \"integer\": spec.size in body must be of type string: \"integer\""),
        "{stderr}"
    );

    // Unknown fields: kubectl asks for Strict (400 naming them); Warn drops them with a warning.
    let extra = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: extra\n  namespace: crds\nspec:\n  color: blue\n  bogus: 1\n";
    let extra = write_file(dir.path(), "extra.yaml", extra);
    let stderr = kcp.kubectl_in_err(a, &["create", "-f", &extra]);
    assert!(
        stderr.contains("Widget in version \"v1\" cannot be handled as a Widget: strict decoding error: unknown field \"spec.bogus\""),
        "{stderr}"
    );
    let output = kcp.kubectl_in(a, &["create", "-f", &extra, "--validate=warn"]);
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("unknown field \"spec.bogus\""), "{stderr}");
    let spec = kcp.kubectl_in_ok(
        a,
        &[
            "get",
            "widget",
            "extra",
            "-n",
            "crds",
            "-o",
            "jsonpath={.spec}",
        ],
    );
    assert_eq!(spec, r#"{"color":"blue","size":3}"#);
}

#[test]
fn status_is_its_own_subresource_and_generation_follows_the_spec() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("crds-status");
    let cluster = &kcp.home().to_string();
    let crd = write_file(
        dir.path(),
        "crd.yaml",
        &widget_crd("{type: object, properties: {size: {type: integer}}}", "wd"),
    );
    kcp.kubectl_in_ok(cluster, &["create", "namespace", "s"]);
    kcp.kubectl_in_ok(cluster, &["apply", "-f", &crd]);
    kcp.wait_established(cluster, "widgets.example.com");
    // Status sent with a create is dropped.
    let widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: s\nspec:\n  size: 1\nstatus:\n  ready: true\n";
    let widget = write_file(dir.path(), "w.yaml", widget);
    kcp.kubectl_in_ok(cluster, &["create", "-f", &widget]);
    let get = |path: &str| {
        kcp.kubectl_in_ok(
            cluster,
            &[
                "get",
                "widget",
                "w",
                "-n",
                "s",
                "-o",
                &format!("jsonpath={path}"),
            ],
        )
    };
    assert_eq!(get("{.status}"), "");
    assert_eq!(get("{.metadata.generation}"), "1");

    // The main endpoint ignores status; the status endpoint ignores the rest.
    let main = r#"{"spec":{"size":2},"status":{"ready":true}}"#;
    kcp.kubectl_in_ok(
        cluster,
        &[
            "patch",
            "widget",
            "w",
            "-n",
            "s",
            "--type=merge",
            "-p",
            main,
        ],
    );
    assert_eq!(
        get("{.spec.size}/{.status.ready}/{.metadata.generation}"),
        "2//2"
    );
    kcp.kubectl_in_ok(
        cluster,
        &[
            "patch",
            "widget",
            "w",
            "-n",
            "s",
            "--type=merge",
            "--subresource=status",
            "-p",
            r#"{"spec":{"size":5},"status":{"ready":true}}"#,
        ],
    );
    assert_eq!(
        get("{.spec.size}/{.status.ready}/{.metadata.generation}"),
        "2/true/2"
    );

    // Labels are metadata: no new generation.
    kcp.kubectl_in_ok(cluster, &["label", "widget", "w", "-n", "s", "tier=gold"]);
    assert_eq!(get("{.metadata.generation}"), "2");

    // Strategic merge patch is not for custom resources.
    let stderr = kcp.kubectl_in_err(
        cluster,
        &[
            "patch",
            "widget",
            "w",
            "-n",
            "s",
            "--type=strategic",
            "-p",
            r#"{"spec":{"size":3}}"#,
        ],
    );
    assert!(
        stderr.contains("the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"),
        "{stderr}"
    );
}

#[test]
fn conflicting_names_are_not_accepted_until_freed() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("crds-names");
    let cluster = &kcp.home().to_string();
    let widgets = write_file(
        dir.path(),
        "widgets.yaml",
        &widget_crd("{type: object, properties: {size: {type: integer}}}", "wd"),
    );
    kcp.kubectl_in_ok(cluster, &["apply", "-f", &widgets]);
    kcp.wait_established(cluster, "widgets.example.com");
    // `kubectl explain` reads the CRD's schema from OpenAPI v3 as soon as it is Established.
    let explained = kcp.kubectl_in_ok(cluster, &["explain", "widgets.spec.size"]);
    assert!(explained.contains("FIELD: size <integer>"), "{explained}");

    // Another CRD of the group that wants the kind Widget and the short name wd.
    let gadgets = widget_crd("{type: object}", "wd")
        .replace("widgets.example.com", "gadgets.example.com")
        .replace(
            "plural: widgets, singular: widget, kind: Widget",
            "plural: gadgets, singular: gadget, kind: Gadget",
        );
    let gadgets = write_file(dir.path(), "gadgets.yaml", &gadgets);
    kcp.kubectl_in_ok(cluster, &["apply", "-f", &gadgets]);
    kcp.kubectl_in_ok(
        cluster,
        &[
            "wait",
            "--for=condition=NamesAccepted=False",
            "crd/gadgets.example.com",
        ],
    );
    let status = kcp.kubectl_in_ok(
        cluster,
        &[
            "get",
            "crd",
            "gadgets.example.com",
            "-o",
            r#"jsonpath={range .status.conditions[*]}{.type}={.status}/{.reason}: {.message}; {end}"#,
        ],
    );
    assert_eq!(
        status.trim(),
        "NamesAccepted=False/ShortNamesConflict: \"wd\" is already in use; Established=False/NotAccepted: not all names are accepted;"
    );
    let stderr = kcp.kubectl_in_err(cluster, &["get", "gadgets"]);
    assert!(stderr.contains("doesn't have a resource type"), "{stderr}");

    // Once widgets is gone, gadgets gets its names.
    kcp.kubectl_in_ok(cluster, &["delete", "crd", "widgets.example.com"]);
    kcp.wait_established(cluster, "gadgets.example.com");
    let listed = kcp.kubectl_in_ok(cluster, &["get", "gadgets", "-A"]);
    assert_eq!(listed.trim(), "");
}
