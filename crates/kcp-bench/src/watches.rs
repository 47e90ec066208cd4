//! `kcp-bench watches`: many watches over many workspaces on the real `kcp` binary.
//!
//! - `--workspaces` (default 1,000) workspaces under root, each with `--namespaces` (default
//!   10) namespaces (`default` and `ns-1`...), all Ready before anything is measured.
//! - One watch of configmaps per workspace and namespace (10,000 by default) plus
//!   `--wildcard` (default 10) watches at `/clusters/*`, all from the current revision, over
//!   HTTP/2 connections of up to 90 streams each (as client-go multiplexes them).
//! - Memory: kcp's RSS after the watches are open and idle, over its RSS before, per watch.
//!   Target ≤ 8 KiB.
//! - Delivery: `--events` (default 2,000) configmap creates in random workspaces and
//!   namespaces, `--rate` (default 1,000) a second from 8 writers; each event goes to its
//!   namespace's watcher and to every wildcard watcher. A delivery's latency runs from the
//!   moment the create was sent to the moment the watcher read the event. Every delivery is
//!   checked: none may be missing or repeated. Target: p99 ≤ 20 ms. The same run's baseline:
//!   the creates' own latency (acknowledged writes, each durable before its answer).

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::{Buf, Bytes, BytesMut};
use hdrhistogram::Histogram;
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Full};

use crate::api::client::{Connection, Protocol, Target, current_revision};
use crate::api::kcp_process::{self, KcpProcess};
use crate::api::verdict;
use crate::measure::new_histogram;
use crate::table;
use crate::workspaces::follow::Follower;
use crate::workspaces::tree::Planned;

/// Memory per idle watch, at most.
const MEMORY_TARGET_KIB: f64 = 8.0;
/// p99 of event delivery, at most.
const DELIVERY_TARGET: Duration = Duration::from_millis(20);
/// Watches per HTTP/2 connection (kcp allows 100 streams).
const STREAMS_PER_CONNECTION: usize = 90;
/// The ConfigMap the server makes in every namespace.
const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";
const WRITERS: usize = 8;

#[derive(clap::Args)]
pub struct Options {
    /// Workspaces under root.
    #[arg(long, default_value_t = 1000)]
    workspaces: usize,
    /// Namespaces per workspace, each with a watch.
    #[arg(long, default_value_t = 10)]
    namespaces: usize,
    /// Watches of every workspace at once.
    #[arg(long, default_value_t = 10)]
    wildcard: usize,
    /// Configmaps created while the watches run.
    #[arg(long, default_value_t = 2000)]
    events: usize,
    /// Creates per second.
    #[arg(long, default_value_t = 1000.0)]
    rate: f64,
    /// The kcp binary (default: `kcp` next to this executable, i.e. target/release/kcp).
    #[arg(long)]
    kcp_binary: Option<PathBuf>,
}

fn namespace(n: usize) -> String {
    if n == 0 {
        "default".into()
    } else {
        format!("ns-{n}")
    }
}

/// When each event's create was sent, by configmap name.
pub(crate) type Sent = Arc<Mutex<HashMap<String, Instant>>>;

/// What one watcher saw: delivery latencies, and how often each name came.
pub(crate) struct Delivered {
    pub(crate) latency: Histogram<u64>,
    pub(crate) names: HashMap<String, u32>,
}

/// Reads a watch until `expected` events came (or the deadline), noting each one's latency.
pub(crate) async fn follow(
    mut body: hyper::body::Incoming,
    sent: Sent,
    expected: usize,
    deadline: Instant,
) -> anyhow::Result<Delivered> {
    let mut delivered = Delivered {
        latency: new_histogram(),
        names: HashMap::new(),
    };
    let mut buffer = BytesMut::new();
    let mut count = 0;
    while count < expected {
        let frame = tokio::time::timeout_at(deadline.into(), body.frame())
            .await
            .with_context(|| format!("{count} of {expected} events came"))?;
        let Some(frame) = frame else {
            anyhow::bail!("a watch ended after {count} of {expected} events");
        };
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        let now = Instant::now();
        buffer.extend_from_slice(&data);
        while let Some(end) = buffer.iter().position(|b| *b == b'\n') {
            let line = buffer.split_to(end + 1);
            let name = name_of(line.chunk()).context("an event without a name")?;
            let at = sent
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .get(&name)
                .copied();
            let at = at.with_context(|| format!("an event of {name}, which was not written"))?;
            delivered
                .latency
                .saturating_record(now.saturating_duration_since(at).as_micros() as u64);
            *delivered.names.entry(name).or_default() += 1;
            count += 1;
        }
    }
    Ok(delivered)
}

/// The object's name in a watch event line (the first `"name"`, metadata's).
fn name_of(line: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(line).ok()?;
    let at = text.find("\"name\":\"")? + "\"name\":\"".len();
    let end = text[at..].find('"')?;
    Some(text[at..at + end].to_string())
}

/// Opens a watch of `path` on `connection` from `revision`.
pub(crate) async fn open(
    connection: &mut Connection,
    authorization: &str,
    path: &str,
    revision: &str,
) -> anyhow::Result<hyper::body::Incoming> {
    let request = connection
        .authorized(
            Method::GET,
            &format!("{path}?watch=true&resourceVersion={revision}&timeoutSeconds=3600"),
            authorization,
        )
        .header(http::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::new()))?;
    let (status, body) = connection.stream(request).await?;
    anyhow::ensure!(status == StatusCode::OK, "watch {path}: {status}");
    Ok(body)
}

/// POSTs `body` to `path`, requiring 201.
pub(crate) async fn create(
    connection: &mut Connection,
    authorization: &str,
    path: &str,
    body: String,
) -> anyhow::Result<()> {
    let request = connection
        .authorized(Method::POST, path, authorization)
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body)))?;
    connection.expect(request, StatusCode::CREATED).await?;
    Ok(())
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    anyhow::ensure!(
        options.workspaces > 0 && options.namespaces > 0 && options.events > 0,
        "nothing to do"
    );
    let binary = kcp_process::locate_binary(options.kcp_binary.as_deref())?;
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("kcp");
    // One identity holds every watch here, where real ones come from many: no per-user cap.
    let kcp = KcpProcess::start_with(&binary, &root, &["--max-watches-per-user", "0"]).await?;
    let ca_pem = std::fs::read(root.join("ca.crt")).context("read the kcp CA")?;
    let token = kcp_testing::kubeconfig::admin_token(&root, "kcp-admin");
    let authorization = Arc::new(format!("Bearer {}", token.trim()));
    let wildcard = crate::workspaces::wildcard_authorization(&root);
    let target = Target::new(SocketAddr::from((Ipv4Addr::LOCALHOST, kcp.port)), &ca_pem)?;

    // The workspaces and their namespaces.
    let began = Instant::now();
    let mut follower = Follower::start(&target, &wildcard).await?;
    let workspaces: Vec<Planned> = (0..options.workspaces)
        .map(|i| Planned {
            parent: "root".into(),
            name: format!("w-{i:05}"),
        })
        .collect();
    crate::workspaces::create_level(&target, &authorization, 10, &workspaces).await?;
    let wanted = options.workspaces;
    tokio::time::timeout(
        Duration::from_secs(600),
        follower.wait(|seen| seen.ready >= wanted),
    )
    .await
    .context("workspaces did not become Ready")??;
    follower.stop();
    let paths: Arc<Vec<String>> = Arc::new(workspaces.iter().map(Planned::path).collect());
    let mut creators = tokio::task::JoinSet::new();
    for worker in 0..WRITERS {
        let (target, authorization, paths) = (
            target.clone(),
            Arc::clone(&authorization),
            Arc::clone(&paths),
        );
        let namespaces = options.namespaces;
        creators.spawn(async move {
            let mut connection = target.connect(Protocol::Http1).await?;
            for path in paths.iter().skip(worker).step_by(WRITERS) {
                for n in 1..namespaces {
                    let body = serde_json::json!({
                        "apiVersion": "v1", "kind": "Namespace",
                        "metadata": {"name": namespace(n)},
                    });
                    create(
                        &mut connection,
                        &authorization,
                        &format!("/clusters/{path}/api/v1/namespaces"),
                        body.to_string(),
                    )
                    .await
                    .with_context(|| format!("namespace {n} of {path}"))?;
                }
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = creators.join_next().await {
        done??;
    }
    eprintln!(
        "{} workspaces with {} namespaces each in {:.1} s",
        options.workspaces,
        options.namespaces,
        began.elapsed().as_secs_f64()
    );

    // The watches, from the current revision once the server has made its own ConfigMap in
    // every namespace: from before, every wildcard watch would first replay all of them.
    wait_for_root_ca_configmaps(&target, &wildcard, paths.len(), options.namespaces).await;
    let revision = current_revision(&target, &authorization).await?.to_string();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let rss_before = kcp.rss_bytes()?;
    let mut paths_to_watch: Vec<(Option<(usize, usize)>, String)> = Vec::new();
    for (w, path) in paths.iter().enumerate() {
        for n in 0..options.namespaces {
            paths_to_watch.push((
                Some((w, n)),
                format!(
                    "/clusters/{path}/api/v1/namespaces/{}/configmaps",
                    namespace(n)
                ),
            ));
        }
    }
    for _ in 0..options.wildcard {
        paths_to_watch.push((None, "/clusters/*/api/v1/configmaps".into()));
    }
    let opening = Instant::now();
    let mut watches = Vec::new();
    let mut connections = Vec::new();
    for chunk in paths_to_watch.chunks(STREAMS_PER_CONNECTION) {
        let mut connection = target.connect(Protocol::H2).await?;
        for (scope, path) in chunk {
            // Across workspaces as the shard admin, as kcp allows only that.
            let who = match scope {
                Some(_) => &authorization,
                None => &wildcard,
            };
            let body = open(&mut connection, who, path, &revision).await?;
            watches.push((*scope, body));
        }
        connections.push(connection);
    }
    let watch_count = watches.len();
    eprintln!(
        "{watch_count} watches open in {:.1} s over {} connections",
        opening.elapsed().as_secs_f64(),
        connections.len()
    );
    tokio::time::sleep(Duration::from_secs(6)).await;
    let rss_idle = kcp.rss_bytes()?;
    let per_watch_kib = rss_idle.saturating_sub(rss_before) as f64 / 1024.0 / watch_count as f64;

    // The events: where each goes, decided up front so every watcher knows what to expect.
    let plan: Vec<(usize, usize)> = (0..options.events)
        .map(|_| {
            (
                fastrand::usize(..options.workspaces),
                fastrand::usize(..options.namespaces),
            )
        })
        .collect();
    let mut expected_per_scope: HashMap<(usize, usize), usize> = HashMap::new();
    for scope in &plan {
        *expected_per_scope.entry(*scope).or_default() += 1;
    }
    let sent: Sent = Arc::new(Mutex::new(HashMap::new()));
    let deadline = Instant::now()
        + Duration::from_secs_f64(options.events as f64 / options.rate)
        + Duration::from_secs(60);
    let mut followers = tokio::task::JoinSet::new();
    for (scope, body) in watches {
        let expected = match scope {
            Some(scope) => expected_per_scope.get(&scope).copied().unwrap_or(0),
            None => options.events,
        };
        let sent = Arc::clone(&sent);
        followers.spawn(async move { follow(body, sent, expected, deadline).await });
    }
    let plan = Arc::new(plan);
    let start = Instant::now();
    let mut writers = tokio::task::JoinSet::new();
    for worker in 0..WRITERS {
        let (target, authorization, paths, plan, sent) = (
            target.clone(),
            Arc::clone(&authorization),
            Arc::clone(&paths),
            Arc::clone(&plan),
            Arc::clone(&sent),
        );
        let rate = options.rate;
        writers.spawn(async move {
            let mut connection = target.connect(Protocol::Http1).await?;
            let mut latency = new_histogram();
            for (i, (w, n)) in plan.iter().enumerate().skip(worker).step_by(WRITERS) {
                // Paced: event i goes out at i / rate seconds.
                let due = start + Duration::from_secs_f64(i as f64 / rate);
                tokio::time::sleep_until(due.into()).await;
                let name = format!("event-{i:07}");
                let body = crate::api::configmap_json(&name, 256);
                let path = format!(
                    "/clusters/{}/api/v1/namespaces/{}/configmaps",
                    paths[*w],
                    namespace(*n)
                );
                let began = Instant::now();
                sent.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(name, began);
                create(&mut connection, &authorization, &path, body).await?;
                latency.saturating_record(began.elapsed().as_micros() as u64);
            }
            anyhow::Ok(latency)
        });
    }
    let mut writes = new_histogram();
    while let Some(done) = writers.join_next().await {
        writes.add(done??)?;
    }
    let mut deliveries = new_histogram();
    let mut repeated = 0usize;
    while let Some(done) = followers.join_next().await {
        let delivered = done??;
        deliveries.add(&delivered.latency)?;
        repeated += delivered.names.values().filter(|n| **n > 1).count();
    }
    let missing =
        (options.events * (1 + options.wildcard)).saturating_sub(deliveries.len() as usize);
    anyhow::ensure!(
        missing == 0 && repeated == 0,
        "{missing} deliveries missing, {repeated} repeated"
    );
    drop(connections);
    kcp.stop().await?;

    let ms = |micros: u64| format!("{:.1} ms", micros as f64 / 1000.0);
    let p99 = deliveries.value_at_quantile(0.99);
    let rows = vec![
        vec![
            "workload".into(),
            "kcp".into(),
            "baseline".into(),
            "target".into(),
        ],
        vec![
            format!(
                "{watch_count} idle watches over {} workspaces, RSS per watch",
                options.workspaces
            ),
            format!("{per_watch_kib:.1} KiB"),
            String::new(),
            verdict(
                per_watch_kib <= MEMORY_TARGET_KIB,
                format!("<= {MEMORY_TARGET_KIB:.0} KiB"),
            ),
        ],
        vec![
            format!(
                "{} events at {}/s, {} deliveries: p50 / p99 / max from send",
                options.events,
                options.rate,
                deliveries.len()
            ),
            format!(
                "{} / {} / {}",
                ms(deliveries.value_at_quantile(0.5)),
                ms(p99),
                ms(deliveries.max())
            ),
            format!(
                "the creates: {} / {}",
                ms(writes.value_at_quantile(0.5)),
                ms(writes.value_at_quantile(0.99))
            ),
            verdict(
                Duration::from_micros(p99) <= DELIVERY_TARGET,
                format!("p99 <= {} ms", DELIVERY_TARGET.as_millis()),
            ),
        ],
    ];
    println!("kcp-bench watches: {}, same run", binary.display());
    println!("{}", table::render(&rows));
    Ok(())
}

/// Waits (at most a minute) until each of the `namespaces` watched namespaces of the
/// `workspaces` benchmark workspaces holds the server's [`ROOT_CA_CONFIGMAP`], and so none of
/// them is made later, in sight of the watches.
async fn wait_for_root_ca_configmaps(
    target: &Target,
    authorization: &str,
    workspaces: usize,
    namespaces: usize,
) {
    let expected = workspaces * namespaces;
    let watched: std::collections::HashSet<String> = (0..namespaces).map(namespace).collect();
    let path =
        format!("/clusters/*/api/v1/configmaps?fieldSelector=metadata.name%3D{ROOT_CA_CONFIGMAP}");
    let made = async || -> anyhow::Result<usize> {
        let mut connection = target.connect(Protocol::Http1).await?;
        let request = connection
            .authorized(Method::GET, &path, authorization)
            .body(Full::new(Bytes::new()))?;
        let answer = connection.expect(request, StatusCode::OK).await?;
        let list: serde_json::Value = serde_json::from_slice(&answer.body)?;
        // Not root's own namespaces, nor a workspace's kube-system.
        let counted = |item: &&serde_json::Value| {
            item["metadata"]["annotations"]["kcp.io/cluster"] != "root"
                && item["metadata"]["namespace"]
                    .as_str()
                    .is_some_and(|ns| watched.contains(ns))
        };
        Ok(list["items"]
            .as_array()
            .map_or(0, |items| items.iter().filter(counted).count()))
    };
    kcp_testing::wait::until_async_within(
        Duration::from_secs(60),
        &format!("{ROOT_CA_CONFIGMAP} in all {expected} namespaces"),
        async || match made().await {
            Ok(made) if made == expected => Ok(()),
            Ok(made) => Err(format!("{made} of {expected}")),
            Err(error) => Err(error.to_string()),
        },
    )
    .await;
}
