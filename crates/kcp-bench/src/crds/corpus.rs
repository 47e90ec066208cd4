//! `kcp-bench crd-corpus`: real-world CRDs (173 from 14 projects) created in one workspace,
//! one `kubectl create` after the other, held, then all deleted, and the server's memory
//! throughout.
//!
//! - The corpus: the CRD manifests of the projects in [`CORPUS`], fetched from the Go module
//!   proxy into Go's module cache (`go mod download`), or the YAML files under `--dir`. Each
//!   file holding a CustomResourceDefinition is one `kubectl create -f` (Istio's holds 14).
//!   kube-apiserver refuses five of them too (Argo Workflows' full CRDs are not structural):
//!   they are counted as refused.
//! - The baseline in the same run: as many `kubectl create configmap` commands, one after the
//!   other (kubectl's own cost per command); and the CRDs' weight, the bytes of their JSON as
//!   the server lists them.
//! - Reported: the RSS when fresh, its peak during the creates (read every 50 ms), once settled
//!   with the CRDs held (its growth against their weight), and once settled after deleting them
//!   all, once their history is compacted (the server runs with a compaction every 10 s) and
//!   the watch cache's window has passed (target: at most fresh + 20% + 16 MiB, so a
//!   workspace's CRDs leave nothing behind).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::{mib, settle};
use crate::api::client::Target;
use crate::api::kcp_process::{self, KcpProcess};
use crate::api::verdict;
use crate::table;
use crate::workspaces::compacted;

/// The projects whose CRDs make the corpus: `<module>@<version>:<directory in the module>`.
pub const CORPUS: &[&str] = &[
    "github.com/prometheus-operator/prometheus-operator@v0.78.2:example/prometheus-operator-crd",
    "github.com/kyverno/kyverno@v1.19.1:config/crds",
    "sigs.k8s.io/gateway-api@v1.2.1:config/crd/standard",
    "github.com/cert-manager/cert-manager@v1.19.2:deploy/crds",
    "github.com/argoproj/argo-cd/v2@v2.14.21:manifests/crds",
    "github.com/argoproj/argo-workflows/v3@v3.6.2:manifests/base/crds/full",
    "istio.io/api@v1.24.2:kubernetes",
    "knative.dev/serving@v0.42.2:config/core/300-resources",
    "github.com/tektoncd/pipeline@v0.68.0:config/300-crds",
    "sigs.k8s.io/cluster-api@v1.9.5:config/crd/bases",
    "github.com/crossplane/crossplane/v2@v2.0.0:cluster/crds",
    "github.com/external-secrets/external-secrets@v0.16.2:config/crds/bases",
    "github.com/vmware-tanzu/velero@v1.14.0:config/crd",
    "github.com/cilium/cilium@v1.16.5:pkg/k8s/apis/cilium.io/client/crds",
];

/// After-deletion RSS at most: fresh × (1 + this) + [`SLACK_MIB`].
const GROWTH_ALLOWED: f64 = 0.20;
const SLACK_MIB: f64 = 16.0;
/// kube-apiserver's watch cache keeps events this long; after it, what the server holds is
/// what it keeps for good (the same window as `kcp-bench workspaces` waits).
const WATCH_CACHE_WINDOW: Duration = Duration::from_secs(85);
/// How often the server compacts its history here (`--etcd-compaction-interval`): what the
/// deleted CRDs' versions held comes back once their history is compacted.
const COMPACTION_INTERVAL: Duration = Duration::from_secs(10);

#[derive(clap::Args)]
pub struct Options {
    /// A directory of CRD manifests (YAML, searched recursively) instead of the projects'.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Most seconds to wait for the server's RSS to stop falling, after the creates and after
    /// the deletes.
    #[arg(long, default_value_t = 60.0)]
    settle_seconds: f64,
    /// The kcp binary (default: `kcp` next to this executable, i.e. target/release/kcp).
    #[arg(long)]
    kcp_binary: Option<PathBuf>,
}

/// The manifests to create, in order: every `.yaml`/`.yml` file holding a CRD.
fn manifests(options: &Options) -> anyhow::Result<Vec<PathBuf>> {
    let roots: Vec<PathBuf> = match &options.dir {
        Some(dir) => vec![dir.clone()],
        None => CORPUS
            .iter()
            .map(|entry| module_dir(entry))
            .collect::<anyhow::Result<_>>()?,
    };
    let mut files = Vec::new();
    for root in roots {
        let mut found = Vec::new();
        collect(&root, &mut found)?;
        found.sort();
        files.extend(found);
    }
    anyhow::ensure!(!files.is_empty(), "no CRD manifests found");
    Ok(files)
}

/// The directory of `<module>@<version>:<dir>` in Go's module cache, downloaded if missing.
pub(crate) fn module_dir(entry: &str) -> anyhow::Result<PathBuf> {
    let (module, dir) = entry.split_once(':').context("module:dir")?;
    let output = std::process::Command::new("go")
        .args(["mod", "download", "-json", module])
        .env("GOFLAGS", "-mod=mod")
        .current_dir("/")
        .output()
        .context("run go (the corpus comes from the Go module proxy; or pass --dir)")?;
    anyhow::ensure!(
        output.status.success(),
        "go mod download {module}: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    let described: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let root = described["Dir"]
        .as_str()
        .with_context(|| format!("go mod download {module}: no Dir"))?;
    Ok(Path::new(root).join(dir))
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, out)?;
            continue;
        }
        let yaml = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
        if yaml
            && std::fs::read_to_string(&path)
                .is_ok_and(|text| text.contains("kind: CustomResourceDefinition"))
        {
            out.push(path);
        }
    }
    Ok(())
}

/// kubectl against the server, as its admin.
struct Kubectl {
    kubeconfig: PathBuf,
}

impl Kubectl {
    async fn output(&self, args: &[&str]) -> anyhow::Result<std::process::Output> {
        tokio::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .await
            .context("run kubectl (is it on PATH?)")
    }

    /// Runs kubectl with `args`; whether it succeeded, and its stderr.
    async fn run(&self, args: &[&str]) -> anyhow::Result<(bool, String)> {
        let output = self.output(args).await?;
        Ok((
            output.status.success(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        ))
    }

    /// Runs kubectl with `args`, which must succeed; its stdout.
    async fn ok(&self, args: &[&str]) -> anyhow::Result<String> {
        let output = self.output(args).await?;
        anyhow::ensure!(
            output.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }
}

/// The highest RSS read every 50 ms while it runs.
struct PeakWatch {
    peak: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl PeakWatch {
    fn start(pid: u32) -> PeakWatch {
        let peak = Arc::new(AtomicU64::new(0));
        let seen = Arc::clone(&peak);
        let task = tokio::spawn(async move {
            loop {
                if let Some(rss) = rss_of(pid) {
                    seen.fetch_max(rss, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        PeakWatch { peak, task }
    }

    fn stop(self) -> u64 {
        self.task.abort();
        self.peak.load(Ordering::Relaxed)
    }
}

fn rss_of(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    let files = manifests(&options)?;
    let settle_for = Duration::from_secs_f64(options.settle_seconds);
    let binary = kcp_process::locate_binary(options.kcp_binary.as_deref())?;
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("kcp");
    let interval = format!("{}s", COMPACTION_INTERVAL.as_secs());
    let kcp =
        KcpProcess::start_with(&binary, &root, &["--etcd-compaction-interval", &interval]).await?;
    let ca_pem = std::fs::read(root.join("ca.crt")).context("read the kcp CA")?;
    let target = Target::new(SocketAddr::from((Ipv4Addr::LOCALHOST, kcp.port)), &ca_pem)?;
    let token = kcp_testing::kubeconfig::admin_token(&root, "kcp-admin");
    let authorization = format!("Bearer {}", token.trim());
    let kubectl = Kubectl {
        kubeconfig: root.join("admin.kubeconfig"),
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_fresh = kcp.rss_bytes()?;

    // The baseline: kubectl's own cost, one small create per command.
    let began = Instant::now();
    for i in 0..files.len() {
        let name = format!("baseline-{i}");
        kubectl
            .ok(&["create", "configmap", &name, "--from-literal=a=b"])
            .await?;
    }
    let configmaps_took = began.elapsed();
    kubectl.ok(&["delete", "configmaps", "--all"]).await?;
    settle(&kcp, settle_for).await?;
    let rss_before = kcp.rss_bytes()?;

    // The CRDs, one file after the other.
    eprintln!("creating the CRDs of {} files", files.len());
    let watch = PeakWatch::start(kcp.pid()?);
    let began = Instant::now();
    let mut refused = Vec::new();
    for file in &files {
        let path = file.to_string_lossy();
        let (created, stderr) = kubectl.run(&["create", "-f", &path]).await?;
        if !created {
            let first = stderr.lines().next().unwrap_or_default().to_string();
            refused.push(first);
        }
    }
    let crds_took = began.elapsed();
    let peak = watch.stop();
    let listed = kubectl.ok(&["get", "crds", "-o", "json"]).await?;
    let list: serde_json::Value = serde_json::from_str(&listed)?;
    let crds = list["items"].as_array().map_or(0, Vec::len);
    let weight: usize = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|crd| crd.to_string().len())
        .sum();
    for line in &refused {
        eprintln!("refused: {line}");
    }
    settle(&kcp, settle_for).await?;
    let rss_held = kcp.rss_bytes()?;
    eprintln!(
        "{crds} CRDs ({:.1} MiB of JSON) in {:.1} s; RSS {:.1} MiB held, {:.1} MiB peak",
        mib(weight as u64),
        crds_took.as_secs_f64(),
        mib(rss_held),
        mib(peak)
    );

    // All deleted, then past the watch cache's window.
    let watch = PeakWatch::start(kcp.pid()?);
    let began = Instant::now();
    kubectl
        .ok(&["delete", "crds", "--all", "--wait=true"])
        .await?;
    let deleted_took = began.elapsed();
    let deleted_at = Instant::now();
    let peak_deleting = watch.stop();
    compacted::wait(&kcp, &target, &authorization, 3 * COMPACTION_INTERVAL).await?;
    let compacted_in = deleted_at.elapsed();
    tokio::time::sleep_until((deleted_at + WATCH_CACHE_WINDOW).into()).await;
    settle(&kcp, settle_for).await?;
    let rss_after = kcp.rss_bytes()?;
    kcp.stop().await?;

    let target = mib(rss_fresh) * (1.0 + GROWTH_ALLOWED) + SLACK_MIB;
    let held = mib(rss_held) - mib(rss_before);
    println!(
        "kcp-bench crd-corpus: {} manifests, {crds} CRDs created ({} refused, as kube-apiserver \
         refuses them), one kubectl create after the other, {}",
        files.len(),
        refused.len(),
        binary.display()
    );
    let rows = vec![
        crate::table::figures_header(),
        vec![
            "creating them".into(),
            format!("{:.1} s", crds_took.as_secs_f64()),
            format!(
                "{} kubectl create configmap: {:.1} s ({:.2}x)",
                files.len(),
                configmaps_took.as_secs_f64(),
                crds_took.as_secs_f64() / configmaps_took.as_secs_f64()
            ),
            String::new(),
        ],
        vec![
            "RSS held with the CRDs".into(),
            format!("{held:+.1} MiB ({:.1} MiB)", mib(rss_held)),
            format!(
                "their JSON: {:.1} MiB ({:.2}x)",
                mib(weight as u64),
                held / mib(weight as u64)
            ),
            String::new(),
        ],
        vec![
            "peak RSS".into(),
            format!(
                "{:.1} MiB creating, {:.1} MiB deleting",
                mib(peak),
                mib(peak_deleting)
            ),
            format!("{:.1} MiB fresh", mib(rss_fresh)),
            String::new(),
        ],
        vec![
            "RSS after deleting them all".into(),
            format!("{:.1} MiB", mib(rss_after)),
            format!(
                "{:.1} MiB fresh; deleted in {:.1} s, their history compacted after {:.0} s",
                mib(rss_fresh),
                deleted_took.as_secs_f64(),
                compacted_in.as_secs_f64()
            ),
            verdict(
                mib(rss_after) <= target,
                format!("<= fresh + 20% + {SLACK_MIB:.0} MiB ({target:.1} MiB)"),
            ),
        ],
    ];
    print!("{}", table::render(&rows));
    Ok(())
}
