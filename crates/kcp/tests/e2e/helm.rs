//! Helm 3 (built from its Go module by `scripts/test`) against a workspace: a chart holding a
//! CRD (in `crds/`), a custom resource of it and a ConfigMap is installed, upgraded, rolled back
//! and uninstalled. Helm keeps its releases in Secrets and deletes them, and what it installed,
//! with protobuf `DeleteOptions` bodies (client-go's typed clients prefer protobuf), so an
//! uninstall that leaves nothing behind needs the server to read them.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::support::{Kcp, write_file};

/// The Helm binary: `KCP_TEST_HELM` (set by `scripts/test`), else where `scripts/test` builds
/// it. No Helm is a failure, not a skip.
fn helm_binary() -> PathBuf {
    if let Ok(path) = std::env::var("KCP_TEST_HELM") {
        return PathBuf::from(path);
    }
    let tools = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/go-tools");
    let built = std::fs::read_dir(&tools)
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("helm"))
        .find(|path| path.exists());
    built.unwrap_or_else(|| {
        panic!(
            "Helm is not built: run scripts/test (which builds it into {}) or set KCP_TEST_HELM",
            tools.display()
        )
    })
}

/// Helm with its own homes and the workspace's kubeconfig.
struct Helm {
    binary: PathBuf,
    home: PathBuf,
    kubeconfig: PathBuf,
}

impl Helm {
    fn run(&self, args: &[&str]) -> String {
        let output = Command::new(&self.binary)
            .env("HELM_CACHE_HOME", self.home.join("cache"))
            .env("HELM_CONFIG_HOME", self.home.join("config"))
            .env("HELM_DATA_HOME", self.home.join("data"))
            .env("KUBECONFIG", &self.kubeconfig)
            .args(args)
            .output()
            .expect("run helm");
        assert!(
            output.status.success(),
            "helm {args:?} failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}

/// A chart whose ConfigMap and Widget carry `.Values.size`.
fn write_chart(dir: &Path) -> String {
    let chart = dir.join("chart");
    std::fs::create_dir_all(chart.join("crds")).unwrap();
    std::fs::create_dir_all(chart.join("templates")).unwrap();
    write_file(
        &chart,
        "Chart.yaml",
        "apiVersion: v2\nname: widgets\nversion: 0.1.0\n",
    );
    write_file(&chart, "values.yaml", "size: 1\n");
    write_file(
        &chart.join("crds"),
        "widgets.yaml",
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.helm.example.com\nspec:\n  group: helm.example.com\n  scope: Namespaced\n  names: {plural: widgets, singular: widget, kind: Widget}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            properties:\n              size: {type: integer}\n",
    );
    write_file(
        &chart.join("templates"),
        "objects.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-settings\ndata:\n  size: {{ .Values.size | quote }}\n---\napiVersion: helm.example.com/v1\nkind: Widget\nmetadata:\n  name: {{ .Release.Name }}-widget\nspec:\n  size: {{ .Values.size }}\n",
    );
    chart.to_string_lossy().into_owned()
}

#[test]
fn helm_installs_upgrades_rolls_back_and_uninstalls_a_chart_with_a_crd() {
    let kcp = Kcp::shared("helm");
    let dir = tempfile::tempdir().unwrap();
    let helm = Helm {
        binary: helm_binary(),
        home: dir.path().join("helm"),
        kubeconfig: kcp.kubeconfig(),
    };
    let chart = write_chart(dir.path());
    let ws = kcp.home().to_string();
    let size = |kind: &str, name: &str, path: &str| {
        kcp.kubectl_in_ok(
            &ws,
            &[
                "get",
                kind,
                name,
                "-n",
                "default",
                "-o",
                &format!("jsonpath={path}"),
            ],
        )
    };
    let releases = || {
        kcp.kubectl_in_ok(
            &ws,
            &[
                "get",
                "secrets",
                "-n",
                "default",
                "-l",
                "owner=helm",
                "-o",
                "name",
            ],
        )
    };

    helm.run(&["install", "shop", &chart, "--namespace", "default"]);
    assert_eq!(size("configmap", "shop-settings", "{.data.size}"), "1");
    assert_eq!(size("widget", "shop-widget", "{.spec.size}"), "1");

    helm.run(&[
        "upgrade",
        "shop",
        &chart,
        "--namespace",
        "default",
        "--set",
        "size=2",
    ]);
    assert_eq!(size("configmap", "shop-settings", "{.data.size}"), "2");
    assert_eq!(size("widget", "shop-widget", "{.spec.size}"), "2");

    helm.run(&["rollback", "shop", "1", "--namespace", "default"]);
    assert_eq!(size("configmap", "shop-settings", "{.data.size}"), "1");
    assert_eq!(size("widget", "shop-widget", "{.spec.size}"), "1");
    let history = helm.run(&["history", "shop", "--namespace", "default"]);
    assert!(history.contains("Rollback to 1"), "{history}");
    assert_eq!(releases().lines().count(), 3, "{}", releases());

    helm.run(&["uninstall", "shop", "--namespace", "default"]);
    assert_eq!(releases(), "", "the release Secrets are gone");
    let left = kcp.kubectl_in_ok(
        &ws,
        &["get", "configmaps,widgets", "-n", "default", "-o", "name"],
    );
    assert!(
        !left.contains("shop-settings") && !left.contains("shop-widget"),
        "{left}"
    );
    let listed = helm.run(&["list", "--all", "--namespace", "default"]);
    assert!(!listed.contains("shop"), "{listed}");
}
