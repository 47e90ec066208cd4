//! `kcp-bench authz`: what authorization costs a request, on the real `kcp` binary.
//!
//! One server with a token file. The namespace `default` of root holds `--bindings` (default
//! 100) RoleBindings to the bootstrap ClusterRole `view`, each for another user, and last the
//! one for the measured user `reader`. Then GETs of one 1 KiB configmap, each cell in three
//! rounds alternating who goes first (the round with the median ratio is reported): as the
//! admin (`shard-admin`, `system:masters`, no RBAC evaluated) and as `reader` (root's access
//! rule, then RBAC over every binding). Target: the reader's throughput ≥ 90% of the admin's.
//! Also, without a target: a service account of root bound to `view` (its binding after the
//! reader's), authenticated by its token's signature and the lookups of its account.

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
const SERVICE_ACCOUNTS: &str = "/clusters/root/api/v1/namespaces/default/serviceaccounts";
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
            .authorized(Method::POST, path, admin.as_str())
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
        .authorized(Method::GET, &path, reader.as_str())
        .body(Full::new(Bytes::new()))?;
    connection
        .expect(request, StatusCode::OK)
        .await
        .context("the reader's first GET")?;

    // A service account in default, viewing it too (its binding after the reader's), and a
    // token for it: authenticated by signature and lookups rather than a digest.
    let account =
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "bench-sa"}});
    let request = create(&connection, SERVICE_ACCOUNTS, account.to_string())?;
    connection.expect(request, StatusCode::CREATED).await?;
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "view-bench-sa"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": "bench-sa", "namespace": "default"}],
    });
    let request = create(&connection, ROLE_BINDINGS, binding.to_string())?;
    connection.expect(request, StatusCode::CREATED).await?;
    let token_request =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    let request = create(
        &connection,
        &format!("{SERVICE_ACCOUNTS}/bench-sa/token"),
        token_request.to_string(),
    )?;
    let answer = connection.expect(request, StatusCode::CREATED).await?;
    let answer: serde_json::Value = serde_json::from_slice(&answer.body)?;
    let account_token = answer["status"]["token"]
        .as_str()
        .context("the TokenRequest's token")?;
    let account = format!("Bearer {account_token}");

    let mut rows = vec![vec![
        "workload".to_string(),
        "as".to_string(),
        "them".to_string(),
        "admin (system:masters)".to_string(),
        "them/admin".to_string(),
        "target".to_string(),
    ]];
    for &concurrency in &options.concurrency {
        let get = |authorization: String| load::gets(path.clone(), Arc::new(authorization));
        let label = format!(
            "GET configmap, {} RoleBindings, {concurrency} conn",
            options.bindings + 2
        );
        let subjects = [
            ("reader (token file)", &reader, Some(RATIO_TARGET)),
            ("service account (JWT)", &account, None),
        ];
        for (who, authorization, target_ratio) in subjects {
            // Rounds alternating who goes first, so drift in the machine's speed falls on
            // both; the round with the median ratio is reported.
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
                let (as_admin, as_them) = if round % 2 == 0 {
                    let as_admin = drive(&admin).await;
                    (as_admin, drive(authorization).await)
                } else {
                    let as_them = drive(authorization).await;
                    (drive(&admin).await, as_them)
                };
                let as_admin = as_admin.with_context(|| format!("{label} as the admin"))?;
                let as_them = as_them.with_context(|| format!("{label} as {who}"))?;
                eprintln!(
                    "{label}, round {}: {who} {} | admin {}",
                    round + 1,
                    as_them.cell(),
                    as_admin.cell()
                );
                rounds.push((as_them.rate() / as_admin.rate(), as_them, as_admin));
            }
            rounds.sort_by(|a, b| a.0.total_cmp(&b.0));
            let (ratio, as_them, as_admin) = rounds.swap_remove(ROUNDS / 2);
            let verdict = match target_ratio {
                Some(wanted) => verdict(ratio >= wanted, format!(">= {wanted:.2}x")),
                None => "(no target)".to_string(),
            };
            rows.push(vec![
                label.clone(),
                who.to_string(),
                as_them.cell(),
                as_admin.cell(),
                format!("{ratio:.2}x"),
                verdict,
            ]);
        }
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
