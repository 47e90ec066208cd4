//! Workspace paths. `/clusters/<path>` names a logical cluster either by its name (one segment,
//! or anything under `system:`: used as it is, as kcp does) or by a path `root:org:team`: the
//! first segment is a logical cluster name (`user:<name>` stands for a user's home), each next
//! one a Workspace in the cluster reached so far, followed through its `spec.cluster`.
//!
//! Resolution reads storage (one read per segment), so there is no per-workspace index to keep
//! in memory or in step, and a Workspace scheduled by another server resolves at once.

use kcp_apis::system;

use super::{LOGICAL_CLUSTER, ROOT, names, text};
use crate::error::RegistryError;
use crate::store::{Registry, Target};

/// Whether `segment` is a valid path segment (a DNS label).
pub fn valid_segment(segment: &str) -> bool {
    let bytes = segment.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

/// Whether `path` names a logical cluster directly (no lookup).
pub fn is_cluster_name(path: &str) -> bool {
    path.starts_with("system:") || !path.contains(':')
}

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
        if is_cluster_name(path) {
            return Ok(path.to_string());
        }
        let mut segments: Vec<&str> = path.split(':').collect();
        let home;
        if segments[0] == "user" && segments.len() > 1 {
            home = names::home_cluster_name(segments[1]);
            segments.splice(0..2, [home.as_str()]);
        }
        if !segments.iter().all(|s| valid_segment(s)) {
            return Err(not_found(path));
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
            let workspace = match self.get(target, segment).await {
                Ok(workspace) => workspace,
                Err(RegistryError::NotFound { .. }) => return Err(not_found(path)),
                Err(other) => return Err(other),
            };
            match text(&workspace, &["spec", "cluster"]) {
                Some(next) => cluster = next.to_string(),
                None => return Err(not_found(path)),
            }
        }
        Ok(cluster)
    }

    /// Whether `cluster` has its LogicalCluster.
    pub async fn logical_cluster_exists(&self, cluster: &str) -> Result<bool, RegistryError> {
        match self.logical_cluster(cluster).await {
            Ok(_) => Ok(true),
            Err(RegistryError::NotFound { .. }) => Ok(false),
            Err(other) => Err(other),
        }
    }

    /// The LogicalCluster of `cluster`.
    pub async fn logical_cluster(&self, cluster: &str) -> Result<serde_json::Value, RegistryError> {
        let target = Target {
            cluster,
            resource: system::logical_clusters(),
            namespace: None,
        };
        self.get(target, LOGICAL_CLUSTER).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_dns_labels() {
        assert!(valid_segment("team-1"));
        assert!(!valid_segment("Team"));
        assert!(!valid_segment("-a"));
        assert!(!valid_segment(""));
        assert!(!valid_segment(&"a".repeat(64)));
    }

    #[test]
    fn names_and_system_clusters_need_no_lookup() {
        assert!(is_cluster_name("root"));
        assert!(is_cluster_name("2xj8f9k3m5n7p1q4"));
        assert!(is_cluster_name("system:admin"));
        assert!(!is_cluster_name("root:org"));
    }
}
