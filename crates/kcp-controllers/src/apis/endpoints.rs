//! One APIExportEndpointSlice: its export checked, and this server's URL of the export's
//! virtual workspace listed once some APIBinding binds the export (kcp lists a shard's URL
//! only when the shard has bindings to it).

use kcp_apimachinery::object::text;
use kcp_registry::{Registry, RegistryError, Target};
use serde_json::{Value, json};

use super::{export_cluster, exports, slices};
use crate::Context;
use crate::conditions::{self, Condition};
use crate::driver::{Also, Key, Outcome, Source};
use kcp_registry::Watched;

pub async fn run(registry: Registry, context: Context) {
    // A binding's changes concern the slice its export made (same name, same cluster).
    let also = vec![Also {
        source: Source::Resource(kcp_apis::system::api_bindings()),
        key: |_, binding| {
            let cluster = text(&binding["status"], "apiExportClusterName");
            let name = text(&binding["spec"]["reference"]["export"], "name");
            (!cluster.is_empty() && !name.is_empty()).then(|| Key {
                cluster: cluster.to_string(),
                namespace: String::new(),
                name: name.to_string(),
            })
        },
        watched: Watched::All,
    }];
    super::run_simple(
        registry,
        context,
        "apiexportendpointslice",
        (kcp_apis::system::api_export_endpoint_slices(), |_| true),
        |registry, key| Box::pin(async move { reconcile(&registry, &key).await }),
        also,
    )
    .await
}

/// This server's address (`https://host:port`), from root's LogicalCluster URL.
async fn server_url(registry: &Registry) -> Option<String> {
    let target = Target {
        cluster: kcp_registry::tenancy::ROOT,
        resource: kcp_apis::system::logical_clusters(),
        namespace: None,
    };
    let root = registry.get(target, "cluster").await.ok()?;
    let url = text(&root["status"], "URL");
    let base = url.split("/clusters/").next().unwrap_or(url);
    (!base.is_empty()).then(|| base.to_string())
}

/// Whether `slice` already lists this server's URL of its export, which some binding still
/// binds, and its export is valid: what every binding's change finds once the first binding is
/// there, answered without reading the export (a thousand workspaces binding an export each
/// bring its slice back).
fn settled(registry: &Registry, slice: &Value, export_name: &str) -> bool {
    let Some(url) = slice["status"]["endpoints"][0]["url"].as_str() else {
        return false;
    };
    let Some((_, tail)) = url.split_once("/services/apiexport/") else {
        return false;
    };
    let Some((cluster, name)) = tail.split_once('/') else {
        return false;
    };
    name == export_name
        && kcp_registry::custom::status_condition_true(&slice["status"], "APIExportValid")
        && registry.export_is_bound(cluster, name)
}

async fn reconcile(registry: &Registry, key: &Key) -> Result<Outcome, RegistryError> {
    let privileged = registry.privileged();
    let slice = match privileged.get(slices(&key.cluster), &key.name).await {
        Ok(slice) => slice,
        Err(RegistryError::NotFound { .. }) => return Ok(Outcome::Finished),
        Err(other) => return Err(other),
    };
    let reference = &slice["spec"]["export"];
    let export_name = text(reference, "name");
    if settled(&privileged, &slice, export_name) {
        return Ok(Outcome::Finished);
    }
    let cluster = export_cluster(&privileged, &key.cluster, text(reference, "path")).await;
    let export = match &cluster {
        Ok(cluster) => privileged.get(exports(cluster), export_name).await.ok(),
        Err(_) => None,
    };
    let mut status = slice["status"].as_object().cloned().unwrap_or_default();
    let mut endpoints = Vec::new();
    match (&cluster, &export) {
        (Ok(cluster), Some(_)) => {
            conditions::set(
                &mut status,
                Condition {
                    kind: "APIExportValid",
                    status: true,
                    reason: "",
                    message: String::new(),
                },
            );
            if privileged.export_is_bound(cluster, export_name)
                && let Some(base) = server_url(&privileged).await
            {
                endpoints.push(json!({
                    "url": format!("{base}/services/apiexport/{cluster}/{export_name}")
                }));
            }
        }
        _ => {
            conditions::set(
                &mut status,
                Condition {
                    kind: "APIExportValid",
                    status: false,
                    reason: "APIExportNotFound",
                    message: format!(
                        "APIExport {}:{export_name} not found",
                        text(reference, "path")
                    ),
                },
            );
        }
    }
    match endpoints.is_empty() {
        true => status.remove("endpoints"),
        false => status.insert("endpoints".into(), Value::Array(endpoints)),
    };
    if Value::Object(status.clone()) == slice["status"] {
        return Ok(Outcome::Finished);
    }
    let mut next = slice.clone();
    next["status"] = Value::Object(status);
    let Some(status_registry) = privileged.subresource("status") else {
        return Ok(Outcome::Finished);
    };
    match status_registry
        .update(slices(&key.cluster), &key.name, next)
        .await
    {
        Ok(_) | Err(RegistryError::NotFound { .. }) => Ok(Outcome::Finished),
        Err(RegistryError::Conflict { .. }) => Ok(Outcome::Again(std::time::Duration::ZERO)),
        Err(other) => Err(other),
    }
}
