//! Pull mode (`--syncer-mode pull`): the cluster-controller installs the syncer into each
//! physical cluster instead of running it, and takes the Cluster's readiness from the syncer's
//! heartbeat, a Lease in the workspace.
//!
//! In the workspace (all owned by the Cluster, so they go with it), in `kube-system`: a
//! ServiceAccount `kcp-syncer-<cluster>` with a token Secret, a ClusterRole and binding that let
//! it read the synced resources and write their status and read namespaces, and a Role and
//! binding for the Lease `kcp-syncer-<cluster>` it renews.
//!
//! In the physical cluster, in the namespace [`syncer_namespace`]: a ServiceAccount `kcp-syncer`,
//! a ClusterRole and binding (named as the namespace) covering exactly what the syncer does
//! there (namespaces and the synced resources: get, list, watch, create, update, patch, delete),
//! the Secret `kcp-syncer-kubeconfig` (a kubeconfig of the workspace with the token above), and
//! the Deployment `kcp-syncer` running the syncer image with [`syncer_args`] (in-cluster
//! credentials downstream). Everything is written by server-side apply, again whenever what
//! would be installed changes; removed when the Cluster goes.

use std::time::Duration;

use base64::Engine as _;
use kube::api::ApiResource;
use serde_json::{Value, json};

use crate::requests;
pub use crate::requests::apply;
use crate::syncer::transform::digest;

/// Where the kubeconfig Secret is mounted in the syncer's pod.
pub const KUBECONFIG_MOUNT: &str = "/etc/kcp-syncer";
/// The workspace namespace holding the syncer's identity and Lease.
pub const UPSTREAM_NAMESPACE: &str = "kube-system";

/// The name of the syncer's ServiceAccount, RBAC and Lease in the workspace for `cluster`.
pub fn upstream_name(cluster: &str) -> String {
    let name = format!("kcp-syncer-{cluster}");
    match name.len() <= 63 {
        true => name,
        false => format!("kcp-syncer-{:016x}", digest(cluster.as_bytes())),
    }
}

/// The physical cluster's namespace of the syncer of `workspace` for the Cluster `cluster`.
pub fn syncer_namespace(workspace: &str, cluster: &str) -> String {
    let name = format!("kcp-syncer-{}-{cluster}", workspace.replace(':', "-"));
    match name.len() <= 63 && !cluster.contains('.') {
        true => name,
        false => format!(
            "kcp-syncer-{:016x}",
            digest(format!("{workspace}/{cluster}").as_bytes())
        ),
    }
}

/// What the syncer of `cluster` runs with, as its Deployment says it.
#[derive(Debug, Clone)]
pub struct Install {
    /// The logical cluster synced from.
    pub workspace: String,
    /// The Cluster's name.
    pub cluster: String,
    /// The resources synced.
    pub resources: Vec<ApiResource>,
    pub resync: Duration,
    pub heartbeat: Duration,
    pub image: String,
    pub split_roots: bool,
}

impl Install {
    /// A digest of everything installed but the credentials: installed again when it changes.
    pub fn fingerprint(&self) -> String {
        let text = format!("{:?}", (syncer_args(self), &self.image));
        format!("{:016x}", digest(text.as_bytes()))
    }
}

fn group_resource(resource: &ApiResource) -> String {
    match resource.group.as_str() {
        "" => resource.plural.clone(),
        group => format!("{}.{group}", resource.plural),
    }
}

fn seconds(duration: Duration) -> String {
    format!("{}s", duration.as_secs().max(1))
}

/// The syncer's arguments in the physical cluster (its kubeconfig of kcp mounted from the
/// Secret, in-cluster credentials downstream).
pub fn syncer_args(install: &Install) -> Vec<String> {
    let mut args = vec![
        format!("--from-kubeconfig={KUBECONFIG_MOUNT}/kubeconfig"),
        format!("--workspace={}", install.workspace),
        format!("--cluster={}", install.cluster),
        format!("--resync-interval={}", seconds(install.resync)),
        format!(
            "--heartbeat-lease={UPSTREAM_NAMESPACE}/{}",
            upstream_name(&install.cluster)
        ),
        format!("--heartbeat-interval={}", seconds(install.heartbeat)),
        format!("--split-deployments={}", install.split_roots),
    ];
    args.extend(install.resources.iter().map(group_resource));
    args
}

/// RBAC rules: `verbs` on each resource of `resources` (and `extra` rules).
fn rules(resources: &[ApiResource], verbs: &[&str], extra: Vec<Value>) -> Vec<Value> {
    let mut rules: Vec<Value> = resources
        .iter()
        .map(|r| json!({"apiGroups": [r.group], "resources": [r.plural], "verbs": verbs}))
        .collect();
    rules.extend(extra);
    rules
}

/// The workspace's objects for the syncer of `install` (path, object), owned by `owner` (the
/// Cluster).
pub fn upstream_objects(install: &Install, owner: &Value) -> Vec<(String, Value)> {
    let name = upstream_name(&install.cluster);
    let ns = UPSTREAM_NAMESPACE;
    let owners = json!([crate::kinds::owner_reference(
        owner,
        "cluster.example.dev/v1alpha1",
        "Cluster"
    )]);
    let meta = |namespaced: bool| {
        let mut meta = json!({"name": name, "ownerReferences": owners});
        if namespaced {
            meta["namespace"] = json!(ns);
        }
        meta
    };
    let subject = json!([{"kind": "ServiceAccount", "name": name, "namespace": ns}]);
    let status: Vec<Value> = install
        .resources
        .iter()
        .map(|r| json!({"apiGroups": [r.group], "resources": [format!("{}/status", r.plural)], "verbs": ["get", "update", "patch"]}))
        .collect();
    let mut extra = status;
    extra.push(
        json!({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]}),
    );
    extra.push(
        json!({"apiGroups": ["core.kcp.io"], "resources": ["logicalclusters"], "verbs": ["get"]}),
    );
    let mut token_meta = meta(true);
    token_meta["name"] = json!(format!("{name}-token"));
    token_meta["annotations"] = json!({"kubernetes.io/service-account.name": name});
    vec![
        (
            format!("/api/v1/namespaces/{ns}"),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
        ),
        (
            format!("/api/v1/namespaces/{ns}/serviceaccounts/{name}"),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(true)}),
        ),
        (
            format!("/api/v1/namespaces/{ns}/secrets/{name}-token"),
            json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token", "metadata": token_meta}),
        ),
        (
            format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(false),
                "rules": rules(&install.resources, &["get", "list", "watch"], extra)}),
        ),
        (
            format!("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta(false),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": subject}),
        ),
        (
            format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles/{name}"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(true),
                "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update", "patch"]}]}),
        ),
        (
            format!("/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings/{name}"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(true),
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
                "subjects": subject}),
        ),
    ]
}

/// A kubeconfig of the workspace at `server` with `token`, trusting `ca` (base64 PEM).
pub fn upstream_kubeconfig(server: &str, ca: &str, token: &str) -> String {
    let config = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kcp", "cluster": {"server": server, "certificate-authority-data": ca}}],
        "users": [{"name": "syncer", "user": {"token": token}}],
        "contexts": [{"name": "kcp", "context": {"cluster": "kcp", "user": "syncer"}}],
        "current-context": "kcp",
    });
    config.to_string()
}

/// The physical cluster's objects for the syncer of `install` (path, object), with `kubeconfig`
/// (of the workspace).
pub fn downstream_objects(install: &Install, kubeconfig: &str) -> Vec<(String, Value)> {
    let ns = syncer_namespace(&install.workspace, &install.cluster);
    let labels = json!({"app.kubernetes.io/name": "kcp-syncer", "kcp.io/cluster": install.cluster});
    let extra = vec![json!({"apiGroups": [""], "resources": ["namespaces"],
        "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]})];
    let all = [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ];
    let encoded = base64::engine::general_purpose::STANDARD.encode(kubeconfig);
    vec![
        (
            format!("/api/v1/namespaces/{ns}"),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}}),
        ),
        (
            format!("/api/v1/namespaces/{ns}/serviceaccounts/kcp-syncer"),
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "kcp-syncer", "namespace": ns}}),
        ),
        (
            format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/{ns}"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": ns, "labels": labels},
                "rules": rules(&install.resources, &all, extra)}),
        ),
        (
            format!("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{ns}"),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": ns, "labels": labels},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ns},
                "subjects": [{"kind": "ServiceAccount", "name": "kcp-syncer", "namespace": ns}]}),
        ),
        (
            format!("/api/v1/namespaces/{ns}/secrets/kcp-syncer-kubeconfig"),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "kcp-syncer-kubeconfig", "namespace": ns},
                "data": {"kubeconfig": encoded}}),
        ),
        (
            format!("/apis/apps/v1/namespaces/{ns}/deployments/kcp-syncer"),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "kcp-syncer", "namespace": ns, "labels": labels},
                "spec": {
                    "replicas": 1,
                    "strategy": {"type": "Recreate"},
                    "selector": {"matchLabels": {"app.kubernetes.io/name": "kcp-syncer"}},
                    "template": {
                        "metadata": {"labels": {"app.kubernetes.io/name": "kcp-syncer"}},
                        "spec": {
                            "serviceAccountName": "kcp-syncer",
                            "containers": [{
                                "name": "syncer",
                                "image": install.image,
                                "args": syncer_args(install),
                                "volumeMounts": [{"name": "kubeconfig", "mountPath": KUBECONFIG_MOUNT, "readOnly": true}],
                            }],
                            "volumes": [{"name": "kubeconfig", "secret": {"secretName": "kcp-syncer-kubeconfig"}}],
                        },
                    },
                },
            }),
        ),
    ]
}

/// The token and CA (base64) of the syncer's token Secret in the workspace, once filled.
pub async fn token(
    workspace: &kube::Client,
    cluster: &str,
) -> anyhow::Result<Option<(String, String)>> {
    let name = upstream_name(cluster);
    let path = format!("/api/v1/namespaces/{UPSTREAM_NAMESPACE}/secrets/{name}-token");
    let Some(secret) = requests::get(workspace, &path).await? else {
        return Ok(None);
    };
    let (Some(token), Some(ca)) = (
        secret["data"]["token"].as_str(),
        secret["data"]["ca.crt"].as_str(),
    ) else {
        return Ok(None);
    };
    let token = base64::engine::general_purpose::STANDARD.decode(token)?;
    Ok(Some((String::from_utf8(token)?, ca.to_string())))
}

/// How long ago a Lease was renewed.
pub fn age(lease: &Value) -> Option<Duration> {
    let renewed = lease["spec"]["renewTime"]
        .as_str()?
        .parse::<jiff::Timestamp>()
        .ok()?;
    let age = jiff::Timestamp::now().duration_since(renewed);
    Some(Duration::from_millis(age.as_millis().max(0) as u64))
}

/// Whether the syncer of `cluster` renewed its Lease in the workspace lately: its
/// `renewTime` plus `leaseDurationSeconds` is not past.
pub fn fresh(lease: &Value) -> bool {
    let duration = lease["spec"]["leaseDurationSeconds"].as_i64().unwrap_or(0);
    age(lease).is_some_and(|age| age.as_secs() as i64 <= duration)
}

/// The syncer's Lease of `cluster` in the workspace.
pub async fn lease(workspace: &kube::Client, cluster: &str) -> anyhow::Result<Option<Value>> {
    let name = upstream_name(cluster);
    let path =
        format!("/apis/coordination.k8s.io/v1/namespaces/{UPSTREAM_NAMESPACE}/leases/{name}");
    requests::get(workspace, &path).await
}

/// Removes what was installed in the physical cluster for `workspace`'s `cluster`.
pub async fn uninstall(
    remote: &kube::Client,
    workspace: &str,
    cluster: &str,
) -> anyhow::Result<()> {
    let ns = syncer_namespace(workspace, cluster);
    for path in [
        format!("/api/v1/namespaces/{ns}"),
        format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/{ns}"),
        format!("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{ns}"),
    ] {
        requests::delete(remote, &path).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn install() -> Install {
        let gvk = kube::core::GroupVersionKind::gvk("apps", "v1", "Deployment");
        Install {
            workspace: "2x8k1".into(),
            cluster: "east".into(),
            resources: vec![ApiResource::from_gvk_with_plural(&gvk, "deployments")],
            resync: Duration::from_secs(30),
            heartbeat: Duration::from_secs(10),
            image: "kcp-rs/syncer:test".into(),
            split_roots: true,
        }
    }

    #[test]
    fn the_deployment_runs_the_syncer_with_its_mounted_kubeconfig_and_lease() {
        let install = install();
        assert_eq!(
            syncer_args(&install),
            [
                "--from-kubeconfig=/etc/kcp-syncer/kubeconfig",
                "--workspace=2x8k1",
                "--cluster=east",
                "--resync-interval=30s",
                "--heartbeat-lease=kube-system/kcp-syncer-east",
                "--heartbeat-interval=10s",
                "--split-deployments=true",
                "deployments.apps",
            ]
        );
        let objects = downstream_objects(&install, "{}");
        let kinds: Vec<&str> = objects
            .iter()
            .map(|(_, o)| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "Namespace",
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "Secret",
                "Deployment"
            ]
        );
        let role = &objects[2].1;
        assert_eq!(role["rules"][0]["resources"], json!(["deployments"]));
        assert_eq!(role["rules"][0]["verbs"].as_array().unwrap().len(), 7);
        assert_eq!(role["rules"][1]["resources"], json!(["namespaces"]));
        assert_eq!(objects[0].1["metadata"]["name"], "kcp-syncer-2x8k1-east");
        let mut other = install.clone();
        other.image = "kcp-rs/syncer:other".into();
        assert_ne!(install.fingerprint(), other.fingerprint());
    }

    #[test]
    fn the_workspace_lets_the_syncer_read_what_it_syncs_and_write_status_and_its_lease() {
        let owner = json!({"metadata": {"name": "east", "uid": "u1"}});
        let objects = upstream_objects(&install(), &owner);
        let role = &objects[3].1;
        assert_eq!(role["kind"], "ClusterRole");
        assert_eq!(role["rules"][0]["verbs"], json!(["get", "list", "watch"]));
        assert_eq!(role["rules"][1]["resources"], json!(["deployments/status"]));
        assert_eq!(objects[1].1["metadata"]["ownerReferences"][0]["uid"], "u1");
        assert_eq!(objects[2].1["type"], "kubernetes.io/service-account-token");
    }

    #[test]
    fn a_lease_is_fresh_for_its_duration() {
        let now = crate::kinds::now();
        assert!(fresh(
            &json!({"spec": {"renewTime": now, "leaseDurationSeconds": 30}})
        ));
        assert!(!fresh(
            &json!({"spec": {"renewTime": "2020-01-01T00:00:00Z", "leaseDurationSeconds": 30}})
        ));
        assert!(!fresh(&json!({"spec": {}})));
    }
}
