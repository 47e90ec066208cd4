//! The ResourceQuota controller, as kube-controller-manager's `resourcequota` controller for
//! object counts: each quota's `status.hard` follows its `spec.hard`, and `status.used` counts
//! the objects of each counted resource in its namespace (see [`kcp_registry::quota`]).
//!
//! One task serves every logical cluster ([`crate::driver`]): it queues each quota whose status
//! does not follow its spec, and the namespace of any object deleted anywhere (the count may
//! have gone down); a pass ([`usage`]) recounts one quota, or every quota of a namespace, and
//! each quota again every [`RESYNC`], as Kubernetes does, for what a race left behind. A
//! create reserved its place in `status.used` when it was admitted.

mod usage;

use kcp_registry::Registry;
use kcp_registry::quota::resource_quotas;
use serde_json::Value;

use crate::Context;
use crate::driver::{Also, Controller, Key, Listing, Source};

/// How often every quota is recounted anyway.
pub(crate) const RESYNC: std::time::Duration = std::time::Duration::from_secs(300);

/// The key of every quota of the namespace an object deleted from it was in.
fn quotas_of_namespace(cluster: &str, gone: &Value) -> Option<Key> {
    let namespace = gone["metadata"]["namespace"].as_str()?;
    (!namespace.is_empty()).then(|| Key {
        cluster: cluster.to_string(),
        namespace: namespace.to_string(),
        name: String::new(),
    })
}

/// Whether a quota's status does not follow its spec yet. A create's reservation (which changes
/// only `status.used`) is no reason to recount: the count could miss the object being created.
fn needs_recount(quota: &Value) -> bool {
    let spec = &quota["spec"]["hard"];
    let status = &quota["status"];
    status["hard"] != *spec
        || spec
            .as_object()
            .is_some_and(|hard| hard.keys().any(|k| status["used"].get(k).is_none()))
}

/// Runs the controller until `stop` turns true.
pub async fn run(registry: Registry, context: Context) {
    Controller {
        name: "resourcequota",
        resource: resource_quotas(),
        wants: needs_recount,
        // After a start every quota is recounted (a reservation whose create failed, counts
        // that went while the server was down).
        listed: Listing::Summaries(|_| true),
        deletions: false,
        reconcile: |registry, key: Key| {
            Box::pin(async move { usage::reconcile(&registry, &key).await })
        },
        workers: crate::driver::WORKERS,
        also: vec![Also {
            source: Source::AnyDeletion,
            key: quotas_of_namespace,
            watched: kcp_registry::Watched::Deletions,
        }],
    }
    .run(registry, context)
    .await
}
