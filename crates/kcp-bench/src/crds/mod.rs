//! `kcp-bench crds`: CRD churn on the real `kcp` binary, and what it leaves in memory.
//!
//! - Baseline first, on the same server and connection: `--updates` (default 1,000) PUTs of a
//!   configmap of `--size-kib` (default 300 KiB), each a different value. It also warms the
//!   store's caches with as many bytes as the CRD phase writes, so that phase's RSS reading
//!   is about CRDs.
//! - Then a cluster-scoped CRD of that size ([`spec`]: a big structural schema, three CEL
//!   rules) is created and, once served, PUT `--updates` times, each a distinct spec (a new
//!   root description), each one compiled and interned by the server; then it is deleted and,
//!   once gone, the server settles: its RSS is read every second until it has not fallen for
//!   [`QUIET_READINGS`] readings in a row (the server's own watchers may still be working off
//!   the updates' events), for at most `--settle-seconds` (default 60).
//! - Reported: both update rates (and their ratio), and the server's RSS before the CRD phase,
//!   its peak during it (read after every update) and after the delete, against the target
//!   after − before ≤ 64 MiB: a CRD's resources must be freed with it.

pub mod corpus;
mod spec;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::Full;
use serde_json::json;

use crate::api::client::{Connection, Protocol, Target};
use crate::api::kcp_process::{self, KcpProcess};
use crate::api::verdict;
use crate::measure::{Measured, new_histogram};
use crate::table;

/// Growth of the server's RSS from before the CRD phase to after the delete, at most.
const MEMORY_TARGET_MIB: f64 = 64.0;
/// How long the CRD may take to be served, or to be gone after its delete.
const WAIT_TIMEOUT: Duration = Duration::from_secs(60);
/// Readings a second apart without RSS falling by a MiB that count as settled (longer than the
/// 5 s between the server's returns of freed memory to the system).
const QUIET_READINGS: u32 = 6;
const MIB: u64 = 1024 * 1024;

const CLUSTER: &str = "/clusters/root";
const CRDS_PATH: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
const CONFIGMAP: &str = "bench-crd-baseline";

#[derive(clap::Args)]
pub struct Options {
    /// Updates of the CRD, and of the configmap of the baseline.
    #[arg(long, default_value_t = 1000)]
    updates: u64,
    /// Size of the CRD and of the configmap, in KiB.
    #[arg(long, default_value_t = 300)]
    size_kib: usize,
    /// Most seconds to wait, once the CRD is gone, for the server's RSS to stop falling.
    #[arg(long, default_value_t = 60.0)]
    settle_seconds: f64,
    /// The kcp binary (default: `kcp` next to this executable, i.e. target/release/kcp).
    #[arg(long)]
    kcp_binary: Option<PathBuf>,
}

/// The client's side of one benchmark run.
struct Client {
    connection: Connection,
    authorization: String,
}

impl Client {
    async fn send(
        &mut self,
        method: Method,
        path: &str,
        body: Option<String>,
    ) -> anyhow::Result<(StatusCode, Bytes)> {
        let mut request = self
            .connection
            .authorized(method, &format!("{CLUSTER}{path}"), &self.authorization)
            .header(http::header::ACCEPT, "application/json");
        if body.is_some() {
            request = request.header(http::header::CONTENT_TYPE, "application/json");
        }
        let request = request.body(Full::new(Bytes::from(body.unwrap_or_default())))?;
        let answer = self.connection.send(request).await?;
        Ok((answer.status, answer.body))
    }

    async fn expect(
        &mut self,
        method: Method,
        path: &str,
        body: Option<String>,
        expected: StatusCode,
    ) -> anyhow::Result<()> {
        let what = format!("{method} {path}");
        let (status, answer) = self.send(method, path, body).await?;
        anyhow::ensure!(
            status == expected,
            "{what}: expected {expected}, got {status}: {}",
            String::from_utf8_lossy(&answer)
        );
        Ok(())
    }

    /// Waits until a GET of `path` answers `wanted`.
    async fn wait_for(&mut self, path: &str, wanted: StatusCode) -> anyhow::Result<()> {
        let deadline = Instant::now() + WAIT_TIMEOUT;
        loop {
            let (status, _) = self.send(Method::GET, path, None).await?;
            if status == wanted {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "GET {path}: still {status} after {WAIT_TIMEOUT:?}, waiting for {wanted}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Times `updates` sequential requests; `each(n)` makes and sends the `n`th, and `after`
/// runs after each (outside the timing).
async fn timed<F, A>(updates: u64, mut each: F, mut after: A) -> anyhow::Result<Measured>
where
    F: AsyncFnMut(u64) -> anyhow::Result<()>,
    A: FnMut(u64) -> anyhow::Result<()>,
{
    let mut latency = new_histogram();
    let mut elapsed = Duration::ZERO;
    for n in 0..updates {
        let began = Instant::now();
        each(n).await?;
        let took = began.elapsed();
        elapsed += took;
        latency.saturating_record(took.as_micros() as u64);
        after(n)?;
    }
    Ok(Measured {
        ops: updates,
        elapsed,
        latency,
    })
}

/// A ConfigMap of `size` bytes of data whose value differs for every `revision`.
fn configmap(size: usize, revision: u64) -> String {
    let marker = format!("revision-{revision:010}-");
    let filler = "x".repeat(size.saturating_sub(marker.len()));
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIGMAP},
        "data": {"value": format!("{marker}{filler}")},
    })
    .to_string()
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    anyhow::ensure!(options.updates > 0, "nothing to do");
    let size = options.size_kib * 1024;
    let binary = kcp_process::locate_binary(options.kcp_binary.as_deref())?;
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("kcp");
    let kcp = KcpProcess::start(&binary, &root).await?;
    let ca_pem = std::fs::read(root.join("ca.crt")).context("read the kcp CA")?;
    let token = kcp_testing::kubeconfig::admin_token(&root, "kcp-admin");
    let target = Target::new(SocketAddr::from((Ipv4Addr::LOCALHOST, kcp.port)), &ca_pem)?;
    let mut client = Client {
        connection: target.connect(Protocol::Http1).await?,
        authorization: format!("Bearer {}", token.trim()),
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_start = kcp.rss_bytes()?;

    // The baseline: configmap updates of the same size.
    let configmaps_path = "/api/v1/namespaces/default/configmaps";
    client
        .expect(
            Method::POST,
            configmaps_path,
            Some(configmap(size, 0)),
            StatusCode::CREATED,
        )
        .await
        .context("create the baseline configmap")?;
    let configmap_path = format!("{configmaps_path}/{CONFIGMAP}");
    let configmaps = timed(
        options.updates,
        async |n| {
            let body = configmap(size, n + 1);
            client
                .expect(Method::PUT, &configmap_path, Some(body), StatusCode::OK)
                .await
        },
        |_| Ok(()),
    )
    .await
    .context("configmap updates")?;
    eprintln!("configmap updates: {}", configmaps.cell());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_before = kcp.rss_bytes()?;

    // The CRD: created, served, updated with a distinct spec each time, deleted.
    let fields = spec::fields_for(size);
    let crd_size = spec::crd(fields, 0).to_string().len();
    let crd_path = format!("{CRDS_PATH}/{}", spec::NAME);
    let served_path = format!("/apis/{}/v1/{}", spec::GROUP, spec::PLURAL);
    client
        .expect(
            Method::POST,
            CRDS_PATH,
            Some(spec::crd(fields, 0).to_string()),
            StatusCode::CREATED,
        )
        .await
        .context("create the CRD")?;
    client.wait_for(&served_path, StatusCode::OK).await?;
    let mut peak = kcp.rss_bytes()?;
    let started = Instant::now();
    let crds = timed(
        options.updates,
        async |n| {
            let body = spec::crd(fields, n + 1).to_string();
            client
                .expect(Method::PUT, &crd_path, Some(body), StatusCode::OK)
                .await
        },
        |n| {
            peak = peak.max(kcp.rss_bytes()?);
            if (n + 1) % 100 == 0 {
                eprintln!(
                    "{} CRD updates after {:.1} s, RSS {:.1} MiB",
                    n + 1,
                    started.elapsed().as_secs_f64(),
                    mib(kcp.rss_bytes()?)
                );
            }
            Ok(())
        },
    )
    .await
    .context("CRD updates")?;
    client.wait_for(&served_path, StatusCode::OK).await?;
    client
        .expect(Method::DELETE, &crd_path, None, StatusCode::OK)
        .await
        .context("delete the CRD")?;
    client.wait_for(&crd_path, StatusCode::NOT_FOUND).await?;
    client.wait_for(&served_path, StatusCode::NOT_FOUND).await?;
    let settled = settle(&kcp, Duration::from_secs_f64(options.settle_seconds)).await?;
    let rss_after = kcp.rss_bytes()?;
    kcp.stop().await?;

    let growth = mib(rss_after) - mib(rss_before);
    println!(
        "kcp-bench crds: {} updates of a {:.0} KiB CRD ({fields} fields, 3 CEL rules) and of a \
         {} KiB configmap, one client, {}",
        options.updates,
        crd_size as f64 / 1024.0,
        options.size_kib,
        binary.display()
    );
    let rows = vec![
        crate::table::figures_header(),
        vec![
            "CRD updates, each a distinct spec".into(),
            crds.cell(),
            format!(
                "configmap updates: {} ({:.2}x)",
                configmaps.cell(),
                crds.rate() / configmaps.rate()
            ),
            String::new(),
        ],
        vec![
            "RSS after the CRD's updates and delete".into(),
            format!("{growth:+.1} MiB"),
            format!(
                "{:.1} MiB before (at start {:.1}), {:.1} MiB peak, {:.1} MiB after \
                 (settled in {:.0} s)",
                mib(rss_before),
                mib(rss_start),
                mib(peak),
                mib(rss_after),
                settled.as_secs_f64()
            ),
            verdict(
                growth <= MEMORY_TARGET_MIB,
                format!("after - before <= {MEMORY_TARGET_MIB:.0} MiB"),
            ),
        ],
    ];
    print!("{}", table::render(&rows));
    Ok(())
}

/// Reads the server's RSS every second until it has not fallen by a MiB for
/// [`QUIET_READINGS`] readings in a row, for at most `max`; answers how long that took.
async fn settle(kcp: &KcpProcess, max: Duration) -> anyhow::Result<Duration> {
    let began = Instant::now();
    let mut lowest = kcp.rss_bytes()?;
    let mut quiet = 0;
    while quiet < QUIET_READINGS && began.elapsed() < max {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = kcp.rss_bytes()?;
        if now.saturating_add(MIB) <= lowest {
            quiet = 0;
        } else {
            quiet += 1;
        }
        lowest = lowest.min(now);
    }
    Ok(began.elapsed())
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configmaps_weigh_the_size_and_differ_per_revision() {
        let one: serde_json::Value = serde_json::from_str(&configmap(1024, 1)).unwrap();
        let two: serde_json::Value = serde_json::from_str(&configmap(1024, 2)).unwrap();
        assert_eq!(one["data"]["value"].as_str().unwrap().len(), 1024);
        assert_ne!(one["data"], two["data"]);
    }

    #[tokio::test]
    async fn timed_counts_every_request_and_runs_after_each() {
        let mut sent = Vec::new();
        let mut seen = 0;
        let measured = timed(
            3,
            async |n| {
                sent.push(n);
                Ok(())
            },
            |_| {
                seen += 1;
                Ok(())
            },
        )
        .await
        .unwrap();
        assert_eq!((measured.ops, sent, seen), (3, vec![0, 1, 2], 3));
        assert_eq!(measured.latency.len(), 3);
    }
}
