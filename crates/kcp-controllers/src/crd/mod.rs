//! The CustomResourceDefinition controller: accepts a CRD's names and establishes it, for
//! every logical cluster in one task ([`crate::driver`]).
//!
//! [`naming`] checks the requested names against the other CRDs of the same group in the
//! same cluster, writes `status.acceptedNames` and the `NamesAccepted` condition, and sets
//! `Established` once the names are accepted. The registry serves a CRD's resources once it is
//! Established. A deleted CRD's key is reconciled too, so CRDs that lost a name conflict to it
//! get their names.
//!
//! [`cleanup`] finishes the deletion of a CRD: it deletes the CRD's custom resources in its
//! logical cluster, then removes the `customresourcecleanup.apiextensions.k8s.io` finalizer the
//! first delete added.

pub mod cleanup;
mod naming;

use kcp_registry::Registry;

use crate::Context;
use crate::driver::{Controller, Key, Listing};

pub(crate) fn crds() -> &'static kcp_apis::builtin::Resource {
    kcp_apis::builtin::in_group_version("apiextensions.k8s.io", "v1")
        .find(|r| r.name == "customresourcedefinitions")
        .expect("the catalogue has customresourcedefinitions")
}

/// CRDs reconciled at once.
const WORKERS: usize = 4;

/// Runs the controller until `stop` turns true.
pub async fn run(registry: Registry, context: Context) {
    Controller {
        name: "customresourcedefinition",
        resource: crds(),
        wants: |_| true,
        listed: Listing::Summaries(|_| true),
        deletions: true,
        reconcile: |registry, key: Key| {
            Box::pin(async move {
                naming::reconcile(&registry, &key.cluster, &key.name).await?;
                cleanup::reconcile(&registry, &key.cluster, &key.name).await
            })
        },
        // A CRD is read whole (its schemas, megabytes for real-world ones) by every reconcile:
        // a few at once bound what a burst of them holds (kube-controller-manager's CRD
        // controllers run with one to five workers).
        workers: WORKERS,
        also: Vec::new(),
    }
    .run(registry, context)
    .await
}
