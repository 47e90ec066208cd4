//! One organization seen from a user's chair: `kubectl get ws` in it (the whole command), and
//! the server's answer to the list kubectl sends (a Table) and to a plain JSON list.
//!
//! The baseline in the same run: the same kubectl command against a bare server
//! ([`BareServer::replay`]) that replays what kcp answered to each of kubectl's requests
//! (discovery, then the Table in pages of 500, gzip as kcp sent it), so the difference is what
//! kcp takes to answer and what is left is kubectl's own. `kubectl get ns` there is timed too,
//! and `kubectl version --client`, kubectl's own start and exit with no request at all, and
//! kcp's answers to the very pages kubectl asks for (limit 500, gzip offered).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::Full;

use crate::api::bare_server::{BareServer, Recorded, request_key};
use crate::api::client::{Answer, Connection, Protocol, Target};
use crate::measure::median;

/// Timed runs of each command; the median is reported.
const RUNS: usize = 7;

/// What kubectl asks for (`kubectl get`, client-wire.md).
const TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
/// What kubectl asks for when it discovers the server's resources (aggregated discovery).
const DISCOVERY_ACCEPT: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
/// kubectl's page size (`--chunk-size`).
const KUBECTL_PAGE: usize = 500;

pub struct Listing {
    pub kubectl_get_ws: Duration,
    /// The same command against the bare server replaying kcp's answers.
    pub kubectl_get_ws_replayed: Duration,
    pub kubectl_get_ns: Duration,
    /// `kubectl version --client`: kubectl starting and stopping, no request (its floor).
    pub kubectl_alone: Duration,
    pub server_table: Duration,
    /// kcp answering the pages `kubectl get ws` asks for (limit 500, gzip offered), in all.
    pub server_kubectl_pages: Duration,
    pub server_json: Duration,
    pub rows: usize,
}

/// Times listings of the workspaces in `org` (a path such as `root:org-0`).
pub async fn measure(
    target: &Target,
    authorization: &str,
    root: &Path,
    org: &str,
) -> anyhow::Result<Listing> {
    let path = format!("/clusters/{org}/apis/tenancy.kcp.io/v1alpha1/workspaces");
    let mut connection = target.connect(Protocol::Http1).await?;
    let mut server_table = Vec::new();
    let mut server_json = Vec::new();
    let mut rows = 0;
    for _ in 0..RUNS {
        for (accept, times) in [
            (TABLE_ACCEPT, &mut server_table),
            ("application/json", &mut server_json),
        ] {
            let request = connection
                .authorized(Method::GET, &path, authorization)
                .header(http::header::ACCEPT, accept)
                .body(Full::new(Bytes::new()))?;
            let began = Instant::now();
            let answer = connection.expect(request, StatusCode::OK).await?;
            times.push(began.elapsed());
            if accept == TABLE_ACCEPT {
                let table: serde_json::Value = serde_json::from_slice(&answer.body)?;
                rows = table["rows"].as_array().map_or(0, Vec::len);
            }
        }
    }
    let mut server_kubectl_pages = Vec::new();
    for _ in 0..RUNS {
        let pages = table_pages(&mut connection, authorization, &path).await?;
        server_kubectl_pages.push(pages.iter().map(|page| page.took).sum());
    }
    let replay = BareServer::replay(root, record(&mut connection, authorization, &path).await?)?;
    let kubeconfig = root.join("admin.kubeconfig");
    let kubectl = Kubectl {
        kubeconfig: &kubeconfig,
        server: format!("https://{}/clusters/{org}", target.address),
        cache: root.join("kubectl-cache"),
    };
    let replayed = Kubectl {
        kubeconfig: &kubeconfig,
        server: format!("https://{}/clusters/{org}", replay.address),
        cache: root.join("kubectl-cache-replayed"),
    };
    // The first runs fill kubectl's discovery caches, as a user's first command does.
    kubectl.get("ws").await?;
    replayed.get("ws").await?;
    let (mut get_ws, mut get_ws_replayed, mut get_ns) = (Vec::new(), Vec::new(), Vec::new());
    let mut alone = Vec::new();
    for _ in 0..RUNS {
        get_ws.push(kubectl.get("ws").await?);
        get_ws_replayed.push(replayed.get("ws").await?);
        get_ns.push(kubectl.get("ns").await?);
        alone.push(kubectl_alone().await?);
    }
    Ok(Listing {
        kubectl_get_ws: median(get_ws),
        kubectl_get_ws_replayed: median(get_ws_replayed),
        kubectl_get_ns: median(get_ns),
        kubectl_alone: median(alone),
        server_table: median(server_table),
        server_kubectl_pages: median(server_kubectl_pages),
        server_json: median(server_json),
        rows,
    })
}

/// kubectl pointed at one server, with a discovery cache of its own.
struct Kubectl<'a> {
    kubeconfig: &'a Path,
    server: String,
    cache: PathBuf,
}

impl Kubectl<'_> {
    /// How long `kubectl get <what>` takes, the whole command.
    async fn get(&self, what: &str) -> anyhow::Result<Duration> {
        let began = Instant::now();
        let output = tokio::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(["--server", &self.server, "get", what])
            .stdin(Stdio::null())
            .output()
            .await
            .context("run kubectl (is it on PATH?)")?;
        let took = began.elapsed();
        anyhow::ensure!(
            output.status.success(),
            "kubectl --server {} get {what}: {}",
            self.server,
            String::from_utf8_lossy(&output.stderr)
        );
        Ok(took)
    }
}

/// kcp's answers to what `kubectl get ws` asks in the organization whose workspaces are at
/// `path`: its discovery, then each page of the Table, as kcp sends them (gzip included).
async fn record(
    connection: &mut Connection,
    authorization: &str,
    path: &str,
) -> anyhow::Result<HashMap<String, Recorded>> {
    let cluster = path
        .strip_suffix("/apis/tenancy.kcp.io/v1alpha1/workspaces")
        .context("a workspaces path")?;
    let mut answers = HashMap::new();
    for discovery in ["api", "apis"] {
        let request = format!("{cluster}/{discovery}");
        let answer = fetch(connection, authorization, &request, DISCOVERY_ACCEPT).await?;
        answers.insert(request_key(&request.parse()?), recorded(answer));
    }
    for page in table_pages(connection, authorization, path).await? {
        answers.insert(request_key(&page.request.parse()?), recorded(page.answer));
    }
    Ok(answers)
}

/// A page of a Table, the request that fetched it and how long kcp took to answer it.
struct Page {
    request: String,
    answer: Answer,
    took: Duration,
}

/// Each page of the Table of `path` as kubectl asks for them (limit 500, then `continue`).
async fn table_pages(
    connection: &mut Connection,
    authorization: &str,
    path: &str,
) -> anyhow::Result<Vec<Page>> {
    let mut pages = Vec::new();
    let mut request = format!("{path}?limit={KUBECTL_PAGE}");
    loop {
        let began = Instant::now();
        let answer = fetch(connection, authorization, &request, TABLE_ACCEPT).await?;
        let took = began.elapsed();
        let table: serde_json::Value = serde_json::from_slice(&plain(&answer)?)?;
        let next = match table["metadata"]["continue"].as_str() {
            Some(token) if !token.is_empty() => {
                let token: String = form_urlencoded::byte_serialize(token.as_bytes()).collect();
                Some(format!("{path}?limit={KUBECTL_PAGE}&continue={token}"))
            }
            _ => None,
        };
        pages.push(Page {
            request,
            answer,
            took,
        });
        match next {
            Some(next) => request = next,
            None => return Ok(pages),
        }
    }
}

/// How long `kubectl version --client` takes: kubectl's start and exit, without a request.
async fn kubectl_alone() -> anyhow::Result<Duration> {
    let began = Instant::now();
    let output = tokio::process::Command::new("kubectl")
        .args(["version", "--client"])
        .stdin(Stdio::null())
        .output()
        .await
        .context("run kubectl (is it on PATH?)")?;
    anyhow::ensure!(output.status.success(), "kubectl version --client failed");
    Ok(began.elapsed())
}

/// A GET offering gzip, as Go clients do.
async fn fetch(
    connection: &mut Connection,
    authorization: &str,
    path: &str,
    accept: &str,
) -> anyhow::Result<Answer> {
    let request = connection
        .authorized(Method::GET, path, authorization)
        .header(http::header::ACCEPT, accept)
        .header(http::header::ACCEPT_ENCODING, "gzip")
        .body(Full::new(Bytes::new()))?;
    connection.expect(request, StatusCode::OK).await
}

/// An answer's body, decompressed if it came compressed.
fn plain(answer: &Answer) -> anyhow::Result<Vec<u8>> {
    match answer.content_encoding.as_deref() {
        Some("gzip") => {
            let mut plain = Vec::new();
            std::io::Read::read_to_end(
                &mut flate2::read::GzDecoder::new(&answer.body[..]),
                &mut plain,
            )?;
            Ok(plain)
        }
        Some(other) => anyhow::bail!("an answer in {other}"),
        None => Ok(answer.body.to_vec()),
    }
}

fn recorded(answer: Answer) -> Recorded {
    Recorded {
        content_type: answer.content_type.unwrap_or_default(),
        content_encoding: answer.content_encoding,
        body: answer.body,
    }
}
