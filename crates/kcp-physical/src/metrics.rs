//! The physical-cluster layer's metrics, in whatever registry the process serves at `/metrics`
//! (kcp's own in `kcp start`, the `syncer` binary's `--metrics-bind-address`): no global.
//!
//! - `kcp_syncer_objects_synced_total{workspace,cluster,resource,operation}`: writes a syncer
//!   made (`create`, `update`, `delete` downstream; `status` upstream).
//! - `kcp_syncer_sync_duration_seconds{direction}`: how long one object's sync took, from the
//!   reconcile's start to its write's answer (`down`, `up`).
//! - `kcp_syncer_heartbeat_age_seconds{workspace,cluster}`: since the heartbeat Lease was last
//!   renewed: by the syncer itself (pull mode), and as the cluster-controller reads the Lease.

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Synced {
    workspace: String,
    cluster: String,
    resource: String,
    operation: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Direction {
    direction: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Heartbeat {
    workspace: String,
    cluster: String,
}

type Histograms = Family<Direction, Histogram, fn() -> Histogram>;

fn histogram() -> Histogram {
    // 1 ms to about 16 s.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// The metrics every syncer and the cluster-controller of one process share.
#[derive(Clone)]
pub struct Metrics {
    synced: Family<Synced, Counter>,
    durations: Histograms,
    heartbeats: Family<Heartbeat, Gauge<f64, AtomicU64>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            synced: Family::default(),
            durations: Family::new_with_constructor(histogram as fn() -> Histogram),
            heartbeats: Family::default(),
        }
    }
}

impl Metrics {
    /// Adds them to `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "kcp_syncer_objects_synced",
            "Writes a syncer made: create, update, delete downstream; status upstream",
            self.synced.clone(),
        );
        registry.register(
            "kcp_syncer_sync_duration_seconds",
            "How long one object's sync took, by direction",
            self.durations.clone(),
        );
        registry.register(
            "kcp_syncer_heartbeat_age_seconds",
            "Seconds since the syncer's heartbeat Lease was last renewed",
            self.heartbeats.clone(),
        );
    }

    /// One write of `operation` on `resource` synced from `workspace` to `cluster`, which took
    /// `took`.
    pub fn synced(
        &self,
        workspace: &str,
        cluster: &str,
        resource: &str,
        operation: &'static str,
        took: Duration,
    ) {
        self.synced
            .get_or_create(&Synced {
                workspace: workspace.to_string(),
                cluster: cluster.to_string(),
                resource: resource.to_string(),
                operation,
            })
            .inc();
        let direction = if operation == "status" { "up" } else { "down" };
        self.durations
            .get_or_create(&Direction { direction })
            .observe(took.as_secs_f64());
    }

    /// The heartbeat of `workspace`'s syncer for `cluster` is `age` old.
    pub fn heartbeat(&self, workspace: &str, cluster: &str, age: Duration) {
        self.heartbeats
            .get_or_create(&Heartbeat {
                workspace: workspace.to_string(),
                cluster: cluster.to_string(),
            })
            .set(age.as_secs_f64());
    }

    /// Forgets the heartbeat of `workspace`'s `cluster` (the Cluster went).
    pub fn forget(&self, workspace: &str, cluster: &str) {
        self.heartbeats.remove(&Heartbeat {
            workspace: workspace.to_string(),
            cluster: cluster.to_string(),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_and_heartbeats_are_rendered() {
        let metrics = Metrics::default();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        metrics.synced(
            "ws",
            "east",
            "deployments.apps",
            "create",
            Duration::from_millis(3),
        );
        metrics.synced(
            "ws",
            "east",
            "deployments.apps",
            "status",
            Duration::from_millis(5),
        );
        metrics.heartbeat("ws", "east", Duration::from_secs(2));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            text.contains(r#"kcp_syncer_objects_synced_total{workspace="ws",cluster="east",resource="deployments.apps",operation="create"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"kcp_syncer_sync_duration_seconds_count{direction="up"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"kcp_syncer_heartbeat_age_seconds{workspace="ws",cluster="east"} 2.0"#),
            "{text}"
        );
        metrics.forget("ws", "east");
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(
            !text.contains("kcp_syncer_heartbeat_age_seconds{"),
            "{text}"
        );
    }
}
