//! The rule sets against the catalogue, and each kind's Table as kubectl prints it.

use jiff::Timestamp;
use kcp_apimachinery::patch::strategic::ListStrategy;
use kcp_apis::builtin::{RESOURCES, Resource};
use serde_json::{Value, json};

use super::{Column, KINDS, rules};

fn columns(resource: &Resource) -> &'static [Column] {
    rules(resource).columns()
}

fn cells(resource: &Resource, object: &Value, now: Timestamp) -> Vec<Value> {
    rules(resource).cells(object, now)
}

#[test]
fn every_stored_kind_has_a_rule_set_and_every_rule_set_a_resource() {
    for resource in RESOURCES.iter().filter(|r| r.verbs.contains(&"get")) {
        let (group, kind) = rules(resource).group_kind();
        assert_eq!((group, kind), (&*resource.group, &*resource.kind));
    }
    for kind in KINDS {
        let (group, name) = kind.group_kind();
        assert!(
            RESOURCES.iter().any(|r| r.group == group && r.kind == name),
            "{group} {name} has rules but no resource"
        );
    }
}

#[test]
fn metadata_lists_merge_for_every_kind() {
    let strategy = |group: &str, name: &str, path: &[&str]| {
        let resource = RESOURCES
            .iter()
            .find(|r| r.group == group && r.name == name)
            .unwrap();
        rules(resource).list_strategy(path)
    };
    assert_eq!(
        strategy("", "configmaps", &["metadata", "finalizers"]),
        ListStrategy::MergePrimitives
    );
    assert_eq!(
        strategy("", "serviceaccounts", &["secrets"]),
        ListStrategy::MergeByKey("name")
    );
    assert_eq!(
        strategy("rbac.authorization.k8s.io", "roles", &["rules"]),
        ListStrategy::Replace
    );
    assert_eq!(
        strategy("", "namespaces", &["status", "conditions"]),
        ListStrategy::MergeByKey("type")
    );
}

fn resource(group: &str, name: &str) -> &'static Resource {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.name == name)
        .unwrap()
}

fn now() -> Timestamp {
    "2024-01-02T00:00:00Z".parse().unwrap()
}

fn names(resource: &Resource) -> Vec<&'static str> {
    columns(resource).iter().map(|c| c.name).collect()
}

#[test]
fn every_row_has_one_cell_per_column() {
    let object = json!({"metadata": {"name": "x", "creationTimestamp": "2024-01-01T00:00:00Z"}});
    for resource in RESOURCES {
        assert_eq!(
            cells(resource, &object, now()).len(),
            columns(resource).len(),
            "{}",
            resource.name
        );
    }
}

#[test]
fn core_kinds_have_kubectls_columns() {
    assert_eq!(names(resource("", "namespaces")), ["Name", "Status", "Age"]);
    assert_eq!(names(resource("", "configmaps")), ["Name", "Data", "Age"]);
    assert_eq!(
        names(resource("", "secrets")),
        ["Name", "Type", "Data", "Age"]
    );
    assert_eq!(
        names(resource("", "serviceaccounts")),
        ["Name", "Secrets", "Age"]
    );
    let cm = json!({"metadata": {"name": "cm", "creationTimestamp": "2024-01-01T23:59:00Z"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}});
    assert_eq!(
        cells(resource("", "configmaps"), &cm, now()),
        [json!("cm"), json!(3), json!("60s")]
    );
    let secret = json!({"metadata": {"name": "s"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}});
    assert_eq!(
        cells(resource("", "secrets"), &secret, now()),
        [
            json!("s"),
            json!("kubernetes.io/tls"),
            json!(2),
            json!("<unknown>")
        ]
    );
    let ns = json!({"metadata": {"name": "n"}, "status": {"phase": "Active"}});
    assert_eq!(cells(resource("", "namespaces"), &ns, now())[1], "Active");
    let deleting = json!({"metadata": {"name": "n", "deletionTimestamp": "2024-01-01T00:00:00Z"}});
    assert_eq!(
        cells(resource("", "namespaces"), &deleting, now())[1],
        "Terminating"
    );
    let fresh = json!({"metadata": {"name": "n"}});
    assert_eq!(
        cells(resource("", "namespaces"), &fresh, now())[1],
        "Active"
    );
}

#[test]
fn events_print_last_seen_object_and_wide_columns() {
    let event = json!({
        "metadata": {"name": "e1"},
        "involvedObject": {"kind": "ConfigMap", "name": "cm", "fieldPath": "data"},
        "type": "Warning", "reason": "Odd", "message": " hello \n",
        "firstTimestamp": "2024-01-01T00:00:00Z", "lastTimestamp": "2024-01-01T23:00:00Z",
        "count": 4, "source": {"component": "me", "host": "h"},
    });
    let core = resource("", "events");
    let wide: Vec<&str> = columns(core)
        .iter()
        .filter(|c| c.priority == 1)
        .map(|c| c.name)
        .collect();
    assert_eq!(wide, ["Subobject", "Source", "First Seen", "Count", "Name"]);
    assert_eq!(
        cells(core, &event, now()),
        [
            json!("60m"),
            json!("Warning"),
            json!("Odd"),
            json!("configmap/cm"),
            json!("data"),
            json!("me, h"),
            json!("hello"),
            json!("24h"),
            json!(4),
            json!("e1")
        ]
    );
    let new_style = json!({
        "metadata": {"name": "e2"}, "regarding": {"kind": "Lease", "name": "l"},
        "note": "n", "eventTime": "2024-01-01T23:59:50.000000Z", "reportingController": "ctl",
    });
    let cells = cells(resource("events.k8s.io", "events"), &new_style, now());
    assert_eq!(cells[0], "10s");
    assert_eq!(cells[3], "lease/l");
    assert_eq!(cells[5], "ctl");
    assert_eq!(cells[6], "n");
    assert_eq!(cells[8], 1);
}

#[test]
fn rbac_and_other_groups() {
    let rb = resource("rbac.authorization.k8s.io", "rolebindings");
    assert_eq!(
        names(rb),
        ["Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"]
    );
    let binding = json!({"metadata": {"name": "b"}, "roleRef": {"kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "User", "name": "u1"}, {"kind": "User", "name": "u2"},
                     {"kind": "Group", "name": "g"}, {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]});
    assert_eq!(
        cells(rb, &binding, now()),
        [
            json!("b"),
            json!("ClusterRole/view"),
            json!("<unknown>"),
            json!("u1, u2"),
            json!("g"),
            json!("ns/sa")
        ]
    );
    let role = resource("rbac.authorization.k8s.io", "roles");
    assert_eq!(names(role), ["Name", "Created At"]);
    assert_eq!(columns(role)[1].kind, "date");
    let r = json!({"metadata": {"name": "r", "creationTimestamp": "2024-01-01T00:00:00Z"}});
    assert_eq!(cells(role, &r, now())[1], "2024-01-01T00:00:00Z");
    assert_eq!(
        names(resource(
            "apiextensions.k8s.io",
            "customresourcedefinitions"
        )),
        ["Name", "Created At"]
    );
    let lease = json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}});
    assert_eq!(
        cells(resource("coordination.k8s.io", "leases"), &lease, now())[1],
        "me"
    );
    let hooks = json!({"metadata": {"name": "w"}, "webhooks": [{}, {}]});
    let webhook = resource(
        "admissionregistration.k8s.io",
        "validatingwebhookconfigurations",
    );
    assert_eq!(names(webhook), ["Name", "Webhooks", "Age"]);
    assert_eq!(cells(webhook, &hooks, now())[1], 2);
    let csr = json!({"metadata": {"name": "c"}, "spec": {"signerName": "s/x", "username": "bob", "expirationSeconds": 3600},
        "status": {"conditions": [{"type": "Approved"}], "certificate": "Zm9v"}});
    assert_eq!(
        cells(
            resource("certificates.k8s.io", "certificatesigningrequests"),
            &csr,
            now()
        )[2..],
        [
            json!("s/x"),
            json!("bob"),
            json!("60m"),
            json!("Approved,Issued")
        ]
    );
}

#[test]
fn quotas_split_requests_and_limits() {
    let quota = json!({"metadata": {"name": "q"}, "status": {
        "hard": {"pods": "10", "limits.cpu": "2", "requests.memory": "1Gi"},
        "used": {"pods": "3", "limits.cpu": "500m"}}});
    let cells = cells(resource("", "resourcequotas"), &quota, now());
    assert_eq!(cells[1], "pods: 3/10, requests.memory: 0/1Gi");
    assert_eq!(cells[2], "limits.cpu: 500m/2");
}
