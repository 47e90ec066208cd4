//! kcp's controller-runtime provider (github.com/kcp-dev/multicluster-provider), unmodified:
//! its `examples/apiexport` operator (built from its Go module by `scripts/test`, path in
//! `KCP_TEST_MULTICLUSTER_PROVIDER`) pointed at an export's endpoint slice URL engages every
//! consumer bound to the export and reconciles their ConfigMaps, which the export claims.

use std::process::{Command, Stdio};

use kcp_testing::output::Lines;

use super::support::{Kcp, kubectl_with_plugins, write_file};

fn operator() -> String {
    std::env::var("KCP_TEST_MULTICLUSTER_PROVIDER").expect(
        "KCP_TEST_MULTICLUSTER_PROVIDER names the multicluster-provider's apiexport example \
         (scripts/test builds it)",
    )
}

#[test]
fn kcps_controller_runtime_provider_reconciles_every_consumer() {
    let operator = operator();
    let dir = tempfile::tempdir().unwrap();
    let kcp = Kcp::shared("multicluster-provider");
    let provider = kcp.workspace("provider");
    // The example's own export: no resources, a claim on configmaps (v1alpha1, as its bundle).
    let export = write_file(
        dir.path(),
        "export.yaml",
        "apiVersion: apis.kcp.io/v1alpha1
kind: APIExport
metadata:
  name: examples-apiexport-multicluster
spec:
  latestResourceSchemas: []
  permissionClaims:
  - {all: true, group: \"\", resource: configmaps}
",
    );
    kcp.kubectl_in_ok(&provider, &["apply", "-f", &export]);
    let reference = format!("{provider}:examples-apiexport-multicluster");
    let mut consumers = Vec::new();
    for name in ["one", "two"] {
        let consumer = kcp.workspace(name);
        let kubeconfig = kcp.kubeconfig_in(dir.path(), &consumer, None);
        let bound = kubectl_with_plugins(
            &kubeconfig,
            &[
                "kcp",
                "bind",
                "apiexport",
                &reference,
                "--accept-permission-claim",
                "configmaps.core",
            ],
        );
        assert!(
            bound.status.success(),
            "{}",
            String::from_utf8_lossy(&bound.stderr)
        );
        consumers.push((consumer.clone(), kcp.logical_cluster(&consumer)));
    }
    let url = kcp.endpoint_url(&provider, "examples-apiexport-multicluster");

    let kubeconfig = kcp.kubeconfig_in(dir.path(), &provider, None);
    let mut child = Command::new(&operator)
        .arg(format!("--server={url}"))
        .env("KUBECONFIG", &kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run {operator}: {e}"));
    let log = Lines::of(child.stderr.take().unwrap());
    let _stdout = Lines::of(child.stdout.take().unwrap());
    let reconciled =
        |cluster: &str, name: &str| format!("\"cluster\": \"{cluster}\", \"name\": \"{name}\"");
    // Every consumer is engaged and its ConfigMaps reconciled, the existing ones...
    let mut awaited: Vec<String> = consumers
        .iter()
        .map(|(_, cluster)| reconciled(cluster, "kube-root-ca.crt"))
        .collect();
    while !awaited.is_empty() {
        let line = log.next(&format!("reconciles of {awaited:?}"));
        if line.contains("Reconciling ConfigMap") {
            awaited.retain(|needle| !line.contains(needle.as_str()));
        }
    }
    // ...and new ones.
    let (path, cluster) = &consumers[1];
    kcp.kubectl_in_ok(path, &["create", "configmap", "fresh", "-n", "default"]);
    log.find(&reconciled(cluster, "fresh"));
    let _ = child.kill();
    let _ = child.wait();
}
