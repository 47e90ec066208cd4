//! Workspace paths and logical cluster names, as kcp (`kcp-dev/logicalcluster`) defines them.
//!
//! A path is one or more segments joined by `:`, each a DNS label (`[a-z0-9]`, then up to 61 of
//! `[a-z0-9-]`, then `[a-z0-9]`; [`kcp_apimachinery::dns::is_dns1123_label`]): the regular expression
//! `^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(:[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$`. Anything else
//! (empty, `.`, `..`, NUL, upper case, a segment over 63 characters) is not a path; the API
//! server answers it with kcp's 400. `/clusters/<path>` names a logical cluster either by its
//! name (one segment; `system:*` names the server's own clusters) or by a path `root:org:team`:
//! the first segment is a logical cluster name (`user:<name>` stands for a user's home), each
//! next one a Workspace in the cluster reached so far, followed through its `spec.cluster`.
//!
//! Only logical clusters that exist resolve: a name must have its LogicalCluster (`root`
//! always has), and of the `system:` names only [`SYSTEM_CLUSTERS`], so no request can write
//! under a storage key of a cluster nobody created. Unknown paths and names answer kcp's 404
//! `workspaces.tenancy.kcp.io "<path>" not found`.
//!
//! Resolution reads storage (one read per segment), so there is no per-workspace index to keep
//! in memory or in step, and a Workspace scheduled by another server resolves at once.

use kcp_apimachinery::dns::is_dns1123_label;
use kcp_apimachinery::object::str_at;
use kcp_apis::system;

use super::{LOGICAL_CLUSTER, ROOT, names};
use crate::error::RegistryError;
use crate::store::{Registry, Target};

/// The `system:` logical clusters this server serves: kcp's shard-local admin cluster (the
/// `system:admin` context of the admin kubeconfig). kcp's other system clusters hold what this
/// server does not have (shards, system CRDs, bound CRDs).
pub const SYSTEM_CLUSTERS: &[&str] = &["system:admin"];

/// Whether `path` is a workspace path (kcp's `Path.IsValid`, without the wildcard `*`).
pub fn valid_path(path: &str) -> bool {
    path.split(':').all(is_dns1123_label)
}

/// Whether `name` is a logical cluster name a Workspace may point at: one DNS label (kcp's
/// `Name.IsValid` also takes `system:` names, which no workspace has).
pub fn valid_cluster_name(name: &str) -> bool {
    is_dns1123_label(name)
}

/// Why `name` is not a logical cluster name, as a field error's detail.
pub const CLUSTER_NAME_MESSAGE: &str = "a logical cluster name must consist of lower case alphanumeric characters or '-', start and end with an alphanumeric character, and be at most 63 characters (regex used for validation is '[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?')";

/// The 404 an unknown path answers, as kcp words it.
pub fn not_found(path: &str) -> RegistryError {
    RegistryError::NotFound {
        qualified_resource: "workspaces.tenancy.kcp.io".into(),
        name: path.to_string(),
    }
}

impl Registry {
    /// The logical cluster `path` names (see the module docs); 404 when a segment does not
    /// exist or its workspace has no logical cluster yet.
    pub async fn resolve_path(&self, path: &str) -> Result<String, RegistryError> {
        if !valid_path(path) {
            return Err(not_found(path));
        }
        if path.starts_with("system:") {
            return match SYSTEM_CLUSTERS.contains(&path) {
                true => Ok(path.to_string()),
                false => Err(not_found(path)),
            };
        }
        let mut segments: Vec<&str> = path.split(':').collect();
        let home;
        if segments[0] == "user" && segments.len() > 1 {
            home = names::home_cluster_name(segments[1]);
            segments.splice(0..2, [home.as_str()]);
        }
        let mut cluster = segments[0].to_string();
        if cluster != ROOT && !self.logical_cluster_exists(&cluster).await? {
            return Err(not_found(path));
        }
        for segment in &segments[1..] {
            let target = Target {
                cluster: &cluster,
                resource: system::workspaces(),
                namespace: None,
            };
            let workspace = match self.get_shared(target, segment).await {
                Ok(workspace) => workspace,
                Err(RegistryError::NotFound { .. }) => return Err(not_found(path)),
                Err(other) => return Err(other),
            };
            let next = str_at(&workspace, &["spec", "cluster"]);
            if !valid_cluster_name(next) {
                return Err(not_found(path));
            }
            cluster = next.to_string();
        }
        Ok(cluster)
    }

    /// Whether `cluster` has its LogicalCluster (read, not decoded).
    pub async fn logical_cluster_exists(&self, cluster: &str) -> Result<bool, RegistryError> {
        match self
            .read(&logical_cluster_of(cluster), LOGICAL_CLUSTER)
            .await
        {
            Ok(_) => Ok(true),
            Err(RegistryError::NotFound { .. }) => Ok(false),
            Err(other) => Err(other),
        }
    }

    /// The LogicalCluster of `cluster`.
    pub async fn logical_cluster(&self, cluster: &str) -> Result<serde_json::Value, RegistryError> {
        self.get(logical_cluster_of(cluster), LOGICAL_CLUSTER).await
    }

    /// [`Registry::logical_cluster`], shared (see [`Registry::get_shared`]): for the reads that
    /// every request into a logical cluster repeats.
    pub async fn logical_cluster_shared(
        &self,
        cluster: &str,
    ) -> Result<std::sync::Arc<serde_json::Value>, RegistryError> {
        self.get_shared(logical_cluster_of(cluster), LOGICAL_CLUSTER)
            .await
    }
}

/// Where the LogicalCluster of `cluster` is.
fn logical_cluster_of(cluster: &str) -> Target<'_> {
    Target {
        cluster,
        resource: system::logical_clusters(),
        namespace: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_dns_labels() {
        assert!(valid_path("team-1"));
        assert!(!valid_path("Team"));
        assert!(!valid_path("-a"));
        assert!(!valid_path(""));
        assert!(!valid_path(&"a".repeat(64)));
    }

    #[test]
    fn paths_follow_kcps_regular_expression() {
        for good in [
            "root",
            "root:org:team-1",
            "a",
            "system:admin",
            "user:alice",
            &"a".repeat(63),
        ] {
            assert!(valid_path(good), "{good}");
        }
        let long = "a".repeat(64);
        for bad in [
            "", ".", "..", "root:", ":root", "root::a", "Root", "a_b", "\0", "a/b", "*", "root:-a",
            "%00", &long,
        ] {
            assert!(!valid_path(bad), "{bad:?}");
        }
        assert!(valid_cluster_name("2xj8f9k3m5n7p1q4"));
        assert!(!valid_cluster_name("root:org"));
        assert!(!valid_cluster_name(""));
    }
}
