//! `crd-puller` (`kubectl kcp crd pull`) against a workspace: built-in kinds come out as
//! structural CRDs a workspace accepts (under a group of their own: CRDs of the core and
//! Kubernetes groups are not served yet), and a CRD-served kind pulled from there round-trips.

use serde_json::{Value, json};

use super::support::{Kcp, kubectl_with_plugins, write_file};

fn pulled(kcp: &Kcp, dir: &std::path::Path, cluster: &str, resources: &[&str]) -> Value {
    let kubeconfig = kcp.kubeconfig_in(dir, cluster, None);
    let mut args = vec!["kcp", "crd", "pull", "-o", "json"];
    args.extend_from_slice(resources);
    let output = kubectl_with_plugins(&kubeconfig, &args);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn pulled_crds_are_served_and_round_trip() {
    let kcp = Kcp::shared("crd-puller");
    let dir = tempfile::tempdir().unwrap();
    let source = kcp.workspace("source");
    let target = kcp.workspace("target");
    let resources = [
        "configmaps",
        "serviceaccounts",
        "namespaces",
        "roles.rbac.authorization.k8s.io",
        "leases.coordination.k8s.io",
    ];
    let mut list = pulled(&kcp, dir.path(), &source, &resources);
    let crds = list["items"].as_array_mut().unwrap();
    assert_eq!(crds.len(), resources.len());
    let serviceaccounts = &crds[1];
    assert_eq!(serviceaccounts["metadata"]["name"], "serviceaccounts.core");
    assert_eq!(serviceaccounts["spec"]["group"], "");
    assert_eq!(serviceaccounts["spec"]["scope"], "Namespaced");
    assert_eq!(
        serviceaccounts["spec"]["names"]["shortNames"],
        json!(["sa"])
    );
    let secrets = &serviceaccounts["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
        ["secrets"];
    assert_eq!(secrets["x-kubernetes-list-type"], "map");
    assert_eq!(crds[2]["spec"]["scope"], "Cluster");
    assert_eq!(
        crds[2]["spec"]["versions"][0]["subresources"],
        json!({"status": {}})
    );

    // Under a group of their own, a workspace accepts and serves them.
    for crd in crds.iter_mut() {
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap().to_string();
        crd["spec"]["group"] = json!("pulled.example.com");
        crd["metadata"]["name"] = json!(format!("{plural}.pulled.example.com"));
        // Short names would shadow the built-in kinds' in kubectl.
        crd["spec"]["names"]
            .as_object_mut()
            .unwrap()
            .remove("shortNames");
    }
    let file = write_file(dir.path(), "pulled.json", &list.to_string());
    kcp.kubectl_in_ok(&target, &["apply", "-f", &file]);
    kcp.wait_established(&target, "leases.pulled.example.com");
    let explained = kcp.kubectl_in_ok(
        &target,
        &[
            "explain",
            "leases.spec.holderIdentity",
            "--api-version=pulled.example.com/v1",
        ],
    );
    assert!(explained.contains("holderIdentity"), "{explained}");
    let lease = write_file(
        dir.path(),
        "lease.yaml",
        "apiVersion: pulled.example.com/v1\nkind: Lease\nmetadata: {name: l, namespace: default}\nspec: {holderIdentity: me, leaseDurationSeconds: 10}\n",
    );
    kcp.kubectl_in_ok(&target, &["apply", "-f", &lease]);

    // A kind a CRD serves is pulled as that CRD: the same again from the target.
    let again = pulled(&kcp, dir.path(), &target, &["leases.pulled.example.com"]);
    let applied = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["spec"]["names"]["plural"] == "leases")
        .unwrap();
    let round = &again["items"][0];
    assert_eq!(round["metadata"]["name"], "leases.pulled.example.com");
    assert_eq!(
        round["spec"]["names"]["kind"],
        applied["spec"]["names"]["kind"]
    );
    assert_eq!(
        round["spec"]["versions"][0]["schema"],
        applied["spec"]["versions"][0]["schema"]
    );
}
