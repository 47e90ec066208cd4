//! Revisioned, etcd-shaped key-value storage for kcp.
//!
//! This crate owns the [`Storage`] trait that every backend implements (in-memory here, embedded
//! redb and etcd v3 in their own crates), the value types that cross it, the typed
//! [`StorageError`], the storage key layout (which always carries the logical cluster), the
//! shared watch fan-out ([`watch::WatchHub`]) and, behind the `conformance` feature, the one test
//! suite every backend must pass.
//!
//! It must not know HTTP, Kubernetes objects (values are opaque bytes) or any concrete backend
//! other than the in-memory reference.

mod error;
pub mod keys;
pub mod memory;
mod revision;
mod storage;
mod types;
pub mod watch;

#[cfg(feature = "conformance")]
pub mod conformance;

pub use error::{Result, StorageError};
pub use memory::MemoryStorage;
pub use revision::{check_compaction, resolve_read_revision};
pub use storage::{Storage, WatchStream};
pub use types::*;
