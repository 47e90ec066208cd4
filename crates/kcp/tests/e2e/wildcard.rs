//! Wildcard requests at `/clusters/*`: lists and watches see the objects of every workspace,
//! each with its `kcp.io/cluster`; other verbs answer 405; custom resources whose CRDs differ
//! between workspaces are listed as metadata only.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, WatchEvent, WatchParams};
use kube::core::GroupVersionKind;

use kcp_testing::crd;

use super::support::{Kcp, write_file};

fn cluster_of(object: &serde_json::Value) -> String {
    object["metadata"]["annotations"]["kcp.io/cluster"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn wildcard_lists_and_watches_see_every_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::start(&dir.path().join(".kcp"), &[]);
    let (a, b) = (kcp.workspace("wild-a"), kcp.workspace("wild-b"));
    let name_of = |path: &str| {
        kcp.kubectl_in_ok(
            "root",
            &[
                "get",
                "ws",
                path.trim_start_matches("root:"),
                "-o=jsonpath={.spec.cluster}",
            ],
        )
    };
    let (cluster_a, cluster_b) = (name_of(&a), name_of(&b));
    for (path, size_type, size) in [(&a, "integer", "3"), (&b, "string", "big")] {
        kcp.kubectl_in_ok(path, &["create", "namespace", "same"]);
        kcp.kubectl_in_ok(path, &["-n", "same", "create", "configmap", "same"]);
        let file = write_file(
            dir.path(),
            &format!("crd-{size_type}.yaml"),
            &crd::sized("gizmos", "Gizmo", size_type).yaml(),
        );
        kcp.kubectl_in_ok(path, &["apply", "-f", &file]);
        kcp.wait_established(path, "gizmos.example.com");
        let gizmo = write_file(
            dir.path(),
            &format!("gizmo-{size_type}.yaml"),
            &format!(
                "apiVersion: example.com/v1\nkind: Gizmo\nmetadata:\n  name: g\n  namespace: same\nspec:\n  size: {size}\n"
            ),
        );
        kcp.kubectl_in_ok(path, &["create", "-f", &gizmo]);
    }
    kcp.kubectl_in_ok(&b, &["-n", "same", "label", "configmap", "same", "pick=me"]);

    // kubectl across every workspace, with each object's cluster.
    let listed = kcp.kubectl_in_ok("*", &["get", "configmaps", "-A", "-o", "json"]);
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    let mut clusters: Vec<String> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["metadata"]["name"] == "same")
        .map(cluster_of)
        .collect();
    clusters.sort();
    let mut expected = vec![cluster_a.clone(), cluster_b.clone()];
    expected.sort();
    assert_eq!(clusters, expected);
    let picked = kcp.kubectl_in_ok(
        "*",
        &[
            "get",
            "configmaps",
            "-n",
            "same",
            "-l",
            "pick=me",
            "-o=jsonpath={.items[*].metadata.annotations.kcp\\.io/cluster}",
        ],
    );
    assert_eq!(picked, cluster_b);
    let workspaces = kcp.kubectl_in_ok("*", &["get", "workspaces", "-o", "name"]);
    assert!(
        workspaces.contains("workspace.tenancy.kcp.io/wild-a")
            && workspaces.contains("workspace.tenancy.kcp.io/wild-b"),
        "{workspaces}"
    );

    // Only list and watch.
    let refused = kcp.kubectl_in_err("*", &["-n", "same", "delete", "configmap", "same"]);
    assert!(
        refused.contains(
            "delete is not supported on resources of kind \"configmaps\" in the `*` logical cluster"
        ),
        "{refused}"
    );
    let refused = kcp.kubectl_in_err("*", &["create", "namespace", "nope"]);
    assert!(
        refused.contains("MethodNotAllowed") || refused.contains("not supported"),
        "{refused}"
    );

    // Custom resources defined differently: metadata only.
    let wildcard = kcp.kube_client_in("*").await;
    let gvk = GroupVersionKind::gvk("example.com", "v1", "Gizmo");
    let gizmos: Api<DynamicObject> = Api::all_with(wildcard.clone(), &ApiResource::from_gvk(&gvk));
    let metadata = gizmos.list_metadata(&ListParams::default()).await.unwrap();
    let mut clusters: Vec<String> = metadata
        .items
        .iter()
        .map(|m| m.metadata.annotations.as_ref().unwrap()["kcp.io/cluster"].clone())
        .collect();
    clusters.sort();
    assert_eq!(clusters, expected);
    assert!(gizmos.list(&ListParams::default()).await.is_err());

    // One watch sees both workspaces.
    let configmaps: Api<ConfigMap> = Api::all(wildcard);
    let current = configmaps
        .list_metadata(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut events = configmaps
        .watch(&WatchParams::default().timeout(20), &current)
        .await
        .unwrap()
        .boxed();
    kcp.kubectl_in_ok(&a, &["-n", "same", "create", "configmap", "new"]);
    kcp.kubectl_in_ok(&b, &["-n", "same", "create", "configmap", "new"]);
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let event = tokio::time::timeout(Duration::from_secs(10), events.next())
            .await
            .expect("an event within 10 s")
            .unwrap()
            .unwrap();
        match event {
            WatchEvent::Added(cm) => {
                assert_eq!(cm.metadata.name.as_deref(), Some("new"));
                seen.push(cm.metadata.annotations.unwrap()["kcp.io/cluster"].clone());
            }
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    seen.sort();
    assert_eq!(seen, expected);
}
