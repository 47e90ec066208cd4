//! What the syncer writes on each side, pure: the downstream namespace of an upstream one, the
//! downstream object for an upstream one (server fields and status left out, a digest of what
//! was synced, the upstream namespace and generation), and the status that goes back up.

use serde_json::{Value, json};

use super::{
    SYNCED_BY_LABEL, SYNCED_DIGEST, UPSTREAM_GENERATION, UPSTREAM_NAMESPACE, WORKSPACE_LABEL,
};

/// A stable 64-bit FNV-1a digest (names and digests must not change between builds).
pub fn digest(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The downstream namespace of `namespace` in `workspace`: `kcp-<workspace>-<namespace>`, or
/// `kcp-<digest>` when that is longer than a namespace name may be.
pub fn downstream_namespace(workspace: &str, namespace: &str) -> String {
    let name = format!("kcp-{}-{namespace}", workspace.replace(':', "-"));
    match name.len() <= 63 {
        true => name,
        false => format!(
            "kcp-{:016x}",
            digest(format!("{workspace}/{namespace}").as_bytes())
        ),
    }
}

/// The upstream fields that are synced: everything but the server's metadata and the status.
fn synced_fields(upstream: &Value) -> Value {
    let mut fields = upstream.clone();
    if let Some(object) = fields.as_object_mut() {
        object.remove("status");
        object.remove("metadata");
    }
    json!({
        "fields": fields,
        "labels": upstream["metadata"]["labels"],
        "annotations": upstream_annotations(upstream),
    })
}

/// The upstream annotations that go down (not kcp's own).
fn upstream_annotations(upstream: &Value) -> serde_json::Map<String, Value> {
    upstream["metadata"]["annotations"]
        .as_object()
        .map(|a| {
            a.iter()
                .filter(|(k, _)| !k.starts_with("kcp.io/"))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// The downstream object for `upstream`, written by the syncer of the Cluster `location` over
/// `existing` (its own annotations and server fields kept) or new.
pub fn transform(
    upstream: &Value,
    existing: Option<&Value>,
    workspace: &str,
    location: &str,
) -> Value {
    let namespace = upstream["metadata"]["namespace"]
        .as_str()
        .unwrap_or_default();
    let synced = synced_fields(upstream);
    let sum = synced_digest(upstream);
    let mut object = match existing {
        Some(existing) => existing.clone(),
        None => json!({"metadata": {"name": upstream["metadata"]["name"]}}),
    };
    if let (Some(object), Some(fields)) = (object.as_object_mut(), synced["fields"].as_object()) {
        object.retain(|k, _| k == "metadata" || k == "status");
        for (key, value) in fields {
            object.insert(key.clone(), value.clone());
        }
    }
    let metadata = &mut object["metadata"];
    metadata["namespace"] = json!(downstream_namespace(workspace, namespace));
    let mut labels = upstream["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    labels.insert(WORKSPACE_LABEL.into(), json!(workspace.replace(':', "-")));
    labels.insert(SYNCED_BY_LABEL.into(), json!(super::synced_by(location)));
    metadata["labels"] = Value::Object(labels);
    let mut annotations = metadata["annotations"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    annotations.extend(upstream_annotations(upstream));
    annotations.insert(UPSTREAM_NAMESPACE.into(), json!(namespace));
    annotations.insert(SYNCED_DIGEST.into(), json!(sum));
    let generation = upstream["metadata"]["generation"]
        .as_i64()
        .unwrap_or_default();
    annotations.insert(UPSTREAM_GENERATION.into(), json!(generation.to_string()));
    metadata["annotations"] = Value::Object(annotations);
    object
}

/// The digest of what is synced of `upstream`, as downstream objects carry it.
pub fn synced_digest(upstream: &Value) -> String {
    format!(
        "{:016x}",
        digest(synced_fields(upstream).to_string().as_bytes())
    )
}

/// Whether `downstream` holds what `upstream` asks for now.
pub fn in_sync(upstream: &Value, downstream: &Value) -> bool {
    downstream["metadata"]["annotations"][SYNCED_DIGEST] == synced_digest(upstream).as_str()
}

/// The status for upstream from `downstream`'s: its `observedGeneration` (if any) becomes the
/// upstream generation it stands for, or one less while the downstream controller has not
/// caught up.
pub fn upstream_status(downstream: &Value) -> Value {
    let generation = downstream["metadata"]["generation"]
        .as_i64()
        .unwrap_or_default();
    let upstream: i64 = downstream["metadata"]["annotations"][UPSTREAM_GENERATION]
        .as_str()
        .and_then(|g| g.parse().ok())
        .unwrap_or_default();
    status_for_upstream(downstream["status"].clone(), generation, upstream)
}

/// [`upstream_status`] from a downstream `status`, the downstream `generation` and the
/// `upstream` generation it was synced from.
pub fn status_for_upstream(mut status: Value, generation: i64, upstream: i64) -> Value {
    if let Some(observed) = status.get("observedGeneration").and_then(Value::as_i64) {
        status["observedGeneration"] = json!(match observed >= generation {
            true => upstream,
            false => upstream - 1,
        });
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {
                "name": "web", "namespace": "default", "uid": "u1", "resourceVersion": "7", "generation": 3,
                "labels": {"kcp.dev/cluster": "east", "app": "web"},
                "annotations": {"kcp.io/cluster": "root:team", "note": "kept"},
                "managedFields": [{"manager": "kubectl"}],
            },
            "spec": {"replicas": 2},
            "status": {"replicas": 1},
        })
    }

    #[test]
    fn downstream_namespaces_are_the_workspaces_own() {
        assert_eq!(
            downstream_namespace("root:team", "default"),
            "kcp-root-team-default"
        );
        let long = downstream_namespace(&"a".repeat(40), &"b".repeat(40));
        assert!(long.len() <= 63 && long.starts_with("kcp-"), "{long}");
        assert_eq!(long, downstream_namespace(&"a".repeat(40), &"b".repeat(40)));
        assert_ne!(long, downstream_namespace(&"a".repeat(40), &"c".repeat(40)));
    }

    #[test]
    fn what_goes_down_leaves_the_server_fields_and_keeps_downstream_annotations() {
        let created = transform(&deployment(), None, "root:team", "east");
        assert_eq!(created["metadata"]["namespace"], "kcp-root-team-default");
        assert_eq!(created["spec"], json!({"replicas": 2}));
        assert!(created.get("status").is_none());
        assert!(
            created["metadata"].get("uid").is_none()
                && created["metadata"].get("managedFields").is_none()
        );
        assert_eq!(created["metadata"]["labels"][WORKSPACE_LABEL], "root-team");
        assert_eq!(created["metadata"]["annotations"]["note"], "kept");
        assert!(
            created["metadata"]["annotations"]
                .get("kcp.io/cluster")
                .is_none()
        );
        assert_eq!(created["metadata"]["annotations"][UPSTREAM_GENERATION], "3");
        assert!(in_sync(&deployment(), &created));

        // The downstream server's defaults and a controller's annotation stay; a change upstream
        // is written over them.
        let mut existing = created.clone();
        existing["metadata"]["uid"] = json!("d1");
        existing["metadata"]["annotations"]["deployment.kubernetes.io/revision"] = json!("1");
        existing["spec"]["strategy"] = json!({"type": "RollingUpdate"});
        existing["status"] = json!({"replicas": 2});
        assert!(in_sync(&deployment(), &existing));
        let mut changed = deployment();
        changed["spec"]["replicas"] = json!(5);
        assert!(!in_sync(&changed, &existing));
        let updated = transform(&changed, Some(&existing), "root:team", "east");
        assert_eq!(updated["spec"], json!({"replicas": 5}));
        assert_eq!(updated["metadata"]["uid"], "d1");
        assert_eq!(
            updated["metadata"]["annotations"]["deployment.kubernetes.io/revision"],
            "1"
        );
        assert_eq!(updated["status"], json!({"replicas": 2}));
    }

    #[test]
    fn the_observed_generation_goes_up_as_the_upstream_one() {
        let mut down = transform(&deployment(), None, "root:team", "east");
        down["metadata"]["generation"] = json!(1);
        down["status"] = json!({"observedGeneration": 1, "availableReplicas": 2});
        assert_eq!(
            upstream_status(&down),
            json!({"observedGeneration": 3, "availableReplicas": 2})
        );
        down["metadata"]["generation"] = json!(2);
        assert_eq!(upstream_status(&down)["observedGeneration"], 2);
    }
}
