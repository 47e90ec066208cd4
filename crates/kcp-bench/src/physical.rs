//! `kcp-bench physical`: a Cluster's APIs imported and published. A real Kubernetes cluster
//! (`scripts/physical-cluster up`, from the binaries `scripts/test` builds) serves 50 custom
//! resources; registered in a workspace of the real `kcp` binary (its in-server
//! cluster-controller importing those 50), the time from the Cluster's create until the
//! workspace's discovery serves all 50. Baseline: the same 50 CRDs applied to another workspace
//! with kubectl until served, in the same run. Target: ≤ 5 s.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use kcp_testing::crd::Crd;

use crate::api::kcp_process::{KcpProcess, locate_binary};
use crate::api::verdict;
use crate::table;

const TARGET: Duration = Duration::from_secs(5);
const RESOURCES: usize = 50;
const GROUP: &str = "bench.example.dev";

#[derive(clap::Args)]
pub struct Options {
    /// The kcp binary (default: target/release/kcp).
    #[arg(long)]
    kcp_binary: Option<PathBuf>,
}

/// The physical cluster, stopped (SIGTERM, then waited for) on drop.
pub(crate) struct Cluster {
    pub(crate) dir: PathBuf,
    runner: Child,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.runner.id().to_string())
            .status();
        let _ = self.runner.wait();
    }
}

impl Cluster {
    pub(crate) fn start(dir: &Path) -> anyhow::Result<Cluster> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/physical-cluster");
        let runner = Command::new(&script)
            .arg("up")
            .arg(dir)
            .env("WATCH_PID", std::process::id().to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("run {}", script.display()))?;
        let mut cluster = Cluster {
            dir: dir.to_path_buf(),
            runner,
        };
        let deadline = Instant::now() + Duration::from_secs(180);
        while !dir.join("ready").exists() {
            if let Some(status) = cluster.runner.try_wait()? {
                bail!(
                    "scripts/physical-cluster up ended ({status}); are its binaries built (scripts/physical-cluster build)?"
                );
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "the physical cluster did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(cluster)
    }
}

pub(crate) fn kubectl(
    kubeconfig: &Path,
    server: Option<&str>,
    args: &[&str],
) -> anyhow::Result<String> {
    let mut command = Command::new("kubectl");
    command.arg("--kubeconfig").arg(kubeconfig);
    if let Some(server) = server {
        command.args(["--server", server]);
    }
    let output = command.args(args).output().context("run kubectl")?;
    anyhow::ensure!(
        output.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// 50 namespaced CRDs with a few fields each.
fn crds() -> String {
    let schema = "type: object
properties:
  spec:
    type: object
    properties:
      size: {type: integer, minimum: 0}
      color: {type: string, enum: [red, green, blue]}
      labels: {type: object, additionalProperties: {type: string}}
      items: {type: array, items: {type: object, properties: {name: {type: string}}}}
  status:
    type: object
    properties:
      ready: {type: boolean}
";
    (0..RESOURCES)
        .map(|i| {
            Crd::namespaced(&format!("thing{i}s"), &format!("Thing{i}"))
                .group(GROUP)
                .singular(&format!("thing{i}"))
                .version(&format!(
                    "name: v1\nserved: true\nstorage: true\nsubresources: {{status: {{}}}}\nschema:\n  openAPIV3Schema:\n{}",
                    schema.lines().map(|l| format!("    {l}\n")).collect::<String>()
                ))
                .yaml()
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

/// Polls the workspace at `server` until its discovery of the bench group lists every resource.
fn await_served(kubeconfig: &Path, server: &str, began: Instant) -> anyhow::Result<Duration> {
    let deadline = began + Duration::from_secs(120);
    loop {
        let listed = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(kubeconfig)
            .args(["--server", server, "get", "--raw"])
            .arg(format!("{}/apis/{GROUP}/v1", server_path(server)))
            .output()?;
        if listed.status.success() {
            let list: serde_json::Value =
                serde_json::from_slice(&listed.stdout).unwrap_or_default();
            let served = list["resources"]
                .as_array()
                .map(|r| {
                    r.iter()
                        .filter(|r| !r["name"].as_str().unwrap_or("/").contains('/'))
                        .count()
                })
                .unwrap_or(0);
            if served == RESOURCES {
                return Ok(began.elapsed());
            }
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "not all {RESOURCES} resources served at {server}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `/clusters/<path>` of a workspace URL (`kubectl get --raw` takes absolute paths).
fn server_path(server: &str) -> &str {
    server.find("/clusters/").map_or("", |at| &server[at..])
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    let binary = locate_binary(options.kcp_binary.as_deref())?;
    let scratch = tempfile::tempdir()?;
    let cluster = Cluster::start(&scratch.path().join("east"))?;
    let cluster_kubeconfig = cluster.dir.join("kubeconfig");
    let crds_file = scratch.path().join("crds.yaml");
    std::fs::write(&crds_file, crds())?;
    let crds_path = crds_file.to_string_lossy().into_owned();
    kubectl(&cluster_kubeconfig, None, &["apply", "-f", &crds_path])?;
    kubectl(
        &cluster_kubeconfig,
        None,
        &[
            "wait",
            "--for=condition=Established",
            "-f",
            &crds_path,
            "--timeout=120s",
        ],
    )?;

    let resources: Vec<String> = (0..RESOURCES)
        .map(|i| format!("thing{i}s.{GROUP}"))
        .collect();
    let root = scratch.path().join("kcp");
    let kcp = KcpProcess::start_with(
        &binary,
        &root,
        &[
            "--resources-to-sync",
            &resources.join(","),
            "--cluster-poll-interval",
            "10m",
        ],
    )
    .await?;
    let kubeconfig = root.join("admin.kubeconfig");
    let base = format!("https://127.0.0.1:{}/clusters/root", kcp.port);
    for workspace in ["baseline", "imported"] {
        let manifest = scratch.path().join(format!("{workspace}.yaml"));
        std::fs::write(
            &manifest,
            format!(
                "apiVersion: tenancy.kcp.io/v1alpha1\nkind: Workspace\nmetadata: {{name: {workspace}}}\n"
            ),
        )?;
        kubectl(
            &kubeconfig,
            Some(&base),
            &["create", "-f", &manifest.to_string_lossy()],
        )?;
        kubectl(
            &kubeconfig,
            Some(&base),
            &[
                "wait",
                "--for=jsonpath={.status.phase}=Ready",
                &format!("workspace/{workspace}"),
                "--timeout=60s",
            ],
        )?;
    }

    // Baseline: the same CRDs applied by kubectl.
    let baseline_server = format!("{base}:baseline");
    let began = Instant::now();
    kubectl(
        &kubeconfig,
        Some(&baseline_server),
        &["apply", "-f", &crds_path],
    )?;
    let baseline = await_served(&kubeconfig, &baseline_server, began)?;

    // Imported: a Cluster registered, its 50 resources imported, negotiated and published.
    let imported_server = format!("{base}:imported");
    let registration = scratch.path().join("cluster.yaml");
    let indented: String = std::fs::read_to_string(&cluster_kubeconfig)?
        .lines()
        .map(|l| format!("    {l}\n"))
        .collect();
    std::fs::write(
        &registration,
        format!(
            "apiVersion: cluster.example.dev/v1alpha1\nkind: Cluster\nmetadata: {{name: east}}\nspec:\n  kubeconfig: |\n{indented}"
        ),
    )?;
    let began = Instant::now();
    kubectl(
        &kubeconfig,
        Some(&imported_server),
        &["create", "-f", &registration.to_string_lossy()],
    )?;
    let imported = await_served(&kubeconfig, &imported_server, began)?;
    let cpu = kcp.cpu_seconds()?;
    kcp.stop().await?;
    drop(cluster);

    let rows = vec![
        vec![
            "50 custom resources served in a workspace".to_string(),
            "time".into(),
            "ratio".into(),
            "target".into(),
        ],
        vec![
            "baseline: kubectl apply of the 50 CRDs".into(),
            format!("{:.2} s", baseline.as_secs_f64()),
            "1.00".into(),
            String::new(),
        ],
        vec![
            "a Cluster registered: imported, negotiated, published".into(),
            format!("{:.2} s", imported.as_secs_f64()),
            format!(
                "{:.2}",
                imported.as_secs_f64() / baseline.as_secs_f64().max(1e-9)
            ),
            verdict(imported <= TARGET, format!("<= {} s", TARGET.as_secs())),
        ],
    ];
    println!(
        "kcp-bench physical: {} (kcp CPU over the whole run: {cpu:.2} s)",
        binary.display()
    );
    print!("{}", table::render(&rows));
    Ok(())
}
