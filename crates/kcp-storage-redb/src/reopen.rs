//! The database handle, closed and opened again once the store has shrunk to a fraction of its
//! peak.
//!
//! redb keeps what it grew for the store's largest size until the database closes: its page
//! cache indexes pages in tables (one per lock stripe, 131 of them) that never shrink, and the
//! pages it still caches sit scattered over the allocator's pages. So the writer closes and
//! reopens the database when a compaction has left at most a quarter of the most versions the
//! store held since it was opened, if that peak was large enough to fill a good part of the
//! cache ([`Peak`]). With 10,000 workspaces created and deleted and the history compacted, the
//! server's RSS was 27.2 MiB with the reopen (which took 2 ms) against 30.7-32.2 MiB without
//! it (fresh: 22.6; after 100 created and deleted: 25.5); a 1 MiB page cache instead of the
//! reopen did not help (31.1).
//!
//! Every transaction holds a read guard of the handle while it lives ([`Database::guard`]), so
//! the reopen waits for the transactions under way and none sees the database closed; the
//! writer reopens between its own transactions.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock, RwLockReadGuard};

use kcp_storage::{Result, StorageError};

use crate::codec::internal;

/// redb's own page cache. Its default (1 GiB) lets a busy server's memory grow with the store;
/// the kernel's page cache still holds hot file pages beyond this.
const CACHE_BYTES: usize = 64 * 1024 * 1024;

/// Versions a store must have held since it was opened before shrinking makes it reopen: about
/// 30 MiB of workspaces' and namespaces' versions, half the cache.
const REOPEN_PEAK: u64 = if cfg!(test) { 100 } else { 20_000 };

/// The store's redb database, which the writer may close and open again.
pub(crate) struct Database {
    path: PathBuf,
    /// `None` only if opening it again failed.
    slot: RwLock<Option<redb::Database>>,
    reopens: AtomicU64,
}

/// A read guard of the open database: transactions begun through it must not outlive it.
pub(crate) struct Guard<'a>(RwLockReadGuard<'a, Option<redb::Database>>);

impl std::ops::Deref for Guard<'_> {
    type Target = redb::Database;

    fn deref(&self) -> &redb::Database {
        // A guard is only made of an open database (see `Database::guard`).
        self.0.as_ref().expect("a guard of an open database")
    }
}

impl Database {
    /// Opens (or creates) the database in the file at `path`.
    pub(crate) fn open(path: &Path) -> Result<Database> {
        Ok(Database {
            path: path.to_path_buf(),
            slot: RwLock::new(Some(open_file(path)?)),
            reopens: AtomicU64::new(0),
        })
    }

    /// The open database, held open until the guard is dropped.
    pub(crate) fn guard(&self) -> Result<Guard<'_>> {
        let guard = self.slot.read().unwrap_or_else(PoisonError::into_inner);
        match *guard {
            Some(_) => Ok(Guard(guard)),
            None => Err(StorageError::Unavailable(
                "the embedded store could not be opened again".into(),
            )),
        }
    }

    /// Closes the database and opens it again, once every transaction under way has ended.
    /// The caller must hold no guard.
    /// If it cannot be opened again, every later transaction fails as unavailable.
    pub(crate) fn reopen(&self) -> Result<()> {
        let mut slot = self.slot.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(database) = slot.take()
            && let Err(error) = database.close()
        {
            // Closed all the same (the writer holds no write transaction now).
            tracing::warn!(%error, "embedded store: closing it to open it again");
        }
        *slot = Some(open_file(&self.path)?);
        self.reopens.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// How often the database was reopened.
    #[cfg(test)]
    pub(crate) fn reopens(&self) -> u64 {
        self.reopens.load(Ordering::Relaxed)
    }
}

fn open_file(path: &Path) -> Result<redb::Database> {
    redb::Builder::new()
        .set_cache_size(CACHE_BYTES)
        .create(path)
        .map_err(internal)
}

/// The most versions the store held since the database was (re)opened; the writer's.
#[derive(Debug, Default)]
pub(crate) struct Peak {
    versions: u64,
}

impl Peak {
    /// Notes that the store holds `versions` now.
    pub(crate) fn saw(&mut self, versions: u64) {
        self.versions = self.versions.max(versions);
    }

    /// Whether a store holding `versions` after a compaction should be reopened: it held at
    /// least [`REOPEN_PEAK`] since it was opened and at most a quarter of that is left.
    pub(crate) fn shrunk_to(&self, versions: u64) -> bool {
        self.versions >= REOPEN_PEAK && versions.saturating_mul(4) <= self.versions
    }

    /// Starts over after a reopen, at `versions`.
    pub(crate) fn reset(&mut self, versions: u64) {
        self.versions = versions;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redb::ReadableDatabase;

    #[test]
    fn a_store_shrunk_to_a_quarter_of_a_large_peak_is_reopened() {
        let mut peak = Peak::default();
        peak.saw(REOPEN_PEAK * 2);
        peak.saw(REOPEN_PEAK);
        assert!(!peak.shrunk_to(REOPEN_PEAK), "half the peak left");
        assert!(peak.shrunk_to(REOPEN_PEAK / 2));
        peak.reset(REOPEN_PEAK / 2);
        assert!(!peak.shrunk_to(0), "the peak starts over after a reopen");
    }

    #[test]
    fn a_small_store_is_never_reopened() {
        let mut peak = Peak::default();
        peak.saw(REOPEN_PEAK - 1);
        assert!(!peak.shrunk_to(0));
    }

    #[test]
    fn a_reopened_database_keeps_what_was_committed() {
        let dir = tempfile::tempdir().unwrap();
        let database = Database::open(&dir.path().join("store.redb")).unwrap();
        const TABLE: redb::TableDefinition<u64, u64> = redb::TableDefinition::new("t");
        {
            let db = database.guard().unwrap();
            let tx = db.begin_write().unwrap();
            tx.open_table(TABLE).unwrap().insert(1, 2).unwrap();
            tx.commit().unwrap();
        }
        database.reopen().unwrap();
        assert_eq!(database.reopens(), 1);
        let db = database.guard().unwrap();
        let tx = db.begin_read().unwrap();
        let table = tx.open_table(TABLE).unwrap();
        assert_eq!(table.get(1).unwrap().map(|v| v.value()), Some(2));
    }
}
