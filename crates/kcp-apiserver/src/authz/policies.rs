//! Each logical cluster's authorization state: its RBAC policy, built from its Roles,
//! ClusterRoles and bindings, and the groups its LogicalCluster requires (kcp's
//! `authorization.kcp.io/required-groups` annotation). Built when a request first needs it and
//! kept until one of those objects changes ([`kcp_registry::followed::Followed`] over the four
//! RBAC resources and LogicalClusters), so idle workspaces cost nothing here.

use std::sync::Arc;

use kcp_apimachinery::rbac::Policy;
use kcp_registry::followed::Followed;
use kcp_registry::{ListOptions, Registry, RegistryError, Target};
use serde_json::Value;

/// The RBAC resources, in the order [`Policy::new`] takes their objects.
const RESOURCES: [&str; 4] = [
    "clusterroles",
    "roles",
    "clusterrolebindings",
    "rolebindings",
];

/// kcp's annotation on a LogicalCluster naming the groups its users must be in:
/// `;`-separated alternatives, each a `,`-separated set of groups a user needs all of.
pub(crate) const REQUIRED_GROUPS: &str = "authorization.kcp.io/required-groups";

/// What authorization knows of one logical cluster.
pub(crate) struct ClusterState {
    pub(crate) policy: Policy,
    /// The value of [`REQUIRED_GROUPS`] on its LogicalCluster, if set.
    pub(crate) required_groups: Option<String>,
}

impl ClusterState {
    /// Whether a user in `groups` satisfies the cluster's required groups (kcp's admins and
    /// workspace bootstrapper always do).
    pub(crate) fn admits_groups(&self, groups: &[String]) -> bool {
        let Some(required) = &self.required_groups else {
            return true;
        };
        let has = |group: &str| groups.iter().any(|g| g == group);
        required
            .split(';')
            .chain([
                "system:kcp:admin",
                "system:kcp:tenancy:workspace-bootstrapper",
            ])
            .any(|all| all.split(',').all(has))
    }
}

/// The policies of the logical clusters requests have needed.
#[derive(Clone)]
pub(crate) struct Policies {
    registry: Registry,
    /// The bootstrap ClusterRoles, which a cluster's own labelled ClusterRoles aggregate into.
    shared_roles: Arc<Vec<Value>>,
    kept: Arc<Followed<String, Arc<ClusterState>>>,
}

impl Policies {
    /// Policies read through `registry`, kept current by a follower the first use starts.
    pub(crate) fn new(registry: Registry, shared_roles: Vec<Value>) -> Policies {
        let resources = RESOURCES
            .into_iter()
            .map(kcp_apis::builtin::rbac)
            .chain([kcp_apis::system::logical_clusters()])
            .collect();
        Policies {
            registry,
            shared_roles: Arc::new(shared_roles),
            kept: Arc::new(Followed::new("RBAC", resources, |_, event| {
                event.cluster.clone()
            })),
        }
    }

    /// The state of `cluster`, built again if one of its objects changed since.
    pub(crate) async fn of(&self, cluster: &str) -> Result<Arc<ClusterState>, RegistryError> {
        self.kept
            .get(&self.registry, cluster, || async {
                Ok(Arc::new(self.read(cluster).await?))
            })
            .await
    }

    /// Reads the state of `cluster`.
    async fn read(&self, cluster: &str) -> Result<ClusterState, RegistryError> {
        let mut objects: Vec<Vec<Value>> = Vec::with_capacity(RESOURCES.len());
        for name in RESOURCES {
            let target = Target {
                cluster,
                resource: kcp_apis::builtin::rbac(name),
                namespace: None,
            };
            let listed = self.registry.list(target, ListOptions::default()).await?;
            objects.push(listed.items);
        }
        let target = Target {
            cluster,
            resource: kcp_apis::system::logical_clusters(),
            namespace: None,
        };
        let listed = self.registry.list(target, ListOptions::default()).await?;
        let required_groups = listed.items.iter().find_map(|object| {
            object["metadata"]["annotations"][REQUIRED_GROUPS]
                .as_str()
                .map(str::to_string)
        });
        let policy = Policy::over_shared(
            &self.shared_roles,
            &objects[0],
            &objects[1],
            &objects[2],
            &objects[3],
        );
        Ok(ClusterState {
            policy,
            required_groups,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(required: Option<&str>) -> ClusterState {
        ClusterState {
            policy: Policy::default(),
            required_groups: required.map(str::to_string),
        }
    }

    fn groups(names: &[&str]) -> Vec<String> {
        names.iter().map(|g| g.to_string()).collect()
    }

    #[test]
    fn required_groups_are_alternatives_of_group_sets() {
        assert!(state(None).admits_groups(&[]));
        let required = state(Some("team-a,on-call;auditors"));
        assert!(required.admits_groups(&groups(&["team-a", "on-call"])));
        assert!(required.admits_groups(&groups(&["auditors"])));
        assert!(!required.admits_groups(&groups(&["team-a"])));
        assert!(!required.admits_groups(&groups(&["system:authenticated"])));
        // kcp's admins and workspace bootstrapper always satisfy them.
        assert!(required.admits_groups(&groups(&["system:kcp:admin"])));
        assert!(required.admits_groups(&groups(&["system:kcp:tenancy:workspace-bootstrapper"])));
    }
}
