//! Controllers that run inside the kcp server, one folder per controller.
//!
//! Each controller is one task for every logical cluster: it lists and watches its resource
//! across all clusters at once ([`kcp_registry::Registry::watch_all_clusters`]) and keys its
//! work queue by `(cluster, name)`, so thousands of clusters cost queue entries, not tasks.
//!
//! Until a cluster-aware client exists, controllers call the registry directly; they must not
//! know HTTP, storage backends or how the server is configured.

pub mod admissionpolicy;
pub mod apis;
pub mod clusterroleaggregation;
mod conditions;
pub mod crd;
mod driver;
mod events;
pub mod garbagecollector;
pub mod logicalcluster;
pub mod metrics;
pub mod namespace;
pub mod namespacedefaults;
mod queue;
pub mod resourcequota;
pub mod serviceaccount;
pub mod workspace;

pub use driver::{Key, Outcome};
pub use metrics::ControllerMetrics;

use kcp_registry::Registry;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What every controller runs with besides the registry: the signal to stop, and the metrics
/// its queue reports to.
#[derive(Clone)]
pub struct Context {
    pub stop: watch::Receiver<bool>,
    pub metrics: ControllerMetrics,
}

/// The running controllers; [`Controllers::shutdown`] stops them.
pub struct Controllers {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    metrics: ControllerMetrics,
}

impl Controllers {
    /// Starts every controller on `registry`.
    pub fn start(registry: Registry) -> Controllers {
        let (stop, stopped) = watch::channel(false);
        let metrics = ControllerMetrics::default();
        let context = Context {
            stop: stopped,
            metrics: metrics.clone(),
        };
        let r = || registry.clone();
        let c = || context.clone();
        let tasks = vec![
            tokio::spawn(namespace::run(r(), c())),
            tokio::spawn(crd::run(r(), c())),
            tokio::spawn(workspace::run(r(), c())),
            tokio::spawn(logicalcluster::run(r(), c())),
            tokio::spawn(serviceaccount::run(r(), c())),
            tokio::spawn(namespacedefaults::run(r(), c())),
            tokio::spawn(clusterroleaggregation::run(r(), c())),
            tokio::spawn(admissionpolicy::run(r(), c())),
            tokio::spawn(resourcequota::run(r(), c())),
            tokio::spawn(garbagecollector::run(r(), c())),
            tokio::spawn(apis::run_exports(r(), c())),
            tokio::spawn(apis::run_endpoint_slices(r(), c())),
            tokio::spawn(apis::run_bindings(r(), c())),
        ];
        Controllers {
            stop,
            tasks,
            metrics,
        }
    }

    /// The controllers' metrics, to add to the server's (see [`ControllerMetrics::register`]).
    pub fn metrics(&self) -> &ControllerMetrics {
        &self.metrics
    }

    /// Stops every controller and waits until they have stopped.
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}
