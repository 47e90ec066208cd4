//! A server that has served, as the "before" of memory: before the benchmark's own workspaces,
//! [`WORKSPACES`] are created under root, deleted again and their history compacted, and the
//! RSS after that is what the RSS once everything is deleted is held to (and what growth per
//! workspace counts from). A server that has answered nothing has not yet paged in the code
//! that creates and deletes workspaces, nor grown the thread heaps and lazily built caches that
//! the first requests grow once; that memory belongs to a server that serves, not to the
//! workspaces it holds. The fresh server's RSS is reported beside it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::follow::Follower;
use super::tree::Planned;
use super::{PHASE_TIMEOUT, compacted, create_level, delete_orgs};
use crate::api::client::Target;
use crate::api::kcp_process::{KcpProcess, Resident};

/// Workspaces created and deleted before the benchmark's own.
pub const WORKSPACES: usize = 100;

/// Creates [`WORKSPACES`] under root from `clients` connections, waits until they are Ready,
/// deletes them, waits until they are gone and their history is compacted (and the watch
/// cache's window has passed), and returns the RSS then.
pub async fn warm_up(
    kcp: &KcpProcess,
    target: &Target,
    authorization: &Arc<String>,
    follower: &mut Follower,
    clients: usize,
    compaction_interval: Duration,
) -> anyhow::Result<Resident> {
    let workspaces: Vec<Planned> = (0..WORKSPACES)
        .map(|i| Planned {
            parent: "root".into(),
            name: format!("warm-up-{i}"),
        })
        .collect();
    create_level(target, authorization, clients, &workspaces).await?;
    tokio::time::timeout(
        PHASE_TIMEOUT,
        follower.wait(|seen| seen.ready >= WORKSPACES),
    )
    .await
    .context("the warm-up's workspaces did not become Ready")??;
    delete_orgs(target, authorization, &workspaces).await?;
    tokio::time::timeout(PHASE_TIMEOUT, follower.wait(|seen| seen.existing == 0))
        .await
        .context("the warm-up's workspaces were not deleted")??;
    let (_, settled) = compacted::settled(
        kcp,
        target,
        authorization,
        Instant::now(),
        compaction_interval,
    )
    .await?;
    Ok(settled)
}
