//! The controllers' work queue metrics, with kube-controller-manager's names:
//! `workqueue_depth`, `workqueue_adds_total`, `workqueue_retries_total` and
//! `workqueue_work_duration_seconds`, each labelled with the controller's `name` only. One
//! queue serves every logical cluster, so no label grows with the workspaces.
//!
//! The families belong to the server's metrics registry ([`ControllerMetrics::register`]); there
//! is no global.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueueName {
    name: String,
}

/// The metrics of every controller of one server. Cloning shares them.
#[derive(Clone)]
pub struct ControllerMetrics {
    depth: Family<QueueName, Gauge>,
    adds: Family<QueueName, Counter>,
    retries: Family<QueueName, Counter>,
    work: Family<QueueName, Histogram>,
}

impl Default for ControllerMetrics {
    fn default() -> Self {
        ControllerMetrics {
            depth: Family::default(),
            adds: Family::default(),
            retries: Family::default(),
            work: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(1e-4, 4.0, 10))
            }),
        }
    }
}

impl ControllerMetrics {
    /// Adds the families to a server's metrics registry.
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue",
            self.depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            self.adds.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            self.retries.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            self.work.clone(),
        );
    }

    /// The metrics of the queue of controller `name`.
    pub(crate) fn queue(&self, name: &str) -> QueueMetrics {
        let label = QueueName {
            name: name.to_string(),
        };
        QueueMetrics {
            depth: self.depth.get_or_create(&label).clone(),
            adds: self.adds.get_or_create(&label).clone(),
            retries: self.retries.get_or_create(&label).clone(),
            work: self.work.get_or_create(&label).clone(),
        }
    }
}

/// One queue's metrics (handles on its series).
#[derive(Clone)]
pub(crate) struct QueueMetrics {
    pub depth: Gauge,
    pub adds: Counter,
    pub retries: Counter,
    pub work: Histogram,
}

impl QueueMetrics {
    /// `work`, its duration recorded once it is done.
    pub(crate) fn timed<T>(&self, work: impl Future<Output = T>) -> impl Future<Output = T> {
        let durations = self.work.clone();
        async move {
            let began = tokio::time::Instant::now();
            let output = work.await;
            durations.observe(began.elapsed().as_secs_f64());
            output
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queues_report_under_their_names_only() {
        let metrics = ControllerMetrics::default();
        let queue = metrics.queue("garbagecollector");
        queue.adds.inc();
        queue.depth.set(3);
        queue.work.observe(0.01);
        metrics.queue("garbagecollector").retries.inc();
        let mut registry = prometheus_client::registry::Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains("workqueue_adds_total{name=\"garbagecollector\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("workqueue_depth{name=\"garbagecollector\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("workqueue_retries_total{name=\"garbagecollector\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("workqueue_work_duration_seconds_count{name=\"garbagecollector\"} 1"),
            "{text}"
        );
    }
}
