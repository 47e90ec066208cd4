//! `kcp-bench admission`: what admission webhooks, admission policies and the audit log cost a
//! write, on the real `kcp` binary.
//!
//! Creates of 1 KiB configmaps (`--writers` clients, default 1 and 8), each cell in three
//! rounds alternating which goes first (the round with the median ratio is reported), against
//! the same creates in a workspace without any:
//! - a validating webhook on configmaps (an HTTPS server in this process that allows
//!   everything): target ≥ 0.5x, and p99 added ≤ 2 ms with one writer;
//! - a ValidatingAdmissionPolicy with three CEL rules, bound with Deny: target ≥ 0.8x;
//! - the audit log at level Metadata (a second server with `--audit-policy-file`, writing to a
//!   file), against the same creates on the first server: target ≥ 0.9x.
//!
//! Each cell also shows kcp's CPU time per create with and without (steadier than rates on a
//! noisy machine, where the client and the webhook share the cores with the server).
//!
//! Memory: kcp's RSS after creating `--configurations` (default 1,000) validating webhook
//! configurations in one workspace (their webhooks on secrets, never called) and a write there
//! that reads them all, over before: target ≤ 8 KiB each.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use base64::Engine;
use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::Full;
use serde_json::{Value, json};

use crate::api::client::{Protocol, Target};
use crate::api::kcp_process::{self, KcpProcess};
use crate::api::load::{self, MakeRequest};
use crate::api::verdict;
use crate::measure::Measured;
use crate::table;
use crate::watches::create;
use crate::workspaces::follow::Follower;
use crate::workspaces::tree::Planned;

const ROUNDS: usize = 3;
const WEBHOOK_RATIO_TARGET: f64 = 0.5;
const WEBHOOK_P99_ADDED_TARGET_MS: f64 = 2.0;
const POLICY_RATIO_TARGET: f64 = 0.8;
const AUDIT_RATIO_TARGET: f64 = 0.9;
const MEMORY_PER_CONFIGURATION_TARGET_KIB: f64 = 8.0;

#[derive(clap::Args)]
pub struct Options {
    /// Seconds each measurement runs.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Concurrent writers.
    #[arg(long, value_delimiter = ',', default_value = "1,8")]
    writers: Vec<usize>,
    /// Webhook configurations for the memory figure.
    #[arg(long, default_value_t = 1000)]
    configurations: usize,
    /// The kcp binary (default: `kcp` next to this executable, i.e. target/release/kcp).
    #[arg(long)]
    kcp_binary: Option<PathBuf>,
}

/// A server and what requests to it need.
struct Server {
    process: KcpProcess,
    target: Target,
    authorization: Arc<String>,
}

async fn start(binary: &Path, root: &Path, args: &[&str]) -> anyhow::Result<Server> {
    let process = KcpProcess::start_with(binary, root, args).await?;
    let ca_pem = std::fs::read(root.join("ca.crt")).context("read the kcp CA")?;
    let token = kcp_testing::kubeconfig::admin_token(root, "kcp-admin");
    let target = Target::new(
        SocketAddr::from((Ipv4Addr::LOCALHOST, process.port)),
        &ca_pem,
    )?;
    Ok(Server {
        process,
        target,
        authorization: Arc::new(format!("Bearer {}", token.trim())),
    })
}

impl Server {
    /// Creates `names` under root and waits until they are Ready.
    async fn workspaces(&self, root: &Path, names: &[&str]) -> anyhow::Result<()> {
        let wildcard = crate::workspaces::wildcard_authorization(root);
        let mut follower = Follower::start(&self.target, &wildcard).await?;
        let planned: Vec<Planned> = names
            .iter()
            .map(|name| Planned {
                parent: "root".into(),
                name: name.to_string(),
            })
            .collect();
        crate::workspaces::create_level(&self.target, &self.authorization, 4, &planned).await?;
        let wanted = planned.len();
        tokio::time::timeout(
            Duration::from_secs(60),
            follower.wait(|s| s.ready >= wanted),
        )
        .await
        .context("workspaces did not become Ready")??;
        follower.stop();
        Ok(())
    }

    async fn create(&self, path: &str, body: Value) -> anyhow::Result<()> {
        let mut connection = self.target.connect(Protocol::Http1).await?;
        create(&mut connection, &self.authorization, path, body.to_string()).await
    }

    /// Creates configmaps in `cluster` until one is answered 201 (admission configurations
    /// take effect once the server has seen them).
    async fn first_create(&self, cluster: &str) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut connection = self.target.connect(Protocol::Http1).await?;
        let path = configmaps(cluster);
        for i in 0.. {
            let request = connection
                .authorized(Method::POST, &path, self.authorization.as_str())
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(crate::api::configmap_json(
                    &format!("warm-{i}"),
                    16,
                ))))?;
            if connection
                .expect(request, StatusCode::CREATED)
                .await
                .is_ok()
            {
                return Ok(());
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "no create went through in {cluster}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// Creates in `cluster` for `duration`, and the server's CPU time per create (µs).
    async fn drive(
        &self,
        cluster: &str,
        writers: usize,
        duration: Duration,
    ) -> anyhow::Result<(Measured, f64)> {
        let cpu = self.process.cpu_seconds()?;
        let measured = load::drive(
            &self.target,
            Protocol::Http1,
            writers,
            duration,
            StatusCode::CREATED,
            creates(configmaps(cluster), Arc::clone(&self.authorization)),
        )
        .await?;
        let used = self.process.cpu_seconds()? - cpu;
        let per = used * 1e6 / measured.ops.max(1) as f64;
        Ok((measured, per))
    }
}

fn configmaps(cluster: &str) -> String {
    format!("/clusters/{cluster}/api/v1/namespaces/default/configmaps")
}

/// Creates of 1 KiB configmaps, a new name each (unique per run through `RUN`).
fn creates(path: String, authorization: Arc<String>) -> MakeRequest {
    let run = fastrand::u64(..);
    Arc::new(move |connection, worker, n| {
        connection
            .authorized(Method::POST, &path, authorization.as_str())
            .header(http::header::CONTENT_TYPE, "application/json")
            .header(http::header::ACCEPT, "application/json")
            .body(Full::new(Bytes::from(crate::api::configmap_json(
                &format!("b-{run:x}-{worker}-{n}"),
                1024,
            ))))
            .expect("a valid request")
    })
}

/// A validating webhook configuration calling `url` for `resource` creates.
fn webhook_configuration(name: &str, url: &str, ca: &str, resource: &str) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": format!("{name}.bench.example.com"),
            "clientConfig": {"url": url, "caBundle": ca},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": [resource]}],
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }],
    })
}

/// Baseline and measured cells in alternating rounds; the median-ratio round.
async fn alternate(
    label: &str,
    mut baseline: impl AsyncFnMut() -> anyhow::Result<(Measured, f64)>,
    mut measured: impl AsyncFnMut() -> anyhow::Result<(Measured, f64)>,
) -> anyhow::Result<(f64, (Measured, f64), (Measured, f64))> {
    let mut rounds = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS {
        let (base, them) = if round % 2 == 0 {
            let base = baseline().await?;
            (base, measured().await?)
        } else {
            let them = measured().await?;
            (baseline().await?, them)
        };
        eprintln!(
            "{label}, round {}: {} ({:.0} µs CPU) | without {} ({:.0} µs CPU)",
            round + 1,
            them.0.cell(),
            them.1,
            base.0.cell(),
            base.1
        );
        rounds.push((them.0.rate() / base.0.rate(), them, base));
    }
    rounds.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(rounds.swap_remove(ROUNDS / 2))
}

fn p99_ms(measured: &Measured) -> f64 {
    measured.latency.value_at_quantile(0.99) as f64 / 1000.0
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    let binary = kcp_process::locate_binary(options.kcp_binary.as_deref())?;
    let duration = Duration::from_secs_f64(options.seconds);
    let dir = tempfile::tempdir()?;

    // The webhook: allows everything.
    let certificate = kcp_testing::https::certificate();
    let handler: kcp_testing::https::Handler = Arc::new(|_, review: Value| {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
               "response": {"uid": review["request"]["uid"], "allowed": true}})
    });
    let (hook_address, _hook) = kcp_testing::https::serve(
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        &certificate,
        handler,
    )
    .await;
    let ca = base64::engine::general_purpose::STANDARD.encode(&certificate.ca_pem);
    let url = format!("https://{hook_address}/validate");

    let root = dir.path().join("kcp");
    let kcp = start(&binary, &root, &[]).await?;
    kcp.workspaces(&root, &["plain", "webhooked", "policed", "configured"])
        .await?;
    kcp.create(
        "/clusters/root:webhooked/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        webhook_configuration("allow", &url, &ca, "configmaps"),
    )
    .await?;
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "three-rules"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}]},
            "validations": [
                {"expression": "object.metadata.name.size() < 64"},
                {"expression": "!has(object.metadata.labels) || !('forbidden' in object.metadata.labels)"},
                {"expression": "!has(object.data) || object.data.all(k, k.size() < 32)"},
            ],
        },
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "three-rules"},
        "spec": {"policyName": "three-rules", "validationActions": ["Deny"]},
    });
    let policies = "/clusters/root:policed/apis/admissionregistration.k8s.io/v1";
    kcp.create(&format!("{policies}/validatingadmissionpolicies"), policy)
        .await?;
    kcp.create(
        &format!("{policies}/validatingadmissionpolicybindings"),
        binding,
    )
    .await?;
    for cluster in ["root:plain", "root:webhooked", "root:policed"] {
        kcp.first_create(cluster).await?;
    }

    // The audited server.
    let policy_file = dir.path().join("audit-policy.yaml");
    std::fs::write(
        &policy_file,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
    )?;
    let audit_log = dir.path().join("audit.log");
    let audited_root = dir.path().join("kcp-audited");
    let audited = start(
        &binary,
        &audited_root,
        &[
            "--audit-policy-file",
            policy_file.to_str().context("a UTF-8 path")?,
            "--audit-log-path",
            audit_log.to_str().context("a UTF-8 path")?,
        ],
    )
    .await?;
    audited.workspaces(&audited_root, &["plain"]).await?;
    audited.first_create("root:plain").await?;

    let mut rows = vec![vec![
        "workload".to_string(),
        "with".to_string(),
        "without".to_string(),
        "ratio".to_string(),
        "p99 added".to_string(),
        "kcp CPU/create".to_string(),
        "target".to_string(),
    ]];
    for &writers in &options.writers {
        let cells: [(&str, &Server, &str, f64); 3] = [
            (
                "validating webhook",
                &kcp,
                "root:webhooked",
                WEBHOOK_RATIO_TARGET,
            ),
            (
                "VAP, 3 CEL rules",
                &kcp,
                "root:policed",
                POLICY_RATIO_TARGET,
            ),
            (
                "audit at Metadata",
                &audited,
                "root:plain",
                AUDIT_RATIO_TARGET,
            ),
        ];
        for (what, server, cluster, ratio_target) in cells {
            let label = format!("create configmap, {what}, {writers} writer(s)");
            let (ratio, (with, with_cpu), (without, without_cpu)) = alternate(
                &label,
                async || kcp.drive("root:plain", writers, duration).await,
                async || server.drive(cluster, writers, duration).await,
            )
            .await?;
            let added = p99_ms(&with) - p99_ms(&without);
            let mut target = verdict(ratio >= ratio_target, format!(">= {ratio_target:.1}x"));
            if what == "validating webhook" && writers == 1 {
                let met = added <= WEBHOOK_P99_ADDED_TARGET_MS;
                target.push_str(&format!(
                    "; {}",
                    verdict(
                        met,
                        format!("p99 added <= {WEBHOOK_P99_ADDED_TARGET_MS} ms")
                    )
                ));
            }
            rows.push(vec![
                label,
                with.cell(),
                without.cell(),
                format!("{ratio:.2}x"),
                format!("{added:+.2} ms"),
                format!("{with_cpu:.0} vs {without_cpu:.0} µs"),
                target,
            ]);
        }
    }
    audited.process.stop().await?;

    // Memory per webhook configuration.
    let before = kcp.process.rss_bytes()?;
    let clients = 8;
    let queue = Arc::new(std::sync::Mutex::new(
        (0..options.configurations).collect::<Vec<_>>(),
    ));
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let mut connection = kcp.target.connect(Protocol::Http1).await?;
        let (queue, authorization) = (Arc::clone(&queue), Arc::clone(&kcp.authorization));
        let (url, ca) = (url.clone(), ca.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let Some(i) = queue.lock().unwrap_or_else(|e| e.into_inner()).pop() else {
                    return anyhow::Ok(());
                };
                let configuration = webhook_configuration(&format!("c-{i:05}"), &url, &ca, "secrets");
                create(
                    &mut connection,
                    &authorization,
                    "/clusters/root:configured/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                    configuration.to_string(),
                )
                .await?;
            }
        }));
    }
    for task in tasks {
        task.await??;
    }
    // Wait until a write there has read them all (its configmap is created once the server
    // has seen the last configuration), then let the allocator settle.
    kcp.first_create("root:configured").await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    kcp.first_create("root:configured").await?;
    let after = kcp.process.rss_bytes()?;
    let per = after.saturating_sub(before) as f64 / 1024.0 / options.configurations.max(1) as f64;
    rows.push(vec![
        format!(
            "RSS per webhook configuration ({} in one workspace)",
            options.configurations
        ),
        format!("{per:.1} KiB"),
        String::new(),
        String::new(),
        String::new(),
        String::new(),
        verdict(
            per <= MEMORY_PER_CONFIGURATION_TARGET_KIB,
            format!("<= {MEMORY_PER_CONFIGURATION_TARGET_KIB} KiB"),
        ),
    ]);
    kcp.process.stop().await?;
    println!(
        "kcp-bench admission: {}, {:.1} s per cell, median of {ROUNDS} alternating rounds, same run",
        binary.display(),
        options.seconds
    );
    print!("{}", table::render(&rows));
    Ok(())
}
