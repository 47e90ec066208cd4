//! `kcp-bench apis`: API sharing on the real `kcp` binary.
//!
//! - A provider workspace exports `widgets`; `--consumers` (default 1,000) workspaces bind it,
//!   8 clients creating the APIBindings. Binding rate: bindings over the time from the first
//!   create until every binding is Bound (target ≥ 200/s; baseline: the same clients creating
//!   as many configmaps). Memory: kcp's RSS after over before, per binding (target ≤ 16 KiB).
//! - One watch of every consumer's widgets through the export's virtual workspace
//!   (`/services/apiexport/<cluster>/widgets/clusters/*`); `--events` (default 1,000) widget
//!   creates in random consumers at `--rate` (default 200) a second; each delivery's latency
//!   from its create's send (target p99 ≤ 20 ms; baseline: the creates' own latency).
//! - A LIST of one consumer's `--objects` (default 500) widgets through the virtual workspace
//!   against the same LIST in the workspace, alternating, `--lists` (default 200) each
//!   (target ≥ 0.8x).

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::Full;
use serde_json::{Value, json};

use crate::api::client::{Connection, Protocol, Target, current_revision};
use crate::api::kcp_process::{self, KcpProcess};
use crate::api::verdict;
use crate::measure::new_histogram;
use crate::table;
use crate::watches::{Sent, create, follow, open};
use crate::workspaces::follow::Follower;
use crate::workspaces::tree::Planned;

const BINDINGS_PER_SECOND_TARGET: f64 = 200.0;
const MEMORY_PER_BINDING_TARGET_KIB: f64 = 16.0;
const DELIVERY_TARGET: Duration = Duration::from_millis(20);
const LIST_RATIO_TARGET: f64 = 0.8;
const WRITERS: usize = 8;

#[derive(clap::Args)]
pub struct Options {
    /// Workspaces binding the export.
    #[arg(long, default_value_t = 1000)]
    consumers: usize,
    /// Widgets created while the virtual workspace's watch runs.
    #[arg(long, default_value_t = 1000)]
    events: usize,
    /// Creates per second.
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    /// Widgets in the consumer whose LIST is compared.
    #[arg(long, default_value_t = 500)]
    objects: usize,
    /// LISTs of each kind.
    #[arg(long, default_value_t = 200)]
    lists: usize,
    /// The kcp binary (default: `kcp` next to this executable, i.e. target/release/kcp).
    #[arg(long)]
    kcp_binary: Option<PathBuf>,
}

fn schema() -> Value {
    json!({
        "apiVersion": "apis.kcp.io/v1alpha1", "kind": "APIResourceSchema",
        "metadata": {"name": "v1.widgets.example.io"},
        "spec": {
            "group": "example.io", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {
                        "size": {"type": "integer", "minimum": 1, "default": 3},
                        "color": {"type": "string"}}},
                    "status": {"type": "object", "properties": {"seen": {"type": "boolean"}}}}}
            }]
        }
    })
}

fn widget(name: &str) -> String {
    json!({
        "apiVersion": "example.io/v1", "kind": "Widget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"color": "red", "size": 2}
    })
    .to_string()
}

async fn get_json(
    connection: &mut Connection,
    authorization: &str,
    path: &str,
) -> anyhow::Result<Value> {
    let request = connection
        .authorized(Method::GET, path, authorization)
        .header(http::header::ACCEPT, "application/json")
        .body(Full::new(Bytes::new()))?;
    let answer = connection.expect(request, StatusCode::OK).await?;
    Ok(serde_json::from_slice(&answer.body)?)
}

/// Creates `bodies` (path, JSON) with [`WRITERS`] clients; answers when all are created.
async fn create_all(
    target: &Target,
    authorization: &Arc<String>,
    bodies: Vec<(String, String)>,
) -> anyhow::Result<()> {
    let bodies = Arc::new(bodies);
    let mut writers = tokio::task::JoinSet::new();
    for worker in 0..WRITERS {
        let (target, authorization, bodies) = (
            target.clone(),
            Arc::clone(authorization),
            Arc::clone(&bodies),
        );
        writers.spawn(async move {
            let mut connection = target.connect(Protocol::Http1).await?;
            for (path, body) in bodies.iter().skip(worker).step_by(WRITERS) {
                create(&mut connection, &authorization, path, body.clone()).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = writers.join_next().await {
        done??;
    }
    Ok(())
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    anyhow::ensure!(options.consumers > 0 && options.events > 0, "nothing to do");
    let binary = kcp_process::locate_binary(options.kcp_binary.as_deref())?;
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("kcp");
    let kcp = KcpProcess::start_with(&binary, &root, &["--max-watches-per-user", "0"]).await?;
    let ca_pem = std::fs::read(root.join("ca.crt")).context("read the kcp CA")?;
    let token = kcp_testing::kubeconfig::admin_token(&root, "kcp-admin");
    let authorization = Arc::new(format!("Bearer {}", token.trim()));
    let wildcard = crate::workspaces::wildcard_authorization(&root);
    let target = Target::new(SocketAddr::from((Ipv4Addr::LOCALHOST, kcp.port)), &ca_pem)?;

    // The provider and the consumers.
    let began = Instant::now();
    let mut follower = Follower::start(&target, &wildcard).await?;
    let mut planned = vec![Planned {
        parent: "root".into(),
        name: "provider".into(),
    }];
    planned.extend((0..options.consumers).map(|i| Planned {
        parent: "root".into(),
        name: format!("c-{i:05}"),
    }));
    crate::workspaces::create_level(&target, &authorization, 10, &planned).await?;
    let wanted = planned.len();
    tokio::time::timeout(
        Duration::from_secs(600),
        follower.wait(|seen| seen.ready >= wanted),
    )
    .await
    .context("workspaces did not become Ready")??;
    follower.stop();
    let consumers: Vec<String> = planned[1..].iter().map(Planned::path).collect();
    eprintln!(
        "{} workspaces in {:.1} s",
        wanted,
        began.elapsed().as_secs_f64()
    );

    // The export.
    let mut connection = target.connect(Protocol::Http1).await?;
    let provider = "root:provider";
    create(
        &mut connection,
        &authorization,
        &format!("/clusters/{provider}/apis/apis.kcp.io/v1alpha1/apiresourceschemas"),
        schema().to_string(),
    )
    .await?;
    let export = json!({
        "apiVersion": "apis.kcp.io/v1alpha2", "kind": "APIExport",
        "metadata": {"name": "widgets"},
        "spec": {"resources": [{"group": "example.io", "name": "widgets",
                                "schema": "v1.widgets.example.io", "storage": {"crd": {}}}]}
    });
    let exports = format!("/clusters/{provider}/apis/apis.kcp.io/v1alpha2/apiexports");
    create(
        &mut connection,
        &authorization,
        &exports,
        export.to_string(),
    )
    .await?;
    let deadline = Instant::now() + Duration::from_secs(30);
    let provider_cluster = loop {
        let export = get_json(
            &mut connection,
            &authorization,
            &format!("{exports}/widgets"),
        )
        .await?;
        if export["status"]["identityHash"].is_string() {
            break export["metadata"]["annotations"]["kcp.io/cluster"]
                .as_str()
                .context("the export's cluster")?
                .to_string();
        }
        anyhow::ensure!(Instant::now() < deadline, "the export got no identity");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };

    // The bindings, against as many configmap creates by the same clients.
    let baseline: Vec<(String, String)> = consumers
        .iter()
        .enumerate()
        .map(|(i, path)| {
            (
                format!("/clusters/{path}/api/v1/namespaces/default/configmaps"),
                crate::api::configmap_json(&format!("baseline-{i}"), 256),
            )
        })
        .collect();
    let started = Instant::now();
    create_all(&target, &authorization, baseline).await?;
    let baseline_rate = consumers.len() as f64 / started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let rss_before = kcp.rss_bytes()?;
    let bindings: Vec<(String, String)> = consumers
        .iter()
        .map(|path| {
            let binding = json!({
                "apiVersion": "apis.kcp.io/v1alpha2", "kind": "APIBinding",
                "metadata": {"name": "widgets"},
                "spec": {"reference": {"export": {"path": provider, "name": "widgets"}}}
            });
            (
                format!("/clusters/{path}/apis/apis.kcp.io/v1alpha2/apibindings"),
                binding.to_string(),
            )
        })
        .collect();
    let started = Instant::now();
    create_all(&target, &authorization, bindings).await?;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let list = get_json(
            &mut connection,
            &wildcard,
            "/clusters/*/apis/apis.kcp.io/v1alpha2/apibindings",
        )
        .await?;
        let bound = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| b["status"]["phase"] == "Bound")
            .count();
        if bound >= consumers.len() {
            break;
        }
        anyhow::ensure!(Instant::now() < deadline, "{bound} bindings Bound");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let binding_rate = consumers.len() as f64 / started.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let rss_after = kcp.rss_bytes()?;
    let per_binding_kib =
        rss_after.saturating_sub(rss_before) as f64 / 1024.0 / consumers.len() as f64;

    // One watch through the virtual workspace, events in random consumers.
    let view = format!("/services/apiexport/{provider_cluster}/widgets");
    let revision = current_revision(&target, &authorization).await?.to_string();
    let mut watch_connection = target.connect(Protocol::H2).await?;
    let body = open(
        &mut watch_connection,
        &authorization,
        &format!("{view}/clusters/*/apis/example.io/v1/widgets"),
        &revision,
    )
    .await?;
    let sent: Sent = Arc::new(Mutex::new(HashMap::new()));
    let deadline = Instant::now()
        + Duration::from_secs_f64(options.events as f64 / options.rate)
        + Duration::from_secs(60);
    let watcher = tokio::spawn(follow(body, Arc::clone(&sent), options.events, deadline));
    let consumers = Arc::new(consumers);
    let start = Instant::now();
    let mut writers = tokio::task::JoinSet::new();
    for worker in 0..WRITERS {
        let (target, authorization, consumers, sent) = (
            target.clone(),
            Arc::clone(&authorization),
            Arc::clone(&consumers),
            Arc::clone(&sent),
        );
        let (events, rate) = (options.events, options.rate);
        writers.spawn(async move {
            let mut connection = target.connect(Protocol::Http1).await?;
            let mut latency = new_histogram();
            for i in (worker..events).step_by(WRITERS) {
                let due = start + Duration::from_secs_f64(i as f64 / rate);
                tokio::time::sleep_until(due.into()).await;
                let name = format!("event-{i:07}");
                let path = format!(
                    "/clusters/{}/apis/example.io/v1/namespaces/default/widgets",
                    consumers[fastrand::usize(..consumers.len())]
                );
                let began = Instant::now();
                sent.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(name.clone(), began);
                create(&mut connection, &authorization, &path, widget(&name)).await?;
                latency.saturating_record(began.elapsed().as_micros() as u64);
            }
            anyhow::Ok(latency)
        });
    }
    let mut writes = new_histogram();
    while let Some(done) = writers.join_next().await {
        writes.add(done??)?;
    }
    let delivered = watcher.await??;
    let repeated = delivered.names.values().filter(|n| **n > 1).count();
    anyhow::ensure!(repeated == 0, "{repeated} deliveries repeated");
    drop(watch_connection);

    // A LIST through the view against the same LIST in the workspace.
    let listed = &consumers[0];
    let cluster = {
        let answer = get_json(
            &mut connection,
            &authorization,
            &format!(
                "/clusters/root/apis/tenancy.kcp.io/v1alpha1/workspaces/{}",
                &listed["root:".len()..]
            ),
        )
        .await?;
        answer["spec"]["cluster"]
            .as_str()
            .context("a cluster")?
            .to_string()
    };
    let objects: Vec<(String, String)> = (0..options.objects)
        .map(|i| {
            (
                format!("/clusters/{listed}/apis/example.io/v1/namespaces/default/widgets"),
                widget(&format!("listed-{i:05}")),
            )
        })
        .collect();
    create_all(&target, &authorization, objects).await?;
    let direct = format!("/clusters/{cluster}/apis/example.io/v1/widgets");
    let through_view = format!("{view}/clusters/{cluster}/apis/example.io/v1/widgets");
    let (mut direct_time, mut view_time) = (Duration::ZERO, Duration::ZERO);
    for round in 0..options.lists * 2 {
        let (path, total) = match round % 2 {
            0 => (&direct, &mut direct_time),
            _ => (&through_view, &mut view_time),
        };
        let began = Instant::now();
        let list = get_json(&mut connection, &authorization, path).await?;
        *total += began.elapsed();
        anyhow::ensure!(
            list["items"].as_array().map_or(0, Vec::len) >= options.objects,
            "a LIST of {path} came short"
        );
    }
    kcp.stop().await?;

    let ms = |micros: u64| format!("{:.1} ms", micros as f64 / 1000.0);
    let p99 = delivered.latency.value_at_quantile(0.99);
    let list_ratio = direct_time.as_secs_f64() / view_time.as_secs_f64();
    let per_list = |total: Duration| {
        format!(
            "{:.2} ms",
            total.as_secs_f64() * 1000.0 / options.lists as f64
        )
    };
    let rows = vec![
        table::figures_header(),
        vec![
            format!("{} APIBindings to Bound", options.consumers),
            format!("{binding_rate:.0}/s"),
            format!("configmap creates: {baseline_rate:.0}/s"),
            verdict(
                binding_rate >= BINDINGS_PER_SECOND_TARGET,
                format!(">= {BINDINGS_PER_SECOND_TARGET:.0}/s"),
            ),
        ],
        vec![
            "RSS per binding".into(),
            format!("{per_binding_kib:.1} KiB"),
            String::new(),
            verdict(
                per_binding_kib <= MEMORY_PER_BINDING_TARGET_KIB,
                format!("<= {MEMORY_PER_BINDING_TARGET_KIB:.0} KiB"),
            ),
        ],
        vec![
            format!(
                "{} widget creates at {}/s, one virtual workspace watch: p50 / p99 / max",
                options.events, options.rate
            ),
            format!(
                "{} / {} / {}",
                ms(delivered.latency.value_at_quantile(0.5)),
                ms(p99),
                ms(delivered.latency.max())
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
        vec![
            format!(
                "LIST of {} widgets through the virtual workspace",
                options.objects
            ),
            format!("{list_ratio:.2}x ({} each)", per_list(view_time)),
            format!("in the workspace: {} each", per_list(direct_time)),
            verdict(
                list_ratio >= LIST_RATIO_TARGET,
                format!(">= {LIST_RATIO_TARGET}x"),
            ),
        ],
    ];
    print!("{}", table::render(&rows));
    Ok(())
}
