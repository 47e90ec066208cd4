//! Waiting for the store to forget what was deleted: its history up to the revision of now is
//! compacted once the server logs a compaction at that revision or later (a compaction at
//! revision R keeps R, the state of now, and forgets what came before). The memory that
//! history held (the store's page cache over the deleted objects' versions) can only come back
//! after it.

use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::Full;

use crate::api::client::{Protocol, Target};
use crate::api::kcp_process::KcpProcess;

/// Waits until `kcp` has compacted its history up to the revision of now, at most `timeout`.
pub async fn wait(
    kcp: &KcpProcess,
    target: &Target,
    authorization: &str,
    timeout: Duration,
) -> anyhow::Result<()> {
    let revision = current_revision(target, authorization).await?;
    let deadline = Instant::now() + timeout;
    while kcp.compacted_revision() < revision {
        anyhow::ensure!(
            Instant::now() < deadline,
            "revision {revision} not compacted in {timeout:?} (last compaction: {})",
            kcp.compacted_revision()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

/// The store's revision now: a list's resourceVersion.
async fn current_revision(target: &Target, authorization: &str) -> anyhow::Result<u64> {
    let mut connection = target.connect(Protocol::Http1).await?;
    let request = connection
        .request(Method::GET, "/clusters/root/api/v1/namespaces?limit=1")
        .header(http::header::AUTHORIZATION, authorization)
        .body(Full::new(Bytes::new()))?;
    let answer = connection.expect(request, StatusCode::OK).await?;
    let list: serde_json::Value = serde_json::from_slice(&answer.body)?;
    list["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|rv| rv.parse().ok())
        .context("a list's resourceVersion")
}
