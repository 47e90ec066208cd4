//! `kcp-bench syncer`: the syncer between the real `kcp` binary and a real Kubernetes cluster
//! (`scripts/physical-cluster`). A custom kind negotiated from the cluster, 100 objects of it
//! assigned to the cluster; then, one at a time, a spec change upstream until a watch on the
//! cluster sees it (spec down), and a status change on the cluster until a watch on kcp sees it
//! (status up): p50/p99 of each against the same watch seeing a write on its own side (the
//! baseline: what a watch costs). Then the `syncer` binary following `--objects` more objects
//! (default 10,000), its RSS once all are synced. Targets: p99 ≤ 500 ms each way; ≤ 50 MiB.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::{BodyExt, Full};
use kcp_testing::crd::Crd;
use serde_json::{Value, json};

use crate::api::client::{Connection, Protocol, Target};
use crate::api::kcp_process::{KcpProcess, locate_binary, read_status_kib};
use crate::api::verdict;
use crate::physical::{Cluster, kubectl};
use crate::table;

const OBJECTS: usize = 100;
const ROUNDS: usize = 200;
const LATENCY_TARGET: Duration = Duration::from_millis(500);
const RSS_TARGET_MIB: f64 = 50.0;
const GROUP: &str = "bench.example.dev";

#[derive(clap::Args)]
pub struct Options {
    /// The kcp binary (default: target/release/kcp; `syncer` is taken from beside it).
    #[arg(long)]
    kcp_binary: Option<PathBuf>,
    /// Objects the `syncer` binary follows for its RSS.
    #[arg(long, default_value_t = 10_000)]
    objects: usize,
}

/// One side's API: an address, a CA and a bearer token.
struct Side {
    target: Target,
    authorization: String,
}

impl Side {
    async fn connect(&self) -> anyhow::Result<Connection> {
        self.target.connect(Protocol::Http1).await
    }

    async fn call(
        &self,
        connection: &mut Connection,
        method: Method,
        path: &str,
        body: Option<(&str, Value)>,
    ) -> anyhow::Result<Value> {
        let mut request = connection.authorized(method.clone(), path, &self.authorization);
        let body = match body {
            Some((content_type, body)) => {
                request = request.header(http::header::CONTENT_TYPE, content_type);
                Bytes::from(body.to_string())
            }
            None => Bytes::new(),
        };
        let answer = connection.send(request.body(Full::new(body))?).await?;
        if !answer.status.is_success() {
            bail!(
                "{method} {path}: {} {}",
                answer.status,
                String::from_utf8_lossy(&answer.body)
            );
        }
        Ok(serde_json::from_slice(&answer.body)?)
    }
}

/// A watch's events, one JSON object per line.
struct Events {
    body: hyper::body::Incoming,
    buffer: Vec<u8>,
    /// Kept open while the stream is read.
    _connection: Connection,
}

impl Events {
    async fn open(side: &Side, path: &str) -> anyhow::Result<Events> {
        let mut connection = side.connect().await?;
        let request = connection
            .authorized(Method::GET, path, &side.authorization)
            .body(Full::new(Bytes::new()))?;
        let (status, body) = connection.stream(request).await?;
        anyhow::ensure!(status == StatusCode::OK, "watch {path}: {status}");
        Ok(Events {
            body,
            buffer: Vec::new(),
            _connection: connection,
        })
    }

    async fn next(&mut self) -> anyhow::Result<Value> {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buffer.drain(..=end).collect();
                if line.len() > 1 {
                    return Ok(serde_json::from_slice(&line)?);
                }
                continue;
            }
            let frame = self.body.frame().await.context("the watch ended")??;
            if let Ok(data) = frame.into_data() {
                self.buffer.extend_from_slice(&data);
            }
        }
    }

    /// Waits for an event whose object `matches`.
    async fn until(&mut self, matches: impl Fn(&Value) -> bool) -> anyhow::Result<()> {
        tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                let event = self.next().await?;
                if matches(&event["object"]) {
                    return anyhow::Ok(());
                }
            }
        })
        .await
        .context("no such event within 30 s")?
    }
}

fn percentile(times: &mut [Duration], p: f64) -> Duration {
    times.sort();
    times[((times.len() as f64 - 1.0) * p).round() as usize]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// Reads a cluster's port, CA and token from its directory.
fn cluster_side(dir: &Path) -> anyhow::Result<Side> {
    let port: u16 = std::fs::read_to_string(dir.join("port"))?.trim().parse()?;
    let ca = std::fs::read(dir.join("pki/ca.crt"))?;
    let token = std::fs::read_to_string(dir.join("token"))?;
    Ok(Side {
        target: Target::new(SocketAddr::from(([127, 0, 0, 1], port)), &ca)?,
        authorization: format!("Bearer {}", token.trim()),
    })
}

fn thing(name: &str, cluster: &str) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "Thing",
        "metadata": {"name": name, "namespace": "default", "labels": {"kcp.dev/cluster": cluster}},
        "spec": {"size": 0},
    })
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    let binary = locate_binary(options.kcp_binary.as_deref())?;
    let syncer_binary = binary.with_file_name("syncer");
    anyhow::ensure!(
        syncer_binary.exists(),
        "{} is missing: cargo build --release -p kcp",
        syncer_binary.display()
    );
    let scratch = tempfile::tempdir()?;
    eprintln!("starting a physical cluster");
    let cluster = Cluster::start(&scratch.path().join("east"))?;
    let cluster_kubeconfig = cluster.dir.join("kubeconfig");
    let crd = Crd::namespaced("things", "Thing")
        .group(GROUP)
        .singular("thing")
        .version(
            "name: v1\nserved: true\nstorage: true\nsubresources: {status: {}}\nschema:\n  openAPIV3Schema:\n    type: object\n    properties:\n      spec: {type: object, properties: {size: {type: integer}}}\n      status: {type: object, properties: {size: {type: integer}}}\n",
        )
        .yaml();
    let crd_file = scratch.path().join("crd.yaml");
    std::fs::write(&crd_file, crd)?;
    let crd_path = crd_file.to_string_lossy().into_owned();
    kubectl(&cluster_kubeconfig, None, &["apply", "-f", &crd_path])?;
    kubectl(
        &cluster_kubeconfig,
        None,
        &[
            "wait",
            "--for=condition=Established",
            "-f",
            &crd_path,
            "--timeout=120s",
        ],
    )?;

    let root = scratch.path().join("kcp");
    let kcp = KcpProcess::start_with(
        &binary,
        &root,
        &[
            "--resources-to-sync",
            &format!("things.{GROUP}"),
            "--cluster-poll-interval",
            "10s",
        ],
    )
    .await?;
    let kubeconfig = root.join("admin.kubeconfig");
    let base = format!("https://127.0.0.1:{}/clusters/root", kcp.port);
    let workspace = scratch.path().join("workspace.yaml");
    std::fs::write(
        &workspace,
        "apiVersion: tenancy.kcp.io/v1alpha1\nkind: Workspace\nmetadata: {name: sync}\n",
    )?;
    kubectl(
        &kubeconfig,
        Some(&base),
        &["create", "-f", &workspace.to_string_lossy()],
    )?;
    kubectl(
        &kubeconfig,
        Some(&base),
        &[
            "wait",
            "--for=jsonpath={.status.phase}=Ready",
            "workspace/sync",
            "--timeout=60s",
        ],
    )?;
    let logical_cluster = kubectl(
        &kubeconfig,
        Some(&base),
        &["get", "workspace", "sync", "-o", "jsonpath={.spec.cluster}"],
    )?;
    let server = format!("{base}:sync");
    let indented: String = std::fs::read_to_string(&cluster_kubeconfig)?
        .lines()
        .map(|l| format!("    {l}\n"))
        .collect();
    let registration = scratch.path().join("cluster.yaml");
    std::fs::write(
        &registration,
        format!(
            "apiVersion: cluster.example.dev/v1alpha1\nkind: Cluster\nmetadata: {{name: east}}\nspec:\n  kubeconfig: |\n{indented}"
        ),
    )?;
    kubectl(
        &kubeconfig,
        Some(&server),
        &["create", "-f", &registration.to_string_lossy()],
    )?;

    let upstream = Side {
        target: Target::new(
            SocketAddr::from(([127, 0, 0, 1], kcp.port)),
            &std::fs::read(root.join("ca.crt"))?,
        )?,
        authorization: format!(
            "Bearer {}",
            kcp_testing::kubeconfig::admin_token(&root, "kcp-admin").trim()
        ),
    };
    let downstream = cluster_side(&cluster.dir)?;
    let up_things =
        "/clusters/root:sync/apis/bench.example.dev/v1/namespaces/default/things".to_string();
    let down_namespace = format!("kcp-{logical_cluster}-default");
    let down_things = format!("/apis/{GROUP}/v1/namespaces/{down_namespace}/things");
    let mut up = upstream.connect().await?;
    let mut down = downstream.connect().await?;
    let deadline = Instant::now() + Duration::from_secs(120);
    while upstream
        .call(&mut up, Method::GET, &up_things, None)
        .await
        .is_err()
    {
        anyhow::ensure!(
            Instant::now() < deadline,
            "things never served in the workspace"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!("creating {OBJECTS} objects");
    for i in 0..OBJECTS {
        upstream
            .call(
                &mut up,
                Method::POST,
                &up_things,
                Some(("application/json", thing(&format!("thing-{i}"), "east"))),
            )
            .await?;
    }
    loop {
        let listed = downstream
            .call(&mut down, Method::GET, &down_things, None)
            .await;
        if listed
            .as_ref()
            .ok()
            .and_then(|l| l["items"].as_array())
            .is_some_and(|i| i.len() == OBJECTS)
        {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the objects never reached the cluster"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    eprintln!("timing {ROUNDS} spec changes and {ROUNDS} status changes");
    let revision = |list: &Value| {
        list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or("0")
            .to_string()
    };
    let merge = "application/merge-patch+json";
    // Spec down, against a write downstream seen by the same watch.
    let listed = downstream
        .call(&mut down, Method::GET, &down_things, None)
        .await?;
    let mut down_watch = Events::open(
        &downstream,
        &format!(
            "{down_things}?watch=1&resourceVersion={}",
            revision(&listed)
        ),
    )
    .await?;
    let (mut spec_down, mut down_baseline) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let name = format!("thing-{}", round % OBJECTS);
        let size = round as i64 + 1;
        let began = Instant::now();
        upstream
            .call(
                &mut up,
                Method::PATCH,
                &format!("{up_things}/{name}"),
                Some((merge, json!({"spec": {"size": size}}))),
            )
            .await?;
        down_watch
            .until(|o| o["metadata"]["name"] == name.as_str() && o["spec"]["size"] == size)
            .await?;
        spec_down.push(began.elapsed());
        let began = Instant::now();
        downstream
            .call(
                &mut down,
                Method::PATCH,
                &format!("{down_things}/{name}"),
                Some((
                    merge,
                    json!({"metadata": {"labels": {"round": round.to_string()}}}),
                )),
            )
            .await?;
        down_watch
            .until(|o| {
                o["metadata"]["name"] == name.as_str()
                    && o["metadata"]["labels"]["round"] == round.to_string().as_str()
            })
            .await?;
        down_baseline.push(began.elapsed());
    }
    drop(down_watch);

    // Status up, against a write upstream seen by the same watch.
    let listed = upstream
        .call(&mut up, Method::GET, &up_things, None)
        .await?;
    let mut up_watch = Events::open(
        &upstream,
        &format!("{up_things}?watch=1&resourceVersion={}", revision(&listed)),
    )
    .await?;
    let (mut status_up, mut up_baseline) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let name = format!("thing-{}", round % OBJECTS);
        let size = round as i64 + 1;
        let began = Instant::now();
        downstream
            .call(
                &mut down,
                Method::PATCH,
                &format!("{down_things}/{name}/status"),
                Some((merge, json!({"status": {"size": size}}))),
            )
            .await?;
        up_watch
            .until(|o| o["metadata"]["name"] == name.as_str() && o["status"]["size"] == size)
            .await?;
        status_up.push(began.elapsed());
        let began = Instant::now();
        upstream
            .call(
                &mut up,
                Method::PATCH,
                &format!("{up_things}/{name}"),
                Some((
                    merge,
                    json!({"metadata": {"annotations": {"round": round.to_string()}}}),
                )),
            )
            .await?;
        up_watch
            .until(|o| {
                o["metadata"]["name"] == name.as_str()
                    && o["metadata"]["annotations"]["round"] == round.to_string().as_str()
            })
            .await?;
        up_baseline.push(began.elapsed());
    }
    drop(up_watch);

    // The syncer binary following many more objects (assigned to another Cluster name).
    eprintln!("the syncer binary following {} objects", options.objects);
    for i in 0..options.objects {
        upstream
            .call(
                &mut up,
                Method::POST,
                &up_things,
                Some(("application/json", thing(&format!("many-{i}"), "many"))),
            )
            .await?;
    }
    let mut syncer = tokio::process::Command::new(&syncer_binary)
        .arg("--from-kubeconfig")
        .arg(&kubeconfig)
        .args(["--workspace", "root:sync", "--to-kubeconfig"])
        .arg(&cluster_kubeconfig)
        .args([
            "--cluster",
            "many",
            "--resync-interval",
            "10m",
            &format!("things.{GROUP}"),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(scratch.path().join("syncer.log"))?)
        .kill_on_drop(true)
        .spawn()
        .context("run the syncer")?;
    let began = Instant::now();
    // (A list with a label selector says no remainingItemCount: the whole list is counted.)
    let labelled = format!("{down_things}?labelSelector=kcp.dev%2Fcluster%3Dmany");
    loop {
        let mut fresh = downstream.connect().await?;
        let listed = tokio::time::timeout(
            Duration::from_secs(10),
            downstream.call(&mut fresh, Method::GET, &labelled, None),
        )
        .await
        .context("listing the cluster's objects took 10 s")??;
        let count = listed["items"].as_array().map_or(0, Vec::len);
        if count >= options.objects {
            break;
        }

        let stuck = match count {
            0 => began.elapsed() > Duration::from_secs(20),
            _ => began.elapsed() > Duration::from_secs(600),
        };
        if stuck {
            let log =
                std::fs::read_to_string(scratch.path().join("syncer.log")).unwrap_or_default();
            bail!(
                "the syncer synced {count} of {} objects; its log:\n{log}",
                options.objects
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let synced_in = began.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    if let Some(status) = syncer.try_wait()? {
        let log = std::fs::read_to_string(scratch.path().join("syncer.log")).unwrap_or_default();
        bail!("the syncer exited ({status}):\n{log}");
    }
    let pid = syncer.id().context("the syncer's pid")?;
    let rss_mib = read_status_kib(pid, "VmRSS:")? as f64 / 1024.0;
    syncer.kill().await?;
    let cpu = kcp.cpu_seconds()?;
    kcp.stop().await?;
    drop(cluster);

    let row =
        |what: &str, times: &mut Vec<Duration>, baseline: &mut Vec<Duration>, target: bool| {
            let p99 = percentile(times, 0.99);
            vec![
                what.to_string(),
                ms(percentile(times, 0.5)),
                ms(p99),
                format!(
                    "{} / {}",
                    ms(percentile(baseline, 0.5)),
                    ms(percentile(baseline, 0.99))
                ),
                if target {
                    verdict(
                        p99 <= LATENCY_TARGET,
                        format!("p99 <= {} ms", LATENCY_TARGET.as_millis()),
                    )
                } else {
                    String::new()
                },
            ]
        };
    let rows = vec![
        vec![
            "".to_string(),
            "p50".into(),
            "p99".into(),
            "baseline p50 / p99 (a write on that side)".into(),
            "target".into(),
        ],
        row(
            "spec upstream -> object downstream",
            &mut spec_down,
            &mut down_baseline,
            true,
        ),
        row(
            "status downstream -> status upstream",
            &mut status_up,
            &mut up_baseline,
            true,
        ),
        vec![
            format!("syncer binary following {} objects", options.objects),
            format!("synced in {:.1} s", synced_in.as_secs_f64()),
            format!("{rss_mib:.1} MiB RSS"),
            String::new(),
            verdict(
                rss_mib <= RSS_TARGET_MIB,
                format!("<= {RSS_TARGET_MIB} MiB"),
            ),
        ],
    ];
    println!(
        "kcp-bench syncer: {} and {} against a real cluster, {ROUNDS} rounds over {OBJECTS} objects (kcp CPU: {cpu:.2} s)",
        binary.display(),
        syncer_binary.display()
    );
    print!("{}", table::render(&rows));
    Ok(())
}
