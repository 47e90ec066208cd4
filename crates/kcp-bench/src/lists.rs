//! `kcp-bench lists`: one LIST of a large collection on the real `kcp` binary, against a bare
//! TLS server sending the very same bytes.
//!
//! - `--objects` (default 100,000) configmaps with `--value-size` (default 1,024) bytes of data
//!   are created in `default` through the API, 16 connections at once.
//! - Then GETs of the whole collection (no limit, JSON, no gzip), each on a new HTTP/1.1
//!   connection, the body read as fast as the client can, each after 6 s idle (the server
//!   gives freed memory back within seconds): a first, cold one (the store's 64 MiB page cache
//!   still holds the writes), then `--rounds` (default 3) warm ones. kcp's RSS is read every few
//!   milliseconds meanwhile: a list's growth is its peak during the list over its RSS just
//!   before. The target is on the warm lists' largest growth; the cold one's is shown (it also
//!   fills the page cache).
//! - The baseline, in the same run: the bare hyper+rustls server (`api::bare_server`, kcp's own
//!   certificate and runtime size) answering every GET with the bytes of kcp's first answer,
//!   read the same way. The Kubernetes-world baseline would be nginx serving them as a static
//!   file; the bare server is the cheaper of the two, so the ratio is conservative.
//! - The same collection paged as client-go's reflectors read it: `limit=500` and each page's
//!   continue token, on one connection, `--rounds` times (shown, against the bare server's
//!   whole list).
//! - Memory given back: kcp's RSS idle before the creates, at its peak during them, and 6 s
//!   after them; and before the lists and 6 s after them (shown).
//! - Reported: the median list time of each (kcp's warm lists) and kcp's throughput as a share
//!   of the baseline's (target ≥ 25%), the RSS growth during kcp's lists (target ≤ 64 MiB), and
//!   kcp's RSS once the lists are done and a few seconds have passed (memory given back).

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Full};

use crate::api::bare_server::BareServer;
use crate::api::client::{Protocol, Target};
use crate::api::kcp_process::{self, KcpProcess, read_status_kib};
use crate::api::paged::{PAGE_LIMIT, paged};
use crate::api::verdict;
use crate::measure::median;
use crate::table;

/// kcp's list throughput as a share of the baseline's, at least.
const THROUGHPUT_TARGET: f64 = 0.25;
/// Growth of kcp's RSS during a list, at most.
const GROWTH_TARGET_MIB: f64 = 64.0;
const MIB: f64 = 1024.0 * 1024.0;
/// What the names of the configmaps created here start with.
const NAME_PREFIX: &str = "list-";
const LIST_PATH: &str = "/clusters/root/api/v1/namespaces/default/configmaps";

#[derive(clap::Args)]
pub struct Options {
    /// Configmaps in the listed collection.
    #[arg(long, default_value_t = 100_000)]
    objects: usize,
    /// Bytes of data per configmap.
    #[arg(long, default_value_t = 1024)]
    value_size: usize,
    /// Warm lists of each server (the median is reported), after one cold list of kcp.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// The kcp binary (default: `kcp` next to this executable, i.e. target/release/kcp).
    #[arg(long)]
    kcp_binary: Option<PathBuf>,
}

/// One list as the client read it.
struct Read {
    took: Duration,
    body: Bytes,
}

/// GETs `path` on a new connection and reads the whole body.
async fn list(target: &Target, authorization: &str, path: &str) -> anyhow::Result<Read> {
    let mut connection = target.connect(Protocol::Http1).await?;
    let request = connection
        .authorized(Method::GET, path, authorization)
        .header(http::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::new()))?;
    let began = Instant::now();
    let (status, body) = connection.stream(request).await?;
    anyhow::ensure!(status == StatusCode::OK, "GET {path}: {status}");
    let body = body.collect().await?.to_bytes();
    Ok(Read {
        took: began.elapsed(),
        body,
    })
}

/// Reads `pid`'s RSS every few milliseconds until dropped; answers the peak seen.
struct RssSampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl RssSampler {
    fn start(pid: u32) -> RssSampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(0));
        let (stopping, highest) = (Arc::clone(&stop), Arc::clone(&peak));
        let task = tokio::spawn(async move {
            while !stopping.load(Ordering::Relaxed) {
                if let Ok(kib) = read_status_kib(pid, "VmRSS:") {
                    highest.fetch_max(kib * 1024, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
        });
        RssSampler { stop, peak, task }
    }

    async fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        self.peak.load(Ordering::Relaxed)
    }
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    anyhow::ensure!(options.rounds > 0 && options.objects > 0, "nothing to do");
    let binary = kcp_process::locate_binary(options.kcp_binary.as_deref())?;
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("kcp");
    let kcp = KcpProcess::start(&binary, &root).await?;
    let pid = kcp.pid()?;
    let ca_pem = std::fs::read(root.join("ca.crt")).context("read the kcp CA")?;
    let token = kcp_testing::kubeconfig::admin_token(&root, "kcp-admin");
    let authorization = format!("Bearer {}", token.trim());
    let target = Target::new(SocketAddr::from((Ipv4Addr::LOCALHOST, kcp.port)), &ca_pem)?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let rss_idle = kcp.rss_bytes()?;
    let peak_before_writes = RssSampler::start(pid);

    let began = Instant::now();
    let workers = 16;
    let mut creators = tokio::task::JoinSet::new();
    for worker in 0..workers {
        let (target, authorization) = (target.clone(), authorization.clone());
        let (objects, size) = (options.objects, options.value_size);
        creators.spawn(async move {
            let mut connection = target.connect(Protocol::Http1).await?;
            for i in (worker..objects).step_by(workers) {
                let body = crate::api::configmap_json(&format!("{NAME_PREFIX}{i:07}"), size);
                let request = connection
                    .authorized(Method::POST, LIST_PATH, authorization.as_str())
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(Full::new(Bytes::from(body)))?;
                connection.expect(request, StatusCode::CREATED).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(result) = creators.join_next().await {
        result?.context("create the listed configmaps")?;
    }
    eprintln!(
        "created {} configmaps in {:.1} s",
        options.objects,
        began.elapsed().as_secs_f64()
    );

    let writes_peak = peak_before_writes.finish().await;
    let mut kcp_times = Vec::new();
    let (mut cold_growth, mut growth) = (0u64, 0u64);
    let mut body = Bytes::new();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let rss_before_lists = kcp.rss_bytes()?;
    for round in 0..=options.rounds {
        tokio::time::sleep(Duration::from_secs(6)).await;
        let before = kcp.rss_bytes()?;
        let sampler = RssSampler::start(pid);
        let read = list(&target, &authorization, LIST_PATH).await?;
        let peak = sampler.finish().await;
        let grown = peak.saturating_sub(before);
        eprintln!(
            "kcp list {round}: {} bytes in {:.0} ms, RSS {:.1} MiB before, peak {:.1} MiB",
            read.body.len(),
            read.took.as_secs_f64() * 1000.0,
            before as f64 / MIB,
            peak as f64 / MIB
        );
        if round == 0 {
            cold_growth = grown;
        } else {
            growth = growth.max(grown);
            kcp_times.push(read.took);
        }
        body = read.body;
    }
    // Besides those created here, the namespace holds what the server keeps in every one
    // (the ConfigMap kube-root-ca.crt).
    let whole: serde_json::Value = serde_json::from_slice(&body).context("the list is JSON")?;
    let whole = whole["items"].as_array().map_or(&[][..], Vec::as_slice);
    let listed = whole.len();
    let items = whole
        .iter()
        .filter(|item| {
            item["metadata"]["name"]
                .as_str()
                .is_some_and(|name| name.starts_with(NAME_PREFIX))
        })
        .count();
    anyhow::ensure!(
        items == options.objects,
        "the list has {items} of the configmaps created, not {}",
        options.objects
    );
    tokio::time::sleep(Duration::from_secs(6)).await;
    let rss_after_lists = kcp.rss_bytes()?;
    let mut paged_reads = Vec::new();
    for _ in 0..options.rounds {
        let read = paged(&target, &authorization, LIST_PATH).await?;
        anyhow::ensure!(
            read.items == listed,
            "the pages hold {} objects, the list {listed}",
            read.items
        );
        paged_reads.push(read);
    }
    paged_reads.sort_by_key(|read| read.took);
    let paged_read = &paged_reads[paged_reads.len() / 2];

    let bare = BareServer::start(&root, body.clone(), "application/json".into())?;
    let bare_target = Target::new(bare.address, &ca_pem)?;
    let mut bare_times = Vec::new();
    for _ in 0..options.rounds {
        let read = list(&bare_target, &authorization, LIST_PATH).await?;
        anyhow::ensure!(
            read.body.len() == body.len(),
            "the baseline sent other bytes"
        );
        bare_times.push(read.took);
    }
    drop(bare);
    kcp.stop().await?;

    let (kcp_time, bare_time) = (median(kcp_times), median(bare_times));
    let ratio = bare_time.as_secs_f64() / kcp_time.as_secs_f64();
    let rate = |took: Duration| {
        format!(
            "{:.0} ms, {:.0} MB/s",
            took.as_secs_f64() * 1000.0,
            body.len() as f64 / took.as_secs_f64() / 1e6
        )
    };
    let (growth_mib, cold_mib) = (growth as f64 / MIB, cold_growth as f64 / MIB);
    let rows = vec![
        vec![
            "workload".into(),
            "kcp".into(),
            "baseline".into(),
            "kcp/baseline".into(),
            "target".into(),
        ],
        vec![
            format!(
                "LIST of {} configmaps of {} B ({:.0} MB), median of {}",
                options.objects,
                options.value_size,
                body.len() as f64 / 1e6,
                options.rounds
            ),
            rate(kcp_time),
            format!("bare hyper+rustls: {}", rate(bare_time)),
            format!("{ratio:.2}x"),
            verdict(
                ratio >= THROUGHPUT_TARGET,
                format!(">= {THROUGHPUT_TARGET:.2}x"),
            ),
        ],
        vec![
            format!(
                "the same in pages of {PAGE_LIMIT} (continue tokens, one connection), median of {}",
                options.rounds
            ),
            format!(
                "{:.0} ms, {:.0} MB/s",
                paged_read.took.as_secs_f64() * 1000.0,
                paged_read.bytes as f64 / paged_read.took.as_secs_f64() / 1e6
            ),
            format!("bare hyper+rustls, whole: {}", rate(bare_time)),
            format!(
                "{:.2}x",
                bare_time.as_secs_f64() / paged_read.took.as_secs_f64()
            ),
            "(shown)".into(),
        ],
        vec![
            "kcp RSS growth during a cold list (peak over before)".into(),
            format!("{cold_mib:.1} MiB"),
            String::new(),
            String::new(),
            "(shown)".into(),
        ],
        vec![
            "kcp RSS growth during a warm list, largest".into(),
            format!("{growth_mib:.1} MiB"),
            String::new(),
            String::new(),
            verdict(
                growth_mib <= GROWTH_TARGET_MIB,
                format!("<= {GROWTH_TARGET_MIB:.0} MiB"),
            ),
        ],
        vec![
            format!(
                "kcp RSS idle, peak during the {} creates, 6 s after them",
                options.objects
            ),
            format!(
                "{:.1} MiB, {:.1} MiB, {:.1} MiB",
                rss_idle as f64 / MIB,
                writes_peak as f64 / MIB,
                rss_before_lists as f64 / MIB
            ),
            String::new(),
            String::new(),
            "(shown)".into(),
        ],
        vec![
            "kcp RSS before the lists, 6 s after them".into(),
            format!(
                "{:.1} MiB, {:.1} MiB",
                rss_before_lists as f64 / MIB,
                rss_after_lists as f64 / MIB
            ),
            String::new(),
            String::new(),
            "(shown)".into(),
        ],
    ];
    println!("kcp-bench lists: {}, same run", binary.display());
    println!("{}", table::render(&rows));
    Ok(())
}
