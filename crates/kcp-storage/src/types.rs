//! Values that cross the [`Storage`](crate::Storage) trait: key-values, ranges, transactions and
//! watch events. They mirror etcd v3's model so the etcd backend is a thin translation.

use bytes::Bytes;

/// A store-wide revision. Every write transaction that changes something gets the next one; it
/// becomes the Kubernetes `resourceVersion`. Revision 0 never names a write.
pub type Revision = u64;

/// One key with its value and its revision bookkeeping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub key: Bytes,
    pub value: Bytes,
    /// Revision of the write that created this incarnation of the key.
    pub create_revision: Revision,
    /// Revision of the last write to the key.
    pub mod_revision: Revision,
    /// Writes since creation, starting at 1; a delete resets it.
    pub version: u64,
}

/// Response of a point read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GetResponse {
    pub kv: Option<KeyValue>,
    /// The revision the read was served at.
    pub revision: Revision,
}

/// The key interval `[start, end)`. An empty `end` means the single key `start`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KeyRange {
    pub start: Vec<u8>,
    pub end: Vec<u8>,
}

impl KeyRange {
    /// Every key that starts with `prefix`.
    pub fn prefix(prefix: impl Into<Vec<u8>>) -> Self {
        let start = prefix.into();
        let end = prefix_end(&start);
        KeyRange { start, end }
    }

    /// Exactly one key.
    pub fn single(key: impl Into<Vec<u8>>) -> Self {
        KeyRange {
            start: key.into(),
            end: Vec::new(),
        }
    }

    /// Whether `key` lies in this range.
    pub fn contains(&self, key: &[u8]) -> bool {
        if self.end.is_empty() {
            return key == self.start.as_slice();
        }
        key >= self.start.as_slice() && (self.end == [0] || key < self.end.as_slice())
    }

    /// The exclusive upper bound as a slice, or `None` for "to the end of the key space".
    pub fn upper_bound(&self) -> Option<&[u8]> {
        if self.end.is_empty() || self.end == [0] {
            None
        } else {
            Some(&self.end)
        }
    }
}

/// The smallest key greater than every key that starts with `prefix` (etcd's "range end").
/// `[0]` stands for "no upper bound" when the prefix is empty or all `0xff`.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// A range read: keys in `range` at `revision`, at most `limit` of them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RangeRequest {
    pub range: KeyRange,
    /// Maximum number of key-values returned; 0 means no limit.
    pub limit: usize,
    /// Read at this revision; 0 means the current revision. Pass the revision of a first page to
    /// read later pages from the same snapshot.
    pub revision: Revision,
    /// Whether the backend may stop reading once the page is full: the response's `count` is
    /// then only a lower bound (at least `kvs.len()`, plus one when `more`), `more` stays
    /// exact. For readers of long ranges page by page, which would otherwise count the rest of
    /// the range on every page.
    pub skip_count: bool,
}

impl RangeRequest {
    /// All keys under `prefix` at the current revision.
    pub fn prefix(prefix: impl Into<Vec<u8>>) -> Self {
        RangeRequest {
            range: KeyRange::prefix(prefix),
            limit: 0,
            revision: 0,
            skip_count: false,
        }
    }

    pub fn with_limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    pub fn at_revision(mut self, revision: Revision) -> Self {
        self.revision = revision;
        self
    }

    /// The same request, allowing the backend not to count past the page (see `skip_count`).
    pub fn without_count(mut self) -> Self {
        self.skip_count = true;
        self
    }

    /// The request for the page after `response`: same range end, same read revision, starting
    /// just after the last returned key.
    pub fn next_page(&self, response: &RangeResponse) -> Option<RangeRequest> {
        if !response.more {
            return None;
        }
        let last = response.kvs.last()?;
        let mut start = last.key.to_vec();
        start.push(0);
        Some(RangeRequest {
            range: KeyRange {
                start,
                end: self.range.end.clone(),
            },
            limit: self.limit,
            revision: response.revision,
            skip_count: self.skip_count,
        })
    }
}

/// The answer to a [`RangeRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeResponse {
    /// Key-values in key order.
    pub kvs: Vec<KeyValue>,
    /// True when the limit cut the result short.
    pub more: bool,
    /// How many keys the whole range holds at `revision`, regardless of the limit.
    pub count: u64,
    /// The revision the range was read at.
    pub revision: Revision,
}

impl RangeResponse {
    /// A response whose `more` flag says whether `kvs` holds fewer keys than `count`.
    pub fn new(kvs: Vec<KeyValue>, count: u64, revision: Revision) -> Self {
        RangeResponse {
            more: (kvs.len() as u64) < count,
            kvs,
            count,
            revision,
        }
    }
}

/// Which per-key number a [`Compare`] looks at. A missing key has all revisions and its version 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CompareTarget {
    ModRevision(Revision),
    CreateRevision(Revision),
    Version(u64),
    /// Compares the stored value; always false for a missing key.
    Value(Bytes),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    Equal,
    NotEqual,
    Less,
    Greater,
}

/// One guard of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compare {
    pub key: Vec<u8>,
    pub target: CompareTarget,
    pub op: CompareOp,
}

impl Compare {
    /// The key's modification revision equals `revision` (0: the key is absent).
    pub fn mod_revision(key: impl Into<Vec<u8>>, revision: Revision) -> Self {
        Compare {
            key: key.into(),
            target: CompareTarget::ModRevision(revision),
            op: CompareOp::Equal,
        }
    }

    /// The key does not exist.
    pub fn absent(key: impl Into<Vec<u8>>) -> Self {
        Compare::mod_revision(key, 0)
    }

    /// The key exists.
    pub fn exists(key: impl Into<Vec<u8>>) -> Self {
        Compare {
            key: key.into(),
            target: CompareTarget::Version(0),
            op: CompareOp::Greater,
        }
    }

    /// Evaluates the guard against the key's current state.
    pub fn evaluate(&self, current: Option<&KeyValue>) -> bool {
        use std::cmp::Ordering;
        let ordering: Ordering = match (&self.target, current) {
            (CompareTarget::Value(_), None) => return false,
            (CompareTarget::Value(v), Some(kv)) => kv.value.as_ref().cmp(v.as_ref()),
            (CompareTarget::ModRevision(r), kv) => kv.map_or(0, |kv| kv.mod_revision).cmp(r),
            (CompareTarget::CreateRevision(r), kv) => kv.map_or(0, |kv| kv.create_revision).cmp(r),
            (CompareTarget::Version(v), kv) => kv.map_or(0, |kv| kv.version).cmp(v),
        };
        match self.op {
            CompareOp::Equal => ordering == Ordering::Equal,
            CompareOp::NotEqual => ordering != Ordering::Equal,
            CompareOp::Less => ordering == Ordering::Less,
            CompareOp::Greater => ordering == Ordering::Greater,
        }
    }
}

/// One operation of a transaction branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Read one key (seeing earlier writes of the same transaction).
    Get(Vec<u8>),
    /// Write one key.
    Put { key: Vec<u8>, value: Bytes },
    /// Delete one key; deleting a missing key changes nothing.
    Delete(Vec<u8>),
}

impl Op {
    pub fn put(key: impl Into<Vec<u8>>, value: impl Into<Bytes>) -> Self {
        Op::Put {
            key: key.into(),
            value: value.into(),
        }
    }

    /// The key this operation writes, if it writes.
    pub fn written_key(&self) -> Option<&[u8]> {
        match self {
            Op::Get(_) => None,
            Op::Put { key, .. } | Op::Delete(key) => Some(key),
        }
    }
}

/// What one operation produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    Get(Option<KeyValue>),
    /// The value the put replaced.
    Put {
        prev: Option<KeyValue>,
    },
    /// The value the delete removed (`None`: the key was absent and nothing happened).
    Delete {
        prev: Option<KeyValue>,
    },
}

/// An atomic compare-and-swap: if every compare holds, run `success`, else `failure`. All writes of
/// the chosen branch share one new revision (none if nothing changed).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Txn {
    pub compares: Vec<Compare>,
    pub success: Vec<Op>,
    pub failure: Vec<Op>,
}

impl Txn {
    /// Rejects a branch that writes the same key twice, as etcd does.
    pub fn validate(&self) -> crate::Result<()> {
        for branch in [&self.success, &self.failure] {
            let mut keys: Vec<&[u8]> = branch.iter().filter_map(Op::written_key).collect();
            keys.sort_unstable();
            if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
                return Err(crate::StorageError::InvalidRequest(format!(
                    "duplicate key given in txn request: {}",
                    String::from_utf8_lossy(w[0])
                )));
            }
        }
        Ok(())
    }
}

/// The answer to a [`Txn`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnResponse {
    pub succeeded: bool,
    /// The store revision after the transaction (the new one if it wrote).
    pub revision: Revision,
    /// One result per operation of the branch that ran.
    pub results: Vec<OpResult>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Put,
    Delete,
}

/// One change seen by a watch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    /// The key-value after the change. For a delete: the key with an empty value, the delete's
    /// revision as `mod_revision`, and zero create revision and version.
    pub kv: KeyValue,
    /// The key-value before the change. Present for a delete unless the backend lost it to
    /// compaction before delivery (etcd can).
    pub prev: Option<KeyValue>,
}

impl Event {
    pub fn revision(&self) -> Revision {
        self.kv.mod_revision
    }

    /// The event a put of `kv` over `prev` produces.
    pub fn put(kv: KeyValue, prev: Option<KeyValue>) -> Self {
        Event {
            kind: EventKind::Put,
            kv,
            prev,
        }
    }

    /// The event a delete of `prev` at `revision` produces.
    pub fn delete(prev: KeyValue, revision: Revision) -> Self {
        Event {
            kind: EventKind::Delete,
            kv: KeyValue {
                key: prev.key.clone(),
                value: Bytes::new(),
                create_revision: 0,
                mod_revision: revision,
                version: 0,
            },
            prev: Some(prev),
        }
    }
}

/// A watch: every change to a key in `range` with revision `>= start_revision`, in order.
/// `start_revision` 0 means "changes after the current revision".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WatchRequest {
    pub range: KeyRange,
    pub start_revision: Revision,
}

impl WatchRequest {
    pub fn prefix(prefix: impl Into<Vec<u8>>, start_revision: Revision) -> Self {
        WatchRequest {
            range: KeyRange::prefix(prefix),
            start_revision,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_increments_last_byte_and_skips_ff() {
        assert_eq!(prefix_end(b"/a/"), b"/a0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff\xff"), vec![0]);
        assert_eq!(prefix_end(b""), vec![0]);
    }

    #[test]
    fn prefix_range_contains_only_prefixed_keys() {
        let r = KeyRange::prefix("/c/a/");
        assert!(r.contains(b"/c/a/x"));
        assert!(!r.contains(b"/c/ab/x"));
        assert!(!r.contains(b"/c/a"));
        let all = KeyRange::prefix("");
        assert!(all.contains(b"\xff\xff"));
        let one = KeyRange::single("k");
        assert!(one.contains(b"k") && !one.contains(b"k1"));
    }

    #[test]
    fn compare_on_missing_key_sees_zeroes_and_no_value() {
        assert!(Compare::absent("k").evaluate(None));
        let c = Compare {
            key: b"k".to_vec(),
            target: CompareTarget::Value(Bytes::from_static(b"")),
            op: CompareOp::Equal,
        };
        assert!(!c.evaluate(None));
    }

    #[test]
    fn txn_rejects_duplicate_written_keys() {
        let txn = Txn {
            compares: vec![],
            success: vec![
                Op::put("a", "1"),
                Op::Get(b"a".to_vec()),
                Op::Delete(b"a".to_vec()),
            ],
            failure: vec![],
        };
        assert!(matches!(
            txn.validate(),
            Err(crate::StorageError::InvalidRequest(_))
        ));
    }
}
