//! The embedded [`Storage`] backend on [redb], the default store of `kcp start`.
//!
//! One file holds every version of every key still needed (see [`codec`] for the layout). Reads
//! run in redb read transactions, concurrently with writes. All writes go through one writer
//! thread that commits many storage transactions in one redb transaction and one fsync (see
//! [`writer`]); an acknowledged write is on disk. Watches replay from the log and then follow the
//! writer's published batches through the shared [`WatchHub`].
//!
//! This crate must not know HTTP, Kubernetes objects or other backends.

mod codec;
mod read;
mod reopen;
mod writer;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use kcp_storage::watch::{EventSource, WatchHub};
use kcp_storage::{
    Event, GetResponse, KeyRange, RangeRequest, RangeResponse, Result, Revision, Storage,
    StorageError, Txn, TxnResponse, WatchRequest, WatchStream, resolve_read_revision,
};
use redb::{ReadTransaction, ReadableDatabase, ReadableTable};
use tokio::sync::{mpsc, oneshot};

use crate::codec::{
    HISTORY, LIVE_KEYS, LOG, META, META_COMPACTED, META_CURRENT, META_LIVE_KEYS, decode_keys,
    internal,
};

/// Queued write requests before callers wait for room.
const QUEUE_DEPTH: usize = 8 * writer::MAX_BATCH;

/// State shared by the storage handle, the writer thread and watch replays.
pub(crate) struct Shared {
    /// Every transaction holds a guard of it while it lives ([`reopen`]).
    db: reopen::Database,
    /// The newest committed revision; set by the writer after each commit.
    current: AtomicU64,
    /// History below this revision is gone or going.
    compacted: AtomicU64,
    hub: WatchHub,
    /// Empty commits the writer made when it ran out of work (see `writer::settle`).
    settles: AtomicU64,
}

/// Committed batches (each up to `writer::MAX_BATCH` events, deletes carrying the previous
/// value) kept for the slowest watcher before it must re-read from the log. Every batch a
/// watcher has not yet taken stays in memory: with 1,024, watchers lagging behind the deletion
/// of 100,000 workspaces held 1.4 GiB of batches.
const HUB_BATCHES: usize = 32;

/// The embedded store. Cloning shares it.
#[derive(Clone)]
pub struct RedbStorage {
    shared: Arc<Shared>,
    requests: mpsc::Sender<writer::Request>,
    writer: Arc<std::sync::Mutex<Option<std::thread::JoinHandle<()>>>>,
}

/// How the store is opened, besides its path.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenOptions {
    /// Called on the writer thread when it runs out of work after writing (at most every
    /// second): where the process's allocator can collect the thread's freed memory, which
    /// some allocators (mimalloc) leave to the thread that allocated it. The store itself
    /// knows no allocator.
    pub on_writer_idle: Option<fn()>,
}

impl RedbStorage {
    /// Opens (or creates) the store in the file at `path`, recovering it if the last process
    /// died without closing it.
    pub fn open(path: &Path) -> Result<Self> {
        RedbStorage::open_with(path, OpenOptions::default())
    }

    /// [`RedbStorage::open`] with `options`.
    pub fn open_with(path: &Path, options: OpenOptions) -> Result<Self> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(internal)?;
        }
        let database = reopen::Database::open(path)?;
        let db = database.guard()?;
        let tx = db.begin_write().map_err(internal)?;
        let (current, compacted) = {
            let history = tx.open_table(HISTORY).map_err(internal)?;
            tx.open_table(LOG).map_err(internal)?;
            let mut live = tx.open_table(LIVE_KEYS).map_err(internal)?;
            let mut meta = tx.open_table(META).map_err(internal)?;
            let read = |meta: &redb::Table<&str, u64>, name| -> Result<u64> {
                Ok(meta.get(name).map_err(internal)?.map_or(0, |v| v.value()))
            };
            if meta.get(META_LIVE_KEYS).map_err(internal)?.is_none() {
                read::fill_live_keys(&history, &mut live)?;
                meta.insert(META_LIVE_KEYS, 1).map_err(internal)?;
            }
            (read(&meta, META_CURRENT)?, read(&meta, META_COMPACTED)?)
        };
        tx.commit().map_err(internal)?;
        drop(db);

        let shared = Arc::new(Shared {
            db: database,
            current: AtomicU64::new(current),
            compacted: AtomicU64::new(compacted),
            hub: WatchHub::new(HUB_BATCHES),
            settles: AtomicU64::new(0),
        });
        let (requests, receiver) = mpsc::channel(QUEUE_DEPTH);
        let writer_shared = Arc::clone(&shared);
        let writer = std::thread::Builder::new()
            .name("kcp-redb-writer".into())
            .spawn(move || writer::run(writer_shared, receiver, options.on_writer_idle))
            .map_err(internal)?;
        Ok(RedbStorage {
            shared,
            requests,
            writer: Arc::new(std::sync::Mutex::new(Some(writer))),
        })
    }

    /// Stops the writer after it has committed everything queued. Other clones of this handle
    /// then fail their writes with [`StorageError::Unavailable`]. The file closes when the last
    /// clone and watch are gone.
    pub async fn close(self) {
        let RedbStorage {
            requests, writer, ..
        } = self;
        let _ = requests.send(writer::Request::Shutdown).await;
        let handle = writer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(handle) = handle {
            let _ = tokio::task::spawn_blocking(move || handle.join()).await;
        }
    }

    async fn submit<T>(
        &self,
        request: writer::Request,
        reply: oneshot::Receiver<Result<T>>,
    ) -> Result<T> {
        let closed = || StorageError::Unavailable("the embedded store is closed".into());
        self.requests.send(request).await.map_err(|_| closed())?;
        reply.await.map_err(|_| closed())?
    }
}

impl Shared {
    /// A read transaction of `db` and the revision bounds it may serve; `revision` 0 means
    /// current.
    fn read_at(
        &self,
        db: &reopen::Guard<'_>,
        revision: Revision,
    ) -> Result<(ReadTransaction, Revision)> {
        let current = self.current.load(Ordering::Acquire);
        let tx = db.begin_read().map_err(internal)?;
        // Loaded after the snapshot: a compaction that removed history this snapshot lacks had
        // already published its revision.
        let compacted = self.compacted.load(Ordering::Acquire);
        let revision = resolve_read_revision(revision, current, compacted)?;
        Ok((tx, revision))
    }
}

impl EventSource for Shared {
    fn events(
        &self,
        range: &KeyRange,
        from: Revision,
        to: Revision,
        limit: usize,
    ) -> Result<Vec<Event>> {
        let db = self.db.guard()?;
        let tx = db.begin_read().map_err(internal)?;
        let compacted = self.compacted.load(Ordering::Acquire);
        if from < compacted {
            return Err(StorageError::Compacted {
                requested: from,
                compacted,
            });
        }
        let history = tx.open_table(HISTORY).map_err(internal)?;
        let log = tx.open_table(LOG).map_err(internal)?;
        let mut events = Vec::new();
        for entry in log.range(from..=to).map_err(internal)? {
            if events.len() >= limit {
                break;
            }
            let (revision, keys) = entry.map_err(internal)?;
            for key in decode_keys(keys.value())?
                .iter()
                .filter(|k| range.contains(k))
            {
                events.extend(read::event_at(&history, key, revision.value())?);
            }
        }
        Ok(events)
    }

    fn current_revision(&self) -> Revision {
        self.current.load(Ordering::Acquire)
    }

    fn compacted_revision(&self) -> Revision {
        self.compacted.load(Ordering::Acquire)
    }
}

#[async_trait]
impl Storage for RedbStorage {
    async fn get(&self, key: &[u8], revision: Revision) -> Result<GetResponse> {
        let db = self.shared.db.guard()?;
        let (tx, revision) = self.shared.read_at(&db, revision)?;
        let history = tx.open_table(HISTORY).map_err(internal)?;
        Ok(GetResponse {
            kv: read::get_at(&history, key, revision)?,
            revision,
        })
    }

    async fn range(&self, request: RangeRequest) -> Result<RangeResponse> {
        let db = self.shared.db.guard()?;
        let (tx, revision) = self.shared.read_at(&db, request.revision)?;
        let history = tx.open_table(HISTORY).map_err(internal)?;
        // A page of a longer range at the snapshot's own revision: the keys it holds are
        // counted from `live`, without reading their versions.
        let counted_live = request.limit != 0 && !request.skip_count && {
            let meta = tx.open_table(META).map_err(internal)?;
            let snapshot = meta.get(META_CURRENT).map_err(internal)?;
            snapshot.map(|v| v.value()) == Some(revision)
        };
        let (kvs, count) = read::range_at(
            &history,
            &request.range,
            revision,
            request.limit,
            request.skip_count || counted_live,
        )?;
        let count = match counted_live {
            true => {
                let live = tx.open_table(LIVE_KEYS).map_err(internal)?;
                read::count_live(&live, &request.range)?
            }
            false => count,
        };
        Ok(RangeResponse::new(kvs, count, revision))
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResponse> {
        txn.validate()?;
        let (reply, response) = oneshot::channel();
        self.submit(writer::Request::Txn(txn, reply), response)
            .await
    }

    async fn watch(&self, request: WatchRequest) -> Result<WatchStream> {
        let source: Arc<dyn EventSource> = self.shared.clone();
        self.shared.hub.watch(source, request)
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        let (reply, response) = oneshot::channel();
        self.submit(writer::Request::Compact(revision, reply), response)
            .await
    }

    async fn current_revision(&self) -> Result<Revision> {
        Ok(self.shared.current.load(Ordering::Acquire))
    }
}
