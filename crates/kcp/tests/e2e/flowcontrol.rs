//! API Priority and Fairness objects through kubectl, in a workspace of their own: the kind
//! added with one rule set (`kcp_registry::kinds::flowcontrol`) and one catalogue entry is
//! served, defaulted, validated, printed and versioned like the others.

use super::support::{Kcp, write_file};

const OBJECTS: &str = "apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: PriorityLevelConfiguration
metadata:
  name: batch
spec:
  type: Limited
  limited:
    limitResponse:
      type: Queue
      queuing: {}
---
apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: batch-jobs
spec:
  priorityLevelConfiguration:
    name: batch
  distinguisherMethod:
    type: ByUser
  rules:
  - subjects:
    - kind: Group
      group:
        name: batch-runners
    resourceRules:
    - verbs: [\"*\"]
      apiGroups: [\"*\"]
      resources: [\"*\"]
      namespaces: [\"*\"]
";

const INVALID: &str = "apiVersion: flowcontrol.apiserver.k8s.io/v1
kind: FlowSchema
metadata:
  name: broken
spec:
  matchingPrecedence: 1
  priorityLevelConfiguration:
    name: batch
";

fn cells(table: &str, row: usize) -> Vec<String> {
    table
        .lines()
        .nth(row)
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

#[test]
fn flow_schemas_and_priority_levels_are_served_like_kube() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("apf");
    let ws = kcp.workspace("inner");
    let file = write_file(dir.path(), "apf.yaml", OBJECTS);
    let created = kcp.kubectl_in_ok(&ws, &["create", "-f", &file]);
    assert!(
        created.contains("prioritylevelconfiguration.flowcontrol.apiserver.k8s.io/batch created"),
        "{created}"
    );

    let levels = kcp.kubectl_in_ok(&ws, &["get", "prioritylevelconfigurations"]);
    assert_eq!(
        cells(&levels, 0),
        [
            "NAME",
            "TYPE",
            "NOMINALCONCURRENCYSHARES",
            "QUEUES",
            "HANDSIZE",
            "QUEUELENGTHLIMIT",
            "AGE"
        ]
    );
    assert_eq!(
        cells(&levels, 1)[..6],
        ["batch", "Limited", "30", "64", "8", "50"]
    );
    let schemas = kcp.kubectl_in_ok(&ws, &["get", "flowschemas"]);
    assert_eq!(
        cells(&schemas, 0),
        [
            "NAME",
            "PRIORITYLEVEL",
            "MATCHINGPRECEDENCE",
            "DISTINGUISHERMETHOD",
            "AGE",
            "MISSINGPL"
        ]
    );
    let row = cells(&schemas, 1);
    assert_eq!(row[..4], ["batch-jobs", "batch", "1000", "ByUser"]);
    assert_eq!(row[5], "?");

    let generation = |ws: &str| {
        kcp.kubectl_in_ok(
            ws,
            &[
                "get",
                "flowschema",
                "batch-jobs",
                "-o",
                "jsonpath={.metadata.generation}",
            ],
        )
    };
    assert_eq!(generation(&ws), "1");
    kcp.kubectl_in_ok(
        &ws,
        &[
            "patch",
            "flowschema",
            "batch-jobs",
            "--type=merge",
            "-p",
            r#"{"spec":{"matchingPrecedence":500}}"#,
        ],
    );
    assert_eq!(generation(&ws), "2");

    let invalid = write_file(dir.path(), "invalid.yaml", INVALID);
    let error = kcp.kubectl_in_err(&ws, &["create", "-f", &invalid]);
    assert!(
        error.contains(
            "spec.matchingPrecedence: Invalid value: 1: only the schema named 'exempt' may have matchingPrecedence 1"
        ),
        "{error}"
    );
    // The objects live in the workspace that made them, not in its parent.
    let parent = kcp.kubectl_ok(&["get", "flowschemas", "-o", "name"]);
    assert_eq!(parent.trim(), "");
}
