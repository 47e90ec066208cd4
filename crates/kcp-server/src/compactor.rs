//! Storage compaction, as kube-apiserver does it: every interval, forget the history older than
//! the revision seen one interval ago. Watches and continue tokens younger than one interval
//! keep working; older ones get 410 Expired and clients list again.

use std::sync::Arc;
use std::time::Duration;

use kcp_storage::{Storage, StorageError};
use tokio::task::JoinHandle;

/// Starts compacting `storage` every `interval`; `None` when the interval is zero (disabled).
pub fn start(storage: Arc<dyn Storage>, interval: Duration) -> Option<JoinHandle<()>> {
    if interval.is_zero() {
        return None;
    }
    Some(tokio::spawn(async move {
        let mut previous: Option<u64> = None;
        let mut ticks = tokio::time::interval(interval);
        ticks.tick().await;
        loop {
            ticks.tick().await;
            if let Some(revision) = previous.filter(|r| *r > 0) {
                let began = std::time::Instant::now();
                match storage.compact(revision).await {
                    Ok(()) => tracing::info!(
                        revision,
                        took_ms = began.elapsed().as_millis() as u64,
                        "storage compacted"
                    ),
                    // Someone (another replica) compacted further already.
                    Err(StorageError::Compacted { .. }) => {}
                    Err(error) => tracing::warn!(%error, revision, "compaction failed"),
                }
            }
            previous = storage.current_revision().await.ok();
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On paused time: the sleep below moves tokio's clock past the compactor's ticks at once.
    #[tokio::test(start_paused = true)]
    async fn history_older_than_one_interval_is_compacted() {
        let storage: Arc<dyn Storage> = Arc::new(kcp_storage::MemoryStorage::new());
        let first = storage
            .create(b"/a", "1".into())
            .await
            .unwrap()
            .mod_revision;
        storage.create(b"/b", "2".into()).await.unwrap();
        let compactor = start(Arc::clone(&storage), Duration::from_millis(100)).unwrap();
        // The first tick notes the current revision, the second compacts up to it.
        tokio::time::sleep(Duration::from_millis(350)).await;
        compactor.abort();
        let old = kcp_storage::RangeRequest {
            revision: first,
            ..kcp_storage::RangeRequest::prefix(b"/".to_vec())
        };
        assert!(matches!(
            storage.range(old).await,
            Err(StorageError::Compacted { .. })
        ));
        assert!(storage.get(b"/b", 0).await.unwrap().kv.is_some());
    }
}
