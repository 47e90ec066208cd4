//! One APIExport: its identity and its endpoint slice.
//!
//! The identity Secret (`spec.identity.secretRef`, by default `kcp-system/<export>`, the
//! namespace made when missing) is created with a new random key when absent; the export's
//! `status.identityHash` is the SHA-256 of the key, and once set it never changes (a Secret
//! whose key gives another hash makes `IdentityValid` False, as in kcp).

use kcp_apimachinery::object::text;
use kcp_registry::{Registry, RegistryError, Target};
use serde_json::{Value, json};

use super::{exports, slices};
use crate::Context;
use crate::conditions::{self, Condition};
use crate::driver::{Key, Outcome};

/// The annotation that keeps an export without an endpoint slice.
const SKIP_ENDPOINT_SLICE: &str = "apiexports.apis.kcp.io/skip-endpointslice";

pub async fn run(registry: Registry, context: Context) {
    super::run_simple(
        registry,
        context,
        "apiexport",
        (kcp_apis::system::api_exports(), |_| true),
        |registry, key| Box::pin(async move { reconcile(&registry, &key).await }),
        Vec::new(),
    )
    .await
}

async fn reconcile(registry: &Registry, key: &Key) -> Result<Outcome, RegistryError> {
    let privileged = registry.privileged();
    let export = match privileged.get(exports(&key.cluster), &key.name).await {
        Ok(export) => export,
        Err(RegistryError::NotFound { .. }) => return Ok(Outcome::Finished),
        Err(other) => return Err(other),
    };
    if export["metadata"].get("deletionTimestamp").is_some() {
        return Ok(Outcome::Finished);
    }
    let hash = privileged.export_identity(&key.cluster, &export).await?;
    let recorded = text(&export["status"], "identityHash");
    let condition = match recorded.is_empty() || recorded == hash {
        true => Condition {
            kind: "IdentityValid",
            status: true,
            reason: "",
            message: String::new(),
        },
        false => Condition {
            kind: "IdentityValid",
            status: false,
            reason: "IdentityVerificationFailed",
            message: "secret does not match the identity hash of the APIExport".into(),
        },
    };
    let mut status = export["status"].as_object().cloned().unwrap_or_default();
    if recorded.is_empty() {
        status.insert("identityHash".into(), json!(hash));
    }
    conditions::set(&mut status, condition);
    if Value::Object(status.clone()) != export["status"] {
        let mut next = export.clone();
        next["status"] = Value::Object(status);
        if let Some(status_registry) = privileged.subresource("status") {
            match status_registry
                .update(exports(&key.cluster), &key.name, next)
                .await
            {
                Ok(_)
                | Err(RegistryError::NotFound { .. })
                | Err(RegistryError::Conflict { .. }) => {}
                Err(other) => return Err(other),
            }
        }
    }
    if export["metadata"]["annotations"]
        .get(SKIP_ENDPOINT_SLICE)
        .is_none()
    {
        ensure_endpoint_slice(&privileged, &key.cluster, &export).await?;
    }
    Ok(Outcome::Finished)
}

/// Creates the export's endpoint slice (its name, owned by it) unless it exists.
async fn ensure_endpoint_slice(
    registry: &Registry,
    cluster: &str,
    export: &Value,
) -> Result<(), RegistryError> {
    let name = text(&export["metadata"], "name");
    match registry.get(slices(cluster), name).await {
        Ok(_) => return Ok(()),
        Err(RegistryError::NotFound { .. }) => {}
        Err(other) => return Err(other),
    }
    let path = logical_cluster_path(registry, cluster).await;
    let body = json!({
        "apiVersion": "apis.kcp.io/v1alpha1",
        "kind": "APIExportEndpointSlice",
        "metadata": {
            "name": name,
            "ownerReferences": [{
                "apiVersion": "apis.kcp.io/v1alpha2", "kind": "APIExport", "name": name,
                "uid": text(&export["metadata"], "uid"),
            }],
        },
        "spec": {"export": {"path": path, "name": name}},
    });
    match registry.create(slices(cluster), body).await {
        Ok(_) | Err(RegistryError::AlreadyExists { .. }) => Ok(()),
        Err(other) => Err(other),
    }
}

/// The workspace path of `cluster` (its LogicalCluster's `kcp.io/path`), else its name.
pub(super) async fn logical_cluster_path(registry: &Registry, cluster: &str) -> String {
    let target = Target {
        cluster,
        resource: kcp_apis::system::logical_clusters(),
        namespace: None,
    };
    registry
        .get(target, "cluster")
        .await
        .ok()
        .and_then(|lc| {
            lc["metadata"]["annotations"][kcp_registry::tenancy::PATH_ANNOTATION]
                .as_str()
                .map(str::to_string)
        })
        .unwrap_or_else(|| cluster.to_string())
}
