//! Each logical cluster's admission configuration (webhooks, ValidatingAdmissionPolicies and
//! their bindings), read on the first write that needs it and kept until one of its objects
//! changes ([`crate::followed::Followed`] over the four kinds): a write in a workspace without
//! any costs a map lookup.

use std::sync::Arc;

use kcp_apis::builtin::{Resource, in_group_version};
use serde_json::Value;

use super::policies::config::{Binding, Policy, binding_of, policy_of};
use super::webhooks::config::{Webhook, webhooks_of};
use crate::error::RegistryError;
use crate::followed::Followed;
use crate::list::ListOptions;
use crate::store::{Registry, Target};
use crate::wildcard::ClusterEvent;

const GROUP: &str = "admissionregistration.k8s.io";

fn configuration_resource(plural: &str) -> &'static Resource {
    in_group_version(GROUP, "v1")
        .find(|r| r.name == plural)
        .unwrap_or_else(|| panic!("the catalogue has no {plural}.{GROUP}"))
}

/// The admission configuration of one logical cluster: webhooks of each kind in calling
/// order, policies by name with their bindings by name.
#[derive(Debug, Default)]
pub(crate) struct ClusterAdmission {
    pub(crate) mutating: Vec<Arc<Webhook>>,
    pub(crate) validating: Vec<Arc<Webhook>>,
    pub(crate) policies: Vec<(Arc<Policy>, Vec<Arc<Binding>>)>,
}

impl ClusterAdmission {
    pub(crate) fn is_empty(&self) -> bool {
        self.mutating.is_empty() && self.validating.is_empty() && self.policies.is_empty()
    }
}

/// The kept webhooks of every logical cluster one registry wrote in (clones share them).
#[derive(Clone)]
pub(crate) struct AdmissionConfigurations(Arc<Followed<String, Arc<ClusterAdmission>>>);

impl Default for AdmissionConfigurations {
    fn default() -> Self {
        let resources = vec![
            configuration_resource("mutatingwebhookconfigurations"),
            configuration_resource("validatingwebhookconfigurations"),
            configuration_resource("validatingadmissionpolicies"),
            configuration_resource("validatingadmissionpolicybindings"),
        ];
        AdmissionConfigurations(Arc::new(Followed::new(
            "admission configuration",
            resources,
            key_of,
        )))
    }
}

fn key_of(_: &'static Resource, event: &ClusterEvent) -> String {
    event.cluster.clone()
}

impl AdmissionConfigurations {
    /// The admission configuration of `cluster`.
    pub(crate) async fn of(
        &self,
        registry: &Registry,
        cluster: &str,
    ) -> Result<Arc<ClusterAdmission>, RegistryError> {
        self.0
            .get(registry, cluster, || read(registry, cluster))
            .await
    }
}

/// Every object of the configuration kind `plural` in `cluster`, by name.
async fn listed(
    registry: &Registry,
    cluster: &str,
    plural: &str,
) -> Result<Vec<Value>, RegistryError> {
    let target = Target {
        cluster,
        resource: configuration_resource(plural),
        namespace: None,
    };
    let mut objects = registry.list(target, ListOptions::default()).await?.items;
    objects.sort_by(|a, b| {
        a["metadata"]["name"]
            .as_str()
            .cmp(&b["metadata"]["name"].as_str())
    });
    Ok(objects)
}

async fn read(registry: &Registry, cluster: &str) -> Result<Arc<ClusterAdmission>, RegistryError> {
    let hooks = |objects: Vec<Value>, mutating: bool| -> Vec<Arc<Webhook>> {
        objects
            .iter()
            .flat_map(|c| webhooks_of(c, mutating))
            .collect()
    };
    let mutating = hooks(
        listed(registry, cluster, "mutatingwebhookconfigurations").await?,
        true,
    );
    let validating = hooks(
        listed(registry, cluster, "validatingwebhookconfigurations").await?,
        false,
    );
    let bindings: Vec<Arc<Binding>> =
        listed(registry, cluster, "validatingadmissionpolicybindings")
            .await?
            .iter()
            .map(binding_of)
            .collect();
    let policies = if bindings.is_empty() {
        Vec::new()
    } else {
        listed(registry, cluster, "validatingadmissionpolicies")
            .await?
            .iter()
            .map(policy_of)
            .map(|policy| {
                let bound = bindings
                    .iter()
                    .filter(|b| b.policy == policy.name)
                    .cloned()
                    .collect();
                (policy, bound)
            })
            .filter(|(_, bound): &(_, Vec<_>)| !bound.is_empty())
            .collect()
    };
    Ok(Arc::new(ClusterAdmission {
        mutating,
        validating,
        policies,
    }))
}
