//! Which upstream objects a syncer takes to its cluster, pure:
//!
//! - an object labelled `kcp.dev/cluster` goes to that cluster only, and its status comes up
//!   from there;
//! - a Deployment neither labelled nor a leaf is a root the splitter spreads (when it runs):
//!   never synced itself;
//! - anything else follows its namespace: it goes to the cluster the namespace is labelled
//!   with (by a user, or by [`crate::scheduler`]), its home, whose copy's status comes up, and
//!   to every other cluster that runs a leaf of the namespace's split Deployments, so that the
//!   ConfigMaps, Secrets and Services a workload needs are wherever it runs (a follower: no
//!   status from there);
//! - what a server makes in every namespace itself (the `kube-root-ca.crt` ConfigMap,
//!   service-account token Secrets) is never synced: the cluster has its own.

use serde_json::Value;

use super::CLUSTER_LABEL;
use crate::kinds::OWNED_BY_LABEL;

/// How an object is synced to a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assignment {
    /// Synced, its status copied back up from this cluster.
    Home,
    /// Synced, its status left to its home.
    Follower,
}

/// What the syncer knows of an object's namespace upstream, for one cluster.
#[derive(Debug, Clone, Copy, Default)]
pub struct NamespaceView<'a> {
    /// The cluster the namespace is labelled with.
    pub cluster: Option<&'a str>,
    /// Whether a leaf of a split Deployment in it runs on this cluster.
    pub runs_leaf_here: bool,
}

/// What decides an object's assignment, besides its namespace.
#[derive(Debug, Clone, Copy, Default)]
pub struct Facts<'a> {
    /// Its `kcp.dev/cluster` label.
    pub cluster: Option<&'a str>,
    /// A Deployment the splitter would spread ([`is_split_root`]).
    pub root: bool,
    /// Being deleted, or made by the server itself: never synced.
    pub ignored: bool,
}

impl<'a> Facts<'a> {
    /// The facts of `object` (of `resource`).
    pub fn of(resource: &kube::api::ApiResource, object: &'a Value) -> Facts<'a> {
        Facts {
            cluster: object["metadata"]["labels"][CLUSTER_LABEL].as_str(),
            root: is_split_root(resource, object),
            ignored: object["metadata"]["deletionTimestamp"].is_string()
                || server_owned(resource, object),
        }
    }
}

/// Whether `object` is one the server of each side makes itself.
pub fn server_owned(resource: &kube::api::ApiResource, object: &Value) -> bool {
    match (resource.group.as_str(), resource.plural.as_str()) {
        ("", "configmaps") => object["metadata"]["name"] == "kube-root-ca.crt",
        ("", "secrets") => object["type"] == "kubernetes.io/service-account-token",
        _ => false,
    }
}

/// Whether `object` (of `resource`) is a root the splitter spreads.
pub fn is_split_root(resource: &kube::api::ApiResource, object: &Value) -> bool {
    let labels = &object["metadata"]["labels"];
    resource.group == "apps"
        && resource.plural == "deployments"
        && labels.get(CLUSTER_LABEL).is_none()
        && labels.get(OWNED_BY_LABEL).is_none()
}

/// How `object` is synced to the cluster `location`, if at all; `split_roots` says whether
/// unassigned Deployments are the splitter's.
pub fn assignment(
    object: Facts<'_>,
    location: &str,
    split_roots: bool,
    namespace: NamespaceView<'_>,
) -> Option<Assignment> {
    if object.ignored {
        return None;
    }
    if let Some(cluster) = object.cluster {
        return (cluster == location).then_some(Assignment::Home);
    }
    if split_roots && object.root {
        return None;
    }
    match (
        namespace.cluster == Some(location),
        namespace.runs_leaf_here,
    ) {
        (true, _) => Some(Assignment::Home),
        (false, true) => Some(Assignment::Follower),
        (false, false) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ApiResource;
    use serde_json::json;

    fn resource(group: &str, plural: &str) -> ApiResource {
        let gvk = kube::core::GroupVersionKind::gvk(group, "v1", "Kind");
        ApiResource::from_gvk_with_plural(&gvk, plural)
    }

    #[test]
    fn objects_follow_their_label_then_their_namespace_and_its_workloads() {
        let configmaps = resource("", "configmaps");
        let deployments = resource("apps", "deployments");
        let plain = json!({"metadata": {"name": "settings", "labels": {}}});
        let labelled = json!({"metadata": {"name": "x", "labels": {"kcp.dev/cluster": "west"}}});
        let home = NamespaceView {
            cluster: Some("east"),
            runs_leaf_here: false,
        };
        let elsewhere = NamespaceView {
            cluster: Some("west"),
            runs_leaf_here: false,
        };
        let leaf_here = NamespaceView {
            cluster: Some("west"),
            runs_leaf_here: true,
        };
        let at = |object: &Value, resource: &ApiResource, view| {
            assignment(Facts::of(resource, object), "east", true, view)
        };
        assert_eq!(at(&plain, &configmaps, home), Some(Assignment::Home));
        assert_eq!(at(&plain, &configmaps, elsewhere), None);
        assert_eq!(
            at(&plain, &configmaps, leaf_here),
            Some(Assignment::Follower)
        );
        assert_eq!(at(&plain, &configmaps, NamespaceView::default()), None);
        // A label wins over the namespace.
        assert_eq!(at(&labelled, &configmaps, home), None);
        assert_eq!(
            assignment(Facts::of(&configmaps, &labelled), "west", true, home),
            Some(Assignment::Home)
        );
        // Roots are the splitter's, unless it does not run.
        assert_eq!(at(&plain, &deployments, home), None);
        assert_eq!(
            assignment(Facts::of(&deployments, &plain), "east", false, home),
            Some(Assignment::Home)
        );
        // The server's own objects never.
        let ca = json!({"metadata": {"name": "kube-root-ca.crt"}});
        assert_eq!(at(&ca, &configmaps, home), None);
        let token =
            json!({"metadata": {"name": "t"}, "type": "kubernetes.io/service-account-token"});
        assert_eq!(at(&token, &resource("", "secrets"), home), None);
        let mut deleting = plain.clone();
        deleting["metadata"]["deletionTimestamp"] = json!("2020-01-01T00:00:00Z");
        assert_eq!(at(&deleting, &configmaps, home), None);
    }
}
