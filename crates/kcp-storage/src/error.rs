//! Typed storage errors. Higher layers map them to Kubernetes `Status` codes in one place.

use crate::types::{KeyValue, Revision};

/// The result type of every storage operation.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

/// What can go wrong in a storage operation, independent of the backend.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StorageError {
    /// The key does not exist (at the requested revision).
    #[error("key not found: {}", String::from_utf8_lossy(key))]
    NotFound { key: Vec<u8> },
    /// A create found the key already present.
    #[error("key already exists: {}", String::from_utf8_lossy(key))]
    AlreadyExists { key: Vec<u8> },
    /// A guarded update or delete found another modification revision. `current` is the value now
    /// stored (absent if the key was deleted meanwhile), so callers can retry without a read.
    #[error("conflict on {}: expected modification revision {expected}, found {}", String::from_utf8_lossy(key), current.as_ref().map_or(0, |kv| kv.mod_revision))]
    Conflict {
        key: Vec<u8>,
        expected: Revision,
        current: Option<Box<KeyValue>>,
    },
    /// The requested revision is older than the compacted revision.
    #[error("required revision {requested} has been compacted (compacted revision {compacted})")]
    Compacted {
        requested: Revision,
        compacted: Revision,
    },
    /// The requested revision is newer than the current revision.
    #[error("required revision {requested} is a future revision (current revision {current})")]
    FutureRevision {
        requested: Revision,
        current: Revision,
    },
    /// The request itself is malformed (for example a key written twice in one transaction).
    #[error("invalid storage request: {0}")]
    InvalidRequest(String),
    /// The backend cannot be reached or refused to serve; the operation may be retried.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The backend failed in a way that retrying will not fix (I/O error, corrupt data).
    #[error("storage internal error: {0}")]
    Internal(String),
}

impl StorageError {
    /// True for errors that a retry against the same backend may not see again.
    pub fn is_retryable(&self) -> bool {
        matches!(self, StorageError::Unavailable(_))
    }
}
