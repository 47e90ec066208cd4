//! Clients for logical clusters from one kube-rs configuration.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// What can go wrong making a client.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("the server URL {0:?} cannot be made a logical cluster's: {1}")]
    Url(String, String),
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error(transparent)]
    Config(#[from] kube::config::InferConfigError),
}

/// One configuration for every logical cluster of a kcp server: the configuration's server URL
/// without its `/clusters/<path>`, to which each client adds its own. Clients are kept per
/// logical cluster (each holds a connection pool), the [`KEPT_CLIENTS`] used last. Cloning
/// shares them.
#[derive(Clone)]
pub struct ClusterConfig {
    config: kube::Config,
    /// `scheme://host[:port]`, plus any path before `/clusters/`.
    base: String,
    clients: Arc<Mutex<Clients>>,
}

/// How many logical clusters' clients are kept; the one used longest ago goes first.
pub const KEPT_CLIENTS: usize = 256;

#[derive(Default)]
struct Clients {
    /// Each client and when it was last handed out (a counter).
    by_cluster: HashMap<String, (kube::Client, u64)>,
    uses: u64,
}

impl ClusterConfig {
    /// From a kube-rs configuration (its server URL may name a logical cluster or not).
    pub fn new(config: kube::Config) -> ClusterConfig {
        let url = config.cluster_url.to_string();
        let base = match url.find("/clusters/") {
            Some(at) => url[..at].to_string(),
            None => url.trim_end_matches('/').to_string(),
        };
        ClusterConfig {
            config,
            base,
            clients: Arc::default(),
        }
    }

    /// The same credentials for the logical clusters behind another URL: a virtual workspace's,
    /// as an APIExportEndpointSlice lists it (`https://host/services/apiexport/<cluster>/<export>`),
    /// where `client(consumer)` reaches one consumer and `wildcard()` all of them.
    pub fn at(&self, url: &str) -> ClusterConfig {
        ClusterConfig {
            config: self.config.clone(),
            base: url.trim_end_matches('/').to_string(),
            clients: Arc::default(),
        }
    }

    /// The virtual workspace URLs of the APIExportEndpointSlice `slice` of logical cluster
    /// `cluster` (`status.endpoints[].url`): where a provider's controller reaches the export's
    /// consumers (empty until some workspace binds the export).
    pub async fn endpoints(&self, cluster: &str, slice: &str) -> Result<Vec<String>, ClusterError> {
        let resource = kube::api::ApiResource {
            group: "apis.kcp.io".into(),
            version: "v1alpha1".into(),
            api_version: "apis.kcp.io/v1alpha1".into(),
            kind: "APIExportEndpointSlice".into(),
            plural: "apiexportendpointslices".into(),
        };
        let slices: kube::Api<kube::api::DynamicObject> =
            kube::Api::all_with(self.client(cluster)?, &resource);
        let found = slices.get(slice).await?;
        Ok(found.data["status"]["endpoints"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| e["url"].as_str().map(str::to_string))
            .collect())
    }

    /// From the environment, as kube-rs reads it (`KUBECONFIG`, the in-cluster service account).
    pub async fn infer() -> Result<ClusterConfig, ClusterError> {
        Ok(ClusterConfig::new(kube::Config::infer().await?))
    }

    /// The URL of logical cluster `cluster` (a path like `root:org:team`, or `*`).
    pub fn url_of(&self, cluster: &str) -> String {
        format!("{}/clusters/{cluster}", self.base)
    }

    /// A client whose requests reach logical cluster `cluster` (`root:org`, or a logical
    /// cluster's name as `kcp.io/cluster` gives it).
    pub fn client(&self, cluster: &str) -> Result<kube::Client, ClusterError> {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients.uses += 1;
        let now = clients.uses;
        if let Some((client, used)) = clients.by_cluster.get_mut(cluster) {
            *used = now;
            return Ok(client.clone());
        }
        let mut config = self.config.clone();
        let url = self.url_of(cluster);
        config.cluster_url = url
            .parse()
            .map_err(|e: http::uri::InvalidUri| ClusterError::Url(url.clone(), e.to_string()))?;
        let client = kube::Client::try_from(config)?;
        if clients.by_cluster.len() >= KEPT_CLIENTS {
            let oldest = clients
                .by_cluster
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(cluster, _)| cluster.clone());
            if let Some(oldest) = oldest {
                clients.by_cluster.remove(&oldest);
            }
        }
        clients
            .by_cluster
            .insert(cluster.to_string(), (client.clone(), now));
        Ok(client)
    }

    /// A client for all logical clusters at once (`/clusters/*`): lists and watches only.
    pub fn wildcard(&self) -> Result<kube::Client, ClusterError> {
        self.client("*")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(url: &str) -> ClusterConfig {
        ClusterConfig::new(kube::Config::new(url.parse().unwrap()))
    }

    #[tokio::test]
    async fn clients_are_kept_for_the_clusters_used_last() {
        let config = config("https://127.0.0.1:6443/clusters/root");
        for n in 0..KEPT_CLIENTS + 10 {
            config.client(&format!("c{n}")).unwrap();
            config.client("hot").unwrap();
        }
        let clients = config.clients.lock().unwrap();
        assert_eq!(clients.by_cluster.len(), KEPT_CLIENTS);
        assert!(clients.by_cluster.contains_key("hot"));
        assert!(!clients.by_cluster.contains_key("c0"));
    }

    #[test]
    fn a_virtual_workspace_url_is_a_base_of_its_own() {
        let view = config("https://127.0.0.1:6443/clusters/root")
            .at("https://127.0.0.1:6443/services/apiexport/abc/widgets");
        assert_eq!(
            view.url_of("*"),
            "https://127.0.0.1:6443/services/apiexport/abc/widgets/clusters/*"
        );
    }

    #[test]
    fn any_cluster_is_reached_from_one_server_url() {
        let named = config("https://127.0.0.1:6443/clusters/root:org");
        assert_eq!(
            named.url_of("root:team"),
            "https://127.0.0.1:6443/clusters/root:team"
        );
        assert_eq!(named.url_of("*"), "https://127.0.0.1:6443/clusters/*");
        let bare = config("https://kcp.example.com/");
        assert_eq!(bare.url_of("root"), "https://kcp.example.com/clusters/root");
        let proxied = config("https://proxy.example.com/kcp/clusters/root");
        assert_eq!(
            proxied.url_of("abc"),
            "https://proxy.example.com/kcp/clusters/abc"
        );
    }
}
