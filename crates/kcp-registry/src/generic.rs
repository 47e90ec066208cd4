//! The generic store: the first stage of every write and the last of every read. Values are
//! bytes at keys with revisions: create only if absent, replace or delete only at the revision
//! the caller read, and in dry-run mode the same checks with nothing written. Reads and watches
//! go to the backend or, for watches, through the shared watch cache.
//!
//! It must not know kinds, object fields, admission or validation: everything above it (the
//! kinds' rules, the admission chain, pruning and defaulting) has run before a value gets here.

use std::sync::Arc;

use bytes::Bytes;
use kcp_storage::{KeyValue, Storage, StorageError};

use crate::watch_cache::WatchCache;

/// Keys, values and revisions over one backend, shared by every logical cluster.
#[derive(Clone)]
pub(crate) struct GenericStore {
    storage: Arc<dyn Storage>,
    watch_cache: Arc<WatchCache>,
    /// Check every write as usual, but store nothing (`dryRun=All`).
    dry_run: bool,
}

impl GenericStore {
    pub(crate) fn new(storage: Arc<dyn Storage>) -> GenericStore {
        GenericStore {
            storage,
            watch_cache: Arc::default(),
            dry_run: false,
        }
    }

    /// The same store with `cache` as its watch cache.
    pub(crate) fn with_watch_cache(self, cache: WatchCache) -> GenericStore {
        GenericStore {
            watch_cache: Arc::new(cache),
            ..self
        }
    }

    /// The same store in dry-run mode: writes are checked but never stored.
    pub(crate) fn dry_run(&self) -> GenericStore {
        GenericStore {
            dry_run: true,
            ..self.clone()
        }
    }

    pub(crate) fn is_dry_run(&self) -> bool {
        self.dry_run
    }

    /// Creates `key`, or in dry-run mode only checks that it could.
    pub(crate) async fn create(&self, key: &[u8], value: Bytes) -> Result<KeyValue, StorageError> {
        if !self.dry_run {
            return self.storage.create(key, value).await;
        }
        match self.storage.get(key, 0).await?.kv {
            Some(_) => Err(StorageError::AlreadyExists { key: key.to_vec() }),
            None => Ok(KeyValue {
                key: Bytes::copy_from_slice(key),
                value,
                create_revision: 0,
                mod_revision: 0,
                version: 0,
            }),
        }
    }

    /// Replaces `key` at revision `expected`, or in dry-run mode only checks that it could.
    pub(crate) async fn update(
        &self,
        key: &[u8],
        value: Bytes,
        expected: u64,
    ) -> Result<KeyValue, StorageError> {
        if !self.dry_run {
            return self.storage.update(key, value, expected).await;
        }
        self.check_revision(key, expected).await
    }

    /// Deletes `key` at revision `expected`, or in dry-run mode only checks that it could.
    pub(crate) async fn delete(&self, key: &[u8], expected: u64) -> Result<KeyValue, StorageError> {
        if !self.dry_run {
            return self.storage.delete(key, Some(expected)).await;
        }
        self.check_revision(key, expected).await
    }

    /// The current value of `key` if its modification revision is `expected` (dry-run checks).
    async fn check_revision(&self, key: &[u8], expected: u64) -> Result<KeyValue, StorageError> {
        match self.storage.get(key, 0).await?.kv {
            None => Err(StorageError::NotFound { key: key.to_vec() }),
            Some(kv) if kv.mod_revision != expected => Err(StorageError::Conflict {
                key: key.to_vec(),
                expected,
                current: Some(Box::new(kv)),
            }),
            Some(kv) => Ok(kv),
        }
    }

    /// The backend, for reads (gets, ranges, watches) and for the server's own writes that are
    /// never dry runs (the cleanup of a deleted CRD's objects).
    pub(crate) fn storage(&self) -> &dyn Storage {
        &*self.storage
    }

    pub(crate) fn shared_storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    pub(crate) fn watch_cache(&self) -> &WatchCache {
        &self.watch_cache
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kcp_storage::MemoryStorage;

    fn store() -> GenericStore {
        GenericStore::new(Arc::new(MemoryStorage::new()))
    }

    #[tokio::test]
    async fn dry_runs_check_like_writes_and_store_nothing() {
        let store = store();
        let written = store.create(b"/k", Bytes::from_static(b"1")).await.unwrap();
        let dry = store.dry_run();
        assert!(matches!(
            dry.create(b"/k", Bytes::from_static(b"2")).await,
            Err(StorageError::AlreadyExists { .. })
        ));
        dry.create(b"/other", Bytes::from_static(b"2"))
            .await
            .unwrap();
        assert!(matches!(
            dry.update(b"/k", Bytes::from_static(b"3"), written.mod_revision + 1)
                .await,
            Err(StorageError::Conflict { .. })
        ));
        dry.update(b"/k", Bytes::from_static(b"3"), written.mod_revision)
            .await
            .unwrap();
        dry.delete(b"/k", written.mod_revision).await.unwrap();
        assert!(matches!(
            dry.delete(b"/missing", 1).await,
            Err(StorageError::NotFound { .. })
        ));
        // Nothing the dry runs did is stored.
        let current = store.storage().get(b"/k", 0).await.unwrap().kv.unwrap();
        assert_eq!(current.value, Bytes::from_static(b"1"));
        assert_eq!(current.mod_revision, written.mod_revision);
        assert!(
            store
                .storage()
                .get(b"/other", 0)
                .await
                .unwrap()
                .kv
                .is_none()
        );
    }

    #[tokio::test]
    async fn writes_hold_to_the_revision_read() {
        let store = store();
        let first = store.create(b"/k", Bytes::from_static(b"1")).await.unwrap();
        let second = store
            .update(b"/k", Bytes::from_static(b"2"), first.mod_revision)
            .await
            .unwrap();
        assert!(matches!(
            store
                .update(b"/k", Bytes::from_static(b"3"), first.mod_revision)
                .await,
            Err(StorageError::Conflict { .. })
        ));
        assert!(matches!(
            store.delete(b"/k", first.mod_revision).await,
            Err(StorageError::Conflict { .. })
        ));
        store.delete(b"/k", second.mod_revision).await.unwrap();
        assert!(store.storage().get(b"/k", 0).await.unwrap().kv.is_none());
    }
}
