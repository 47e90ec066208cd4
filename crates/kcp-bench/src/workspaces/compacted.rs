//! Waiting for the store to forget what was deleted: its history up to the revision of now is
//! compacted once the server logs a compaction at that revision or later (a compaction at
//! revision R keeps R, the state of now, and forgets what came before). The memory that
//! history held (the store's page cache over the deleted objects' versions) can only come back
//! after it.

use std::time::{Duration, Instant};

use crate::api::client::{Target, current_revision};
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
