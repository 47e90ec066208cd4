//! Workspaces never mix: namespaces, configmaps, RBAC objects and CRDs of the same names in two
//! workspaces stay apart in get, list and watch (kubectl and kube-rs).

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, WatchEvent, WatchParams};

use kcp_testing::crd;

use super::support::{Kcp, write_file};

#[tokio::test(flavor = "multi_thread")]
async fn same_names_in_two_workspaces_never_mix() {
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("iso");
    let (a, b) = (kcp.workspace("a"), kcp.workspace("b"));
    for (path, owner, verb, size_type) in [(&a, "a", "get", "integer"), (&b, "b", "list", "string")]
    {
        kcp.kubectl_in_ok(path, &["create", "namespace", "same"]);
        kcp.kubectl_in_ok(
            path,
            &[
                "-n",
                "same",
                "create",
                "configmap",
                "same",
                &format!("--from-literal=owner={owner}"),
            ],
        );
        kcp.kubectl_in_ok(
            path,
            &[
                "-n",
                "same",
                "create",
                "role",
                "same",
                &format!("--verb={verb}"),
                "--resource=configmaps",
            ],
        );
        kcp.kubectl_in_ok(
            path,
            &[
                "create",
                "clusterrolebinding",
                "same",
                "--clusterrole=view",
                &format!("--user={owner}"),
            ],
        );
        let file = write_file(
            dir.path(),
            &format!("crd-{owner}.yaml"),
            &crd::sized("things", "Thing", size_type).yaml(),
        );
        kcp.kubectl_in_ok(path, &["apply", "-f", &file]);
        kcp.wait_established(path, "things.example.com");
    }

    // Gets and lists see only their own workspace's objects.
    for (path, owner, verb) in [(&a, "a", "get"), (&b, "b", "list")] {
        let data = kcp.kubectl_in_ok(
            path,
            &[
                "-n",
                "same",
                "get",
                "cm",
                "same",
                "-o=jsonpath={.data.owner}",
            ],
        );
        assert_eq!(data, owner);
        let all = kcp.kubectl_in_ok(
            path,
            &[
                "get",
                "cm",
                "-A",
                "-o=jsonpath={range .items[*]}{.data.owner},{end}",
            ],
        );
        // Only this workspace's own: the namespaces' `kube-root-ca.crt` have no owner.
        let owners: Vec<&str> = all.split(',').filter(|o| !o.is_empty()).collect();
        assert_eq!(owners, [owner], "{path}");
        let rules = kcp.kubectl_in_ok(
            path,
            &[
                "-n",
                "same",
                "get",
                "role",
                "same",
                "-o=jsonpath={.rules[0].verbs}",
            ],
        );
        assert_eq!(rules, format!(r#"["{verb}"]"#));
        let subjects = kcp.kubectl_in_ok(
            path,
            &[
                "get",
                "clusterrolebinding",
                "same",
                "-o=jsonpath={.subjects[0].name}",
            ],
        );
        assert_eq!(subjects, owner);
        let namespaces = kcp.kubectl_in_ok(path, &["get", "ns", "-o", "name"]);
        assert_eq!(
            namespaces,
            "namespace/default\nnamespace/kube-system\nnamespace/same\n"
        );
    }
    // Each workspace's CRD has its own schema.
    let thing = |size: &str| {
        write_file(
            dir.path(),
            &format!("thing-{size}.yaml"),
            &format!(
                "apiVersion: example.com/v1\nkind: Thing\nmetadata:\n  name: t\n  namespace: same\nspec:\n  size: {size}\n"
            ),
        )
    };
    kcp.kubectl_in_ok(&a, &["create", "-f", &thing("3")]);
    let refused = kcp.kubectl_in_err(&b, &["create", "-f", &thing("3")]);
    assert!(refused.contains("spec.size"), "{refused}");
    kcp.kubectl_in_ok(&b, &["create", "-f", &thing("big")]);
    assert_eq!(
        kcp.kubectl_in_ok(
            &a,
            &[
                "-n",
                "same",
                "get",
                "thing",
                "t",
                "-o=jsonpath={.spec.size}"
            ]
        ),
        "3"
    );
    assert_eq!(
        kcp.kubectl_in_ok(
            &b,
            &[
                "-n",
                "same",
                "get",
                "thing",
                "t",
                "-o=jsonpath={.spec.size}"
            ]
        ),
        "big"
    );

    // A watch in one workspace sees none of the other's events.
    let in_a: Api<ConfigMap> = Api::namespaced(kcp.kube_client_in(&a).await, "same");
    let in_b: Api<ConfigMap> = Api::namespaced(kcp.kube_client_in(&b).await, "same");
    let current = in_a
        .get("same")
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut events = in_a
        .watch(&WatchParams::default().timeout(20), &current)
        .await
        .unwrap()
        .boxed();
    let touch = |owner: &str| Patch::Merge(serde_json::json!({"data": {"touched": owner}}));
    in_b.patch("same", &PatchParams::default(), &touch("b"))
        .await
        .unwrap();
    in_a.patch("same", &PatchParams::default(), &touch("a"))
        .await
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(10), events.next())
        .await
        .expect("an event within 10 s")
        .unwrap()
        .unwrap();
    match first {
        WatchEvent::Modified(cm) => {
            let data = cm.data.unwrap();
            assert_eq!(data["owner"], "a");
            assert_eq!(data["touched"], "a");
        }
        other => panic!("unexpected first event {other:?}"),
    }
}
