//! Where workloads may go: each Cluster's [`Standing`] (pure), from its `Ready` condition, the
//! unreachable grace period and `kubectl kcp cluster cordon|uncordon|drain`'s fields
//! (`spec.unschedulable`, `spec.evictAfter`, as kcp's SyncTargets had them):
//!
//! - `Schedulable`: Ready (or unreachable for less than the grace period) and not cordoned;
//!   takes new namespaces and new shares of split Deployments.
//! - `Cordoned`: `spec.unschedulable`; keeps what it runs, takes nothing new.
//! - `Evicting`: drained (`spec.evictAfter` passed): what it runs moves to the schedulable
//!   clusters make-before-break (it goes only once the new copies are available).
//! - Lost: not Ready, unreachable past the grace period, or being deleted: absent from the
//!   placement; what it ran moves at once (nothing else can be done for it).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

/// What a Cluster may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    Schedulable,
    Cordoned,
    Evicting,
}

/// The Clusters workloads may stay on or go to, by name (lost ones absent).
pub type Placement = BTreeMap<String, Standing>;

/// Whether `cluster` is Ready, or unreachable for less than `grace`.
pub fn reachable(cluster: &Value, grace: Duration) -> bool {
    let Some(ready) = crate::kinds::condition(cluster, "Ready") else {
        return false;
    };
    match (ready["status"].as_str(), ready["reason"].as_str()) {
        (Some("True"), _) => true,
        (Some("False"), Some("Unreachable")) => ready["lastTransitionTime"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            // Times are whole seconds: "since" may be a moment ahead of now.
            .map(|since| jiff::Timestamp::now().duration_since(since).as_millis())
            .is_some_and(|unreachable| unreachable < grace.as_millis() as i128),
        _ => false,
    }
}

/// Whether `cluster` is being drained: `spec.evictAfter` is set and has passed.
pub fn evicting(cluster: &Value) -> bool {
    cluster["spec"]["evictAfter"]
        .as_str()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok())
        .is_some_and(|after| after <= jiff::Timestamp::now())
}

/// The standing of `cluster`, `None` when it is lost.
pub fn standing(cluster: &Value, grace: Duration) -> Option<Standing> {
    if cluster["metadata"]["deletionTimestamp"].is_string() || !reachable(cluster, grace) {
        return None;
    }
    Some(
        match (evicting(cluster), cluster["spec"]["unschedulable"] == true) {
            (true, _) => Standing::Evicting,
            (false, true) => Standing::Cordoned,
            (false, false) => Standing::Schedulable,
        },
    )
}

/// The placement of `clusters` (Cluster objects) for workloads of `resource` (`plural.group`,
/// which a cluster must sync), or of any resource when `None`.
pub fn placement(clusters: &[Value], grace: Duration, resource: Option<&str>) -> Placement {
    clusters
        .iter()
        .filter(|c| {
            let synced = c["status"]["syncedResources"].as_array();
            match resource {
                Some(resource) => synced.is_some_and(|r| r.iter().any(|r| r == resource)),
                None => synced.is_some_and(|r| !r.is_empty()),
            }
        })
        .filter_map(|c| {
            let name = c["metadata"]["name"].as_str()?;
            Some((name.to_string(), standing(c, grace)?))
        })
        .collect()
}

/// The names of the schedulable clusters of `placement`.
pub fn schedulable(placement: &Placement) -> Vec<String> {
    placement
        .iter()
        .filter(|(_, s)| **s == Standing::Schedulable)
        .map(|(name, _)| name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster(name: &str, status: &str, reason: &str, since: &str) -> Value {
        json!({"metadata": {"name": name}, "spec": {}, "status": {
            "conditions": [{"type": "Ready", "status": status, "reason": reason, "lastTransitionTime": since}],
            "syncedResources": ["deployments.apps"],
        }})
    }

    #[test]
    fn an_unreachable_cluster_stays_for_the_grace_period() {
        let now = crate::kinds::now();
        let long_ago = "2020-01-01T00:00:00Z";
        let grace = Duration::from_secs(300);
        let clusters = [
            cluster("b-ready", "True", "APIsImported", long_ago),
            cluster("a-lost-now", "False", "Unreachable", &now),
            cluster("c-lost-long-ago", "False", "Unreachable", long_ago),
            cluster("d-refused", "False", "InvalidKubeConfig", &now),
        ];
        let placement = placement(&clusters, grace, Some("deployments.apps"));
        assert_eq!(schedulable(&placement), ["a-lost-now", "b-ready"]);
        let mut no_deployments = cluster("e", "True", "APIsImported", long_ago);
        no_deployments["status"]["syncedResources"] = json!(["services"]);
        assert!(
            super::placement(&[no_deployments.clone()], grace, Some("deployments.apps")).is_empty()
        );
        assert_eq!(super::placement(&[no_deployments], grace, None).len(), 1);
    }

    #[test]
    fn cordoned_and_drained_clusters_take_nothing_new() {
        let long_ago = "2020-01-01T00:00:00Z";
        let grace = Duration::from_secs(300);
        let mut cordoned = cluster("cordoned", "True", "APIsImported", long_ago);
        cordoned["spec"]["unschedulable"] = json!(true);
        let mut drained = cordoned.clone();
        drained["metadata"]["name"] = json!("drained");
        drained["spec"]["evictAfter"] = json!(long_ago);
        let mut later = cordoned.clone();
        later["metadata"]["name"] = json!("later");
        later["spec"]["evictAfter"] = json!("2999-01-01T00:00:00Z");
        let mut deleting = cluster("deleting", "True", "APIsImported", long_ago);
        deleting["metadata"]["deletionTimestamp"] = json!(long_ago);
        let placement = placement(&[cordoned, drained, later, deleting], grace, None);
        assert_eq!(
            placement,
            Placement::from([
                ("cordoned".into(), Standing::Cordoned),
                ("drained".into(), Standing::Evicting),
                ("later".into(), Standing::Cordoned),
            ])
        );
        assert!(schedulable(&placement).is_empty());
    }
}
