//! Controllers that run inside the kcp server, one folder per controller.
//!
//! Each controller is one task for every logical cluster: it lists and watches its resource
//! across all clusters at once ([`kcp_registry::Registry::watch_all_clusters`]) and keys its
//! work queue by `(cluster, name)`, so thousands of clusters cost queue entries, not tasks.
//!
//! Until a cluster-aware client exists, controllers call the registry directly; they must not
//! know HTTP, storage backends or how the server is configured.

pub mod clusterroleaggregation;
mod conditions;
pub mod crd;
mod driver;
pub mod garbagecollector;
pub mod logicalcluster;
pub mod namespace;
pub mod namespacedefaults;
mod queue;
pub mod resourcequota;
pub mod serviceaccount;
pub mod workspace;

pub use driver::{Key, Outcome};

use kcp_registry::Registry;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The running controllers; [`Controllers::shutdown`] stops them.
pub struct Controllers {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Controllers {
    /// Starts every controller on `registry`.
    pub fn start(registry: Registry) -> Controllers {
        let (stop, stopped) = watch::channel(false);
        let tasks = vec![
            tokio::spawn(namespace::run(registry.clone(), stopped.clone())),
            tokio::spawn(crd::run(registry.clone(), stopped.clone())),
            tokio::spawn(workspace::run(registry.clone(), stopped.clone())),
            tokio::spawn(logicalcluster::run(registry.clone(), stopped.clone())),
            tokio::spawn(serviceaccount::run(registry.clone(), stopped.clone())),
            tokio::spawn(namespacedefaults::run(registry.clone(), stopped.clone())),
            tokio::spawn(clusterroleaggregation::run(
                registry.clone(),
                stopped.clone(),
            )),
            tokio::spawn(resourcequota::run(registry.clone(), stopped.clone())),
            tokio::spawn(garbagecollector::run(registry, stopped)),
        ];
        Controllers { stop, tasks }
    }

    /// Stops every controller and waits until they have stopped.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}
