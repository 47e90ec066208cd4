//! The cases Kubernetes' RBAC documentation walks through, as a table: each row a request and
//! whether the policy below allows it.

use serde_json::{Value, json};

use super::*;

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo {
        name: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..Default::default()
    }
}

fn role(namespace: &str, name: &str, rules: Value) -> Value {
    json!({"metadata": {"namespace": namespace, "name": name}, "rules": rules})
}

fn cluster_role(name: &str, labels: Value, rules: Value) -> Value {
    json!({"metadata": {"name": name, "labels": labels}, "rules": rules})
}

fn binding(namespace: &str, kind: &str, role: &str, subjects: Value) -> Value {
    json!({
        "metadata": {"namespace": namespace, "name": format!("{role}-binding")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
        "subjects": subjects,
    })
}

fn user_subject(name: &str) -> Value {
    json!({"kind": "User", "name": name, "apiGroup": "rbac.authorization.k8s.io"})
}

/// The policy of the documentation's examples.
fn policy() -> Policy {
    let cluster_roles = vec![
        cluster_role(
            "secret-reader",
            json!({}),
            json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "watch", "list"]}]),
        ),
        cluster_role(
            "health",
            json!({}),
            json!([{"nonResourceURLs": ["/healthz", "/healthz/*"], "verbs": ["get", "post"]}]),
        ),
        cluster_role(
            "scaler",
            json!({}),
            json!([{"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["update"]}]),
        ),
        json!({
            "metadata": {"name": "monitoring"},
            "aggregationRule": {"clusterRoleSelectors": [
                {"matchLabels": {"rbac.example.com/aggregate-to-monitoring": "true"}},
            ]},
            "rules": [],
        }),
        cluster_role(
            "monitoring-endpoints",
            json!({"rbac.example.com/aggregate-to-monitoring": "true"}),
            json!([{"apiGroups": [""], "resources": ["services", "endpointslices", "pods"], "verbs": ["get", "list", "watch"]}]),
        ),
        // A chain, as Kubernetes' own admin, edit and view roles are built.
        json!({
            "metadata": {"name": "viewer-plus"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"aggregate-to-viewer-plus": "true"}}]},
        }),
        json!({
            "metadata": {"name": "viewer", "labels": {"aggregate-to-viewer-plus": "true"}},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"aggregate-to-viewer": "true"}}]},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["delete"]}],
        }),
        cluster_role(
            "viewer-configmaps",
            json!({"aggregate-to-viewer": "true"}),
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]),
        ),
    ];
    let roles = vec![
        role(
            "default",
            "pod-reader",
            json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "watch", "list"]}]),
        ),
        role(
            "default",
            "pod-and-pod-logs-reader",
            json!([{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}]),
        ),
        role(
            "default",
            "configmap-updater",
            json!([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["my-configmap"], "verbs": ["update", "get"]}]),
        ),
        role(
            "default",
            "deployer",
            json!([{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"]}]),
        ),
    ];
    let cluster_role_bindings = vec![
        binding(
            "",
            "ClusterRole",
            "secret-reader",
            json!([{"kind": "Group", "name": "manager", "apiGroup": "rbac.authorization.k8s.io"}]),
        ),
        binding("", "ClusterRole", "health", json!([user_subject("prober")])),
        binding(
            "",
            "ClusterRole",
            "scaler",
            json!([user_subject("autoscaler")]),
        ),
        binding(
            "",
            "ClusterRole",
            "monitoring",
            json!([user_subject("prometheus")]),
        ),
        binding(
            "",
            "ClusterRole",
            "viewer-plus",
            json!([user_subject("vera")]),
        ),
        // A ClusterRoleBinding cannot grant a Role.
        binding("", "Role", "pod-reader", json!([user_subject("mallory")])),
    ];
    let role_bindings = vec![
        binding(
            "default",
            "Role",
            "pod-reader",
            json!([user_subject("jane")]),
        ),
        binding(
            "development",
            "ClusterRole",
            "secret-reader",
            json!([user_subject("dave")]),
        ),
        binding(
            "default",
            "Role",
            "pod-and-pod-logs-reader",
            json!([{"kind": "ServiceAccount", "name": "logger"}]),
        ),
        binding(
            "default",
            "Role",
            "configmap-updater",
            json!([{"kind": "ServiceAccount", "name": "updater", "namespace": "default"}]),
        ),
        binding(
            "default",
            "Role",
            "deployer",
            json!([{"kind": "Group", "name": "system:serviceaccounts:ci", "apiGroup": "rbac.authorization.k8s.io"}]),
        ),
        binding(
            "default",
            "ClusterRole",
            "shared-viewer",
            json!([user_subject("sam")]),
        ),
    ];
    Policy::new(
        &cluster_roles,
        &roles,
        &cluster_role_bindings,
        &role_bindings,
    )
}

/// ClusterRoles every logical cluster may reference without a copy.
fn shared() -> Policy {
    Policy::new(
        &[cluster_role(
            "shared-viewer",
            json!({}),
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]),
        )],
        &[],
        &[],
        &[],
    )
}

fn resource<'a>(
    group: &'a str,
    resource: &'a str,
    subresource: &'a str,
    name: &'a str,
    namespace: &'a str,
) -> Target<'a> {
    Target::Resource {
        api_group: group,
        resource,
        subresource,
        name,
        namespace,
    }
}

#[test]
fn the_documented_cases() {
    let policy = policy();
    let shared = shared();
    let jane = user("jane", &["system:authenticated"]);
    let dave = user("dave", &[]);
    let manager = user("mia", &["manager"]);
    let logger = user("system:serviceaccount:default:logger", &[]);
    let logger_elsewhere = user("system:serviceaccount:other:logger", &[]);
    let updater = user("system:serviceaccount:default:updater", &[]);
    let ci = user(
        "system:serviceaccount:ci:builder",
        &["system:serviceaccounts", "system:serviceaccounts:ci"],
    );
    let prober = user("prober", &[]);
    let autoscaler = user("autoscaler", &[]);
    let prometheus = user("prometheus", &[]);
    let vera = user("vera", &[]);
    let mallory = user("mallory", &[]);
    let sam = user("sam", &[]);
    let pods = |ns| resource("", "pods", "", "", ns);
    let cases: Vec<(&UserInfo, &str, Target<'_>, bool)> = vec![
        // A Role grants in its namespace only, and only its verbs.
        (
            &jane,
            "get",
            resource("", "pods", "", "web", "default"),
            true,
        ),
        (&jane, "list", pods("default"), true),
        (&jane, "list", pods("kube-system"), false),
        (&jane, "list", pods(""), false),
        (&jane, "create", pods("default"), false),
        (
            &jane,
            "get",
            resource("apps", "pods", "", "", "default"),
            false,
        ),
        // A ClusterRole bound in one namespace grants there only.
        (
            &dave,
            "get",
            resource("", "secrets", "", "s", "development"),
            true,
        ),
        (
            &dave,
            "get",
            resource("", "secrets", "", "s", "default"),
            false,
        ),
        (&dave, "list", resource("", "secrets", "", "", ""), false),
        // A ClusterRoleBinding grants in every namespace and across them; groups match.
        (&manager, "list", resource("", "secrets", "", "", ""), true),
        (
            &manager,
            "watch",
            resource("", "secrets", "", "", "any"),
            true,
        ),
        (
            &manager,
            "delete",
            resource("", "secrets", "", "s", "any"),
            false,
        ),
        // Subresources are named `resource/subresource`; the resource alone does not grant them.
        (
            &logger,
            "get",
            resource("", "pods", "log", "web", "default"),
            true,
        ),
        (
            &jane,
            "get",
            resource("", "pods", "log", "web", "default"),
            false,
        ),
        (
            &logger,
            "get",
            resource("", "pods", "status", "web", "default"),
            false,
        ),
        // A service account subject without a namespace is of the binding's namespace.
        (&logger_elsewhere, "get", pods("default"), false),
        // `*/scale` is the scale subresource of every resource.
        (
            &autoscaler,
            "update",
            resource("apps", "deployments", "scale", "d", "x"),
            true,
        ),
        (
            &autoscaler,
            "update",
            resource("apps", "deployments", "", "d", "x"),
            false,
        ),
        // resourceNames restrict to those objects; a request without a name matches none.
        (
            &updater,
            "get",
            resource("", "configmaps", "", "my-configmap", "default"),
            true,
        ),
        (
            &updater,
            "update",
            resource("", "configmaps", "", "my-configmap", "default"),
            true,
        ),
        (
            &updater,
            "get",
            resource("", "configmaps", "", "other", "default"),
            false,
        ),
        (
            &updater,
            "list",
            resource("", "configmaps", "", "", "default"),
            false,
        ),
        // Service-account groups; `*` verbs; the API group must match.
        (
            &ci,
            "deletecollection",
            resource("apps", "deployments", "", "", "default"),
            true,
        ),
        (
            &ci,
            "create",
            resource("", "deployments", "", "", "default"),
            false,
        ),
        // Non-resource URLs: exact, or a prefix ending in `*`; never through resources.
        (
            &prober,
            "get",
            Target::NonResource { path: "/healthz" },
            true,
        ),
        (
            &prober,
            "get",
            Target::NonResource {
                path: "/healthz/etcd",
            },
            true,
        ),
        (
            &prober,
            "post",
            Target::NonResource { path: "/healthz" },
            true,
        ),
        (
            &prober,
            "get",
            Target::NonResource { path: "/metrics" },
            false,
        ),
        (
            &prober,
            "delete",
            Target::NonResource { path: "/healthz" },
            false,
        ),
        (
            &jane,
            "get",
            Target::NonResource { path: "/healthz" },
            false,
        ),
        // Aggregated ClusterRoles gather the rules of the roles their selectors pick.
        (
            &prometheus,
            "list",
            resource("", "endpointslices", "", "", ""),
            true,
        ),
        (&prometheus, "delete", pods("x"), false),
        // ... along chains, replacing the aggregated role's own rules.
        (&vera, "get", resource("", "configmaps", "", "c", "x"), true),
        (&vera, "delete", resource("", "nodes", "", "n", ""), false),
        // A ClusterRoleBinding to a Role grants nothing.
        (&mallory, "get", pods("default"), false),
        // Shared ClusterRoles can be bound without a copy in the cluster.
        (
            &sam,
            "list",
            resource("", "configmaps", "", "", "default"),
            true,
        ),
        (
            &sam,
            "list",
            resource("", "configmaps", "", "", "other"),
            false,
        ),
    ];
    for (user, verb, target, expected) in cases {
        let attributes = Attributes { user, verb, target };
        assert_eq!(
            policy.allows(&attributes, Some(&shared)),
            expected,
            "{} {verb} {target:?}",
            user.name
        );
    }
    // Without the shared roles, a binding to one grants nothing.
    let attributes = Attributes {
        user: &sam,
        verb: "list",
        target: resource("", "configmaps", "", "", "default"),
    };
    assert!(!policy.allows(&attributes, None));
}

#[test]
fn aggregation_gathers_each_rule_once_and_an_empty_selector_takes_every_role() {
    let roles = [
        json!({"metadata": {"name": "all"}, "aggregationRule": {"clusterRoleSelectors": [{}]}}),
        cluster_role(
            "a",
            json!({"x": "1"}),
            json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]),
        ),
        cluster_role(
            "b",
            json!({}),
            json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]),
        ),
    ];
    let policy = Policy::new(&roles, &[], &[], &[]);
    assert_eq!(policy.cluster_role("all").unwrap().len(), 1);
}

#[test]
fn a_clusters_labelled_roles_aggregate_into_the_shared_roles_there_only() {
    let shared = [
        json!({
            "metadata": {"name": "admin"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-admin": "true"}}]},
        }),
        cluster_role(
            "system:aggregate-to-admin",
            json!({"rbac.authorization.k8s.io/aggregate-to-admin": "true"}),
            json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]),
        ),
    ];
    let widgets = cluster_role(
        "widget-admin",
        json!({"rbac.authorization.k8s.io/aggregate-to-admin": "true"}),
        json!([{"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["*"]}]),
    );
    let bindings = [binding(
        "team",
        "ClusterRole",
        "admin",
        json!([user_subject("ann")]),
    )];
    let ann = user("ann", &[]);
    let asks = |group, plural| Attributes {
        user: &ann,
        verb: "delete",
        target: resource(group, plural, "", "x", "team"),
    };
    let shared_policy = Policy::new(&shared, &[], &[], &[]);
    let here = Policy::over_shared(&shared, &[widgets], &[], &[], &bindings);
    assert!(here.allows(&asks("example.com", "widgets"), Some(&shared_policy)));
    assert!(here.allows(&asks("", "configmaps"), Some(&shared_policy)));
    // A cluster without such a role holds no copy and grants the shared role as it is.
    let plain = Policy::over_shared(&shared, &[], &[], &[], &bindings);
    assert!(plain.cluster_role("admin").is_none());
    assert!(!plain.allows(&asks("example.com", "widgets"), Some(&shared_policy)));
    assert!(plain.allows(&asks("", "configmaps"), Some(&shared_policy)));
}

#[test]
fn denials_are_worded_as_kube_apiserver_words_them() {
    let alice = user("alice", &[]);
    let message = |verb, target| {
        forbidden_message(&Attributes {
            user: &alice,
            verb,
            target,
        })
    };
    assert_eq!(
        message("list", resource("", "configmaps", "", "", "team")),
        r#"User "alice" cannot list resource "configmaps" in API group "" in the namespace "team""#
    );
    assert_eq!(
        message("get", resource("apps", "deployments", "scale", "d", "")),
        r#"User "alice" cannot get resource "deployments/scale" in API group "apps" at the cluster scope"#
    );
    assert_eq!(
        message("get", Target::NonResource { path: "/metrics" }),
        r#"User "alice" cannot get path "/metrics""#
    );
}

#[test]
fn escalation_finds_what_is_not_held_wildcards_covered_only_by_wildcards() {
    let rule = |value: Value| Rule::from_json(&value);
    let held = vec![
        rule(
            json!({"apiGroups": [""], "resources": ["configmaps", "pods/log"], "verbs": ["get", "list"]}),
        ),
        rule(json!({"apiGroups": ["apps"], "resources": ["*"], "verbs": ["*"]})),
        rule(json!({"nonResourceURLs": ["/healthz/*"], "verbs": ["get"]})),
    ];
    let covered = vec![
        rule(json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]})),
        rule(
            json!({"apiGroups": [""], "resources": ["pods/log"], "resourceNames": ["p"], "verbs": ["list"]}),
        ),
        rule(
            json!({"apiGroups": ["apps"], "resources": ["deployments", "deployments/scale"], "verbs": ["*"]}),
        ),
        rule(json!({"nonResourceURLs": ["/healthz/etcd"], "verbs": ["get"]})),
    ];
    assert!(uncovered(&held, &covered).is_empty());
    let wanted = vec![
        rule(
            json!({"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["get", "delete"]}),
        ),
        rule(json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]})),
        rule(json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["get"]})),
        rule(json!({"nonResourceURLs": ["/metrics"], "verbs": ["get"]})),
    ];
    let missing: Vec<String> = uncovered(&held, &wanted)
        .iter()
        .map(Rule::compact)
        .collect();
    assert_eq!(
        missing,
        [
            r#"{APIGroups:[""], Resources:["secrets"], Verbs:["get" "delete"]}"#,
            r#"{APIGroups:[""], Resources:["configmaps"], Verbs:["delete"]}"#,
            r#"{APIGroups:[""], Resources:["pods"], Verbs:["get"]}"#,
            r#"{APIGroups:["*"], Resources:["*"], Verbs:["get"]}"#,
            r#"{NonResourceURLs:["/metrics"], Verbs:["get"]}"#,
        ]
    );
}
