//! ClusterRole aggregation with kubectl, in two workspaces at once: an aggregating ClusterRole
//! gets the rules of the roles its selectors pick and follows their labels, rules and
//! deletion; roles of the other workspace never count.

use kcp_testing::wait;

use super::support::{Kcp, write_file};

const LABEL: &str = "rbac.example.com/aggregate-to-monitoring";

fn aggregator() -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: monitoring\naggregationRule:\n  clusterRoleSelectors:\n  - matchLabels:\n      {LABEL}: \"true\"\nrules: []\n"
    )
}

/// The `resource/verb` pairs of the aggregator's rules, sorted.
fn aggregated(kcp: &Kcp, cluster: &str) -> String {
    let text = kcp.kubectl_in_ok(
        cluster,
        &[
            "get",
            "clusterrole",
            "monitoring",
            "-o",
            "jsonpath={range .rules[*]}{.resources[0]}/{.verbs[0]} {end}",
        ],
    );
    let mut pairs: Vec<&str> = text.split_whitespace().collect();
    pairs.sort();
    pairs.join(" ")
}

fn wait_aggregated(kcp: &Kcp, cluster: &str, expected: &str) {
    wait::until(
        &format!("monitoring in {cluster} aggregates {expected:?}"),
        || {
            let seen = aggregated(kcp, cluster);
            if seen == expected { Ok(()) } else { Err(seen) }
        },
    );
}

#[test]
fn an_aggregated_role_follows_the_labels_of_its_workspace_only() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("clusterrole-aggregation");
    let (home, other) = (kcp.home().to_string(), kcp.workspace("other"));
    let file = write_file(dir.path(), "aggregator.yaml", &aggregator());
    for cluster in [&home, &other] {
        kcp.kubectl_in_ok(cluster, &["create", "-f", &file]);
        for (role, resource) in [
            ("cm-reader", "configmaps"),
            ("sa-reader", "serviceaccounts"),
        ] {
            kcp.kubectl_in_ok(
                cluster,
                &[
                    "create",
                    "clusterrole",
                    role,
                    "--verb=get",
                    &format!("--resource={resource}"),
                ],
            );
        }
    }
    let label = format!("{LABEL}=true");
    kcp.kubectl_in_ok(&home, &["label", "clusterrole", "cm-reader", &label]);
    kcp.kubectl_in_ok(&home, &["label", "clusterrole", "sa-reader", &label]);
    kcp.kubectl_in_ok(&other, &["label", "clusterrole", "sa-reader", &label]);
    wait_aggregated(&kcp, &home, "configmaps/get serviceaccounts/get");
    wait_aggregated(&kcp, &other, "serviceaccounts/get");

    // A rule added to a selected role is aggregated; a label removed drops its rules.
    kcp.kubectl_in_ok(
        &home,
        &[
            "patch",
            "clusterrole",
            "cm-reader",
            "--type=json",
            "-p",
            r#"[{"op":"add","path":"/rules/-","value":{"apiGroups":[""],"resources":["secrets"],"verbs":["list"]}}]"#,
        ],
    );
    wait_aggregated(
        &kcp,
        &home,
        "configmaps/get secrets/list serviceaccounts/get",
    );
    kcp.kubectl_in_ok(
        &home,
        &["label", "clusterrole", "sa-reader", &format!("{LABEL}-")],
    );
    wait_aggregated(&kcp, &home, "configmaps/get secrets/list");
    // A selected role deleted takes its rules along.
    kcp.kubectl_in_ok(&home, &["delete", "clusterrole", "cm-reader"]);
    wait_aggregated(&kcp, &home, "");
    assert_eq!(aggregated(&kcp, &other), "serviceaccounts/get");
}
