//! Each logical cluster's webhooks, read from its configurations on the first write that
//! needs them and kept until one of them changes ([`crate::followed::Followed`] over both
//! configuration kinds): a write in a workspace without webhooks costs a map lookup.

use std::sync::Arc;

use kcp_apis::builtin::{Resource, in_group_version};
use serde_json::Value;

use super::config::{Webhook, webhooks_of};
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

/// The webhooks of one logical cluster, each kind in calling order.
#[derive(Debug, Default)]
pub(crate) struct ClusterWebhooks {
    pub(crate) mutating: Vec<Arc<Webhook>>,
    pub(crate) validating: Vec<Arc<Webhook>>,
}

/// The kept webhooks of every logical cluster one registry wrote in (clones share them).
#[derive(Clone)]
pub(crate) struct AdmissionConfigurations(Arc<Followed<String, Arc<ClusterWebhooks>>>);

impl Default for AdmissionConfigurations {
    fn default() -> Self {
        let resources = vec![
            configuration_resource("mutatingwebhookconfigurations"),
            configuration_resource("validatingwebhookconfigurations"),
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
    /// The webhooks of `cluster`.
    pub(crate) async fn of(
        &self,
        registry: &Registry,
        cluster: &str,
    ) -> Result<Arc<ClusterWebhooks>, RegistryError> {
        self.0
            .get(registry, cluster, || read(registry, cluster))
            .await
    }
}

async fn read(registry: &Registry, cluster: &str) -> Result<Arc<ClusterWebhooks>, RegistryError> {
    let mut webhooks = ClusterWebhooks::default();
    for (plural, mutating) in [
        ("mutatingwebhookconfigurations", true),
        ("validatingwebhookconfigurations", false),
    ] {
        let target = Target {
            cluster,
            resource: configuration_resource(plural),
            namespace: None,
        };
        let mut configurations: Vec<Value> =
            registry.list(target, ListOptions::default()).await?.items;
        configurations.sort_by(|a, b| {
            a["metadata"]["name"]
                .as_str()
                .cmp(&b["metadata"]["name"].as_str())
        });
        let hooks = configurations
            .iter()
            .flat_map(|c| webhooks_of(c, mutating))
            .collect();
        match mutating {
            true => webhooks.mutating = hooks,
            false => webhooks.validating = hooks,
        }
    }
    Ok(Arc::new(webhooks))
}
