//! Storage compaction, as kube-apiserver does it: every interval, forget the history older than
//! the revision seen one interval ago. Watches and continue tokens younger than one interval
//! keep working; older ones get 410 Expired and clients list again.

use std::sync::Arc;
use std::time::Duration;

use kcp_storage::{Storage, StorageError};
use tokio::task::JoinHandle;

/// Parses a duration as kube-apiserver's flags spell them: `300s`, `5m`, `1h30m`, `500ms`, `0`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .ok_or_else(|| format!("missing unit in duration {text:?}"))?;
        let value: u64 = rest[..digits]
            .parse()
            .map_err(|_| format!("invalid duration {text:?}"))?;
        rest = &rest[digits..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_end] {
            "ms" => Duration::from_millis(1),
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            other => return Err(format!("unknown unit {other:?} in duration {text:?}")),
        };
        let too_long = || format!("duration {text:?} too long");
        let part = unit
            .checked_mul(u32::try_from(value).map_err(|_| too_long())?)
            .ok_or_else(too_long)?;
        total = total.checked_add(part).ok_or_else(too_long)?;
        rest = &rest[unit_end..];
    }
    Ok(total)
}

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

    #[test]
    fn absurd_durations_are_errors_not_panics() {
        // Each part fits; their sum does not fit a Duration.
        let many = format!("{}h", u32::MAX).repeat(1_200_000);
        assert!(parse_duration(&many).is_err());
        assert!(parse_duration(&format!("{}h", u64::MAX)).is_err());
    }

    #[test]
    fn durations_read_like_kube_flags() {
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("5y").is_err());
    }

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
