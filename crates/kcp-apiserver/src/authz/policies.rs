//! Each logical cluster's authorization state: its RBAC policy, built from its Roles,
//! ClusterRoles and bindings, and the groups its LogicalCluster requires (kcp's
//! `authorization.kcp.io/required-groups` annotation). Built when a request first needs it,
//! dropped as soon as one of those objects changes.
//!
//! A follower watches the four RBAC resources and LogicalClusters across all logical clusters
//! and drops the state of the cluster each event belongs to. A build that was under way when an
//! event of its cluster arrived is not kept (its snapshot may predate the event). Only clusters
//! whose state a request needed are held, so idle workspaces cost nothing here. While the
//! follower is not watching (before it starts, between a failed watch and the next) no state
//! is trusted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kcp_apimachinery::rbac::Policy;
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

struct Built {
    state: Arc<ClusterState>,
    /// The oldest snapshot revision the state was read at.
    revision: u64,
}

struct State {
    built: HashMap<String, Built>,
    /// The builds under way, per cluster.
    building: HashMap<String, usize>,
    /// The clusters with a build under way that an event of theirs arrived during.
    changed_while_building: std::collections::HashSet<String>,
    /// States built before this revision are not trusted: the follower was not yet watching
    /// (nothing is trusted before it starts) or lost track and started again.
    trusted_from: u64,
}

impl Default for State {
    fn default() -> State {
        State {
            built: HashMap::new(),
            building: HashMap::new(),
            changed_while_building: Default::default(),
            trusted_from: u64::MAX,
        }
    }
}

/// The policies of the logical clusters requests have needed.
#[derive(Clone)]
pub(crate) struct Policies {
    registry: Registry,
    /// The bootstrap ClusterRoles, which a cluster's own labelled ClusterRoles aggregate into.
    shared_roles: Arc<Vec<Value>>,
    state: Arc<Mutex<State>>,
    /// The follower, started by the first request that needs a policy.
    follower: Arc<std::sync::OnceLock<tokio::task::JoinHandle<()>>>,
}

impl Policies {
    /// Policies read through `registry`, kept current by a follower the first use starts.
    pub(crate) fn new(registry: Registry, shared_roles: Vec<Value>) -> Policies {
        Policies {
            registry,
            shared_roles: Arc::new(shared_roles),
            state: Arc::default(),
            follower: Arc::default(),
        }
    }

    /// The state of `cluster`, built again if one of its objects changed since.
    pub(crate) async fn of(&self, cluster: &str) -> Result<Arc<ClusterState>, RegistryError> {
        self.follower.get_or_init(|| self.follow());
        {
            let mut state = self.state.lock().unwrap();
            if let Some(built) = state.built.get(cluster)
                && built.revision >= state.trusted_from
            {
                return Ok(Arc::clone(&built.state));
            }
            *state.building.entry(cluster.to_string()).or_default() += 1;
        }
        let read = self.read(cluster).await;
        let mut state = self.state.lock().unwrap();
        let changed = state.changed_while_building.contains(cluster);
        match state.building.get_mut(cluster) {
            Some(count) if *count > 1 => *count -= 1,
            _ => {
                state.building.remove(cluster);
                state.changed_while_building.remove(cluster);
            }
        }
        let (built, revision) = read?;
        let built = Arc::new(built);
        if !changed && revision >= state.trusted_from {
            state.built.insert(
                cluster.to_string(),
                Built {
                    state: Arc::clone(&built),
                    revision,
                },
            );
        }
        Ok(built)
    }

    /// Reads the state of `cluster` and the oldest revision it was read at.
    async fn read(&self, cluster: &str) -> Result<(ClusterState, u64), RegistryError> {
        let mut objects: Vec<Vec<Value>> = Vec::with_capacity(RESOURCES.len());
        let mut revision = u64::MAX;
        for name in RESOURCES {
            let target = Target {
                cluster,
                resource: kcp_apis::builtin::rbac(name),
                namespace: None,
            };
            let listed = self.registry.list(target, ListOptions::default()).await?;
            revision = revision.min(listed.resource_version);
            objects.push(listed.items);
        }
        let target = Target {
            cluster,
            resource: kcp_apis::system::logical_clusters(),
            namespace: None,
        };
        let listed = self.registry.list(target, ListOptions::default()).await?;
        revision = revision.min(listed.resource_version);
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
        Ok((
            ClusterState {
                policy,
                required_groups,
            },
            revision,
        ))
    }

    /// Follows RBAC writes in every logical cluster for as long as the returned task runs.
    fn follow(&self) -> tokio::task::JoinHandle<()> {
        let policies = self.clone();
        tokio::spawn(async move {
            loop {
                if let Err(error) = policies.follow_once().await {
                    tracing::warn!(%error, "RBAC follower lost track; following again");
                }
                // Writes may go unseen until the next watch starts: trust no policy till then.
                policies.state.lock().unwrap().trusted_from = u64::MAX;
                // Not a busy loop when storage is unavailable.
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    }

    /// One watch of the four resources from the current revision, until it fails. Everything
    /// built before it started is distrusted, since writes may have been missed meanwhile.
    async fn follow_once(&self) -> Result<(), RegistryError> {
        let start = self.registry.current_revision().await?;
        self.state.lock().unwrap().trusted_from = start;
        let mut watches = Vec::new();
        let resources = RESOURCES
            .into_iter()
            .map(kcp_apis::builtin::rbac)
            .chain([kcp_apis::system::logical_clusters()]);
        for resource in resources {
            watches.push(
                self.registry
                    .watch_all_clusters(resource, start)
                    .await?
                    .boxed(),
            );
        }
        let mut events = futures::stream::select_all(watches);
        while let Some(event) = events.next().await {
            let event = event?;
            let mut state = self.state.lock().unwrap();
            // The stale state goes at once; a build already under way is not kept.
            state.built.remove(&event.cluster);
            if state.building.contains_key(&event.cluster) {
                state.changed_while_building.insert(event.cluster);
            }
        }
        Err(RegistryError::Internal("the RBAC watch ended".into()))
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
