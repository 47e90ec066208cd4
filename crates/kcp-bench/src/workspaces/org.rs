//! One organization seen from a user's chair: `kubectl get ws` in it (the whole command, with
//! `kubectl get ns` in the same organization as the baseline of kubectl's own cost), and the
//! server's answer to the list kubectl sends (a Table) and to a plain JSON list.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::Full;

use crate::api::client::{Protocol, Target};

/// Timed runs of each command; the median is reported.
const RUNS: usize = 7;

/// What kubectl asks for (`kubectl get`, client-wire.md).
const TABLE_ACCEPT: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

pub struct Listing {
    pub kubectl_get_ws: Duration,
    pub kubectl_get_ns: Duration,
    pub server_table: Duration,
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
                .request(Method::GET, &path)
                .header(http::header::AUTHORIZATION, authorization)
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
    let server = format!("https://{}/clusters/{org}", target.address);
    let kubeconfig = root.join("admin.kubeconfig");
    let cache = root.join("kubectl-cache");
    let kubectl = |what: &'static str| {
        let (server, kubeconfig, cache) = (server.clone(), kubeconfig.clone(), cache.clone());
        async move {
            let began = Instant::now();
            let output = tokio::process::Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&kubeconfig)
                .arg("--cache-dir")
                .arg(&cache)
                .args(["--server", &server, "get", what])
                .stdin(Stdio::null())
                .output()
                .await
                .context("run kubectl (is it on PATH?)")?;
            let took = began.elapsed();
            anyhow::ensure!(
                output.status.success(),
                "kubectl get {what}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            anyhow::Ok(took)
        }
    };
    // The first run fills kubectl's discovery cache, as a user's first command does.
    kubectl("ws").await?;
    let mut get_ws = Vec::new();
    let mut get_ns = Vec::new();
    for _ in 0..RUNS {
        get_ws.push(kubectl("ws").await?);
        get_ns.push(kubectl("ns").await?);
    }
    Ok(Listing {
        kubectl_get_ws: median(get_ws),
        kubectl_get_ns: median(get_ns),
        server_table: median(server_table),
        server_json: median(server_json),
        rows,
    })
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}
