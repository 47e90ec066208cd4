//! The database handle, closed and opened again once the store has shrunk to a fraction of its
//! peak.
//!
//! redb keeps what it grew for the store's largest size until the database closes: its page
//! cache indexes pages in tables (one per lock stripe, 131 of them) that never shrink, and the
//! pages it still caches sit scattered over the allocator's pages. So the writer closes and
//! reopens the database when a compaction has left at most a quarter of the most versions the
//! store held since it was opened, or of the most bytes of values written since then and not
//! compacted away, if that peak was large enough to fill a good part of the cache ([`Peak`]).
//! Counting bytes too: 168 real-world CRDs created and deleted are a few hundred versions, yet
//! redb's cache held 64 MiB of their pages for good after they were gone. With 10,000 workspaces created and deleted and the history compacted, the
//! server's RSS was 27.2 MiB with the reopen (which took 2 ms) against 30.7-32.2 MiB without
//! it (fresh: 22.6; after 100 created and deleted: 25.5); a 1 MiB page cache instead of the
//! reopen did not help (31.1).
//!
//! redb also keeps its page allocator's state for the whole file, and the file does not shrink
//! while a page near its end is in use: after a million workspaces were created and deleted,
//! the file stayed 12 GiB and the state some 3 MiB (about 0.3 MiB per GiB of file, measured
//! with redb 4.5 alone). So a reopen that finds the file mostly free ([`worth_compacting`])
//! compacts it first (redb's `compact`: the pages in use moved to the front, the file cut
//! after them), as etcd's operators defragment a member. Everything waits meanwhile: about a
//! second for a 2.5 GiB file of which 10 MiB is in use, 2.5 s for 270 MiB in use (redb 4.5
//! alone, this machine), so it is done only for little in use ([`COMPACT_AT_MOST`]).
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

/// Bytes of values a store must have been written (and not compacted away) since it was opened
/// before shrinking makes it reopen: half the cache.
const REOPEN_PEAK_BYTES: u64 = if cfg!(test) { 1024 } else { 32 * 1024 * 1024 };

/// The most bytes in use for which a reopen compacts the file (the time it takes follows them).
const COMPACT_AT_MOST: u64 = 64 * 1024 * 1024;

/// A reopen compacts the file when it is at least this many times the bytes in use.
const COMPACT_FROM_TIMES: u64 = 8;

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
        let mut database = open_file(&self.path)?;
        if compact_if_mostly_free(&mut database, &self.path) {
            // Opened once more: the compaction filled redb's page cache with pages it moved.
            if let Err(error) = database.close() {
                tracing::warn!(%error, "embedded store: closing it after compacting it");
            }
            database = open_file(&self.path)?;
        }
        *slot = Some(database);
        self.reopens.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// How often the database was reopened.
    #[cfg(test)]
    pub(crate) fn reopens(&self) -> u64 {
        self.reopens.load(Ordering::Relaxed)
    }
}

/// Compacts the just opened `database` (no transaction under way) when its file at `path` is
/// mostly free, and says whether it did; a failure leaves it as it was, and is logged.
fn compact_if_mostly_free(database: &mut redb::Database, path: &Path) -> bool {
    let in_use = match database.begin_write().and_then(|tx| {
        let stats = tx.stats()?;
        tx.abort()?;
        Ok(stats.allocated_pages() * stats.page_size() as u64)
    }) {
        Ok(bytes) => bytes,
        Err(error) => {
            tracing::warn!(%error, "embedded store: reading its size before compacting");
            return false;
        }
    };
    let file = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    if !worth_compacting(in_use, file) {
        return false;
    }
    let began = std::time::Instant::now();
    match database.compact() {
        Ok(_) => {
            tracing::info!(
                in_use,
                file_before = file,
                file_after = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
                took_ms = began.elapsed().as_millis() as u64,
                "embedded store compacted: its file was mostly free"
            );
            true
        }
        Err(error) => {
            tracing::warn!(%error, "embedded store: compacting its file");
            false
        }
    }
}

/// Whether a file of `file` bytes with `in_use` of them in use is worth compacting: mostly
/// free, and little enough in use to be moved quickly.
fn worth_compacting(in_use: u64, file: u64) -> bool {
    in_use <= COMPACT_AT_MOST && in_use.saturating_mul(COMPACT_FROM_TIMES) <= file
}

fn open_file(path: &Path) -> Result<redb::Database> {
    redb::Builder::new()
        .set_cache_size(CACHE_BYTES)
        .create(path)
        .map_err(internal)
}

/// The most versions the store held since the database was (re)opened, and the most bytes of
/// values written since then and not yet compacted away; the writer's.
#[derive(Debug, Default)]
pub(crate) struct Peak {
    versions: u64,
    /// Bytes of the values written since the database was opened, less those compactions
    /// removed (values stored before it opened are not counted: their removal only lowers
    /// this to 0).
    bytes: u64,
    peak_bytes: u64,
}

impl Peak {
    /// Notes that the store holds `versions` now.
    pub(crate) fn saw(&mut self, versions: u64) {
        self.versions = self.versions.max(versions);
    }

    /// Notes values of `bytes` written.
    pub(crate) fn wrote(&mut self, bytes: u64) {
        self.bytes = self.bytes.saturating_add(bytes);
        self.peak_bytes = self.peak_bytes.max(self.bytes);
    }

    /// Notes values of `bytes` removed by a compaction.
    pub(crate) fn removed(&mut self, bytes: u64) {
        self.bytes = self.bytes.saturating_sub(bytes);
    }

    /// Whether a store holding `versions` after a compaction should be reopened: it held at
    /// least [`REOPEN_PEAK`] versions since it was opened and at most a quarter of that is
    /// left, or at least [`REOPEN_PEAK_BYTES`] of values and at most a quarter of those (few
    /// versions, each large: CRDs of megabytes, which fill the cache as much).
    pub(crate) fn shrunk_to(&self, versions: u64) -> bool {
        (self.versions >= REOPEN_PEAK && versions.saturating_mul(4) <= self.versions)
            || (self.peak_bytes >= REOPEN_PEAK_BYTES
                && self.bytes.saturating_mul(4) <= self.peak_bytes)
    }

    /// Starts over after a reopen, at `versions`.
    pub(crate) fn reset(&mut self, versions: u64) {
        self.versions = versions;
        self.peak_bytes = self.bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redb::{ReadableDatabase, ReadableTableMetadata};

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
    fn only_a_mostly_free_file_with_little_in_use_is_compacted() {
        const MIB: u64 = 1024 * 1024;
        assert!(worth_compacting(10 * MIB, 12 * 1024 * MIB));
        assert!(worth_compacting(MIB, 8 * MIB));
        assert!(!worth_compacting(MIB, 8 * MIB - 1), "not mostly free");
        assert!(
            !worth_compacting(65 * MIB, 12 * 1024 * MIB),
            "too much to move at once"
        );
    }

    #[test]
    fn a_reopen_compacts_a_file_left_mostly_free() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.redb");
        let database = Database::open(&path).unwrap();
        const TABLE: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("t");
        let value = vec![7u8; 1000];
        let write = |keys: std::ops::Range<u64>, insert: bool| {
            let db = database.guard().unwrap();
            let tx = db.begin_write().unwrap();
            {
                let mut table = tx.open_table(TABLE).unwrap();
                for key in keys {
                    if insert {
                        table.insert(key, value.as_slice()).unwrap();
                    } else {
                        table.remove(key).unwrap();
                    }
                }
            }
            tx.commit().unwrap();
        };
        for chunk in 0..20 {
            write(chunk * 1000..(chunk + 1) * 1000, true);
        }
        // The last key written stays, holding a page near the file's end.
        write(1_000_000..1_000_001, true);
        for chunk in 0..20 {
            write(chunk * 1000..(chunk + 1) * 1000, false);
        }
        let grown = std::fs::metadata(&path).unwrap().len();
        assert!(grown > 16 * 1024 * 1024, "{grown}");
        database.reopen().unwrap();
        let compacted = std::fs::metadata(&path).unwrap().len();
        assert!(compacted * 4 < grown, "{compacted} of {grown}");
        let db = database.guard().unwrap();
        let tx = db.begin_read().unwrap();
        let table = tx.open_table(TABLE).unwrap();
        assert_eq!(table.len().unwrap(), 1);
        assert_eq!(
            table.get(1_000_000).unwrap().unwrap().value(),
            value.as_slice()
        );
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
