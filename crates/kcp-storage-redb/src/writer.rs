//! The single writer: one thread owns every write transaction of the database.
//!
//! Callers queue requests; the writer takes whatever is queued (up to [`MAX_BATCH`]) and applies
//! it in one redb transaction with one fsync (group commit). Each storage transaction still gets
//! its own revision, in queue order. Only after the commit is durable does the writer publish the
//! events to the watch hub and acknowledge the callers, so nothing is acknowledged that a crash
//! could lose. If the commit fails, every caller in the batch gets the error and nothing changed.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kcp_storage::{Event, Op, OpResult, Result, Revision, Txn, TxnResponse, check_compaction};
use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata, Table, WriteTransaction};
use tokio::sync::{mpsc, oneshot};

use crate::Shared;
use crate::codec::{
    HISTORY, LIVE_KEYS, LOG, META, META_COMPACTED, META_CURRENT, Record, encode_keys, internal,
};
use crate::read::{get_at, version_at};
use crate::reopen::Peak;

/// Most storage transactions committed together.
pub(crate) const MAX_BATCH: usize = 1024;

/// Most log revisions one compaction transaction removes, to keep transactions bounded.
const COMPACTION_CHUNK: usize = if cfg!(test) { 64 } else { 2_000 };

/// After a chunk of compaction, the writer serves writes for this many times the chunk's
/// duration before the next chunk: compaction takes at most a quarter of its time.
const WRITES_PER_COMPACTION: u32 = 3;

/// The least time between two calls of the idle hook.
const IDLE_HOOK_EVERY: Duration = Duration::from_millis(if cfg!(test) { 100 } else { 1000 });

/// How long the writer waits without a request before it settles the store ([`settle`]).
const SETTLE_AFTER: Duration = Duration::from_millis(if cfg!(test) { 20 } else { 100 });

pub(crate) enum Request {
    Txn(Txn, oneshot::Sender<Result<TxnResponse>>),
    Compact(Revision, oneshot::Sender<Result<()>>),
    /// Commit what came before, then stop; later requests fail as "closed".
    Shutdown,
}

/// Runs the writer until every sender is gone or a shutdown request arrives.
///
/// A compaction removes its history a chunk ([`COMPACTION_CHUNK`] log revisions, one
/// transaction) at a time, and between two chunks the writer commits writes for three times as
/// long as the chunk took: writes wait for one chunk at most and keep three quarters of the
/// writer, instead of waiting for the whole compaction (at a million workspaces, five minutes
/// of history took half a minute to remove, and every write waited for it). Compactions queue
/// behind each other; one under way is finished before the writer stops.
pub(crate) fn run(
    shared: Arc<Shared>,
    mut requests: mpsc::Receiver<Request>,
    on_idle: Option<fn()>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    let mut compactions = Compactions::default();
    // A store opened large may shrink by compaction alone.
    compactions.peak.saw(history_versions(&shared).unwrap_or(0));
    let mut next_chunk = Instant::now();
    let mut idle = IdleHook::new(on_idle);
    loop {
        let first = if compactions.idle() {
            match idle.wait(&mut requests, || settle(&shared)) {
                Some(request) => request,
                None => break,
            }
        } else {
            match requests.try_recv() {
                Ok(request) => request,
                Err(mpsc::error::TryRecvError::Empty) => {
                    let now = Instant::now();
                    if now < next_chunk {
                        // Writes' turn: wait briefly for one rather than block on the queue.
                        std::thread::sleep((next_chunk - now).min(Duration::from_millis(1)));
                    } else {
                        next_chunk = compactions.step_in_turn(&shared);
                    }
                    continue;
                }
                Err(mpsc::error::TryRecvError::Disconnected) => break,
            }
        };
        let mut stop = false;
        match first {
            Request::Compact(revision, reply) => compactions.queue(revision, reply),
            Request::Txn(txn, reply) => {
                batch.push((txn, reply));
                while batch.len() < MAX_BATCH {
                    match requests.try_recv() {
                        Ok(Request::Txn(txn, reply)) => batch.push((txn, reply)),
                        Ok(Request::Compact(revision, reply)) => compactions.queue(revision, reply),
                        Ok(Request::Shutdown) => {
                            stop = true;
                            break;
                        }
                        Err(_) => break,
                    }
                }
                commit_batch(&shared, &mut batch, &mut compactions.peak);
            }
            Request::Shutdown => stop = true,
        }
        if stop {
            break;
        }
        if Instant::now() >= next_chunk {
            next_chunk = compactions.step_in_turn(&shared);
        }
    }
    compactions.finish(&shared);
}

/// What the writer does when it runs out of work after writing. It calls the hook (the
/// process's allocator collects the thread's freed memory there) at most every
/// [`IDLE_HOOK_EVERY`] but always before the writer stays idle: when the last call was too
/// recent, the writer waits for a request only until the next call is due. It settles the store
/// ([`settle`]) once no request has come for [`SETTLE_AFTER`], so never between the batches of
/// a steady stream of writes.
struct IdleHook {
    hook: Option<fn()>,
    last: Option<Instant>,
    /// Whether a request was taken since the last call of the hook.
    owed: bool,
    /// Whether a request was taken since the store last settled.
    unsettled: bool,
    /// A clock for waiting on the queue with a deadline (none if it could not be built: then
    /// the writer polls the queue).
    clock: Option<tokio::runtime::Runtime>,
}

impl IdleHook {
    fn new(hook: Option<fn()>) -> IdleHook {
        let clock = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .ok();
        IdleHook {
            hook,
            last: None,
            owed: false,
            unsettled: false,
            clock,
        }
    }

    /// The next request (`None`: every sender is gone), calling the hook and settling the store
    /// with `settle` when they are due.
    fn wait(
        &mut self,
        requests: &mut mpsc::Receiver<Request>,
        settle: impl Fn(),
    ) -> Option<Request> {
        loop {
            match requests.try_recv() {
                Ok(request) => return Some(self.took(request)),
                Err(mpsc::error::TryRecvError::Disconnected) => return None,
                Err(mpsc::error::TryRecvError::Empty) => {}
            }
            let now = Instant::now();
            if !self.owed {
                if !self.unsettled {
                    return requests.blocking_recv().map(|request| self.took(request));
                }
                match self.receive_until(requests, now + SETTLE_AFTER) {
                    Some(received) => return received.map(|request| self.took(request)),
                    None => {
                        settle();
                        self.unsettled = false;
                    }
                }
                continue;
            }
            match self.last.map(|last| last + IDLE_HOOK_EVERY) {
                Some(due) if now < due => {
                    if let Some(received) = self.receive_until(requests, due) {
                        return received.map(|request| self.took(request));
                    }
                }
                _ => {
                    if let Some(hook) = self.hook {
                        hook();
                    }
                    self.last = Some(now);
                    self.owed = false;
                }
            }
        }
    }

    /// `request`, noted as work to call the hook and settle the store after.
    fn took(&mut self, request: Request) -> Request {
        self.owed = true;
        self.unsettled = true;
        request
    }

    /// What the queue gives before `deadline` (`Some(None)`: every sender is gone); `None` if
    /// nothing came.
    fn receive_until(
        &self,
        requests: &mut mpsc::Receiver<Request>,
        deadline: Instant,
    ) -> Option<Option<Request>> {
        let left = deadline.saturating_duration_since(Instant::now());
        match &self.clock {
            Some(clock) => {
                // The timer is made inside the clock's context, which it needs.
                let until = async { tokio::time::timeout(left, requests.recv()).await };
                clock.block_on(until).ok()
            }
            None => {
                std::thread::sleep(left.min(Duration::from_millis(1)));
                None
            }
        }
    }
}

/// The compactions asked for and not yet done, the first one perhaps under way.
#[derive(Default)]
struct Compactions {
    queued: std::collections::VecDeque<(Revision, oneshot::Sender<Result<()>>)>,
    under_way: Option<UnderWay>,
    /// The most versions the store held since it was opened: a compaction that leaves a
    /// fraction of it reopens the database ([`crate::reopen`]).
    peak: Peak,
}

/// A compaction whose revision is marked compacted and whose history is being removed.
struct UnderWay {
    /// The first log revision whose history is still to remove.
    from: Revision,
    until: Revision,
    reply: oneshot::Sender<Result<()>>,
}

impl Compactions {
    fn idle(&self) -> bool {
        self.under_way.is_none() && self.queued.is_empty()
    }

    fn queue(&mut self, revision: Revision, reply: oneshot::Sender<Result<()>>) {
        self.queued.push_back((revision, reply));
    }

    /// Starts the next compaction if none is under way, then removes one chunk of history.
    fn step(&mut self, shared: &Shared) {
        if self.under_way.is_none() {
            let Some((revision, reply)) = self.queued.pop_front() else {
                return;
            };
            match mark_compacted(shared, revision) {
                Ok(from) => {
                    self.under_way = Some(UnderWay {
                        from,
                        until: revision,
                        reply,
                    })
                }
                Err(error) => {
                    let _ = reply.send(Err(error));
                    return;
                }
            }
        }
        let Some(mut under_way) = self.under_way.take() else {
            return;
        };
        if under_way.from < under_way.until {
            let removed = shared.db.guard().and_then(|db| {
                let tx = db.begin_write().map_err(internal)?;
                let chunk = compact_chunk(&tx, under_way.from, under_way.until)?;
                tx.commit().map_err(internal)?;
                Ok(chunk)
            });
            match removed {
                Ok((next, bytes)) => {
                    under_way.from = next;
                    self.peak.removed(bytes);
                }
                Err(error) => {
                    let _ = under_way.reply.send(Err(error));
                    return;
                }
            }
        }
        if under_way.from < under_way.until {
            self.under_way = Some(under_way);
        } else {
            self.reopen_if_shrunk(shared);
            let _ = under_way.reply.send(Ok(()));
        }
    }

    /// Reopens the database if the compaction just finished left a fraction of the store's
    /// peak ([`Peak::shrunk_to`]), so that redb's page cache gives back the room of its peak.
    fn reopen_if_shrunk(&mut self, shared: &Shared) {
        let versions = match history_versions(shared) {
            Ok(versions) => versions,
            Err(error) => {
                tracing::warn!(%error, "embedded store: counting versions after a compaction");
                return;
            }
        };
        if !self.peak.shrunk_to(versions) {
            return;
        }
        let began = Instant::now();
        match shared.db.reopen() {
            Ok(()) => {
                tracing::info!(
                    versions,
                    took_ms = began.elapsed().as_millis() as u64,
                    "embedded store reopened: a compaction left a fraction of its versions"
                );
                self.peak.reset(versions);
            }
            Err(error) => tracing::error!(%error, "embedded store: opening it again failed"),
        }
    }

    /// [`Compactions::step`], and when the next chunk's turn comes: after the writes have had
    /// [`WRITES_PER_COMPACTION`] times as long as this chunk took.
    fn step_in_turn(&mut self, shared: &Shared) -> Instant {
        let began = Instant::now();
        self.step(shared);
        let now = Instant::now();
        now + (now - began) * WRITES_PER_COMPACTION
    }

    /// Runs every compaction asked for to its end.
    fn finish(&mut self, shared: &Shared) {
        while !self.idle() {
            self.step(shared);
        }
    }
}

/// An empty durable commit, made once the writer has had no request for [`SETTLE_AFTER`] after
/// writing. redb follows a commit that freed pages with a non-durable one of its own (its
/// freed-page bookkeeping), whose pages stay in its write buffer until the next durable commit;
/// until then, every read that misses redb's full page cache first looks through all the
/// buffer's stripes for pages to write back, and finds none. The empty commit empties the
/// buffer. Listing 100,000 configmaps (more than the cache holds) after creating them took
/// 0.93-1.15 s without it, 0.64-0.70 s with it (`kcp-bench lists`).
fn settle(shared: &Shared) {
    let committed = shared.db.guard().and_then(|db| {
        let tx = db.begin_write().map_err(internal)?;
        tx.commit().map_err(internal)
    });
    match committed {
        Ok(()) => {
            shared.settles.fetch_add(1, Ordering::Relaxed);
        }
        Err(error) => tracing::warn!(%error, "embedded store: an empty commit failed"),
    }
}

/// Applies and commits one batch, then publishes and acknowledges.
fn commit_batch(
    shared: &Shared,
    batch: &mut Vec<(Txn, oneshot::Sender<Result<TxnResponse>>)>,
    peak: &mut Peak,
) {
    let start = shared.current.load(Ordering::Acquire);
    let applied = apply_batch(shared, start, batch, peak);
    match applied {
        Ok((responses, events, current)) => {
            shared.current.store(current, Ordering::Release);
            shared.hub.publish(events);
            for ((_, reply), response) in batch.drain(..).zip(responses) {
                let _ = reply.send(Ok(response));
            }
        }
        Err(error) => {
            tracing::error!(%error, "embedded store commit failed");
            for (_, reply) in batch.drain(..) {
                let _ = reply.send(Err(error.clone()));
            }
        }
    }
}

type Applied = (Vec<TxnResponse>, Vec<Event>, Revision);

fn apply_batch(
    shared: &Shared,
    start: Revision,
    batch: &[(Txn, oneshot::Sender<Result<TxnResponse>>)],
    peak: &mut Peak,
) -> Result<Applied> {
    let db = shared.db.guard()?;
    let tx = db.begin_write().map_err(internal)?;
    let mut current = start;
    let mut responses = Vec::with_capacity(batch.len());
    let mut events = Vec::new();
    {
        let mut history = tx.open_table(HISTORY).map_err(internal)?;
        let mut log = tx.open_table(LOG).map_err(internal)?;
        let mut live = tx.open_table(LIVE_KEYS).map_err(internal)?;
        for (txn, _) in batch {
            let mut tables = Tables {
                history: &mut history,
                log: &mut log,
                live: &mut live,
            };
            let response = apply_txn(&mut tables, current, txn, &mut events)?;
            current = response.revision;
            responses.push(response);
        }
        peak.wrote(events.iter().map(|e| e.kv.value.len() as u64).sum());
        if current != start {
            let mut meta = tx.open_table(META).map_err(internal)?;
            meta.insert(META_CURRENT, current).map_err(internal)?;
        }
        peak.saw(history.len().map_err(internal)?);
    }
    tx.commit().map_err(internal)?;
    Ok((responses, events, current))
}

type HistoryTable<'t> = Table<'t, (&'static [u8], u64), &'static [u8]>;
type LogTable<'t> = Table<'t, u64, &'static [u8]>;
type LiveTable<'t> = Table<'t, &'static [u8], ()>;

/// The tables a storage transaction writes.
struct Tables<'a, 't> {
    history: &'a mut HistoryTable<'t>,
    log: &'a mut LogTable<'t>,
    live: &'a mut LiveTable<'t>,
}

/// Applies one storage transaction on top of `current` inside the writer's redb transaction.
fn apply_txn(
    tables: &mut Tables<'_, '_>,
    current: Revision,
    txn: &Txn,
    events: &mut Vec<Event>,
) -> Result<TxnResponse> {
    let (history, log, live) = (&mut *tables.history, &mut *tables.log, &mut *tables.live);
    let mut succeeded = true;
    for compare in &txn.compares {
        if !compare.evaluate(get_at(history, &compare.key, current)?.as_ref()) {
            succeeded = false;
            break;
        }
    }
    let ops = if succeeded {
        &txn.success
    } else {
        &txn.failure
    };
    let revision = current + 1;
    let mut changed: Vec<&[u8]> = Vec::new();
    let mut results = Vec::with_capacity(ops.len());
    for op in ops {
        results.push(match op {
            Op::Get(key) => OpResult::Get(get_at(history, key, revision)?),
            Op::Put { key, value } => {
                let prev = get_at(history, key, revision)?;
                let kv = put(history, key, value, prev.as_ref(), revision)?;
                if prev.is_none() {
                    live.insert(key.as_slice(), ()).map_err(internal)?;
                }
                events.push(Event::put(kv, prev.clone()));
                changed.push(key);
                OpResult::Put { prev }
            }
            Op::Delete(key) => {
                let prev = get_at(history, key, revision)?;
                if let Some(prev) = &prev {
                    live.remove(key.as_slice()).map_err(internal)?;
                    let tombstone = Record::Tombstone.encode();
                    history
                        .insert((key.as_slice(), revision), tombstone.as_slice())
                        .map_err(internal)?;
                    events.push(Event::delete(prev.clone(), revision));
                    changed.push(key);
                }
                OpResult::Delete { prev }
            }
        });
    }
    if changed.is_empty() {
        return Ok(TxnResponse {
            succeeded,
            revision: current,
            results,
        });
    }
    log.insert(revision, encode_keys(changed).as_slice())
        .map_err(internal)?;
    Ok(TxnResponse {
        succeeded,
        revision,
        results,
    })
}

fn put(
    history: &mut HistoryTable<'_>,
    key: &[u8],
    value: &Bytes,
    prev: Option<&kcp_storage::KeyValue>,
    revision: Revision,
) -> Result<kcp_storage::KeyValue> {
    let (create_revision, version) =
        prev.map_or((revision, 1), |p| (p.create_revision, p.version + 1));
    let record = Record::Live {
        create_revision,
        version,
        value: value.clone(),
    };
    history
        .insert((key, revision), record.encode().as_slice())
        .map_err(internal)?;
    Ok(kcp_storage::KeyValue {
        key: Bytes::copy_from_slice(key),
        value: value.clone(),
        create_revision,
        mod_revision: revision,
        version,
    })
}

/// Marks history below `revision` compacted (reads below it are refused from now on) and answers
/// the first log revision whose history is still to remove: every version older than `revision`
/// except each key's newest live one goes, chunk by chunk ([`compact_chunk`]).
fn mark_compacted(shared: &Shared, revision: Revision) -> Result<Revision> {
    let current = shared.current.load(Ordering::Acquire);
    let compacted = shared.compacted.load(Ordering::Acquire);
    check_compaction(revision, current, compacted)?;
    let db = shared.db.guard()?;
    let tx = db.begin_write().map_err(internal)?;
    {
        let mut meta = tx.open_table(META).map_err(internal)?;
        meta.insert(META_COMPACTED, revision).map_err(internal)?;
    }
    tx.commit().map_err(internal)?;
    shared.compacted.store(revision, Ordering::Release);
    Ok(compacted)
}

/// Versions the store holds now (every key's, live or compacted away soon).
fn history_versions(shared: &Shared) -> Result<u64> {
    let db = shared.db.guard()?;
    let tx = db.begin_read().map_err(internal)?;
    let history = tx.open_table(HISTORY).map_err(internal)?;
    history.len().map_err(internal)
}

/// Removes the history that log revisions `[from, ..)` below `until` made obsolete, for at most
/// [`COMPACTION_CHUNK`] revisions; returns where the next chunk starts and the bytes removed.
fn compact_chunk(
    tx: &WriteTransaction,
    from: Revision,
    until: Revision,
) -> Result<(Revision, u64)> {
    let mut history = tx.open_table(HISTORY).map_err(internal)?;
    let mut log = tx.open_table(LOG).map_err(internal)?;
    let mut keys = std::collections::BTreeSet::new();
    let mut next = until;
    let mut bytes = 0;
    let mut revisions = Vec::new();
    for entry in log
        .range(from..until)
        .map_err(internal)?
        .take(COMPACTION_CHUNK + 1)
    {
        let (revision, changed) = entry.map_err(internal)?;
        if revisions.len() == COMPACTION_CHUNK {
            next = revision.value();
            break;
        }
        revisions.push(revision.value());
        keys.extend(crate::codec::decode_keys(changed.value())?);
    }
    for key in &keys {
        // Versions below `until`; keep the newest one unless it is a deletion.
        let mut obsolete: Vec<Revision> = Vec::new();
        for entry in history
            .range((key.as_slice(), 0u64)..(key.as_slice(), until))
            .map_err(internal)?
        {
            obsolete.push(entry.map_err(internal)?.0.value().1);
        }
        if let Some(&newest) = obsolete.last()
            && let Some((_, Record::Live { .. })) = version_at(&history, key, newest)?
        {
            obsolete.pop();
        }
        for revision in obsolete {
            if let Some(removed) = history
                .remove((key.as_slice(), revision))
                .map_err(internal)?
            {
                bytes += removed.value().len() as u64;
            }
        }
    }
    for revision in revisions {
        log.remove(revision).map_err(internal)?;
    }
    Ok((next, bytes))
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use futures::StreamExt;
    use kcp_storage::{Op, Storage, Txn};
    use tokio::sync::oneshot;

    use super::{COMPACTION_CHUNK, Request};
    use crate::RedbStorage;

    fn put(key: &str, value: &str) -> Txn {
        Txn {
            compares: vec![],
            success: vec![Op::put(
                key.as_bytes().to_vec(),
                Bytes::from(value.to_string()),
            )],
            failure: vec![],
        }
    }

    fn delete(key: &str) -> Txn {
        Txn {
            compares: vec![],
            success: vec![Op::Delete(key.as_bytes().to_vec())],
            failure: vec![],
        }
    }

    /// A write queued behind a compaction of fifty chunks is committed before the compaction
    /// ends (each chunk is a durable commit, so the writer cannot finish them all before the
    /// write arrives); the compaction still finishes and removes the history.
    #[tokio::test]
    async fn writes_go_on_between_the_chunks_of_a_compaction() {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStorage::open(&dir.path().join("store.redb")).unwrap();
        for i in 0..50 * COMPACTION_CHUNK {
            let (reply, done) = oneshot::channel();
            let txn = put(&format!("/k/{}", i % 10), &i.to_string());
            store.requests.send(Request::Txn(txn, reply)).await.unwrap();
            if i % 1000 == 999 {
                done.await.unwrap().unwrap();
            }
        }
        let (reply, written) = oneshot::channel();
        store
            .requests
            .send(Request::Txn(put("/k/last", "x"), reply))
            .await
            .unwrap();
        let until = written.await.unwrap().unwrap().revision;

        let (compact_reply, mut compacted) = oneshot::channel();
        let (write_reply, written) = oneshot::channel();
        store
            .requests
            .send(Request::Compact(until, compact_reply))
            .await
            .unwrap();
        store
            .requests
            .send(Request::Txn(put("/k/late", "v"), write_reply))
            .await
            .unwrap();
        written.await.unwrap().unwrap();
        assert!(
            compacted.try_recv().is_err(),
            "the write waited for the whole compaction"
        );
        compacted.await.unwrap().unwrap();
        let old = store.get(b"/k/0", until - 5).await;
        assert!(
            old.is_err(),
            "reads below the compacted revision are refused"
        );
        let now = store.get(b"/k/0", 0).await.unwrap();
        assert!(now.kv.is_some());
    }

    /// Once the writer has had no request for a moment after writing, it makes an empty commit
    /// (also without an idle hook), once, and none while nothing is written.
    #[tokio::test]
    async fn the_writer_settles_the_store_once_after_writes() {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStorage::open(&dir.path().join("store.redb")).unwrap();
        let settles = || {
            store
                .shared
                .settles
                .load(std::sync::atomic::Ordering::Relaxed)
        };
        let pause = || tokio::time::sleep(super::IDLE_HOOK_EVERY * 3);
        pause().await;
        assert_eq!(settles(), 0, "settled before any write");
        for i in 0..3 {
            store.txn(put(&format!("/k/{i}"), "v")).await.unwrap();
        }
        // Each write came right after the one before (a stall of the test could still let the
        // writer settle between two).
        pause().await;
        let after_writes = settles();
        assert!(
            (1..=3).contains(&after_writes),
            "settled {after_writes} times after three writes"
        );
        pause().await;
        assert_eq!(settles(), after_writes, "settled while nothing was written");
        store.txn(put("/k/again", "v")).await.unwrap();
        pause().await;
        assert_eq!(
            settles(),
            after_writes + 1,
            "not settled once after the next write"
        );
        assert_eq!(
            store
                .get(b"/k/again", 0)
                .await
                .unwrap()
                .kv
                .unwrap()
                .value
                .as_ref(),
            b"v"
        );
    }

    /// Few but large versions count by their bytes: a compaction that leaves a quarter of the
    /// most bytes written since the store opened reopens it, though the versions are too few.
    #[tokio::test]
    async fn a_compaction_that_leaves_a_fraction_of_the_bytes_reopens_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStorage::open(&dir.path().join("store.redb")).unwrap();
        let reopens = || store.shared.db.reopens();
        let big = "x".repeat(2048);
        store.txn(put("/k/keep", "kept")).await.unwrap();
        for i in 0..4 {
            store.txn(put(&format!("/k/{i}"), &big)).await.unwrap();
        }
        let revision = store.current_revision().await.unwrap();
        store.compact(revision).await.unwrap();
        assert_eq!(reopens(), 0, "reopened with every value still live");
        for i in 0..4 {
            store.txn(delete(&format!("/k/{i}"))).await.unwrap();
        }
        let revision = store.current_revision().await.unwrap();
        store.compact(revision).await.unwrap();
        assert_eq!(reopens(), 1, "not reopened after the big values went");
        let kept = store.get(b"/k/keep", 0).await.unwrap().kv.unwrap();
        assert_eq!(kept.value.as_ref(), b"kept");
    }

    /// A compaction that leaves a quarter of the most versions the store held reopens the
    /// database (one that leaves more does not); reads running meanwhile all succeed, what was
    /// kept reads back and takes writes after, and a watch open across the reopen goes on.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_compaction_that_leaves_a_fraction_of_the_store_reopens_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = RedbStorage::open(&dir.path().join("store.redb")).unwrap();
        let reopens = || store.shared.db.reopens();
        store.txn(put("/k/keep", "kept")).await.unwrap();
        for i in 0..200 {
            store.txn(put(&format!("/k/{i}"), "v")).await.unwrap();
        }
        let revision = store.current_revision().await.unwrap();
        store.compact(revision).await.unwrap();
        assert_eq!(reopens(), 0, "reopened with every key still live");

        let reading = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let reader = tokio::spawn({
            let (store, reading) = (store.clone(), reading.clone());
            async move {
                let mut reads = 0;
                while reading.load(std::sync::atomic::Ordering::Relaxed) {
                    let kv = store
                        .get(b"/k/keep", 0)
                        .await
                        .expect("a read during the reopen");
                    assert!(kv.kv.is_some());
                    reads += 1;
                    tokio::task::yield_now().await;
                }
                reads
            }
        });
        for i in 0..200 {
            store.txn(delete(&format!("/k/{i}"))).await.unwrap();
        }
        let revision = store.current_revision().await.unwrap();
        let mut watch = store
            .watch(kcp_storage::WatchRequest::prefix("/k/", revision + 1))
            .await
            .unwrap();
        store.compact(revision).await.unwrap();
        reading.store(false, std::sync::atomic::Ordering::Relaxed);
        assert!(reader.await.unwrap() > 0);
        assert_eq!(reopens(), 1, "not reopened after the store shrank");

        let kept = store.get(b"/k/keep", 0).await.unwrap().kv.unwrap();
        assert_eq!(kept.value.as_ref(), b"kept");
        assert!(store.get(b"/k/0", 0).await.unwrap().kv.is_none());
        store.txn(put("/k/after", "w")).await.unwrap();
        assert!(store.get(b"/k/after", 0).await.unwrap().kv.is_some());
        let next = tokio::time::timeout(std::time::Duration::from_secs(10), watch.next());
        let event = next.await.expect("the watch stalled").unwrap().unwrap();
        assert_eq!(event.kv.key.as_ref(), b"/k/after");
    }

    static IDLE_CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    fn count_idle() {
        IDLE_CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    /// The idle hook runs once the writer has written and runs out of work, even when a burst
    /// ends right after an earlier call, and not again while nothing is written.
    #[tokio::test]
    async fn the_idle_hook_runs_after_writes_and_only_then() {
        use std::sync::atomic::Ordering::SeqCst;
        let dir = tempfile::tempdir().unwrap();
        let options = crate::OpenOptions {
            on_writer_idle: Some(count_idle),
        };
        let store = RedbStorage::open_with(&dir.path().join("store.redb"), options).unwrap();
        let settle = || tokio::time::sleep(super::IDLE_HOOK_EVERY * 3);
        settle().await;
        assert_eq!(IDLE_CALLS.load(SeqCst), 0, "called before any write");
        store.txn(put("/k/a", "1")).await.unwrap();
        settle().await;
        assert_eq!(IDLE_CALLS.load(SeqCst), 1, "not called once after a write");
        // Two bursts closer together than the hook's interval: the second still gets a call
        // after it.
        store.txn(put("/k/b", "2")).await.unwrap();
        tokio::time::sleep(super::IDLE_HOOK_EVERY / 4).await;
        let before_second = IDLE_CALLS.load(SeqCst);
        store.txn(put("/k/c", "3")).await.unwrap();
        settle().await;
        let after = IDLE_CALLS.load(SeqCst);
        assert!(
            after > before_second,
            "the second burst went without a call"
        );
        settle().await;
        assert_eq!(
            IDLE_CALLS.load(SeqCst),
            after,
            "called while nothing was written"
        );
    }
}
