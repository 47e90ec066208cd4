//! The namespace deletion controller: empties terminating namespaces and finalizes them.
//!
//! One task serves every logical cluster ([`crate::driver`]): it queues `(cluster, name)` of
//! each namespace that carries a deletionTimestamp. A pass ([`reconcile`]) deletes the
//! namespace's content, comes back after a second while finalizers hold some of it (as kube's
//! controller does), then removes `kubernetes` from `spec.finalizers`, which removes the
//! namespace.

mod conditions;
mod reconcile;

use std::time::Duration;

use kcp_registry::{Registry, Summary};
use serde_json::Value;

use crate::Context;
use crate::driver::{Controller, Key, Listing};
pub use reconcile::reconcile;

/// The wait before looking again at a namespace whose content finalizers still hold.
const CONTENT_REMAINING_DELAY: Duration = Duration::from_secs(1);

fn namespaces() -> &'static kcp_apis::builtin::Resource {
    kcp_apis::builtin::core("namespaces")
}

fn deleting(namespace: &Value) -> bool {
    Summary::of_value(namespace).deleting
}

/// Runs the controller until `stop` turns true.
pub async fn run(registry: Registry, context: Context) {
    Controller {
        name: "namespace",
        resource: namespaces(),
        wants: deleting,
        listed: Listing::Summaries(|namespace| namespace.deleting),
        deletions: false,
        reconcile: |registry, key: Key| {
            Box::pin(async move { reconcile(&registry, &key.cluster, &key.name).await })
        },
        workers: crate::driver::WORKERS,
        also: Vec::new(),
    }
    .run(registry, context)
    .await
}
