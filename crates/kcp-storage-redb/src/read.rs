//! Revisioned reads over the `history` table, shared by read transactions (get, range, watch
//! replay) and the writer's transaction (compares, and reads that see earlier writes).

use kcp_storage::{Event, KeyRange, KeyValue, Result, Revision};
use redb::ReadableTable;

use crate::codec::{Record, internal};

/// The table type of `history`, as any transaction sees it.
pub(crate) trait History: ReadableTable<(&'static [u8], u64), &'static [u8]> {}
impl<T: ReadableTable<(&'static [u8], u64), &'static [u8]>> History for T {}

/// The newest version of `key` at or before `revision`, with its modification revision.
pub(crate) fn version_at(
    table: &impl History,
    key: &[u8],
    revision: Revision,
) -> Result<Option<(Revision, Record)>> {
    let mut versions = table
        .range((key, 0u64)..=(key, revision))
        .map_err(internal)?;
    match versions.next_back() {
        Some(entry) => {
            let (k, v) = entry.map_err(internal)?;
            Ok(Some((k.value().1, Record::decode(v.value())?)))
        }
        None => Ok(None),
    }
}

/// The key-value of `key` at `revision`, `None` if absent then.
pub(crate) fn get_at(
    table: &impl History,
    key: &[u8],
    revision: Revision,
) -> Result<Option<KeyValue>> {
    Ok(version_at(table, key, revision)?
        .and_then(|(mod_revision, record)| record.into_key_value(key, mod_revision)))
}

/// The key-values in `range` at `revision`, at most `limit` (0: all), and how many there are
/// (with `skip_count`, only up to the first live key past the page: enough for `more`).
pub(crate) fn range_at(
    table: &impl History,
    range: &KeyRange,
    revision: Revision,
    limit: usize,
    skip_count: bool,
) -> Result<(Vec<KeyValue>, u64)> {
    let start = range.start.as_slice();
    let entries = if range.end.is_empty() {
        table.range((start, 0u64)..=(start, u64::MAX))
    } else {
        match range.upper_bound() {
            Some(end) => table.range((start, 0u64)..(end, 0u64)),
            None => table.range((start, 0u64)..),
        }
    }
    .map_err(internal)?;

    let mut page = Page {
        kvs: Vec::new(),
        count: 0,
        limit,
    };
    // The newest version at or before `revision` of the key being scanned: key, revision, and the
    // record bytes (only its first byte, the live/tombstone flag, once the page is full).
    let mut candidate: Option<(Vec<u8>, Revision, Vec<u8>)> = None;
    for entry in entries {
        let (k, v) = entry.map_err(internal)?;
        let (key, mod_revision) = k.value();
        if candidate
            .as_ref()
            .is_some_and(|(c, _, _)| c.as_slice() != key)
        {
            page.settle(candidate.take())?;
            if skip_count && page.full() && page.count > page.kvs.len() as u64 {
                return Ok((page.kvs, page.count));
            }
        }
        if mod_revision <= revision {
            let raw = v.value();
            let raw = if page.full() {
                &raw[..raw.len().min(1)]
            } else {
                raw
            };
            match &mut candidate {
                Some(c) => {
                    c.1 = mod_revision;
                    c.2.clear();
                    c.2.extend_from_slice(raw);
                }
                None => candidate = Some((key.to_vec(), mod_revision, raw.to_vec())),
            }
        }
    }
    page.settle(candidate)?;
    Ok((page.kvs, page.count))
}

/// The result of a range scan as it is built.
struct Page {
    kvs: Vec<KeyValue>,
    count: u64,
    limit: usize,
}

impl Page {
    fn full(&self) -> bool {
        self.limit != 0 && self.kvs.len() >= self.limit
    }

    /// Counts a scanned key and keeps it if it is live and the page has room.
    fn settle(&mut self, candidate: Option<(Vec<u8>, Revision, Vec<u8>)>) -> Result<()> {
        let Some((key, mod_revision, raw)) = candidate else {
            return Ok(());
        };
        if raw.first() != Some(&Record::LIVE_FLAG) {
            return Ok(());
        }
        self.count += 1;
        if !self.full() {
            self.kvs
                .extend(Record::decode(&raw)?.into_key_value(&key, mod_revision));
        }
        Ok(())
    }
}

/// How many keys of `range` exist at the current revision, from `live`.
pub(crate) fn count_live(
    live: &impl ReadableTable<&'static [u8], ()>,
    range: &KeyRange,
) -> Result<u64> {
    let start = range.start.as_slice();
    let keys = if range.end.is_empty() {
        live.range(start..=start)
    } else {
        match range.upper_bound() {
            Some(end) => live.range(start..end),
            None => live.range(start..),
        }
    }
    .map_err(internal)?;
    let mut count = 0;
    for key in keys {
        key.map_err(internal)?;
        count += 1;
    }
    Ok(count)
}

/// Fills `live` with the keys whose newest version in `history` is live (for a store written
/// before `live` was kept).
pub(crate) fn fill_live_keys(
    history: &impl History,
    live: &mut redb::Table<&'static [u8], ()>,
) -> Result<()> {
    let mut newest: Option<(Vec<u8>, bool)> = None;
    let mut settle = |newest: Option<(Vec<u8>, bool)>| -> Result<()> {
        if let Some((key, true)) = newest {
            live.insert(key.as_slice(), ()).map_err(internal)?;
        }
        Ok(())
    };
    for entry in history.iter().map_err(internal)? {
        let (k, v) = entry.map_err(internal)?;
        let (key, _) = k.value();
        let is_live = v.value().first() == Some(&Record::LIVE_FLAG);
        match &mut newest {
            Some((current, flag)) if current.as_slice() == key => *flag = is_live,
            _ => {
                settle(newest.take())?;
                newest = Some((key.to_vec(), is_live));
            }
        }
    }
    settle(newest)
}

/// The watch event that `revision` recorded for `key`.
pub(crate) fn event_at(
    table: &impl History,
    key: &[u8],
    revision: Revision,
) -> Result<Option<Event>> {
    let Some(guard) = table.get((key, revision)).map_err(internal)? else {
        return Ok(None);
    };
    let record = Record::decode(guard.value())?;
    let prev = match revision.checked_sub(1) {
        Some(before) => get_at(table, key, before)?,
        None => None,
    };
    Ok(match record.into_key_value(key, revision) {
        Some(kv) => Some(Event::put(kv, prev)),
        None => prev.map(|prev| Event::delete(prev, revision)),
    })
}
