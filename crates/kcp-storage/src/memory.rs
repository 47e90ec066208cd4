//! The in-memory backend: the reference semantics every other backend is tested against. Simple
//! over fast: a map from key to its list of versions, and a log from revision to changed keys.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use async_trait::async_trait;
use bytes::Bytes;

use crate::watch::{EventSource, WatchHub};
use crate::{
    Event, GetResponse, KeyRange, KeyValue, Op, OpResult, RangeRequest, RangeResponse, Result,
    Revision, Storage, StorageError, Txn, TxnResponse, WatchRequest, WatchStream,
};
use crate::{check_compaction, resolve_read_revision};

/// An in-memory [`Storage`]. Cloning shares the store.
#[derive(Clone)]
pub struct MemoryStorage {
    inner: Arc<Inner>,
}

struct Inner {
    state: RwLock<State>,
    hub: WatchHub,
}

#[derive(Default)]
struct State {
    /// Every key's versions, oldest first. `value: None` is a deletion.
    history: BTreeMap<Vec<u8>, Vec<Version>>,
    /// The keys each revision changed, in the order the transaction changed them.
    log: BTreeMap<Revision, Vec<Vec<u8>>>,
    current: Revision,
    compacted: Revision,
}

#[derive(Clone)]
struct Version {
    mod_revision: Revision,
    create_revision: Revision,
    version: u64,
    value: Option<Bytes>,
}

impl Default for MemoryStorage {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStorage {
    pub fn new() -> Self {
        MemoryStorage {
            inner: Arc::new(Inner {
                state: RwLock::new(State::default()),
                hub: WatchHub::new(1024),
            }),
        }
    }
}

impl Inner {
    fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn to_key_value(key: &[u8], version: &Version) -> Option<KeyValue> {
    Some(KeyValue {
        key: Bytes::copy_from_slice(key),
        value: version.value.clone()?,
        create_revision: version.create_revision,
        mod_revision: version.mod_revision,
        version: version.version,
    })
}

fn range_bounds(range: &KeyRange) -> (Bound<&[u8]>, Bound<&[u8]>) {
    let start = Bound::Included(range.start.as_slice());
    if range.end.is_empty() {
        return (start, Bound::Included(range.start.as_slice()));
    }
    match range.upper_bound() {
        Some(end) => (start, Bound::Excluded(end)),
        None => (start, Bound::Unbounded),
    }
}

impl State {
    fn read_revision(&self, revision: Revision) -> Result<Revision> {
        resolve_read_revision(revision, self.current, self.compacted)
    }

    fn version_at(versions: &[Version], revision: Revision) -> Option<&Version> {
        versions.iter().rev().find(|v| v.mod_revision <= revision)
    }

    fn get_at(&self, key: &[u8], revision: Revision) -> Option<KeyValue> {
        let versions = self.history.get(key)?;
        to_key_value(key, Self::version_at(versions, revision)?)
    }

    fn apply(&mut self, txn: &Txn) -> TxnResponse {
        let succeeded = txn
            .compares
            .iter()
            .all(|c| c.evaluate(self.get_at(&c.key, self.current).as_ref()));
        let ops = if succeeded {
            &txn.success
        } else {
            &txn.failure
        };
        let revision = self.current + 1;
        let mut changed = Vec::new();
        let mut results = Vec::with_capacity(ops.len());
        for op in ops {
            let result = match op {
                Op::Get(key) => OpResult::Get(self.get_at(key, revision)),
                Op::Put { key, value } => {
                    let prev = self.get_at(key, revision);
                    let (create_revision, version) = match &prev {
                        Some(p) => (p.create_revision, p.version + 1),
                        None => (revision, 1),
                    };
                    self.history.entry(key.clone()).or_default().push(Version {
                        mod_revision: revision,
                        create_revision,
                        version,
                        value: Some(value.clone()),
                    });
                    changed.push(key.clone());
                    OpResult::Put { prev }
                }
                Op::Delete(key) => {
                    let prev = self.get_at(key, revision);
                    if prev.is_some() {
                        self.history.entry(key.clone()).or_default().push(Version {
                            mod_revision: revision,
                            create_revision: 0,
                            version: 0,
                            value: None,
                        });
                        changed.push(key.clone());
                    }
                    OpResult::Delete { prev }
                }
            };
            results.push(result);
        }
        if !changed.is_empty() {
            self.current = revision;
            self.log.insert(revision, changed);
        }
        TxnResponse {
            succeeded,
            revision: self.current,
            results,
        }
    }

    fn event_at(&self, key: &[u8], revision: Revision) -> Option<Event> {
        let versions = self.history.get(key)?;
        let index = versions.iter().position(|v| v.mod_revision == revision)?;
        let prev = index
            .checked_sub(1)
            .and_then(|i| to_key_value(key, &versions[i]));
        Some(match to_key_value(key, &versions[index]) {
            Some(kv) => Event::put(kv, prev),
            None => Event::delete(prev?, revision),
        })
    }

    fn compact(&mut self, revision: Revision) {
        self.history.retain(|_, versions| {
            let first_kept = versions.partition_point(|v| v.mod_revision < revision);
            // Keep the last version before the compaction point unless it is a deletion.
            let keep_from = match first_kept.checked_sub(1) {
                Some(i) if versions[i].value.is_some() => i,
                _ => first_kept,
            };
            versions.drain(..keep_from);
            !versions.is_empty()
        });
        self.log = self.log.split_off(&revision);
        self.compacted = revision;
    }
}

impl EventSource for Inner {
    fn events(
        &self,
        range: &KeyRange,
        from: Revision,
        to: Revision,
        limit: usize,
    ) -> Result<Vec<Event>> {
        let state = self.read();
        if from < state.compacted {
            return Err(StorageError::Compacted {
                requested: from,
                compacted: state.compacted,
            });
        }
        let mut events = Vec::new();
        for (&revision, keys) in state.log.range(from..=to) {
            if events.len() >= limit {
                break;
            }
            for key in keys.iter().filter(|k| range.contains(k)) {
                events.extend(state.event_at(key, revision));
            }
        }
        Ok(events)
    }

    fn current_revision(&self) -> Revision {
        self.read().current
    }

    fn compacted_revision(&self) -> Revision {
        self.read().compacted
    }
}

#[async_trait]
impl Storage for MemoryStorage {
    async fn get(&self, key: &[u8], revision: Revision) -> Result<GetResponse> {
        let state = self.inner.read();
        let revision = state.read_revision(revision)?;
        Ok(GetResponse {
            kv: state.get_at(key, revision),
            revision,
        })
    }

    async fn range(&self, request: RangeRequest) -> Result<RangeResponse> {
        let state = self.inner.read();
        let revision = state.read_revision(request.revision)?;
        let mut kvs = Vec::new();
        let mut count = 0u64;
        for (key, versions) in state.history.range::<[u8], _>(range_bounds(&request.range)) {
            let Some(kv) = State::version_at(versions, revision).and_then(|v| to_key_value(key, v))
            else {
                continue;
            };
            count += 1;
            if request.limit == 0 || kvs.len() < request.limit {
                kvs.push(kv);
            }
        }
        Ok(RangeResponse::new(kvs, count, revision))
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResponse> {
        txn.validate()?;
        let mut state = self.inner.write();
        let before = state.current;
        let response = state.apply(&txn);
        let events = if response.revision > before {
            let keys = state
                .log
                .get(&response.revision)
                .cloned()
                .unwrap_or_default();
            keys.iter()
                .filter_map(|k| state.event_at(k, response.revision))
                .collect()
        } else {
            Vec::new()
        };
        // Publish under the lock so batches reach the hub in revision order.
        self.inner.hub.publish(events);
        Ok(response)
    }

    async fn watch(&self, request: WatchRequest) -> Result<WatchStream> {
        let source: Arc<dyn EventSource> = self.inner.clone();
        self.inner.hub.watch(source, request)
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        let mut state = self.inner.write();
        check_compaction(revision, state.current, state.compacted)?;
        state.compact(revision);
        Ok(())
    }

    async fn current_revision(&self) -> Result<Revision> {
        Ok(self.inner.read().current)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    crate::storage_conformance_tests!(async { (MemoryStorage::new(), ()) });
}
