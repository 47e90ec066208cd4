//! The conditions of a terminating namespace, as Kubernetes' namespace controller writes them:
//! five types, each `False` with its "all is well" reason while nothing is wrong;
//! `NamespaceContentRemaining` and `NamespaceFinalizersRemaining` turn `True` and say what is
//! left (`configmaps. has 2 resource instances`, `example.com/hold in 1 resource instances`)
//! while finalizers hold content.

use std::collections::BTreeMap;

use kcp_registry::{Held, Registry, RegistryError, Target};
use serde_json::Value;

use crate::conditions::{self, Condition};

/// Each type with its reason and message when all is well.
const ALL_WELL: [(&str, &str, &str); 5] = [
    (
        "NamespaceDeletionDiscoveryFailure",
        "ResourcesDiscovered",
        "All resources successfully discovered",
    ),
    (
        "NamespaceDeletionGroupVersionParsingFailure",
        "ParsedGroupVersions",
        "All legacy kube types successfully parsed",
    ),
    (
        "NamespaceDeletionContentFailure",
        "ContentDeleted",
        "All content successfully deleted, may be waiting on finalization",
    ),
    (
        "NamespaceContentRemaining",
        "ContentRemoved",
        "All content successfully removed",
    ),
    (
        "NamespaceFinalizersRemaining",
        "ContentHasNoFinalizers",
        "All content-preserving finalizers finished",
    ),
];

/// What is left of a namespace's content after a pass.
#[derive(Debug, Default)]
pub(super) struct Remaining {
    /// Objects left per resource, as `<plural>.<group>`.
    pub by_resource: BTreeMap<String, usize>,
    /// Objects left and the finalizers holding them.
    pub held: Held,
}

impl Remaining {
    pub(super) fn add(&mut self, plural: &str, group: &str, held: Held) {
        if held.objects > 0 {
            *self
                .by_resource
                .entry(format!("{plural}.{group}"))
                .or_default() += held.objects;
        }
        self.held.add(held);
    }

    /// The conditions this leaves, in Kubernetes' order.
    fn conditions(&self) -> Vec<Condition<'static>> {
        ALL_WELL
            .iter()
            .map(|(kind, reason, message)| {
                let mut condition = Condition {
                    kind,
                    status: false,
                    reason,
                    message: message.to_string(),
                };
                if *kind == "NamespaceContentRemaining" && !self.by_resource.is_empty() {
                    let left: Vec<String> = self
                        .by_resource
                        .iter()
                        .map(|(resource, n)| format!("{resource} has {n} resource instances"))
                        .collect();
                    condition.status = true;
                    condition.reason = "SomeResourcesRemain";
                    condition.message =
                        format!("Some resources are remaining: {}", left.join(", "));
                }
                if *kind == "NamespaceFinalizersRemaining" && !self.held.finalizers.is_empty() {
                    let left: Vec<String> = self
                        .held
                        .finalizers
                        .iter()
                        .map(|(finalizer, n)| format!("{finalizer} in {n} resource instances"))
                        .collect();
                    condition.status = true;
                    condition.reason = "SomeFinalizersRemain";
                    condition.message = format!(
                        "Some content in the namespace has finalizers remaining: {}",
                        left.join(", ")
                    );
                }
                condition
            })
            .collect()
    }
}

/// Writes what `remaining` says into the conditions of `namespace` (as read in this pass),
/// unless they say it already.
pub(super) async fn report(
    registry: &Registry,
    target: Target<'_>,
    namespace: &Value,
    remaining: &Remaining,
) -> Result<(), RegistryError> {
    let mut status = namespace["status"].as_object().cloned().unwrap_or_default();
    let mut changed = false;
    for condition in remaining.conditions() {
        changed |= conditions::set(&mut status, condition);
    }
    if !changed {
        return Ok(());
    }
    let Some(status_registry) = registry.subresource("status") else {
        return Ok(());
    };
    let name = namespace["metadata"]["name"].as_str().unwrap_or_default();
    let status = Value::Object(status);
    let result = status_registry
        .patch(target, name, &|current: &Value| {
            let mut next = current.clone();
            if let Some(conditions) = status.get("conditions") {
                next["status"]["conditions"] = conditions.clone();
            }
            Ok(next)
        })
        .await;
    match result {
        Ok(_) | Err(RegistryError::NotFound { .. }) | Err(RegistryError::Conflict { .. }) => Ok(()),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn what_remains_reads_as_kubernetes_writes_it() {
        let mut remaining = Remaining::default();
        let held = Held {
            objects: 2,
            finalizers: [("example.com/hold".to_string(), 2)].into(),
        };
        remaining.add("configmaps", "", held);
        remaining.add("widgets", "example.com", Held::default());
        let conditions = remaining.conditions();
        let of = |kind: &str| conditions.iter().find(|c| c.kind == kind).unwrap();
        let content = of("NamespaceContentRemaining");
        assert!(content.status);
        assert_eq!(
            content.message,
            "Some resources are remaining: configmaps. has 2 resource instances"
        );
        assert_eq!(
            of("NamespaceFinalizersRemaining").message,
            "Some content in the namespace has finalizers remaining: example.com/hold in 2 \
             resource instances"
        );
        assert!(!of("NamespaceDeletionContentFailure").status);
        let mut status = json!({}).as_object().cloned().unwrap();
        for condition in Remaining::default().conditions() {
            assert!(conditions::set(&mut status, condition));
        }
        assert_eq!(status["conditions"].as_array().unwrap().len(), 5);
    }
}
