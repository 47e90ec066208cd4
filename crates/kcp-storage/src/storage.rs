//! The [`Storage`] trait: etcd v3 semantics behind an object-safe async interface.

use std::pin::Pin;

use async_trait::async_trait;
use bytes::Bytes;
use futures::Stream;

use crate::{
    Compare, Event, GetResponse, KeyValue, Op, OpResult, RangeRequest, RangeResponse, Result,
    Revision, StorageError, Txn, TxnResponse, WatchRequest,
};

/// The events of a watch, in revision order. It ends with an `Err` item if the watch cannot go on
/// (for example [`StorageError::Compacted`] after falling too far behind).
pub type WatchStream = Pin<Box<dyn Stream<Item = Result<Event>> + Send>>;

/// A revisioned, ordered key-value store with etcd v3 semantics.
///
/// Every acknowledged write is durable (for persistent backends) and visible to every later read.
/// Revisions are global, start at 1 for the first write, and grow by one per transaction that
/// changes something.
#[async_trait]
pub trait Storage: Send + Sync + 'static {
    /// Reads one key at `revision` (0: the current revision).
    async fn get(&self, key: &[u8], revision: Revision) -> Result<GetResponse>;

    /// Reads a key range at one revision, with a limit; see [`RangeRequest::next_page`].
    async fn range(&self, request: RangeRequest) -> Result<RangeResponse>;

    /// Runs a compare-and-swap transaction atomically.
    async fn txn(&self, txn: Txn) -> Result<TxnResponse>;

    /// Streams every change in the request's range from its start revision on.
    /// Fails with [`StorageError::Compacted`] if the start revision is older than the compacted
    /// revision, and with [`StorageError::FutureRevision`] never: a future start just waits.
    async fn watch(&self, request: WatchRequest) -> Result<WatchStream>;

    /// Forgets history older than `revision`: reads and watches before it then fail with
    /// [`StorageError::Compacted`]. The latest value of every key is kept.
    async fn compact(&self, revision: Revision) -> Result<()>;

    /// The revision of the last write.
    async fn current_revision(&self) -> Result<Revision>;

    /// Creates `key`, failing with [`StorageError::AlreadyExists`] if it exists.
    async fn create(&self, key: &[u8], value: Bytes) -> Result<KeyValue> {
        let response = self
            .txn(Txn {
                compares: vec![Compare::absent(key)],
                success: vec![Op::put(key, value.clone())],
                failure: vec![],
            })
            .await?;
        if !response.succeeded {
            return Err(StorageError::AlreadyExists { key: key.to_vec() });
        }
        Ok(KeyValue {
            key: Bytes::copy_from_slice(key),
            value,
            create_revision: response.revision,
            mod_revision: response.revision,
            version: 1,
        })
    }

    /// Replaces the value of `key` if its modification revision is still `expected`.
    /// Fails with [`StorageError::NotFound`] if the key is absent, and [`StorageError::Conflict`]
    /// (carrying the current value) if it was modified meanwhile.
    async fn update(&self, key: &[u8], value: Bytes, expected: Revision) -> Result<KeyValue> {
        let response = self
            .txn(Txn {
                compares: vec![Compare::exists(key), Compare::mod_revision(key, expected)],
                success: vec![Op::put(key, value.clone())],
                failure: vec![Op::Get(key.to_vec())],
            })
            .await?;
        if !response.succeeded {
            return Err(guard_failure(key, expected, response));
        }
        let prev = match response.results.into_iter().next() {
            Some(OpResult::Put { prev: Some(prev) }) => prev,
            _ => return Err(StorageError::NotFound { key: key.to_vec() }),
        };
        Ok(KeyValue {
            key: prev.key,
            value,
            create_revision: prev.create_revision,
            mod_revision: response.revision,
            version: prev.version + 1,
        })
    }

    /// Deletes `key`, if `expected` is given only while its modification revision is `expected`.
    /// Returns the deleted key-value with the revision of the delete as its `mod_revision`.
    async fn delete(&self, key: &[u8], expected: Option<Revision>) -> Result<KeyValue> {
        let compares = match expected {
            Some(revision) => vec![Compare::mod_revision(key, revision)],
            None => vec![],
        };
        let response = self
            .txn(Txn {
                compares,
                success: vec![Op::Delete(key.to_vec())],
                failure: vec![Op::Get(key.to_vec())],
            })
            .await?;
        if !response.succeeded {
            return Err(guard_failure(key, expected.unwrap_or(0), response));
        }
        match response.results.into_iter().next() {
            Some(OpResult::Delete { prev: Some(prev) }) => Ok(KeyValue {
                mod_revision: response.revision,
                ..prev
            }),
            _ => Err(StorageError::NotFound { key: key.to_vec() }),
        }
    }
}

/// Turns a failed guard into NotFound (key absent) or Conflict (key changed).
fn guard_failure(key: &[u8], expected: Revision, response: TxnResponse) -> StorageError {
    match response.results.into_iter().next() {
        Some(OpResult::Get(Some(current))) => StorageError::Conflict {
            key: key.to_vec(),
            expected,
            current: Some(Box::new(current)),
        },
        _ => StorageError::NotFound { key: key.to_vec() },
    }
}
