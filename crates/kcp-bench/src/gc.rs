//! `kcp-bench gc`: garbage collection on the real `kcp` binary, against a client deleting the
//! same objects itself in the same run.
//!
//! - Fan-out: `--dependents` (default 10,000) configmaps owned by one configmap. The owner is
//!   deleted (background propagation, kubectl's default); timed until the namespace holds no
//!   dependent. Baseline: as many configmaps without owners, deleted one by one by the client
//!   over 16 connections. Target: ≤ 10 s.
//! - Chains: a namespace holding `--chains` (default 200) chains of five kinds (a custom
//!   resource owning a configmap owning a secret owning a service account owning a role:
//!   1,000 objects) is deleted; timed until the namespace is gone. Baseline: a namespace with
//!   the same objects without owners, deleted the same way. Target: ≤ 5 s.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::Full;
use serde_json::{Value, json};

use crate::api::client::{Protocol, Target};
use crate::api::kcp_process::{self, KcpProcess};
use crate::api::verdict;
use crate::table;

/// Dependents of one owner collected, at most this long.
const FAN_OUT_TARGET: Duration = Duration::from_secs(10);
/// A namespace of chained objects deleted, at most this long.
const CHAINS_TARGET: Duration = Duration::from_secs(5);
/// Connections the client writes over at once.
const WORKERS: usize = 16;
/// How long anything may take before the benchmark gives up.
const GIVE_UP: Duration = Duration::from_secs(600);
const CLUSTER: &str = "/clusters/root";

#[derive(clap::Args)]
pub struct Options {
    /// Configmaps owned by one configmap.
    #[arg(long, default_value_t = 10_000)]
    dependents: usize,
    /// Chains of five objects in the deleted namespace.
    #[arg(long, default_value_t = 200)]
    chains: usize,
    /// The kcp binary (default: `kcp` next to this executable, i.e. target/release/kcp).
    #[arg(long)]
    kcp_binary: Option<PathBuf>,
}

/// The admin's requests to the root workspace.
#[derive(Clone)]
struct Admin {
    target: Target,
    authorization: String,
}

impl Admin {
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<(StatusCode, Value)> {
        let mut connection = self.target.connect(Protocol::Http1).await?;
        self.send_on(&mut connection, method, path, body).await
    }

    async fn send_on(
        &self,
        connection: &mut crate::api::client::Connection,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<(StatusCode, Value)> {
        let request = connection
            .authorized(method, &format!("{CLUSTER}{path}"), &self.authorization)
            .header(http::header::CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(
                body.map(Value::to_string).unwrap_or_default(),
            )))?;
        let answer = connection.send(request).await?;
        let value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        Ok((answer.status, value))
    }

    /// Creates `object` at `path`; answers its uid.
    async fn create(&self, path: &str, object: Value) -> anyhow::Result<String> {
        let (status, created) = self.send(Method::POST, path, Some(&object)).await?;
        anyhow::ensure!(
            status == StatusCode::CREATED,
            "POST {path}: {status}: {created}"
        );
        Ok(created["metadata"]["uid"]
            .as_str()
            .unwrap_or_default()
            .to_string())
    }

    /// Sends `requests` (method, path, body) over [`WORKERS`] connections; each must answer
    /// one of `expected`.
    async fn many(
        &self,
        requests: Vec<(Method, String, Option<Value>)>,
        expected: &'static [StatusCode],
    ) -> anyhow::Result<()> {
        let mut tasks = tokio::task::JoinSet::new();
        let mut shares: Vec<Vec<_>> = (0..WORKERS).map(|_| Vec::new()).collect();
        for (i, request) in requests.into_iter().enumerate() {
            shares[i % WORKERS].push(request);
        }
        for share in shares {
            let admin = self.clone();
            tasks.spawn(async move {
                let mut connection = admin.target.connect(Protocol::Http1).await?;
                for (method, path, body) in share {
                    let (status, answer) = admin
                        .send_on(&mut connection, method.clone(), &path, body.as_ref())
                        .await?;
                    anyhow::ensure!(
                        expected.contains(&status),
                        "{method} {path}: {status}: {answer}"
                    );
                }
                anyhow::Ok(())
            });
        }
        while let Some(done) = tasks.join_next().await {
            done??;
        }
        Ok(())
    }

    /// Waits until `done` holds of a GET of `path`; answers how long it took.
    async fn until(
        &self,
        path: &str,
        done: impl Fn(StatusCode, &Value) -> bool,
    ) -> anyhow::Result<Duration> {
        let began = Instant::now();
        let mut connection = self.target.connect(Protocol::Http1).await?;
        loop {
            let (status, answer) = self
                .send_on(&mut connection, Method::GET, path, None)
                .await?;
            if done(status, &answer) {
                return Ok(began.elapsed());
            }
            anyhow::ensure!(
                began.elapsed() < GIVE_UP,
                "GET {path}: still {status} after {GIVE_UP:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn owner_reference(api_version: &str, kind: &str, name: &str, uid: &str) -> Value {
    json!([{"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "blockOwnerDeletion": true}])
}

fn object(api_version: &str, kind: &str, name: &str, owners: Option<Value>) -> Value {
    let mut object = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": name}});
    if let Some(owners) = owners {
        object["metadata"]["ownerReferences"] = owners;
    }
    if kind == "Role" {
        object["rules"] = json!([]);
    }
    object
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    let binary = kcp_process::locate_binary(options.kcp_binary.as_deref())?;
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("kcp");
    let kcp = KcpProcess::start(&binary, &root).await?;
    let ca_pem = std::fs::read(root.join("ca.crt")).context("read the kcp CA")?;
    let token = kcp_testing::kubeconfig::admin_token(&root, "kcp-admin");
    let admin = Admin {
        target: Target::new(SocketAddr::from((Ipv4Addr::LOCALHOST, kcp.port)), &ca_pem)?,
        authorization: format!("Bearer {}", token.trim()),
    };
    for namespace in ["fan-baseline", "fan", "chains-baseline", "chains"] {
        admin
            .create(
                "/api/v1/namespaces",
                json!({"metadata": {"name": namespace}}),
            )
            .await?;
    }
    admin
        .create(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "widgets.example.com"},
                "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {"type": "object"}}}]},
            }),
        )
        .await?;
    admin
        .until(
            "/apis/example.com/v1/namespaces/chains/widgets",
            |status, _| status == StatusCode::OK,
        )
        .await?;

    // Fan-out: the client's own deletes first, then the collector's.
    let configmaps = |namespace: &str| format!("/api/v1/namespaces/{namespace}/configmaps");
    let creates = |namespace: &str, owners: Option<Value>| {
        (0..options.dependents)
            .map(|i| {
                let body = object(
                    "v1",
                    "ConfigMap",
                    &format!("dependent-{i:05}"),
                    owners.clone(),
                );
                (Method::POST, configmaps(namespace), Some(body))
            })
            .collect::<Vec<_>>()
    };
    admin
        .many(creates("fan-baseline", None), &[StatusCode::CREATED])
        .await?;
    let began = Instant::now();
    let deletes = (0..options.dependents)
        .map(|i| {
            (
                Method::DELETE,
                format!("{}/dependent-{i:05}", configmaps("fan-baseline")),
                None,
            )
        })
        .collect();
    admin.many(deletes, &[StatusCode::OK]).await?;
    let client_deletes = began.elapsed();
    let owner_uid = admin
        .create(&configmaps("fan"), object("v1", "ConfigMap", "owner", None))
        .await?;
    let owners = owner_reference("v1", "ConfigMap", "owner", &owner_uid);
    admin
        .many(creates("fan", Some(owners)), &[StatusCode::CREATED])
        .await?;
    eprintln!("created {} dependents of one owner", options.dependents);
    let began = Instant::now();
    let (status, answer) = admin
        .send(
            Method::DELETE,
            &format!("{}/owner", configmaps("fan")),
            None,
        )
        .await?;
    anyhow::ensure!(
        status == StatusCode::OK,
        "delete the owner: {status}: {answer}"
    );
    admin
        .until(&format!("{}?limit=1", configmaps("fan")), |status, list| {
            // The namespace's own kube-root-ca.crt stays (it sorts after the dependents).
            status == StatusCode::OK
                && list["items"].as_array().is_some_and(|items| {
                    items
                        .iter()
                        .all(|i| i["metadata"]["name"] == "kube-root-ca.crt")
                })
                && list["metadata"]["remainingItemCount"].as_u64().unwrap_or(0) == 0
        })
        .await?;
    let collected = began.elapsed();

    // Chains: widget → configmap → secret → service account → role, in a namespace deleted.
    let chain_kinds = [
        (
            "example.com/v1",
            "Widget",
            "/apis/example.com/v1/namespaces/NS/widgets",
        ),
        ("v1", "ConfigMap", "/api/v1/namespaces/NS/configmaps"),
        ("v1", "Secret", "/api/v1/namespaces/NS/secrets"),
        (
            "v1",
            "ServiceAccount",
            "/api/v1/namespaces/NS/serviceaccounts",
        ),
        (
            "rbac.authorization.k8s.io/v1",
            "Role",
            "/apis/rbac.authorization.k8s.io/v1/namespaces/NS/roles",
        ),
    ];
    for namespace in ["chains-baseline", "chains"] {
        let owned = namespace == "chains";
        let mut tasks = tokio::task::JoinSet::new();
        for worker in 0..WORKERS {
            let admin = admin.clone();
            let chains = options.chains;
            tasks.spawn(async move {
                for chain in (worker..chains).step_by(WORKERS) {
                    let mut owner: Option<(String, String, String)> = None;
                    for (api_version, kind, path) in chain_kinds {
                        let name = format!("chain-{chain:04}-{}", kind.to_lowercase());
                        let owners = owner.as_ref().filter(|_| owned).map(|(v, k, uid)| {
                            owner_reference(
                                v,
                                k,
                                &format!("chain-{chain:04}-{}", k.to_lowercase()),
                                uid,
                            )
                        });
                        let uid = admin
                            .create(
                                &path.replace("NS", namespace),
                                object(api_version, kind, &name, owners),
                            )
                            .await?;
                        owner = Some((api_version.to_string(), kind.to_string(), uid));
                    }
                }
                anyhow::Ok(())
            });
        }
        while let Some(done) = tasks.join_next().await {
            done??;
        }
    }
    eprintln!(
        "created {} chains of five, with and without owners",
        options.chains
    );
    let mut namespace_deletes = Vec::new();
    for namespace in ["chains-baseline", "chains"] {
        let began = Instant::now();
        let (status, answer) = admin
            .send(
                Method::DELETE,
                &format!("/api/v1/namespaces/{namespace}"),
                None,
            )
            .await?;
        anyhow::ensure!(
            status == StatusCode::OK,
            "delete {namespace}: {status}: {answer}"
        );
        admin
            .until(&format!("/api/v1/namespaces/{namespace}"), |status, _| {
                status == StatusCode::NOT_FOUND
            })
            .await?;
        namespace_deletes.push(began.elapsed());
    }

    let seconds = |d: Duration| format!("{:.2} s", d.as_secs_f64());
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-9);
    let rows = vec![
        crate::table::figures_header(),
        vec![
            format!("GC of {} dependents of one owner", options.dependents),
            seconds(collected),
            format!(
                "the client deleting them itself (16 connections): {} ({:.2}x)",
                seconds(client_deletes),
                ratio(collected, client_deletes)
            ),
            verdict(
                collected <= FAN_OUT_TARGET,
                format!("<= {}", seconds(FAN_OUT_TARGET)),
            ),
        ],
        vec![
            format!(
                "delete a namespace of {} objects in chains of 5 kinds",
                options.chains * 5
            ),
            seconds(namespace_deletes[1]),
            format!(
                "the same objects without owners: {} ({:.2}x)",
                seconds(namespace_deletes[0]),
                ratio(namespace_deletes[1], namespace_deletes[0])
            ),
            verdict(
                namespace_deletes[1] <= CHAINS_TARGET,
                format!("<= {}", seconds(CHAINS_TARGET)),
            ),
        ],
    ];
    print!("{}", table::render(&rows));
    Ok(())
}
