//! Each logical cluster's RBAC policy, built from its Roles, ClusterRoles and bindings when a
//! request first needs it, and rebuilt after any of them changes.
//!
//! A follower watches the four RBAC resources across all logical clusters and records, per
//! cluster, the revision of its latest RBAC write; a policy built from a snapshot older than
//! that is stale and is built again. Only clusters whose policy a request needed are held, and
//! only until their RBAC changes, so idle workspaces cost nothing here beyond the revision of
//! their last RBAC write (one number per cluster that had one). While the follower is not
//! watching (before it starts, between a failed watch and the next) no policy is trusted.

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

struct Built {
    policy: Arc<Policy>,
    /// The oldest snapshot revision the policy was read at.
    revision: u64,
}

struct State {
    built: HashMap<String, Built>,
    /// Per cluster, the revision of the latest RBAC write the follower saw.
    changed: HashMap<String, u64>,
    /// Policies built before this revision are not trusted: the follower was not yet watching
    /// (nothing is trusted before it starts) or lost track and started again.
    trusted_from: u64,
}

impl Default for State {
    fn default() -> State {
        State {
            built: HashMap::new(),
            changed: HashMap::new(),
            trusted_from: u64::MAX,
        }
    }
}

/// The policies of the logical clusters requests have needed.
#[derive(Clone)]
pub(crate) struct Policies {
    registry: Registry,
    state: Arc<Mutex<State>>,
    /// The follower, started by the first request that needs a policy.
    follower: Arc<std::sync::OnceLock<tokio::task::JoinHandle<()>>>,
}

impl Policies {
    /// Policies read through `registry`, kept current by a follower the first use starts.
    pub(crate) fn new(registry: Registry) -> Policies {
        Policies {
            registry,
            state: Arc::default(),
            follower: Arc::default(),
        }
    }

    /// The policy of `cluster`, built again if an RBAC object of it changed since.
    pub(crate) async fn of(&self, cluster: &str) -> Result<Arc<Policy>, RegistryError> {
        self.follower.get_or_init(|| self.follow());
        {
            let state = self.state.lock().unwrap();
            if let Some(built) = state.built.get(cluster) {
                let changed = state.changed.get(cluster).copied().unwrap_or(0);
                if built.revision >= changed && built.revision >= state.trusted_from {
                    return Ok(Arc::clone(&built.policy));
                }
            }
        }
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
        let policy = Arc::new(Policy::new(
            &objects[0],
            &objects[1],
            &objects[2],
            &objects[3],
        ));
        let mut state = self.state.lock().unwrap();
        state.built.insert(
            cluster.to_string(),
            Built {
                policy: Arc::clone(&policy),
                revision,
            },
        );
        Ok(policy)
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
        {
            let mut state = self.state.lock().unwrap();
            state.trusted_from = start;
            state.changed.clear();
        }
        let mut watches = Vec::new();
        for name in RESOURCES {
            watches.push(
                self.registry
                    .watch_all_clusters(kcp_apis::builtin::rbac(name), start)
                    .await?
                    .boxed(),
            );
        }
        let mut events = futures::stream::select_all(watches);
        while let Some(event) = events.next().await {
            let event = event?;
            let revision = event.event.revision;
            let mut state = self.state.lock().unwrap();
            // The stale policy goes at once; `changed` also catches a build already under way.
            state.built.remove(&event.cluster);
            let latest = state.changed.entry(event.cluster).or_default();
            *latest = (*latest).max(revision);
        }
        Err(RegistryError::Internal("the RBAC watch ended".into()))
    }
}
