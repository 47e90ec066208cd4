//! The ConfigMap `kube-root-ca.crt` of a namespace: the server's CA as `ca.crt`, for clients
//! inside the cluster to verify the server. Created when missing, its CA put back when it is
//! not the server's.

use kcp_apis::builtin::core;
use kcp_registry::{Registry, RegistryError, Target};
use serde::Deserialize;
use serde_json::json;

/// The ConfigMap every namespace has.
pub const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";
/// Its `kubernetes.io/description` annotation, as Kubernetes words it.
pub const DESCRIPTION: &str = "Contains a CA bundle that can be used to verify the \
    kube-apiserver when using internal endpoints such as the internal service IP or \
    kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes \
    clusters.";

/// The CA a `kube-root-ca.crt` ConfigMap holds (the rest of it is not read).
#[derive(Deserialize)]
struct HeldCa {
    #[serde(default)]
    data: Option<HeldCaData>,
}

#[derive(Deserialize)]
struct HeldCaData {
    #[serde(default, rename = "ca.crt")]
    ca: Option<String>,
}

/// Creates or mends the `kube-root-ca.crt` ConfigMap of `namespace`.
pub(super) async fn ensure(
    registry: &Registry,
    cluster: &str,
    namespace: &str,
) -> Result<(), RegistryError> {
    let Some(tokens) = registry.service_account_tokens() else {
        return Ok(());
    };
    let Ok(ca) = std::str::from_utf8(tokens.root_ca_pem()) else {
        return Ok(());
    };
    let target = Target {
        cluster,
        resource: core("configmaps"),
        namespace: Some(namespace),
    };
    // Its CA alone first: after a restart every namespace is looked at, and nearly all hold
    // the right one.
    let held = registry
        .get_part::<HeldCa>(target, ROOT_CA_CONFIG_MAP)
        .await;
    if held.is_ok_and(|held| held.data.and_then(|data| data.ca).as_deref() == Some(ca)) {
        return Ok(());
    }
    let result = match registry.get(target, ROOT_CA_CONFIG_MAP).await {
        Ok(current) if current["data"]["ca.crt"] == ca => return Ok(()),
        Ok(mut current) => {
            current["data"] = json!({"ca.crt": ca});
            registry
                .update(target, ROOT_CA_CONFIG_MAP, current)
                .await
                .map(drop)
        }
        Err(RegistryError::NotFound { .. }) => {
            let config_map = json!({
                "metadata": {
                    "name": ROOT_CA_CONFIG_MAP,
                    "annotations": {"kubernetes.io/description": DESCRIPTION},
                },
                "data": {"ca.crt": ca},
            });
            registry.create(target, config_map).await.map(drop)
        }
        Err(error) => Err(error),
    };
    match result {
        // Another pass or a user won the race: the next event brings the namespace back if
        // need be. A namespace terminating meanwhile needs nothing more, as
        // kube-controller-manager takes it (a deleted workspace loses its ConfigMaps before its
        // namespaces are marked: retried, this made 9,752 warnings while a million workspaces
        // were deleted); a refusal of a quota without room is retried.
        Ok(())
        | Err(RegistryError::AlreadyExists { .. })
        | Err(RegistryError::Conflict { .. })
        | Err(RegistryError::NotFound { .. }) => Ok(()),
        Err(error) if error.refused_as_namespace_terminating() => Ok(()),
        Err(error) => Err(error),
    }
}
