//! kube-rs with a derived custom resource: the CRD kube-rs generates is accepted and
//! Established, and the typed client creates objects, patches their status and watches them.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::support::Kcp;

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "kube.example.com",
    version = "v1",
    kind = "Gizmo",
    namespaced,
    status = "GizmoStatus",
    shortname = "gz"
)]
pub struct GizmoSpec {
    pub size: i32,
    pub label: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct GizmoStatus {
    pub ready: bool,
}

#[tokio::test]
async fn kube_rs_serves_a_derived_custom_resource() {
    let kcp = tokio::task::spawn_blocking(|| Kcp::shared("kube-rs-crd"))
        .await
        .unwrap();
    let client = kcp.kube_client().await;

    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &Gizmo::crd())
        .await
        .unwrap();
    let established = await_condition(
        crds.clone(),
        "gizmos.kube.example.com",
        conditions::is_crd_established(),
    );
    tokio::time::timeout(Duration::from_secs(10), established)
        .await
        .expect("the CRD is Established in time")
        .unwrap();

    let gizmos: Api<Gizmo> = Api::namespaced(client, "default");
    let mut events = watcher(gizmos.clone(), watcher::Config::default())
        .applied_objects()
        .boxed();
    let created = gizmos
        .create(
            &PostParams::default(),
            &Gizmo::new(
                "g1",
                GizmoSpec {
                    size: 2,
                    label: None,
                },
            ),
        )
        .await
        .unwrap();
    assert_eq!(created.spec.size, 2);
    assert_eq!(created.status, None);
    assert_eq!(created.metadata.generation, Some(1));

    let patched = gizmos
        .patch_status(
            "g1",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"status": {"ready": true}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.status, Some(GizmoStatus { ready: true }));
    assert_eq!(patched.metadata.generation, Some(1));

    // The watch sees the object, then its status.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let next = tokio::time::timeout_at(deadline, events.next())
            .await
            .expect("the watch delivers the status change")
            .unwrap()
            .unwrap();
        assert_eq!(next.metadata.name.as_deref(), Some("g1"));
        if next.status == Some(GizmoStatus { ready: true }) {
            break;
        }
    }
    let listed = gizmos.list(&Default::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(listed.items[0].spec.size, 2);

    // Server-side apply, as a kube-rs operator does it: an applier takes `size` over from the
    // creator only when forced, and owns what it applied.
    let applied = serde_json::json!({
        "apiVersion": "kube.example.com/v1", "kind": "Gizmo",
        "metadata": {"name": "g1"}, "spec": {"size": 5, "label": "applied"}
    });
    let refused = gizmos
        .patch(
            "g1",
            &PatchParams::apply("operator"),
            &Patch::Apply(&applied),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("a conflict is an API error: {refused:?}")
    };
    assert_eq!(status.code, 409);
    assert!(status.message.contains(".spec.size"), "{}", status.message);
    let forced = gizmos
        .patch(
            "g1",
            &PatchParams::apply("operator").force(),
            &Patch::Apply(&applied),
        )
        .await
        .unwrap();
    assert_eq!(forced.spec.size, 5);
    assert_eq!(forced.spec.label.as_deref(), Some("applied"));
    let owners = forced.metadata.managed_fields.unwrap_or_default();
    let operator = owners
        .iter()
        .find(|e| e.manager.as_deref() == Some("operator"))
        .expect("the applier owns fields");
    assert_eq!(operator.operation.as_deref(), Some("Apply"));
    assert_eq!(
        operator.fields_v1.as_ref().map(|f| f.0.clone()),
        Some(serde_json::json!({"f:spec": {"f:label": {}, "f:size": {}}}))
    );
}
