//! `kcp-bench api`: the real `kcp` binary against baselines run in the same command.
//!
//! - GET of one 1 KiB configmap over kept-alive TLS, against a bare hyper + rustls server
//!   ([`bare_server`]) answering the very same bytes, both driven by the same client
//!   ([`client`]) at each concurrency (one connection per worker). Target: kcp ≥ 50% of bare.
//! - Creates: POSTs of 1 KiB configmaps at each concurrency, against raw creates in the embedded
//!   store (`RedbStorage`, same value size, same disk). Target: kcp ≥ 50% of the store.
//! - Custom resource creates: POSTs of a custom resource whose CRD has a 30-field schema and 3
//!   CEL rules ([`custom`]), against configmap creates at the same concurrency in the same run.
//!   Target: ≥ 70% of configmap creates.
//! - Server-side apply ([`apply`]): applies of a 50-field configmap against merge patches of
//!   the same document (target ≥ 50%), and GETs of it with managedFields against GETs without
//!   (target ≥ 95%).
//! - Idle RSS 1 s after the first start (target ≤ 30 MiB) and spawn-to-"ready to serve" time on a
//!   fresh root and on restarts (target ≤ 300 ms).
//!
//! It runs the `kcp` binary next to its own executable: build it first with
//! `cargo build --release -p kcp` (or pass `--kcp-binary`).

mod apply;
pub(crate) mod bare_server;
pub(crate) mod client;
mod custom;
pub(crate) mod kcp_process;
pub(crate) mod load;
pub(crate) mod paged;

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::Full;
use kcp_storage::Storage;
use kcp_storage_redb::RedbStorage;

use crate::measure::Measured;
use crate::table;
use bare_server::BareServer;
use client::{Protocol, Target};
use kcp_process::KcpProcess;

/// kcp's throughput as a share of its baseline's, at least.
const RATIO_TARGET: f64 = 0.5;
/// Custom resource creates as a share of configmap creates, at least.
const CUSTOM_RATIO_TARGET: f64 = 0.7;
/// Resident memory when idle after start, at most.
const IDLE_RSS_TARGET_MIB: f64 = 30.0;
/// Spawn to ready, at most.
const START_TARGET: Duration = Duration::from_millis(300);

/// The API prefix of the logical cluster the admin kubeconfig points at.
const CLUSTER_PREFIX: &str = "/clusters/root";
const NAMESPACE: &str = "default";
const GET_NAME: &str = "bench-get";

#[derive(clap::Args)]
pub struct Options {
    /// Seconds each measurement runs.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Connection counts for GETs.
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    get_concurrency: Vec<usize>,
    /// Protocols for GETs.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "http1,h2")]
    protocols: Vec<Protocol>,
    /// Concurrent creators (connections for kcp, tasks for the store).
    #[arg(long, value_delimiter = ',', default_value = "1,16,64")]
    create_concurrency: Vec<usize>,
    /// Concurrent creators of custom resources (each against configmap creates).
    #[arg(long, value_delimiter = ',', default_value = "16")]
    custom_concurrency: Vec<usize>,
    /// Concurrent appliers (each against merge patches at the same concurrency).
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    apply_concurrency: Vec<usize>,
    /// Protocol for creates.
    #[arg(long, value_enum, default_value = "http1")]
    create_protocol: Protocol,
    /// Bytes of configmap data.
    #[arg(long, default_value_t = 1024)]
    value_size: usize,
    /// Restarts on the same root whose start-to-ready times are measured (the median is shown).
    #[arg(long, default_value_t = 3)]
    restarts: usize,
    /// The kcp binary (default: `kcp` next to this executable, i.e. target/release/kcp).
    #[arg(long)]
    kcp_binary: Option<PathBuf>,
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    let binary = kcp_process::locate_binary(options.kcp_binary.as_deref())?;
    let duration = Duration::from_secs_f64(options.seconds);
    // kcp's root and the raw store in one directory: same disk, same fsync.
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("kcp");
    let mut rows = vec![vec![
        "workload".to_string(),
        "kcp".to_string(),
        "baseline".to_string(),
        "kcp/baseline".to_string(),
        "target".to_string(),
    ]];

    // Start-up on a fresh root, then idle memory, then restarts on the same root.
    let mut kcp = KcpProcess::start(&binary, &root).await?;
    let fresh_start = kcp.start_to_ready;
    eprintln!("fresh start to ready: {fresh_start:?}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle_rss = mib(kcp.rss_bytes()?);
    eprintln!("idle RSS: {idle_rss:.1} MiB");
    let mut restarts = Vec::new();
    for _ in 0..options.restarts {
        kcp.stop().await?;
        kcp = KcpProcess::start(&binary, &root).await?;
        restarts.push(kcp.start_to_ready);
    }
    restarts.sort();
    eprintln!("restarts to ready: {restarts:?}");

    let ca_pem = std::fs::read(root.join("ca.crt")).context("read the kcp CA")?;
    // The shard admin (`system:masters`): exempt from the per-user in-flight share, which
    // 64 writers of one user would exceed (429s), as kube-apiserver exempts it.
    let token = kcp_testing::kubeconfig::admin_token(&root, "shard-admin");
    let authorization = Arc::new(format!("Bearer {}", token.trim()));
    let kcp_target = Target::new(SocketAddr::from((Ipv4Addr::LOCALHOST, kcp.port)), &ca_pem)?;

    // GET: kcp, then the bare server with kcp's exact answer.
    let (body, content_type) = prepare_get(&kcp_target, &authorization, options.value_size).await?;
    let bare = BareServer::start(&root, body.clone(), content_type)?;
    let bare_target = Target::new(bare.address, &ca_pem)?;
    let get_path = format!("{CLUSTER_PREFIX}/api/v1/namespaces/{NAMESPACE}/configmaps/{GET_NAME}");
    for &protocol in &options.protocols {
        for &concurrency in &options.get_concurrency {
            let make = load::gets(get_path.clone(), Arc::clone(&authorization));
            let label = format!("GET configmap, {}, {concurrency} conn", protocol.label());
            let on_kcp = load::drive(
                &kcp_target,
                protocol,
                concurrency,
                duration,
                StatusCode::OK,
                Arc::clone(&make),
            )
            .await
            .with_context(|| format!("{label} on kcp"))?;
            let on_bare = load::drive(
                &bare_target,
                protocol,
                concurrency,
                duration,
                StatusCode::OK,
                make,
            )
            .await
            .with_context(|| format!("{label} on the bare server"))?;
            rows.push(ratio_row(label, &on_kcp, "bare hyper+rustls", &on_bare));
        }
    }
    drop(bare);

    // Creates: kcp against the raw embedded store.
    let raw_store: Arc<dyn Storage> = Arc::new(RedbStorage::open(&dir.path().join("raw.redb"))?);
    let value = Bytes::from(configmap_json("bench-raw-value", options.value_size));
    for (cell, &concurrency) in options.create_concurrency.iter().enumerate() {
        let make: load::MakeRequest = {
            let authorization = Arc::clone(&authorization);
            let path = format!("{CLUSTER_PREFIX}/api/v1/namespaces/{NAMESPACE}/configmaps");
            let value_size = options.value_size;
            Arc::new(move |connection, worker, n| {
                let name = format!("bench-create-{cell}-{worker}-{n}");
                connection
                    .authorized(Method::POST, &path, authorization.as_str())
                    .header(http::header::ACCEPT, "application/json")
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(Full::new(Bytes::from(configmap_json(&name, value_size))))
                    .expect("a valid request")
            })
        };
        let writers = if concurrency == 1 {
            "writer"
        } else {
            "writers"
        };
        let label = format!("create configmap, {concurrency} {writers}");
        let on_kcp = load::drive(
            &kcp_target,
            options.create_protocol,
            concurrency,
            duration,
            StatusCode::CREATED,
            make,
        )
        .await
        .with_context(|| format!("{label} on kcp"))?;
        let on_store = crate::storage::writes(&raw_store, concurrency, duration, &value)
            .await
            .with_context(|| format!("{label} on the raw store"))?;
        rows.push(ratio_row(label, &on_kcp, "redb create", &on_store));
    }

    // Custom resources against configmaps, cell by cell in the same run.
    custom::install(&kcp_target, &authorization, CLUSTER_PREFIX).await?;
    for &concurrency in &options.custom_concurrency {
        let creates = |path: String, body: fn(&str, u64) -> String, tag: &'static str| {
            let authorization = Arc::clone(&authorization);
            let make: load::MakeRequest = Arc::new(move |connection, worker, n| {
                let name = format!("bench-{tag}-{concurrency}-{worker}-{n}");
                connection
                    .authorized(Method::POST, &path, authorization.as_str())
                    .header(http::header::ACCEPT, "application/json")
                    .header(http::header::CONTENT_TYPE, "application/json")
                    .body(Full::new(Bytes::from(body(&name, n))))
                    .expect("a valid request")
            });
            make
        };
        let label =
            format!("create custom resource (30 fields, 3 CEL rules), {concurrency} writers");
        let on_custom = load::drive(
            &kcp_target,
            options.create_protocol,
            concurrency,
            duration,
            StatusCode::CREATED,
            creates(
                format!("{CLUSTER_PREFIX}{}", custom::PLURAL_PATH),
                custom::sample_json,
                "cr",
            ),
        )
        .await
        .with_context(|| format!("{label} on kcp"))?;
        let on_configmaps = load::drive(
            &kcp_target,
            options.create_protocol,
            concurrency,
            duration,
            StatusCode::CREATED,
            creates(
                format!("{CLUSTER_PREFIX}/api/v1/namespaces/{NAMESPACE}/configmaps"),
                |name, _| configmap_json(name, 1024),
                "cm",
            ),
        )
        .await
        .with_context(|| format!("{label}: configmaps on kcp"))?;
        let ratio = on_custom.rate() / on_configmaps.rate();
        eprintln!(
            "{label}: {} | configmaps {}",
            on_custom.cell(),
            on_configmaps.cell()
        );
        rows.push(vec![
            label,
            on_custom.cell(),
            format!("kcp configmap create: {}", on_configmaps.cell()),
            format!("{ratio:.2}x"),
            verdict(
                ratio >= CUSTOM_RATIO_TARGET,
                format!(">= {CUSTOM_RATIO_TARGET:.2}x"),
            ),
        ]);
    }
    apply::run(
        &kcp_target,
        &authorization,
        &options.apply_concurrency,
        duration,
        &|| kcp.cpu_seconds(),
        &mut rows,
    )
    .await?;
    let peak_rss = mib(kcp.peak_rss_bytes()?);
    let rss_after = mib(kcp.rss_bytes()?);
    kcp.stop().await?;

    rows.push(limit_row(
        "idle RSS, 1 s after ready".into(),
        format!("{idle_rss:.1} MiB"),
        idle_rss <= IDLE_RSS_TARGET_MIB,
        format!("<= {IDLE_RSS_TARGET_MIB:.0} MiB"),
    ));
    rows.push(vec![
        "RSS after the load (peak)".into(),
        format!("{rss_after:.1} MiB ({peak_rss:.1} MiB)"),
    ]);
    rows.push(limit_row(
        "start to ready, fresh root".into(),
        millis(fresh_start),
        fresh_start <= START_TARGET,
        format!("<= {} ms", START_TARGET.as_millis()),
    ));
    if let Some(median) = restarts.get(restarts.len() / 2) {
        rows.push(limit_row(
            format!("start to ready, restart (median of {})", restarts.len()),
            millis(*median),
            *median <= START_TARGET,
            format!("<= {} ms", START_TARGET.as_millis()),
        ));
    }

    println!(
        "kcp-bench api: {} with a {} B configmap, {:.1} s per cell, root and raw store in {}, same run",
        binary.display(),
        options.value_size,
        options.seconds,
        dir.path().display()
    );
    print!("{}", table::render(&rows));
    Ok(())
}

/// Creates the configmap the GETs read and returns kcp's answer to a GET of it, with its
/// content type, for the bare server to repeat.
async fn prepare_get(
    target: &Target,
    authorization: &str,
    value_size: usize,
) -> anyhow::Result<(Bytes, String)> {
    let mut connection = target.connect(Protocol::Http1).await?;
    let create = connection
        .authorized(
            Method::POST,
            &format!("{CLUSTER_PREFIX}/api/v1/namespaces/{NAMESPACE}/configmaps"),
            authorization,
        )
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(configmap_json(GET_NAME, value_size))))?;
    connection
        .expect(create, StatusCode::CREATED)
        .await
        .context("create the configmap to GET")?;
    let get = connection
        .authorized(
            Method::GET,
            &format!("{CLUSTER_PREFIX}/api/v1/namespaces/{NAMESPACE}/configmaps/{GET_NAME}"),
            authorization,
        )
        .header(http::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::new()))?;
    let answer = connection.expect(get, StatusCode::OK).await?;
    let object: serde_json::Value = serde_json::from_slice(&answer.body)?;
    let data = object["data"]["value"].as_str().unwrap_or_default();
    anyhow::ensure!(data.len() == value_size, "GET {GET_NAME}: unexpected data");
    let content_type = answer
        .content_type
        .unwrap_or_else(|| "application/json".to_string());
    Ok((answer.body, content_type))
}

/// A ConfigMap named `name` with `value_size` bytes under `data.value`.
pub(crate) fn configmap_json(name: &str, value_size: usize) -> String {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"value": "x".repeat(value_size)},
    })
    .to_string()
}

fn ratio_row(label: String, kcp: &Measured, baseline: &str, base: &Measured) -> Vec<String> {
    let ratio = kcp.rate() / base.rate();
    eprintln!("{label}: kcp {} | {baseline} {}", kcp.cell(), base.cell());
    vec![
        label,
        kcp.cell(),
        format!("{baseline}: {}", base.cell()),
        format!("{ratio:.2}x"),
        verdict(ratio >= RATIO_TARGET, format!(">= {RATIO_TARGET:.2}x")),
    ]
}

fn limit_row(label: String, value: String, met: bool, target: String) -> Vec<String> {
    vec![
        label,
        value,
        String::new(),
        String::new(),
        verdict(met, target),
    ]
}

pub(crate) fn verdict(met: bool, target: String) -> String {
    format!("{target}: {}", if met { "met" } else { "MISSED" })
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn millis(duration: Duration) -> String {
    format!("{:.0} ms", duration.as_secs_f64() * 1000.0)
}
