//! ClusterRole aggregation, as kube-controller-manager's `clusterrole-aggregation` controller:
//! a ClusterRole with an `aggregationRule` gets as its `rules` the rules of every other
//! ClusterRole of its logical cluster that one of its `clusterRoleSelectors` selects (in name
//! order, each rule once), and follows them as their labels and rules change.
//!
//! One task serves every logical cluster ([`crate::driver`]). Its keys are logical clusters:
//! any ClusterRole written or deleted queues its cluster once, however many roles changed, and
//! a pass ([`aggregate`]) recomputes every aggregating ClusterRole there, so a role that changed
//! reaches each aggregation that selects (or selected) it. Nothing is queued at start: the
//! stored aggregations are what the last pass wrote.

mod aggregate;

use kcp_registry::{Registry, Watched};

use crate::Context;
use crate::driver::{Also, Controller, Key, Listing, Source};

pub(crate) fn cluster_roles() -> &'static kcp_apis::builtin::Resource {
    kcp_apis::builtin::rbac("clusterroles")
}

/// Runs the controller until `stop` turns true.
pub async fn run(registry: Registry, context: Context) {
    Controller {
        name: "clusterrole-aggregation",
        resource: cluster_roles(),
        // Keys are clusters, which `also` gives (its own keys would be roles).
        wants: |_| false,
        listed: Listing::Nothing,
        deletions: false,
        reconcile: |registry, key: Key| {
            Box::pin(async move { aggregate::reconcile(&registry, &key.cluster).await })
        },
        workers: crate::driver::WORKERS,
        // Every write and delete: a label removed matters as much as one added.
        also: vec![Also {
            source: Source::Resource(cluster_roles()),
            key: |cluster, _| {
                Some(Key {
                    cluster: cluster.to_string(),
                    namespace: String::new(),
                    name: String::new(),
                })
            },
            watched: Watched::All,
        }],
    }
    .run(registry, context)
    .await
}
