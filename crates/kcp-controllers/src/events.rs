//! Events the controllers record about objects, as kube-controller-manager's event recorder
//! writes them: a core/v1 Event in the object's namespace (`default` for a cluster-scoped
//! object) of its logical cluster, named after the object and the time, that
//! `kubectl events` and `kubectl describe` show.

use kcp_apis::builtin::core;
use kcp_registry::{Registry, Target};
use serde_json::{Value, json};

/// An event about `object` (in `cluster`): its type (`Normal`, `Warning`), reason and message,
/// recorded for `component`. A failure to record is only logged: events are best effort.
pub(crate) async fn record(
    registry: &Registry,
    cluster: &str,
    object: &Value,
    warning: bool,
    reason: &str,
    message: &str,
    component: &str,
) {
    let metadata = &object["metadata"];
    let name = metadata["name"].as_str().unwrap_or_default();
    let namespace = metadata["namespace"]
        .as_str()
        .filter(|n| !n.is_empty())
        .unwrap_or("default");
    let now = kcp_registry::now();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let event = json!({
        "metadata": {"name": format!("{name}.{nanos:x}"), "namespace": namespace},
        "involvedObject": {
            "apiVersion": object["apiVersion"],
            "kind": object["kind"],
            "namespace": metadata["namespace"],
            "name": name,
            "uid": metadata["uid"],
            "resourceVersion": metadata["resourceVersion"],
        },
        "reason": reason,
        "message": message,
        "type": if warning { "Warning" } else { "Normal" },
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": "",
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    });
    let target = Target {
        cluster,
        resource: core("events"),
        namespace: Some(namespace),
    };
    if let Err(error) = registry.create(target, event).await {
        tracing::info!(%error, reason, "recording an event");
    }
}
