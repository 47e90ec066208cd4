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
    // After a start every namespace of every workspace comes through here, and reads of the
    // embedded store never wait: without giving up its turn after each, the pass ran in long
    // turns that everything else waited for (deleting an org of 1,000 right after a restart
    // over 101,000 workspaces took 5.6-7.0 s, 3.2-4.2 s with it). Only this controller does
    // it: yielding after every reconcile of every controller slowed such a deletion's own
    // chain of reconciles (4.3-5.5 s).
    tokio::task::yield_now().await;
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use kcp_registry::Target;
    use kcp_storage::MemoryStorage;
    use serde_json::json;

    use super::*;

    /// A registry whose cluster `c` has the namespace `ns`.
    async fn registry_with_a_namespace() -> Registry {
        let registry = Registry::new(Arc::new(MemoryStorage::new()));
        let target = Target {
            cluster: "c",
            resource: core("namespaces"),
            namespace: None,
        };
        registry
            .create(target, json!({"metadata": {"name": "ns"}}))
            .await
            .unwrap();
        registry
    }

    #[tokio::test]
    async fn a_namespace_deleted_under_a_pass_is_left_alone_without_a_retry() {
        let registry = registry_with_a_namespace().await;
        let target = Target {
            cluster: "c",
            resource: core("namespaces"),
            namespace: None,
        };
        // Still there, terminating until its finalizer goes.
        registry.delete(target, "ns").await.unwrap();
        // What a pass that read the namespace just before the deletion then does.
        service_account::ensure(&registry, "c", "ns")
            .await
            .expect("no retry for a terminating namespace");
        let accounts = Target {
            cluster: "c",
            resource: core("serviceaccounts"),
            namespace: Some("ns"),
        };
        assert!(matches!(
            registry.get(accounts, DEFAULT_SERVICE_ACCOUNT).await,
            Err(RegistryError::NotFound { .. })
        ));
    }

    /// One thread: the other task runs only when the reconcile gives up its turn.
    #[tokio::test(flavor = "current_thread")]
    async fn a_pass_over_a_namespace_that_has_everything_gives_up_its_turn() {
        let registry = registry_with_a_namespace().await;
        let key = Key {
            cluster: "c".into(),
            namespace: String::new(),
            name: "ns".into(),
        };
        // The first pass creates the service account; the second only reads.
        reconcile(&registry, &key).await.unwrap();
        let other_ran = Arc::new(AtomicBool::new(false));
        let other = tokio::spawn({
            let other_ran = other_ran.clone();
            async move { other_ran.store(true, Ordering::SeqCst) }
        });
        assert_eq!(reconcile(&registry, &key).await.unwrap(), Outcome::Finished);
        assert!(other_ran.load(Ordering::SeqCst), "the other task waited");
        other.await.unwrap();
    }
}
