//! Resource semantics for any kind, over the [`Storage`](kcp_storage::Storage) trait.
//!
//! The registry turns verbs on objects (`serde_json::Value`) into storage operations: it sets the
//! server-managed metadata (uid, creationTimestamp, resourceVersion, generateName), enforces
//! optimistic concurrency and finalizers, validates the built-in kinds with Kubernetes' messages
//! (`validation`), and pages lists over one storage snapshot. Errors are typed ([`RegistryError`]) and turned into HTTP `Status` by the API
//! server in one place.
//!
//! It must not know HTTP, content types or which backend stores the bytes.

mod error;
mod list;
mod meta;
mod names;
mod store;
mod validation;
mod watch;

pub use error::{Cause, RegistryError};
pub use list::{Filter, ListOptions, ListResult};
pub use store::{DeleteOutcome, Registry, Target};
pub use watch::WatchEvent;
