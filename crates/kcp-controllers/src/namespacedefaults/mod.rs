//! What every namespace has in Kubernetes, in every logical cluster: the ServiceAccount
//! `default` (kube-controller-manager's `serviceaccount` controller) and the ConfigMap
//! `kube-root-ca.crt` with the server's CA (its `root-ca-cert-publisher`).
//!
//! One task serves every logical cluster ([`crate::driver`]): it queues each namespace that is
//! not being deleted, and the namespace of a `default` ServiceAccount or `kube-root-ca.crt`
//! ConfigMap that was deleted, so both come back. A pass creates what is missing
//! ([`service_account`], [`root_ca`]); a ConfigMap whose CA is not the server's gets it back
//! when its namespace is next looked at.

mod root_ca;
mod service_account;

use kcp_apis::builtin::core;
use kcp_registry::{Registry, RegistryError, Summary, Watched};
use serde_json::Value;

use crate::Context;
use crate::driver::{Also, Controller, Key, Listing, Outcome, Source};

pub use root_ca::{DESCRIPTION, ROOT_CA_CONFIG_MAP};
pub use service_account::DEFAULT_SERVICE_ACCOUNT;

fn active(namespace: &Value) -> bool {
    !Summary::of_value(namespace).deleting
}

/// The namespace key of an object named `name` in a namespace.
fn namespace_of(cluster: &str, object: &Value, name: &str) -> Option<Key> {
    let namespace = object["metadata"]["namespace"].as_str()?;
    (object["metadata"]["name"] == name).then(|| Key {
        cluster: cluster.to_string(),
        namespace: String::new(),
        name: namespace.to_string(),
    })
}

/// Gives the namespace `key` what it lacks.
async fn reconcile(registry: &Registry, key: &Key) -> Result<Outcome, RegistryError> {
    let target = kcp_registry::Target {
        cluster: &key.cluster,
        resource: core("namespaces"),
        namespace: None,
    };
    // Summaries, not whole objects: after a start every namespace of every workspace is
    // looked at here, and nearly all are active and have their service account.
    match registry.summary(target, &key.name).await {
        Ok(namespace) if !namespace.deleting => {}
        Ok(_) | Err(RegistryError::NotFound { .. }) => return Ok(Outcome::Finished),
        Err(error) => return Err(error),
    }
    service_account::ensure(registry, &key.cluster, &key.name).await?;
    root_ca::ensure(registry, &key.cluster, &key.name).await?;
    Ok(Outcome::Finished)
}

/// Runs the controller until `stop` turns true.
pub async fn run(registry: Registry, context: Context) {
    Controller {
        name: "namespace-defaults",
        resource: core("namespaces"),
        wants: active,
        listed: Listing::Summaries(|namespace| !namespace.deleting),
        deletions: false,
        reconcile: |registry, key: Key| Box::pin(async move { reconcile(&registry, &key).await }),
        // Few at once, as kube-controller-manager runs these with one worker each: with 64, a
        // burst of new workspaces was about 30% slower to Ready (their four writes competed with
        // the workspaces' own) and a restart answered a second later. With 4, creating 10,000
        // workspaces (20,000 namespaces) ends with every namespace served about 10 s after the
        // last create, instead of 2 s.
        workers: 4,
        also: vec![
            Also {
                source: Source::Resource(core("serviceaccounts")),
                key: |cluster, object| namespace_of(cluster, object, DEFAULT_SERVICE_ACCOUNT),
                watched: Watched::Deletions,
            },
            Also {
                source: Source::Resource(core("configmaps")),
                key: |cluster, object| namespace_of(cluster, object, ROOT_CA_CONFIG_MAP),
                watched: Watched::Deletions,
            },
        ],
    }
    .run(registry, context)
    .await
}
