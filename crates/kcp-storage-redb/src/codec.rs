//! The on-disk layout: three redb tables and the byte encodings of their values.
//!
//! - `history`: `(key, mod_revision) -> version record`: every version of every key still
//!   needed, a deletion stored as a tombstone record.
//! - `log`: `revision -> changed keys`: which keys each revision changed, in order, for watch
//!   replay and compaction.
//! - `live`: `key -> ()`: the keys that exist at the current revision, so that a range at the
//!   current revision counts keys without reading their versions.
//! - `meta`: `name -> u64`: the current and compacted revisions, and since when `live` is kept.
//!
//! All integers are little-endian. Nothing here knows about transactions or watches.

use bytes::Bytes;
use kcp_storage::{KeyValue, Revision, StorageError};
use redb::TableDefinition;

pub(crate) const HISTORY: TableDefinition<(&[u8], u64), &[u8]> = TableDefinition::new("history");
pub(crate) const LOG: TableDefinition<u64, &[u8]> = TableDefinition::new("log");
pub(crate) const LIVE_KEYS: TableDefinition<&[u8], ()> = TableDefinition::new("live");
pub(crate) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

pub(crate) const META_CURRENT: &str = "current_revision";
pub(crate) const META_COMPACTED: &str = "compacted_revision";
/// Present once `live` holds the live keys (stores written before it was kept have it built
/// when they are opened).
pub(crate) const META_LIVE_KEYS: &str = "live_keys_kept";

const LIVE: u8 = 0;
const TOMBSTONE: u8 = 1;
const HEADER: usize = 17;

/// One version of a key as stored in `history`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Record {
    Live {
        create_revision: Revision,
        version: u64,
        value: Bytes,
    },
    Tombstone,
}

impl Record {
    /// The first byte of an encoded live record.
    pub(crate) const LIVE_FLAG: u8 = LIVE;

    pub(crate) fn encode(&self) -> Vec<u8> {
        match self {
            Record::Live {
                create_revision,
                version,
                value,
            } => {
                let mut out = Vec::with_capacity(HEADER + value.len());
                out.push(LIVE);
                out.extend_from_slice(&create_revision.to_le_bytes());
                out.extend_from_slice(&version.to_le_bytes());
                out.extend_from_slice(value);
                out
            }
            Record::Tombstone => vec![TOMBSTONE],
        }
    }

    pub(crate) fn decode(bytes: &[u8]) -> Result<Record, StorageError> {
        match bytes.first() {
            Some(&TOMBSTONE) => Ok(Record::Tombstone),
            Some(&LIVE) if bytes.len() >= HEADER => Ok(Record::Live {
                create_revision: u64_at(bytes, 1),
                version: u64_at(bytes, 9),
                value: Bytes::copy_from_slice(&bytes[HEADER..]),
            }),
            _ => Err(corrupt("history record")),
        }
    }

    /// The key-value this record describes, `None` for a tombstone.
    pub(crate) fn into_key_value(self, key: &[u8], mod_revision: Revision) -> Option<KeyValue> {
        match self {
            Record::Live {
                create_revision,
                version,
                value,
            } => Some(KeyValue {
                key: Bytes::copy_from_slice(key),
                value,
                create_revision,
                mod_revision,
                version,
            }),
            Record::Tombstone => None,
        }
    }
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut buf = [0u8; 8];
    buf.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(buf)
}

/// Encodes the changed keys of one revision for `log`.
pub(crate) fn encode_keys<'a>(keys: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    for key in keys {
        out.extend_from_slice(&(key.len() as u32).to_le_bytes());
        out.extend_from_slice(key);
    }
    out
}

/// Decodes a `log` value back into its keys.
pub(crate) fn decode_keys(mut bytes: &[u8]) -> Result<Vec<Vec<u8>>, StorageError> {
    let mut keys = Vec::new();
    while !bytes.is_empty() {
        if bytes.len() < 4 {
            return Err(corrupt("log entry"));
        }
        let len = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
        bytes = &bytes[4..];
        if bytes.len() < len {
            return Err(corrupt("log entry"));
        }
        keys.push(bytes[..len].to_vec());
        bytes = &bytes[len..];
    }
    Ok(keys)
}

fn corrupt(what: &str) -> StorageError {
    StorageError::Internal(format!("corrupt {what} in the embedded store"))
}

/// Maps any redb error to a storage error; the message keeps redb's words.
pub(crate) fn internal(error: impl std::fmt::Display) -> StorageError {
    StorageError::Internal(format!("embedded store: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let live = Record::Live {
            create_revision: 7,
            version: 3,
            value: Bytes::from_static(b"hello"),
        };
        assert_eq!(Record::decode(&live.encode()).unwrap(), live);
        assert_eq!(
            Record::decode(&Record::Tombstone.encode()).unwrap(),
            Record::Tombstone
        );
        assert!(Record::decode(&[]).is_err());
        assert!(Record::decode(&[LIVE, 1, 2]).is_err());
    }

    #[test]
    fn log_keys_round_trip_and_reject_truncation() {
        let encoded = encode_keys([&b"/a"[..], b"", b"/b/c"]);
        assert_eq!(
            decode_keys(&encoded).unwrap(),
            vec![b"/a".to_vec(), vec![], b"/b/c".to_vec()]
        );
        assert!(decode_keys(&encoded[..encoded.len() - 1]).is_err());
    }
}
