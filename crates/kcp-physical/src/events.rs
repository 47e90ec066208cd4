//! Events the physical-cluster layer records in the workspace, as Kubernetes' controllers do
//! (core v1 `Event`s, in the object's namespace, `default` for cluster-scoped ones and
//! Namespaces): a
//! Cluster's `Ready` changing, a namespace placed or moved, a root Deployment's split changing.
//! Recording is best effort: a failure is logged, never retried.

use http::Method;
use serde_json::{Value, json};

use crate::requests;

/// Who records them.
const COMPONENT: &str = "cluster-controller";

/// An event of type `kind` (`Normal`, `Warning`) about `object` (of `api_version` and
/// `object_kind`).
pub struct Event<'a> {
    pub object: &'a Value,
    pub api_version: &'a str,
    pub object_kind: &'a str,
    pub kind: &'a str,
    pub reason: &'a str,
    pub message: &'a str,
}

/// The Event object for `event`.
pub fn event(event: &Event<'_>) -> Value {
    let metadata = &event.object["metadata"];
    let name = metadata["name"].as_str().unwrap_or_default();
    // A cluster-scoped object's (a Namespace's too) go to `default`, as kube-apiserver wants.
    let namespace = metadata["namespace"].as_str().unwrap_or("default");
    let now = crate::kinds::now();
    let mut involved = json!({
        "apiVersion": event.api_version,
        "kind": event.object_kind,
        "name": name,
        "uid": metadata["uid"],
    });
    if let Some(ns) = metadata["namespace"].as_str() {
        involved["namespace"] = json!(ns);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": format!("{name}."), "namespace": namespace},
        "involvedObject": involved,
        "reason": event.reason,
        "message": event.message,
        "type": event.kind,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": COMPONENT,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    })
}

/// Records `event` through `client` (a client of the object's workspace).
pub async fn record(client: &kube::Client, event: Event<'_>) {
    let body = self::event(&event);
    let namespace = body["metadata"]["namespace"].as_str().unwrap_or("default");
    let path = format!("/api/v1/namespaces/{namespace}/events");
    if let Err(error) =
        requests::send(client, Method::POST, &path, Some(&body), "application/json").await
    {
        tracing::info!(
            reason = event.reason,
            error = format!("{error:#}"),
            "could not record an event"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_go_to_the_objects_namespace_or_default() {
        let root = json!({"metadata": {"name": "web", "namespace": "shop", "uid": "u1"}});
        let split = event(&Event {
            object: &root,
            api_version: "apps/v1",
            object_kind: "Deployment",
            kind: "Normal",
            reason: "Draining",
            message: "west=8",
        });
        assert_eq!(split["metadata"]["namespace"], "shop");
        assert_eq!(split["involvedObject"]["namespace"], "shop");
        assert_eq!(split["involvedObject"]["uid"], "u1");
        let cluster = json!({"metadata": {"name": "east", "uid": "c1"}});
        let ready = event(&Event {
            object: &cluster,
            api_version: "cluster.example.dev/v1alpha1",
            object_kind: "Cluster",
            kind: "Warning",
            reason: "Unreachable",
            message: "gone",
        });
        assert_eq!(ready["metadata"]["namespace"], "default");
        assert!(ready["involvedObject"].get("namespace").is_none());
        let namespace = json!({"metadata": {"name": "shop", "uid": "n1"}});
        let placed = event(&Event {
            object: &namespace,
            api_version: "v1",
            object_kind: "Namespace",
            kind: "Normal",
            reason: "Placed",
            message: "on east",
        });
        assert_eq!(placed["metadata"]["namespace"], "default");
    }
}
