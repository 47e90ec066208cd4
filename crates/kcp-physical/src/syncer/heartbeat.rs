//! The syncer's heartbeat (pull mode): a Lease in the workspace renewed every interval, its
//! duration three intervals, from which the cluster-controller takes the Cluster's readiness.

use std::time::Duration;

use serde_json::json;

/// Which Lease a syncer renews, and how often.
#[derive(Debug, Clone)]
pub struct Heartbeat {
    pub namespace: String,
    pub name: String,
    pub interval: Duration,
}

/// Renews the Lease of `heartbeat` through `upstream` for the syncer of `options` until dropped
/// (a failure is retried on the next beat); its age counted in the options' metrics.
pub async fn beat(upstream: kube::Client, heartbeat: Heartbeat, options: super::SyncerOptions) {
    let holder = format!("syncer-{}", options.location);
    let mut last = tokio::time::Instant::now();
    let mut ticks = tokio::time::interval(heartbeat.interval);
    let path = format!(
        "/apis/coordination.k8s.io/v1/namespaces/{}/leases/{}",
        heartbeat.namespace, heartbeat.name
    );
    let duration = 3 * heartbeat.interval.as_secs().max(1);
    loop {
        ticks.tick().await;
        let renewed = crate::kinds::now().replace('Z', ".000000Z");
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": heartbeat.name, "namespace": heartbeat.namespace},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration, "renewTime": renewed},
        });
        let objects = [(path.clone(), lease)];
        match crate::requests::apply(&upstream, &objects).await {
            Ok(()) => last = tokio::time::Instant::now(),
            Err(error) => {
                tracing::info!(
                    error = format!("{error:#}"),
                    "heartbeat failed; trying again"
                )
            }
        }
        options
            .metrics
            .heartbeat(&options.workspace, &options.location, last.elapsed());
    }
}
