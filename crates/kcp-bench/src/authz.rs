//! `kcp-bench authz`: what authorization costs a request, on the real `kcp` binary.
//!
//! One server with a token file. The namespace `default` of root holds `--bindings` (default
//! 100) RoleBindings to the bootstrap ClusterRole `view`, each for another user, and last the
//! one for the measured user `reader`. Then GETs of one 1 KiB configmap, each cell in three
//! rounds alternating who goes first (the round with the median ratio is reported): as the
//! admin (`shard-admin`, `system:masters`, no RBAC evaluated) and as `reader` (root's access
//! rule, then RBAC over every binding). Target: the reader's throughput ≥ 90% of the admin's.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::Full;
use serde_json::json;

use crate::api::client::{Connection, Protocol, Target};
use crate::api::kcp_process::{self, KcpProcess};
use crate::api::{configmap_json, load, verdict};
use crate::table;

/// Alternating rounds per cell.
const ROUNDS: usize = 3;
/// The reader's GET throughput as a share of the admin's, at least.
const RATIO_TARGET: f64 = 0.9;
const READER_TOKEN: &str = "bench-reader-token";
const CONFIGMAPS: &str = "/clusters/root/api/v1/namespaces/default/configmaps";
const ROLE_BINDINGS: &str =
    "/clusters/root/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings";

#[derive(clap::Args)]
pub struct Options {
    /// Seconds each measurement runs.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Connection counts.
    #[arg(long, value_delimiter = ',', default_value = "1,16")]
    concurrency: Vec<usize>,
    /// RoleBindings in the namespace (the reader's is the last).
    #[arg(long, default_value_t = 100)]
    bindings: usize,
    /// The kcp binary (default: `kcp` next to this executable, i.e. target/release/kcp).
    #[arg(long)]
    kcp_binary: Option<PathBuf>,
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    let binary = kcp_process::locate_binary(options.kcp_binary.as_deref())?;
    let duration = Duration::from_secs_f64(options.seconds);
    let dir = tempfile::tempdir()?;
    let tokens = dir.path().join("tokens.csv");
    std::fs::write(&tokens, format!("{READER_TOKEN},reader,2001\n"))?;
    let root = dir.path().join("kcp");
    let tokens = tokens.to_string_lossy().into_owned();
    let kcp = KcpProcess::start_with(&binary, &root, &["--token-auth-file", &tokens]).await?;
    let ca_pem = std::fs::read(root.join("ca.crt")).context("read the kcp CA")?;
    let token = kcp_testing::kubeconfig::admin_token(&root, "shard-admin");
    let admin = format!("Bearer {}", token.trim());
    let reader = format!("Bearer {READER_TOKEN}");
    let target = Target::new(SocketAddr::from((Ipv4Addr::LOCALHOST, kcp.port)), &ca_pem)?;

    // The configmap, then the bindings, the reader's last.
    let mut connection = target.connect(Protocol::Http1).await?;
    let create = |connection: &Connection, path: &str, body: String| {
        connection
            .request(Method::POST, path)
            .header(http::header::AUTHORIZATION, admin.as_str())
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(body)))
    };
    let request = create(&connection, CONFIGMAPS, configmap_json("bench-get", 1024))?;
    connection.expect(request, StatusCode::CREATED).await?;
    for i in 0..=options.bindings {
        let user = match i == options.bindings {
            true => "reader".to_string(),
            false => format!("user-{i}"),
        };
        let binding = json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": format!("view-{user}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        });
        let request = create(&connection, ROLE_BINDINGS, binding.to_string())?;
        connection
            .expect(request, StatusCode::CREATED)
            .await
            .context("create a RoleBinding")?;
    }
    // The reader may read now (its first request builds root's policy).
    let path = format!("{CONFIGMAPS}/bench-get");
    let request = connection
        .request(Method::GET, &path)
        .header(http::header::AUTHORIZATION, reader.as_str())
        .body(Full::new(Bytes::new()))?;
    connection
        .expect(request, StatusCode::OK)
        .await
        .context("the reader's first GET")?;

    let mut rows = vec![vec![
        "workload".to_string(),
        "reader (RBAC)".to_string(),
        "admin (system:masters)".to_string(),
        "reader/admin".to_string(),
        "target".to_string(),
    ]];
    for &concurrency in &options.concurrency {
        let get = |authorization: String| -> load::MakeRequest {
            let path = path.clone();
            Arc::new(move |connection, _, _| {
                connection
                    .request(Method::GET, &path)
                    .header(http::header::AUTHORIZATION, authorization.as_str())
                    .header(http::header::ACCEPT, "application/json")
                    .body(Full::new(Bytes::new()))
                    .expect("a valid request")
            })
        };
        let label = format!(
            "GET configmap, {} RoleBindings, {concurrency} conn",
            options.bindings + 1
        );
        // Rounds alternating who goes first, so drift in the machine's speed falls on both;
        // the round with the median ratio is reported.
        let mut rounds = Vec::with_capacity(ROUNDS);
        for round in 0..ROUNDS {
            let drive = |authorization: &String| {
                load::drive(
                    &target,
                    Protocol::Http1,
                    concurrency,
                    duration,
                    StatusCode::OK,
                    get(authorization.clone()),
                )
            };
            let (as_admin, as_reader) = if round % 2 == 0 {
                let as_admin = drive(&admin).await;
                (as_admin, drive(&reader).await)
            } else {
                let as_reader = drive(&reader).await;
                (drive(&admin).await, as_reader)
            };
            let as_admin = as_admin.with_context(|| format!("{label} as the admin"))?;
            let as_reader = as_reader.with_context(|| format!("{label} as the reader"))?;
            eprintln!(
                "{label}, round {}: reader {} | admin {}",
                round + 1,
                as_reader.cell(),
                as_admin.cell()
            );
            rounds.push((as_reader.rate() / as_admin.rate(), as_reader, as_admin));
        }
        rounds.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (ratio, as_reader, as_admin) = rounds.swap_remove(ROUNDS / 2);
        rows.push(vec![
            label,
            as_reader.cell(),
            as_admin.cell(),
            format!("{ratio:.2}x"),
            verdict(ratio >= RATIO_TARGET, format!(">= {RATIO_TARGET:.2}x")),
        ]);
    }
    kcp.stop().await?;
    println!(
        "kcp-bench authz: {}, {:.1} s per cell, median of {ROUNDS} alternating rounds, same run",
        binary.display(),
        options.seconds
    );
    print!("{}", table::render(&rows));
    Ok(())
}
