//! `kcp-bench workspaces`: the real `kcp` binary creating, holding and deleting a tree of
//! workspaces.
//!
//! - Creation: `--workspaces` (default 10,000) workspaces in a tree of depth 3 under root
//!   ([`tree`]), POSTed by `--clients` concurrent clients (default 10, one kept-alive connection
//!   each), level by level: a level starts once every workspace of the one above is Ready, as a
//!   child needs its parent. The rate counts every workspace up to the moment the last one is
//!   Ready, as one wildcard watch ([`follow`]) sees it. Target ≥ 500/s (kcp: 8/s). The baseline
//!   in the same run: configmap creates by as many clients (one write each, where a workspace
//!   takes several: the Workspace, its LogicalCluster, two namespaces, status updates).
//! - Memory: growth of the server's RSS from before the first workspace to after the last is
//!   Ready, per workspace. Target ≤ 64 KiB (kcp: 7.4 MiB).
//! - Deletion: the organizations are deleted; the time until the watch has seen every workspace
//!   go. Target ≤ 30 s (kcp: about an hour).

pub(crate) mod follow;
pub(crate) mod tree;

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::Full;

use crate::api::client::{Protocol, Target};
use crate::api::kcp_process::{self, KcpProcess};
use crate::api::{configmap_json, load, verdict};
use crate::table;
use follow::Follower;
use tree::Planned;

/// Workspaces per second until all are Ready, at least.
const RATE_TARGET: f64 = 500.0;
/// RSS growth per empty workspace, at most.
const MEMORY_TARGET_KIB: f64 = 64.0;
/// Deleting them all, at most.
const DELETE_TARGET: Duration = Duration::from_secs(30);
/// How long any one phase may take before the benchmark gives up.
const PHASE_TIMEOUT: Duration = Duration::from_secs(600);

const WORKSPACES_PATH: &str = "/apis/tenancy.kcp.io/v1alpha1/workspaces";

#[derive(clap::Args)]
pub struct Options {
    /// Workspaces in the tree.
    #[arg(long, default_value_t = 10_000)]
    workspaces: usize,
    /// Concurrent clients creating them (and creating configmaps for the baseline).
    #[arg(long, default_value_t = 10)]
    clients: usize,
    /// Seconds of configmap creates for the baseline.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// The kcp binary (default: `kcp` next to this executable, i.e. target/release/kcp).
    #[arg(long)]
    kcp_binary: Option<PathBuf>,
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    anyhow::ensure!(
        options.workspaces > 0 && options.clients > 0,
        "nothing to do"
    );
    let binary = kcp_process::locate_binary(options.kcp_binary.as_deref())?;
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("kcp");
    let kcp = KcpProcess::start(&binary, &root).await?;
    let ca_pem = std::fs::read(root.join("ca.crt")).context("read the kcp CA")?;
    let token = kcp_testing::kubeconfig::admin_token(&root, "kcp-admin");
    let authorization = Arc::new(format!("Bearer {}", token.trim()));
    let target = Target::new(SocketAddr::from((Ipv4Addr::LOCALHOST, kcp.port)), &ca_pem)?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_before = kcp.rss_bytes()?;

    let mut follower = Follower::start(&target, &authorization).await?;
    let levels = tree::plan(options.workspaces);
    let started = Instant::now();
    let mut planned = 0;
    for level in &levels {
        create_level(&target, &authorization, options.clients, level).await?;
        planned += level.len();
        tokio::time::timeout(PHASE_TIMEOUT, follower.wait(|seen| seen.ready >= planned))
            .await
            .context("workspaces did not become Ready")??;
        eprintln!(
            "{planned} workspaces Ready after {:.2} s",
            started.elapsed().as_secs_f64()
        );
    }
    let created_in = started.elapsed();
    let rate = options.workspaces as f64 / created_in.as_secs_f64();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_after = kcp.rss_bytes()?;
    let per_workspace_kib =
        rss_after.saturating_sub(rss_before) as f64 / 1024.0 / options.workspaces as f64;

    // The baseline: plain configmap creates by as many clients, same server, same run.
    let configmaps = load::drive(
        &target,
        Protocol::Http1,
        options.clients,
        Duration::from_secs_f64(options.seconds),
        StatusCode::CREATED,
        {
            let authorization = Arc::clone(&authorization);
            Arc::new(move |connection, worker, n| {
                connection
                    .request(
                        Method::POST,
                        "/clusters/root/api/v1/namespaces/default/configmaps",
                    )
                    .header(http::header::AUTHORIZATION, authorization.as_str())
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(Full::new(Bytes::from(configmap_json(
                        &format!("bench-{worker}-{n}"),
                        1024,
                    ))))
                    .expect("a valid request")
            })
        },
    )
    .await
    .context("configmap creates")?;

    let deleting = Instant::now();
    delete_orgs(&target, &authorization, &levels[0]).await?;
    tokio::time::timeout(PHASE_TIMEOUT, follower.wait(|seen| seen.existing == 0))
        .await
        .context("workspaces were not deleted")??;
    let deleted_in = deleting.elapsed();
    let peak = kcp.peak_rss_bytes()?;
    follower.stop();
    kcp.stop().await?;

    let shape: Vec<String> = levels.iter().map(|l| l.len().to_string()).collect();
    println!(
        "kcp-bench workspaces: {} workspaces (tree {} under root), {} clients, {}",
        options.workspaces,
        shape.join(" / "),
        options.clients,
        binary.display()
    );
    let rows = vec![
        vec![
            "figure".to_string(),
            "kcp-rs".to_string(),
            "baseline in this run".to_string(),
            "target".to_string(),
            "kcp (Go), published".to_string(),
        ],
        vec![
            "workspaces created to Ready".into(),
            format!("{rate:.0}/s ({:.2} s)", created_in.as_secs_f64()),
            format!(
                "configmap creates {:.0}/s ({:.2}x)",
                configmaps.rate(),
                rate / configmaps.rate()
            ),
            verdict(rate >= RATE_TARGET, format!(">= {RATE_TARGET:.0}/s")),
            "8/s".into(),
        ],
        vec![
            "RSS growth per empty workspace".into(),
            format!("{per_workspace_kib:.1} KiB"),
            format!(
                "{:.1} MiB before, {:.1} MiB after, {:.1} MiB peak",
                mib(rss_before),
                mib(rss_after),
                mib(peak)
            ),
            verdict(
                per_workspace_kib <= MEMORY_TARGET_KIB,
                format!("<= {MEMORY_TARGET_KIB:.0} KiB"),
            ),
            "7.4 MiB".into(),
        ],
        vec![
            format!("delete all {}", options.workspaces),
            format!("{:.2} s", deleted_in.as_secs_f64()),
            String::new(),
            verdict(
                deleted_in <= DELETE_TARGET,
                format!("<= {} s", DELETE_TARGET.as_secs()),
            ),
            "about 1 h".into(),
        ],
    ];
    print!("{}", table::render(&rows));
    Ok(())
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// POSTs every workspace of `level` from `clients` connections, each taking the next one.
pub(crate) async fn create_level(
    target: &Target,
    authorization: &Arc<String>,
    clients: usize,
    level: &[Planned],
) -> anyhow::Result<()> {
    let queue: Arc<Mutex<VecDeque<Planned>>> =
        Arc::new(Mutex::new(level.iter().cloned().collect()));
    let mut tasks = Vec::new();
    for _ in 0..clients.min(level.len()) {
        let mut connection = target.connect(Protocol::Http1).await?;
        let (queue, authorization) = (Arc::clone(&queue), Arc::clone(authorization));
        tasks.push(tokio::spawn(async move {
            loop {
                let Some(next) = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front() else {
                    return anyhow::Ok(());
                };
                let body = serde_json::json!({
                    "apiVersion": "tenancy.kcp.io/v1alpha1",
                    "kind": "Workspace",
                    "metadata": {"name": next.name},
                });
                let request = connection
                    .request(
                        Method::POST,
                        &format!("/clusters/{}{WORKSPACES_PATH}", next.parent),
                    )
                    .header(http::header::AUTHORIZATION, authorization.as_str())
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(Full::new(Bytes::from(body.to_string())))?;
                connection
                    .expect(request, StatusCode::CREATED)
                    .await
                    .with_context(|| format!("create {}", next.path()))?;
            }
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(())
}

/// Deletes the organizations (which takes everything under them along).
async fn delete_orgs(target: &Target, authorization: &str, orgs: &[Planned]) -> anyhow::Result<()> {
    let mut connection = target.connect(Protocol::Http1).await?;
    for org in orgs {
        let request = connection
            .request(
                Method::DELETE,
                &format!("/clusters/root{WORKSPACES_PATH}/{}", org.name),
            )
            .header(http::header::AUTHORIZATION, authorization)
            .body(Full::new(Bytes::new()))?;
        let answer = connection.send(request).await?;
        anyhow::ensure!(
            answer.status.is_success(),
            "delete {}: {}",
            org.path(),
            String::from_utf8_lossy(&answer.body)
        );
    }
    Ok(())
}
