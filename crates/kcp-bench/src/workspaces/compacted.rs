//! Waiting for the store to forget what was deleted: its history up to the revision of now is
//! compacted once the server logs a compaction at that revision or later (a compaction at
//! revision R keeps R, the state of now, and forgets what came before). The memory that
//! history held (the store's page cache over the deleted objects' versions) can only come back
//! after it.

use std::time::{Duration, Instant};

use super::{PHASE_TIMEOUT, WATCH_CACHE_WINDOW};
use crate::api::client::{Target, current_revision};
use crate::api::kcp_process::{KcpProcess, Resident};

/// What is left once deletions made at `deleted_at` have settled: the time until their history
/// was compacted (the server compacts every `compaction_interval`), and the RSS once that is
/// done, the watch cache's window has passed since `deleted_at` (its trim runs every 5 s) and
/// 6 s more have gone by (mimalloc's arenas are purged every 5 s).
pub async fn settled(
    kcp: &KcpProcess,
    target: &Target,
    authorization: &str,
    deleted_at: Instant,
    compaction_interval: Duration,
) -> anyhow::Result<(Duration, Resident)> {
    wait(
        kcp,
        target,
        authorization,
        2 * compaction_interval + PHASE_TIMEOUT,
    )
    .await?;
    let compacted_in = deleted_at.elapsed();
    tokio::time::sleep_until((deleted_at + WATCH_CACHE_WINDOW).into()).await;
    tokio::time::sleep(Duration::from_secs(6)).await;
    Ok((compacted_in, kcp.resident()?))
}

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
