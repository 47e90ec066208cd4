//! One Cluster's importer: a task that, every poll interval, pulls the configured resources'
//! CRDs from the physical cluster ([`crate::puller`]) and keeps one `APIResourceImport` per
//! resource the cluster serves in the Cluster's workspace (owned by the Cluster, named
//! `<plural>.<cluster>.<version>.<group>`), removing those of resources it no longer serves.
//! Each pass's outcome is kept for the Cluster's status, and announced.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use http::Method;
use kcp_sdk::ClusterKey;
use serde_json::{Value, json};

use crate::Shared;
use crate::kinds::{self, Gvr};
use crate::puller::{NotServed, Puller};
use crate::requests;

/// What the last pass gave: how many resources were imported, or why none were.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The names of the imports the pass keeps.
    Imported(Vec<String>),
    /// The cluster could not be reached (connection, TLS, timeouts).
    Unreachable(String),
    /// It answered, but not as needed (permissions, documents).
    Failed(String),
}

/// A running importer of one Cluster.
pub struct Importer {
    /// What it was started for (the Cluster's uid and kubeconfig): another needs another.
    pub fingerprint: String,
    /// The client of the physical cluster.
    pub remote: kube::Client,
    last: Arc<Mutex<Option<Outcome>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Importer {
    /// Starts importing from `remote` (a client of the physical cluster) into the Cluster `key`.
    pub fn start(
        shared: Arc<Shared>,
        key: ClusterKey,
        cluster: Value,
        remote: kube::Client,
        fingerprint: String,
    ) -> Importer {
        let last = Arc::new(Mutex::new(None));
        let outcome = last.clone();
        let client = remote.clone();
        let task = tokio::spawn(async move {
            loop {
                let result = pass(&shared, &key, &cluster, &remote).await;
                let result = match result.map_err(|e| (shortened(&format!("{e:#}")), answered(&e)))
                {
                    Ok(names) => Outcome::Imported(names),
                    Err((message, answered)) => {
                        tracing::info!(cluster = %key, error = message, "import failed");
                        match answered {
                            true => Outcome::Failed(message),
                            false => Outcome::Unreachable(message),
                        }
                    }
                };
                *outcome.lock().unwrap_or_else(|e| e.into_inner()) = Some(result);
                if shared.passes.send(key.clone()).is_err() {
                    return;
                }
                tokio::time::sleep(shared.options.poll_interval).await;
            }
        });
        Importer {
            fingerprint,
            remote: client,
            last,
            task,
        }
    }

    /// The last pass's outcome (`None` before the first ends).
    pub fn outcome(&self) -> Option<Outcome> {
        self.last.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub fn stop(self) {
        self.task.abort();
    }
}

/// The longest message a pass leaves for the Cluster's condition.
const MESSAGE_LIMIT: usize = 1024;

fn shortened(message: &str) -> String {
    match message.char_indices().nth(MESSAGE_LIMIT) {
        Some((at, _)) => format!("{}...", &message[..at]),
        None => message.to_string(),
    }
}

/// Whether the cluster answered (an API error, or a document it served that cannot be used),
/// rather than not being reachable at all.
fn answered(error: &anyhow::Error) -> bool {
    !error.chain().any(|e| {
        matches!(
            e.downcast_ref::<kube::Error>(),
            Some(kube::Error::HyperError(_) | kube::Error::Service(_))
        )
    })
}

/// One import pass; the names of the imports it keeps.
async fn pass(
    shared: &Shared,
    key: &ClusterKey,
    cluster: &Value,
    remote: &kube::Client,
) -> anyhow::Result<Vec<String>> {
    let location = key.name.as_str();
    let mut puller = Puller::new(remote);
    let mut pulled = Vec::new();
    for resource in &shared.options.resources {
        match puller.pull(resource).await {
            Ok(crd) => pulled.push(crd),
            Err(error) if error.is::<NotServed>() => {}
            Err(error) => return Err(error.context(format!("pulling {resource}"))),
        }
    }
    // The Cluster may have gone (or come back as another) while this pass read.
    let current = shared.clusters.get(key);
    if current.and_then(|c| c.metadata.uid.clone()).as_deref()
        != cluster["metadata"]["uid"].as_str()
    {
        return Ok(Vec::new());
    }
    let workspace = shared.config.client(&key.cluster)?;
    let existing = shared.imports_in(&key.cluster);
    let mut wanted = BTreeSet::new();
    for crd in &pulled {
        let Some((gvr, spec)) = import_spec(crd, location) else {
            continue;
        };
        let name = gvr.import_name(location);
        wanted.insert(name.clone());
        let current = existing
            .iter()
            .find(|i| i["metadata"]["name"] == name.as_str());
        match current {
            Some(current) => {
                // The strategy is the user's to change; the rest follows the cluster.
                let mut spec = spec;
                if let Some(strategy) = current["spec"].get("schemaUpdateStrategy") {
                    spec["schemaUpdateStrategy"] = strategy.clone();
                }
                if current["spec"] != spec {
                    let mut updated = current.clone();
                    updated["spec"] = spec;
                    let path = requests::path(&kinds::imports(), None, &name);
                    requests::write(&workspace, Method::PUT, &path, &updated).await?;
                }
            }
            None => {
                let import = json!({
                    "apiVersion": "apiresource.kcp.io/v1alpha1",
                    "kind": "APIResourceImport",
                    "metadata": {
                        "name": name,
                        "annotations": {kinds::API_VERSION_ANNOTATION: gvr.api_version()},
                        "ownerReferences": [kinds::owner_reference(cluster, "cluster.example.dev/v1alpha1", "Cluster")],
                    },
                    "spec": spec,
                });
                let path = requests::collection(&kinds::imports(), None);
                match requests::send(
                    &workspace,
                    Method::POST,
                    &path,
                    Some(&import),
                    "application/json",
                )
                .await?
                {
                    requests::Answer::Ok(_) | requests::Answer::AlreadyExists => {}
                    _ => anyhow::bail!("could not create APIResourceImport {name}"),
                }
            }
        }
    }
    for import in &existing {
        let name = import["metadata"]["name"].as_str().unwrap_or_default();
        if import["spec"]["location"] == location && !wanted.contains(name) {
            requests::delete(&workspace, &requests::path(&kinds::imports(), None, name)).await?;
        }
    }
    Ok(wanted.into_iter().collect())
}

/// An import's spec from a pulled CRD: its storage version's schema, names, scope,
/// subresources and printer columns.
pub fn import_spec(crd: &Value, location: &str) -> Option<(Gvr, Value)> {
    let spec = &crd["spec"];
    let versions = spec["versions"].as_array()?;
    let version = versions
        .iter()
        .find(|v| v["storage"] == true)
        .or_else(|| versions.first())?;
    let group = spec["group"].as_str().unwrap_or_default();
    let names = &spec["names"];
    let gvr = Gvr {
        group: group.to_string(),
        version: version["name"].as_str()?.to_string(),
        plural: names["plural"].as_str()?.to_string(),
    };
    let mut import = json!({
        "groupVersion": {"group": group, "version": gvr.version},
        "scope": spec["scope"],
        "plural": gvr.plural,
        "kind": names["kind"],
        "openAPIV3Schema": version["schema"]["openAPIV3Schema"],
        "location": location,
        "schemaUpdateStrategy": "UpdateUnpublished",
    });
    for field in ["singular", "listKind", "shortNames", "categories"] {
        if let Some(value) = names.get(field).filter(|v| !v.is_null()) {
            import[field] = value.clone();
        }
    }
    let subresources: Vec<Value> = ["status", "scale"]
        .iter()
        .filter(|name| version["subresources"].get(**name).is_some())
        .map(|name| json!({"name": name}))
        .collect();
    if !subresources.is_empty() {
        import["subResources"] = Value::Array(subresources);
    }
    let columns: Vec<Value> = version["additionalPrinterColumns"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let mut column =
                json!({"name": c["name"], "type": c["type"], "jsonPath": c["jsonPath"]});
            for field in ["format", "description", "priority"] {
                if let Some(value) = c.get(field) {
                    column[field] = value.clone();
                }
            }
            column
        })
        .collect();
    if !columns.is_empty() {
        import["columnDefinitions"] = Value::Array(columns);
    }
    Some((gvr, import))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_import_takes_the_storage_version_and_what_it_serves() {
        let crd = json!({"spec": {
            "group": "example.dev", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList", "shortNames": ["wd"]},
            "versions": [
                {"name": "v1alpha1", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}},
                {"name": "v1", "served": true, "storage": true,
                 "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object"}}}},
                 "subresources": {"status": {}},
                 "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size", "priority": 1}]},
            ],
        }});
        let (gvr, spec) = import_spec(&crd, "east").unwrap();
        assert_eq!(gvr.import_name("east"), "widgets.east.v1.example.dev");
        assert_eq!(
            spec["groupVersion"],
            json!({"group": "example.dev", "version": "v1"})
        );
        assert_eq!(spec["shortNames"], json!(["wd"]));
        assert_eq!(spec["subResources"], json!([{"name": "status"}]));
        assert_eq!(
            spec["columnDefinitions"],
            json!([{"name": "Size", "type": "integer", "jsonPath": ".spec.size", "priority": 1}])
        );
        assert_eq!(
            spec["openAPIV3Schema"]["properties"]["spec"]["type"],
            "object"
        );
        assert_eq!(spec["location"], "east");
    }
}
