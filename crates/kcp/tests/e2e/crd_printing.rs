//! How custom resources print and are selected, with kubectl: a CRD version's
//! `additionalPrinterColumns` (wide ones only with `-o wide`; `NAME AGE` without any), short
//! and singular names, categories (`kubectl get all`, `kubectl get <category>`), selectable
//! fields in field selectors (list and watch), and the `scale` subresource (`kubectl scale`).

use kcp_testing::crd::Crd;

use super::support::{Kcp, write_file};

/// `widgets.example.com`: printer columns, selectable fields, status and scale subresources,
/// in the categories `all` and `toys`.
fn widgets_crd() -> String {
    Crd::namespaced("widgets", "Widget")
        .singular("widget")
        .short_names(&["wd"])
        .categories(&["all", "toys"])
        .version(
            r#"
            name: v1
            served: true
            storage: true
            subresources:
              status: {}
              scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas, labelSelectorPath: .status.selector}
            additionalPrinterColumns:
            - {name: Replicas, type: integer, jsonPath: .spec.replicas}
            - {name: Color, type: string, jsonPath: .spec.color}
            - {name: First, type: string, jsonPath: ".spec.parts[*].name"}
            - {name: Second, type: string, jsonPath: ".spec.parts[1].name"}
            - {name: Ready, type: boolean, jsonPath: .status.ready, priority: 1}
            - {name: Synced, type: string, jsonPath: '.status.conditions[?(@.type=="Synced")].status', priority: 1}
            - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
            selectableFields:
            - jsonPath: .spec.color
            - jsonPath: .spec.size
            - jsonPath: .spec.enabled
            schema:
              openAPIV3Schema:
                type: object
                properties:
                  spec:
                    type: object
                    properties:
                      replicas: {type: integer}
                      color: {type: string}
                      size: {type: integer}
                      enabled: {type: boolean}
                      other: {type: string}
                      parts:
                        type: array
                        items: {type: object, properties: {name: {type: string}}}
                  status:
                    type: object
                    properties:
                      replicas: {type: integer}
                      selector: {type: string}
                      ready: {type: boolean}
                      conditions:
                        type: array
                        items: {type: object, properties: {type: {type: string}, status: {type: string}}}
            "#,
        )
        .yaml()
}

/// `gadgets.example.com`: no printer columns, only in the category `toys`.
fn gadgets_crd() -> String {
    Crd::namespaced("gadgets", "Gadget")
        .categories(&["toys"])
        .version(
            "
            name: v1
            served: true
            storage: true
            schema:
              openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
            ",
        )
        .yaml()
}

/// The workspace `cluster` (`root:<name>`) on the shared server with both CRDs Established,
/// namespace `ns` created.
fn start(dir: &std::path::Path, cluster: &str) -> Kcp {
    let kcp = Kcp::shared(cluster.trim_start_matches("root:"));
    kcp.kubectl_in_ok(cluster, &["create", "namespace", "ns"]);
    for (name, text) in [("widgets", widgets_crd()), ("gadgets", gadgets_crd())] {
        let file = write_file(dir, &format!("{name}.yaml"), &text);
        kcp.kubectl_in_ok(cluster, &["apply", "-f", &file]);
        kcp.wait_established(cluster, &format!("{name}.example.com"));
    }
    kcp
}

fn widget(name: &str, spec: &str) -> String {
    format!(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: {name}\n  namespace: ns\nspec: {spec}\n"
    )
}

fn create(kcp: &Kcp, dir: &std::path::Path, cluster: &str, name: &str, text: &str) {
    let file = write_file(dir, &format!("{name}.yaml"), text);
    kcp.kubectl_in_ok(cluster, &["create", "-f", &file]);
}

/// The whitespace-separated words of each line.
fn words(table: &str) -> Vec<Vec<String>> {
    table
        .lines()
        .map(|line| line.split_whitespace().map(str::to_string).collect())
        .collect()
}

#[test]
fn printer_columns_names_and_categories() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = "root:printing";
    let kcp = start(dir.path(), cluster);
    create(
        &kcp,
        dir.path(),
        cluster,
        "w1",
        &widget(
            "w1",
            "{replicas: 3, color: red, parts: [{name: wheel}, {name: bell}]}",
        ),
    );
    create(&kcp, dir.path(), cluster, "w2", &widget("w2", "{}"));
    kcp.kubectl_in_ok(
        cluster,
        &[
            "patch",
            "widget",
            "w1",
            "-n",
            "ns",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"ready":true,"conditions":[{"type":"Ready","status":"False"},{"type":"Synced","status":"True"}]}}"#,
        ],
    );
    let gadget =
        "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: g1\n  namespace: ns\n";
    create(&kcp, dir.path(), cluster, "g1", gadget);
    kcp.kubectl_in_ok(cluster, &["create", "configmap", "cm1", "-n", "ns"]);

    // The declared columns, in order; missing values print empty; only the first value of a
    // wildcard path; the date column as an age.
    let table = words(&kcp.kubectl_in_ok(cluster, &["get", "widgets", "-n", "ns"]));
    assert_eq!(
        table[0],
        ["NAME", "REPLICAS", "COLOR", "FIRST", "SECOND", "AGE"]
    );
    assert_eq!(table[1][..5], ["w1", "3", "red", "wheel", "bell"]);
    let age = &table[1][5];
    assert!(
        age.starts_with(|c: char| c.is_ascii_digit()) && age.ends_with(['s', 'm']),
        "an age: {:?}",
        table[1]
    );
    // w2 has only its name and age (created in the same or a later second).
    assert_eq!(table[2].len(), 2, "{:?}", table[2]);
    assert_eq!(table[2][0], "w2");
    assert!(table[2][1].ends_with(['s', 'm']), "{:?}", table[2]);

    // Priority 1 columns only with -o wide; a filter picks the condition of its type.
    let wide = words(&kcp.kubectl_in_ok(cluster, &["get", "widgets", "-n", "ns", "-o", "wide"]));
    assert_eq!(
        wide[0],
        [
            "NAME", "REPLICAS", "COLOR", "FIRST", "SECOND", "READY", "SYNCED", "AGE"
        ]
    );
    assert_eq!(wide[1][5..7], ["true", "True"]);
    assert_eq!(wide[2].len(), 2, "{:?}", wide[2]);

    // Without declared columns: NAME and AGE.
    let gadgets = words(&kcp.kubectl_in_ok(cluster, &["get", "gadgets", "-n", "ns"]));
    assert_eq!(gadgets[0], ["NAME", "AGE"]);
    assert_eq!(gadgets[1][0], "g1");

    // Short and singular names, alone and with the group.
    for name in ["wd", "widget", "widgets.example.com", "widget.example.com"] {
        let out = kcp.kubectl_in_ok(cluster, &["get", name, "w1", "-n", "ns", "-o", "name"]);
        assert_eq!(out.trim(), "widget.example.com/w1", "kubectl get {name}");
    }

    // `all` holds widgets only (no built-in resource kcp serves is in it); `toys` both.
    let all = kcp.kubectl_in_ok(cluster, &["get", "all", "-n", "ns", "-o", "name"]);
    let mut all: Vec<&str> = all.lines().collect();
    all.sort();
    assert_eq!(all, ["widget.example.com/w1", "widget.example.com/w2"]);
    let toys = kcp.kubectl_in_ok(cluster, &["get", "toys", "-n", "ns", "-o", "name"]);
    let mut toys: Vec<&str> = toys.lines().collect();
    toys.sort();
    assert_eq!(
        toys,
        [
            "gadget.example.com/g1",
            "widget.example.com/w1",
            "widget.example.com/w2"
        ]
    );
    // The table of `get all` prints widgets with their own columns.
    let all_table = words(&kcp.kubectl_in_ok(cluster, &["get", "all", "-n", "ns"]));
    assert_eq!(
        all_table[0],
        ["NAME", "REPLICAS", "COLOR", "FIRST", "SECOND", "AGE"]
    );
}

#[test]
fn selectable_fields_select_in_lists_and_watches() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = "root:selecting";
    let kcp = start(dir.path(), cluster);
    for (name, spec) in [
        ("red-small", "{color: red, size: 1, enabled: true}"),
        ("red-big", "{color: red, size: 3, enabled: false}"),
        ("blue-big", "{color: blue, size: 3}"),
    ] {
        create(&kcp, dir.path(), cluster, name, &widget(name, spec));
    }
    let select = |selector: &str| -> Vec<String> {
        let out = kcp.kubectl_in_ok(
            cluster,
            &[
                "get",
                "widgets",
                "-n",
                "ns",
                "--field-selector",
                selector,
                "-o",
                "name",
            ],
        );
        let mut names: Vec<String> = out
            .lines()
            .map(|l| l.trim_start_matches("widget.example.com/").to_string())
            .collect();
        names.sort();
        names
    };
    assert_eq!(select("spec.color=red"), ["red-big", "red-small"]);
    assert_eq!(select("spec.color!=red"), ["blue-big"]);
    assert_eq!(select("spec.size=3"), ["blue-big", "red-big"]);
    assert_eq!(select("spec.enabled=true"), ["red-small"]);
    // An absent field compares as empty.
    assert_eq!(select("spec.enabled="), ["blue-big"]);
    assert_eq!(select("spec.color=red,spec.size=3"), ["red-big"]);
    assert_eq!(select("metadata.name=blue-big"), ["blue-big"]);

    // A field the CRD does not declare selectable is refused.
    let stderr = kcp.kubectl_in_err(
        cluster,
        &[
            "get",
            "widgets",
            "-n",
            "ns",
            "--field-selector",
            "spec.other=x",
        ],
    );
    assert!(
        stderr.contains("field label not supported: spec.other"),
        "{stderr}"
    );
    // So is any field of a CRD without selectable fields.
    let stderr = kcp.kubectl_in_err(
        cluster,
        &[
            "get",
            "gadgets",
            "-n",
            "ns",
            "--field-selector",
            "spec.color=red",
        ],
    );
    assert!(
        stderr.contains("field label not supported: spec.color"),
        "{stderr}"
    );

    // Watches select the same way.
    let events = kcp.kubectl_in_ok(
        cluster,
        &[
            "get",
            "--raw",
            &format!("/clusters/{cluster}/apis/example.com/v1/namespaces/ns/widgets?watch=true&fieldSelector=spec.size%3D3&timeoutSeconds=1"),
        ],
    );
    let mut watched: Vec<String> = events
        .lines()
        .map(|line| {
            let event: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(event["type"], "ADDED", "{line}");
            event["object"]["metadata"]["name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    watched.sort();
    assert_eq!(watched, ["blue-big", "red-big"]);
    let stderr = kcp.kubectl_in_err(cluster,
        &[
            "get",
            "--raw",
            &format!(
                "/clusters/{cluster}/apis/example.com/v1/namespaces/ns/widgets?watch=true&fieldSelector=spec.other%3Dx&timeoutSeconds=1"
            ),
        ],
    );
    assert!(
        stderr.contains("field label not supported: spec.other"),
        "{stderr}"
    );
}

#[test]
fn the_scale_subresource_reads_and_writes_spec_replicas() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = "root:scaling";
    let kcp = start(dir.path(), cluster);
    create(
        &kcp,
        dir.path(),
        cluster,
        "w",
        &widget("w", "{replicas: 1, color: red}"),
    );
    kcp.kubectl_in_ok(
        cluster,
        &[
            "patch",
            "widget",
            "w",
            "-n",
            "ns",
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"replicas":1,"selector":"app=w"}}"#,
        ],
    );
    let get = |path: &str| {
        kcp.kubectl_in_ok(
            cluster,
            &[
                "get",
                "widget",
                "w",
                "-n",
                "ns",
                "-o",
                &format!("jsonpath={path}"),
            ],
        )
    };
    // kubectl's --raw paths do not keep the server URL's path: name the cluster.
    let scale_url =
        &format!("/clusters/{cluster}/apis/example.com/v1/namespaces/ns/widgets/w/scale");
    let scale: serde_json::Value =
        serde_json::from_str(&kcp.kubectl_in_ok(cluster, &["get", "--raw", scale_url])).unwrap();
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["apiVersion"], "autoscaling/v1");
    assert_eq!(scale["metadata"]["name"], "w");
    assert_eq!(scale["metadata"]["namespace"], "ns");
    assert_eq!(
        scale["metadata"]["uid"].as_str(),
        Some(get("{.metadata.uid}").as_str())
    );
    assert_eq!(scale["spec"]["replicas"], 1);
    assert_eq!(
        scale["status"],
        serde_json::json!({"replicas": 1, "selector": "app=w"})
    );

    // kubectl scale patches the scale: spec.replicas and the generation move, nothing else.
    let out = kcp.kubectl_in_ok(
        cluster,
        &["scale", "widget", "w", "-n", "ns", "--replicas=5"],
    );
    assert_eq!(out.trim(), "widget.example.com/w scaled");
    assert_eq!(
        get("{.spec.replicas}/{.spec.color}/{.status.replicas}/{.metadata.generation}"),
        "5/red/1/2"
    );
    // With --current-replicas it reads the scale and replaces it.
    kcp.kubectl_in_ok(
        cluster,
        &[
            "scale",
            "wd/w",
            "-n",
            "ns",
            "--current-replicas=5",
            "--replicas=7",
        ],
    );
    assert_eq!(get("{.spec.replicas}"), "7");
    let stderr = kcp.kubectl_in_err(
        cluster,
        &[
            "scale",
            "widget/w",
            "-n",
            "ns",
            "--current-replicas=3",
            "--replicas=9",
        ],
    );
    assert!(
        stderr.contains("Expected replicas to be 3, was 7"),
        "{stderr}"
    );

    // A Scale with a negative count is refused by the custom resource's validation.
    let negative = write_file(
        dir.path(),
        "negative.json",
        r#"{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"w","namespace":"ns"},"spec":{"replicas":-1}}"#,
    );
    let stderr = kcp.kubectl_in_err(cluster, &["replace", "--raw", scale_url, "-f", &negative]);
    assert!(
        stderr.contains(".spec.replicas: Invalid value: -1: should be a non-negative integer"),
        "{stderr}"
    );
    // A stale resourceVersion is a conflict.
    let stale = write_file(
        dir.path(),
        "stale.json",
        r#"{"kind":"Scale","apiVersion":"autoscaling/v1","metadata":{"name":"w","namespace":"ns","resourceVersion":"1"},"spec":{"replicas":2}}"#,
    );
    let stderr = kcp.kubectl_in_err(cluster, &["replace", "--raw", scale_url, "-f", &stale]);
    assert!(stderr.contains("the object has been modified"), "{stderr}");
    assert_eq!(get("{.spec.replicas}"), "7");
    // Creating with a negative count fails the same way.
    let stderr = kcp.kubectl_in_err(
        cluster,
        &[
            "create",
            "-f",
            &write_file(dir.path(), "neg.yaml", &widget("neg", "{replicas: -2}")),
        ],
    );
    assert!(
        stderr.contains(".spec.replicas: Invalid value: -2: should be a non-negative integer"),
        "{stderr}"
    );

    // Gadgets have no scale subresource.
    let stderr = kcp.kubectl_in_err(
        cluster,
        &[
            "get",
            "--raw",
            &format!("/clusters/{cluster}/apis/example.com/v1/namespaces/ns/gadgets/g/scale"),
        ],
    );
    assert!(
        stderr.contains("NotFound") || stderr.contains("not found"),
        "{stderr}"
    );
}
