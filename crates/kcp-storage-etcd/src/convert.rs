//! Translation between the `kcp_storage` values and etcd's wire types, including the optional
//! key prefix and the key-range conventions.
//!
//! This module owns pure conversions: it must not do I/O or interpret errors. Input from the
//! network is never trusted: negative revisions become 0 and malformed answers become
//! [`StorageError::Internal`], never panics.

use bytes::Bytes;
use kcp_storage::{
    Compare, CompareOp, CompareTarget, Event, EventKind, KeyRange, KeyValue, Op, Revision,
    StorageError, prefix_end,
};

use crate::proto;

/// A storage revision as etcd's signed 64-bit number (saturating; real revisions are far below).
pub(crate) fn to_wire(revision: Revision) -> i64 {
    i64::try_from(revision).unwrap_or(i64::MAX)
}

/// An etcd revision as a storage revision; negative numbers (never sent by etcd) become 0.
pub(crate) fn from_wire(revision: i64) -> Revision {
    u64::try_from(revision).unwrap_or(0)
}

/// The revision in a response header (0 if etcd sent none).
pub(crate) fn header_revision(header: Option<&proto::ResponseHeader>) -> Revision {
    header.map_or(0, |h| from_wire(h.revision))
}

/// Maps keys between the storage's key space and etcd's, where every key carries `prefix`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Keys {
    prefix: Vec<u8>,
}

impl Keys {
    pub(crate) fn new(prefix: Vec<u8>) -> Self {
        Keys { prefix }
    }

    /// The etcd key of a storage key.
    pub(crate) fn key(&self, key: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.prefix.len() + key.len());
        out.extend_from_slice(&self.prefix);
        out.extend_from_slice(key);
        out
    }

    /// The etcd `(key, range_end)` of a storage key range. An empty end (one key) stays empty;
    /// `[0]` ("to the end of the key space") becomes the end of the prefix, which is `[0]` again
    /// without prefix. etcd rejects an empty start key, so an empty start without prefix becomes
    /// `[0]`, the smallest key etcd can hold.
    pub(crate) fn range(&self, range: &KeyRange) -> (Vec<u8>, Vec<u8>) {
        let mut start = self.key(&range.start);
        let end = if range.end.is_empty() {
            Vec::new()
        } else if range.end == [0] {
            prefix_end(&self.prefix)
        } else {
            self.key(&range.end)
        };
        if start.is_empty() && !end.is_empty() {
            start = vec![0];
        }
        (start, end)
    }

    /// The storage key of an etcd key. Keys outside the prefix cannot be returned for requests
    /// inside it; should one appear anyway it is passed on unchanged.
    pub(crate) fn strip(&self, key: Bytes) -> Bytes {
        if key.starts_with(&self.prefix) {
            key.slice(self.prefix.len()..)
        } else {
            key
        }
    }

    pub(crate) fn key_value(&self, kv: proto::KeyValue) -> KeyValue {
        KeyValue {
            key: self.strip(kv.key),
            value: kv.value,
            create_revision: from_wire(kv.create_revision),
            mod_revision: from_wire(kv.mod_revision),
            version: from_wire(kv.version),
        }
    }

    pub(crate) fn compare(&self, compare: &Compare) -> proto::Compare {
        let (target, value) = match &compare.target {
            CompareTarget::ModRevision(r) => (
                proto::CompareTarget::Mod,
                proto::TargetUnion::ModRevision(to_wire(*r)),
            ),
            CompareTarget::CreateRevision(r) => (
                proto::CompareTarget::Create,
                proto::TargetUnion::CreateRevision(to_wire(*r)),
            ),
            CompareTarget::Version(v) => (
                proto::CompareTarget::Version,
                proto::TargetUnion::Version(to_wire(*v)),
            ),
            CompareTarget::Value(v) => (
                proto::CompareTarget::Value,
                proto::TargetUnion::Value(v.clone()),
            ),
        };
        let result = match compare.op {
            CompareOp::Equal => proto::CompareResult::Equal,
            CompareOp::NotEqual => proto::CompareResult::NotEqual,
            CompareOp::Less => proto::CompareResult::Less,
            CompareOp::Greater => proto::CompareResult::Greater,
        };
        proto::Compare {
            result: result as i32,
            target: target as i32,
            key: self.key(&compare.key),
            target_union: Some(value),
            range_end: Vec::new(),
        }
    }

    /// One transaction operation. Writes ask for the previous value so results carry it; a get
    /// is a range over the single key.
    pub(crate) fn op(&self, op: &Op) -> proto::RequestOp {
        let request = match op {
            Op::Get(key) => proto::Request::RequestRange(proto::RangeRequest {
                key: self.key(key),
                ..Default::default()
            }),
            Op::Put { key, value } => proto::Request::RequestPut(proto::PutRequest {
                key: self.key(key),
                value: value.clone(),
                prev_kv: true,
                ..Default::default()
            }),
            Op::Delete(key) => proto::Request::RequestDeleteRange(proto::DeleteRangeRequest {
                key: self.key(key),
                range_end: Vec::new(),
                prev_kv: true,
            }),
        };
        proto::RequestOp {
            request: Some(request),
        }
    }

    /// A watch event. etcd describes a delete by the key, its delete revision and zeroes, like
    /// [`Event::delete`]; the previous value is present unless etcd could no longer read it.
    pub(crate) fn event(&self, event: proto::Event) -> Result<Event, StorageError> {
        let kv = event
            .kv
            .ok_or_else(|| StorageError::Internal("etcd sent a watch event without kv".into()))?;
        let prev = event.prev_kv.map(|kv| self.key_value(kv));
        match proto::EventType::try_from(event.r#type) {
            Ok(proto::EventType::Put) => Ok(Event::put(self.key_value(kv), prev)),
            Ok(proto::EventType::Delete) => Ok(Event {
                kind: EventKind::Delete,
                kv: KeyValue {
                    key: self.strip(kv.key),
                    value: Bytes::new(),
                    create_revision: 0,
                    mod_revision: from_wire(kv.mod_revision),
                    version: 0,
                },
                prev,
            }),
            Err(_) => Err(StorageError::Internal(format!(
                "etcd sent a watch event of unknown type {}",
                event.r#type
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_map_single_keys_prefixes_and_open_ends() {
        let plain = Keys::new(Vec::new());
        assert_eq!(
            plain.range(&KeyRange::single("a")),
            (b"a".to_vec(), Vec::new())
        );
        assert_eq!(
            plain.range(&KeyRange::prefix("/a/")),
            (b"/a/".to_vec(), b"/a0".to_vec())
        );
        assert_eq!(plain.range(&KeyRange::prefix("")), (vec![0], vec![0]));

        let prefixed = Keys::new(b"/p".to_vec());
        assert_eq!(
            prefixed.range(&KeyRange::prefix("")),
            (b"/p".to_vec(), b"/q".to_vec())
        );
        assert_eq!(
            prefixed.range(&KeyRange::prefix("/a/")),
            (b"/p/a/".to_vec(), b"/p/a0".to_vec())
        );
        assert_eq!(
            prefixed.strip(Bytes::from_static(b"/p/a/x")),
            Bytes::from_static(b"/a/x")
        );
    }

    #[test]
    fn malformed_events_are_errors_not_panics() {
        let keys = Keys::default();
        assert!(
            keys.event(proto::Event {
                r#type: 0,
                kv: None,
                prev_kv: None
            })
            .is_err()
        );
        assert!(
            keys.event(proto::Event {
                r#type: 7,
                kv: Some(proto::KeyValue::default()),
                prev_kv: None
            })
            .is_err()
        );
        assert_eq!(from_wire(-3), 0);
    }
}
