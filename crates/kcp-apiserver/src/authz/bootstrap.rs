//! The ClusterRoles every logical cluster may bind without holding a copy, as kcp's bootstrap
//! policy provides them: Kubernetes' `cluster-admin`, `admin`, `edit` and `view` (over the APIs
//! this server serves), `system:discovery`, `system:basic-user`, and kcp's own:
//! `system:kcp:workspace:access` (verb `access` on `/`, which entering a workspace needs),
//! `system:kcp:tenancy:reader`, `system:kcp:metrics-reader`, and the roles of kcp's system
//! groups (`system:kcp:admin`, the workspace bootstrapper, the logical cluster admins); and the
//! bindings that hold everywhere.
//! Kept once in memory for all workspaces.

use kcp_apimachinery::rbac::Policy;
use serde_json::{Value, json};

/// Read verbs, as Kubernetes' `view` role grants them.
const READ: &[&str] = &["get", "list", "watch"];
/// Write verbs, as Kubernetes' `edit` role adds them.
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];

/// The objects a workspace's users read and write in Kubernetes' `view` and `edit` roles (of
/// the APIs kcp serves): configmaps, events, service accounts, and (edit only) secrets.
fn namespaced_content(verbs: &[&str], secrets: bool) -> Vec<Value> {
    let mut core = vec!["configmaps", "events", "serviceaccounts", "resourcequotas"];
    if secrets {
        core.push("secrets");
    }
    vec![
        json!({"apiGroups": [""], "resources": core, "verbs": verbs}),
        json!({"apiGroups": [""], "resources": ["namespaces"], "verbs": READ}),
        json!({"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": verbs}),
        json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": verbs}),
    ]
}

fn cluster_role(name: &str, rules: Vec<Value>) -> Value {
    json!({"metadata": {"name": name}, "rules": rules})
}

/// The label by which a ClusterRole joins the aggregated role `role` (`admin`, `edit`, `view`).
fn aggregate_to(role: &str) -> String {
    format!("rbac.authorization.k8s.io/aggregate-to-{role}")
}

/// A ClusterRole gathering the rules of every ClusterRole labelled `aggregate-to-<name>`, as
/// Kubernetes' `admin`, `edit` and `view` are; `labels` make it part of another.
fn aggregated(name: &str, labels: Value) -> Value {
    json!({
        "metadata": {"name": name, "labels": labels},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {aggregate_to(name): "true"}}]},
        "rules": [],
    })
}

/// A ClusterRole whose rules join the aggregated role `into`.
fn part_of(name: &str, into: &str, rules: Vec<Value>) -> Value {
    json!({"metadata": {"name": name, "labels": {aggregate_to(into): "true"}}, "rules": rules})
}

/// The bootstrap ClusterRoles. `admin`, `edit` and `view` are aggregated as in Kubernetes
/// (view into edit, edit into admin, and each from its `system:aggregate-to-*` part), so a
/// workspace's own ClusterRoles labelled `rbac.authorization.k8s.io/aggregate-to-<role>` add
/// to them there.
pub(crate) fn cluster_roles() -> Vec<Value> {
    let all_verbs: Vec<&str> = READ.iter().chain(WRITE).copied().collect();
    let view_rules = namespaced_content(READ, false);
    let mut edit_rules = namespaced_content(&all_verbs, true);
    edit_rules.retain(|rule| !view_rules.contains(rule));
    let admin_rules = vec![json!({
        "apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["roles", "rolebindings"],
        "verbs": all_verbs,
    })];
    vec![
        cluster_role(
            "cluster-admin",
            vec![
                json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}),
                json!({"nonResourceURLs": ["*"], "verbs": ["*"]}),
            ],
        ),
        aggregated("admin", json!({})),
        aggregated("edit", json!({aggregate_to("admin"): "true"})),
        aggregated("view", json!({aggregate_to("edit"): "true"})),
        part_of("system:aggregate-to-admin", "admin", admin_rules),
        part_of("system:aggregate-to-edit", "edit", edit_rules),
        part_of("system:aggregate-to-view", "view", view_rules),
        cluster_role(
            "system:kcp:tenancy:reader",
            vec![
                json!({"apiGroups": ["tenancy.kcp.io"], "resources": ["workspaces", "workspacetypes"], "verbs": READ}),
                json!({"apiGroups": ["core.kcp.io"], "resources": ["logicalclusters"], "verbs": READ}),
            ],
        ),
        cluster_role(
            "system:kcp:tenancy:workspace-bootstrapper",
            vec![
                json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}),
                json!({"nonResourceURLs": ["*"], "verbs": ["*"]}),
            ],
        ),
        cluster_role(
            "system:kcp:logical-cluster-admin",
            vec![
                json!({"apiGroups": ["core.kcp.io"], "resources": ["logicalclusters", "logicalclusters/status"], "verbs": ["*"]}),
                json!({"apiGroups": ["tenancy.kcp.io"], "resources": ["workspaces"], "verbs": ["delete", "update", "get"]}),
            ],
        ),
        cluster_role(
            "system:kcp:external-logical-cluster-admin",
            vec![
                json!({"apiGroups": ["core.kcp.io"], "resources": ["logicalclusters", "logicalclusters/status"], "verbs": ["delete", "update", "get"]}),
                json!({"apiGroups": ["tenancy.kcp.io"], "resources": ["workspaces"], "verbs": ["delete", "update", "patch", "get"]}),
                json!({"apiGroups": [""], "resources": ["serviceaccounts", "secrets"], "verbs": ["get"]}),
                json!({"nonResourceURLs": ["/"], "verbs": ["access"]}),
                json!({"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}),
            ],
        ),
        cluster_role(
            "system:service-account-issuer-discovery",
            vec![json!({
                "nonResourceURLs": [
                    "/.well-known/openid-configuration", "/.well-known/openid-configuration/",
                    "/openid/v1/jwks", "/openid/v1/jwks/",
                ],
                "verbs": ["get"],
            })],
        ),
        cluster_role(
            "system:kcp:metrics-reader",
            vec![json!({"nonResourceURLs": ["/metrics"], "verbs": ["get"]})],
        ),
        cluster_role(
            "system:kcp:workspace:access",
            vec![json!({"nonResourceURLs": ["/"], "verbs": ["access"]})],
        ),
        cluster_role(
            "system:basic-user",
            vec![
                json!({
                    "apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    "verbs": ["create"],
                }),
                json!({
                    "apiGroups": ["authentication.k8s.io"],
                    "resources": ["selfsubjectreviews"],
                    "verbs": ["create"],
                }),
            ],
        ),
        cluster_role(
            "system:discovery",
            vec![json!({
                "nonResourceURLs": [
                    "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
                    "/openapi/*", "/readyz", "/version", "/version/",
                ],
                "verbs": ["get"],
            })],
        ),
    ]
}

/// The bindings that hold in every logical cluster: every authenticated user reads discovery
/// and asks what they may do and who they are (Kubernetes' `system:discovery` and
/// `system:basic-user`), and kcp's admins (`system:kcp:admin`, the group of the admin
/// kubeconfig's `kcp-admin`) are `cluster-admin` (kcp's `system:kcp:admin:cluster-admin`).
pub(crate) fn cluster_role_bindings() -> Vec<Value> {
    [
        ("system:discovery", "system:discovery", "system:authenticated"),
        ("system:basic-user", "system:basic-user", "system:authenticated"),
        ("system:kcp:admin:cluster-admin", "cluster-admin", "system:kcp:admin"),
        (
            "system:service-account-issuer-discovery",
            "system:service-account-issuer-discovery",
            "system:serviceaccounts",
        ),
        (
            "system:kcp:tenancy:workspace-bootstrapper",
            "system:kcp:tenancy:workspace-bootstrapper",
            "system:kcp:tenancy:workspace-bootstrapper",
        ),
        (
            "system:kcp:logical-cluster-admin",
            "system:kcp:logical-cluster-admin",
            "system:kcp:logical-cluster-admin",
        ),
        (
            "system:kcp:external-logical-cluster-admin",
            "system:kcp:external-logical-cluster-admin",
            "system:kcp:external-logical-cluster-admin",
        ),
    ]
    .iter()
    .map(|(name, role, group)| {
        json!({
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}],
        })
    })
    .collect()
}

/// The bootstrap ClusterRoles and bindings as a policy.
pub(crate) fn policy() -> Policy {
    Policy::new(&cluster_roles(), &[], &cluster_role_bindings(), &[])
}
