//! ClusterRole aggregation, as kube-controller-manager's `clusterrole-aggregation` controller:
//! a ClusterRole with an `aggregationRule` gets as its `rules` the rules of every other
//! ClusterRole of its logical cluster that one of its `clusterRoleSelectors` selects (in name
//! order, each rule once), and follows them as their labels and rules change.
//!
//! One task serves every logical cluster ([`crate::driver`]). It queues every ClusterRole
//! written or deleted; a pass ([`aggregate`]) recomputes every aggregating ClusterRole of the
//! key's logical cluster, so a role that changed reaches each aggregation that selects (or
//! selected) it.

mod aggregate;

use kcp_registry::Registry;

use crate::Context;
use crate::driver::{Controller, Key};

pub(crate) fn cluster_roles() -> &'static kcp_apis::builtin::Resource {
    kcp_apis::builtin::rbac("clusterroles")
}

/// Runs the controller until `stop` turns true.
pub async fn run(registry: Registry, context: Context) {
    Controller {
        name: "clusterrole-aggregation",
        resource: cluster_roles(),
        // Every write: a label removed matters as much as one added.
        wants: |_| true,
        listed: None,
        deletions: true,
        reconcile: |registry, key: Key| {
            Box::pin(async move { aggregate::reconcile(&registry, &key.cluster).await })
        },
        workers: crate::driver::WORKERS,
        also: Vec::new(),
    }
    .run(registry, context)
    .await
}
