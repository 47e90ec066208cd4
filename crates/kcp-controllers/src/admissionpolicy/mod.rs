//! ValidatingAdmissionPolicies' type checking, as kube-controller-manager's
//! `validatingadmissionpolicy-status` controller: each policy whose `status.observedGeneration`
//! is behind gets `status.typeChecking.expressionWarnings` for the validation expressions (and
//! message expressions) that name a field the matched kinds' schemas do not declare, with
//! cel-go's words (`/v1, Kind=ConfigMap: ERROR: <input>:1:8: undefined field 'x' ...`), and the
//! generation it checked.
//!
//! Only policies whose `matchConstraints.resourceRules` name their groups, versions and
//! resources exactly are checked (wildcards leave the types open, as in Kubernetes); each kind
//! the logical cluster serves is checked against its schema, `params` against the param kind's.
//! The checker knows fields, not types (CEL here has no full type checker): only undefined
//! fields are found.

mod typecheck;

use kcp_registry::Registry;
use serde_json::Value;

use crate::Context;
use crate::driver::{Controller, Key, Listing};

pub(crate) fn policies() -> &'static kcp_apis::builtin::Resource {
    kcp_apis::builtin::in_group_version("admissionregistration.k8s.io", "v1")
        .find(|r| r.name == "validatingadmissionpolicies")
        .expect("the catalogue has validatingadmissionpolicies")
}

/// Whether `policy` was changed since it was last checked.
fn unchecked(policy: &Value) -> bool {
    policy["status"]["observedGeneration"] != policy["metadata"]["generation"]
}

/// Runs the controller until `stop` turns true.
pub async fn run(registry: Registry, context: Context) {
    Controller {
        name: "validatingadmissionpolicy-status",
        resource: policies(),
        wants: unchecked,
        listed: Listing::Summaries(|_| true),
        deletions: false,
        reconcile: |registry, key: Key| {
            Box::pin(async move { typecheck::reconcile(&registry, &key).await })
        },
        workers: 4,
        also: Vec::new(),
    }
    .run(registry, context)
    .await
}
