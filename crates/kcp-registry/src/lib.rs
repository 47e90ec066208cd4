//! Resource semantics for any kind, over the [`Storage`](kcp_storage::Storage) trait.
//!
//! The registry turns verbs on objects (`serde_json::Value`) into storage operations: it sets the
//! server-managed metadata (uid, creationTimestamp, resourceVersion, generateName), enforces
//! optimistic concurrency and finalizers, checks names and namespaces, validates the built-in
//! kinds with Kubernetes' messages (`validation`), pages lists over one storage snapshot, deletes
//! collections, and keeps the namespace lifecycle (see [`strategy`]). Cross-cluster lists and
//! watches ([`Registry::list_all_clusters`]) serve controllers. Errors are typed ([`RegistryError`]) and turned into HTTP `Status` by the API
//! server in one place.
//!
//! It must not know HTTP, content types or which backend stores the bytes.

pub mod admission;
mod collection;
pub mod custom;
mod error;
pub mod kinds;
mod list;
mod meta;
mod names;
mod namespaces;
mod store;
pub mod strategy;
pub mod tenancy;
mod validation;
mod watch;
mod watch_cache;
mod wildcard;

pub use collection::DeletedCollection;
pub use custom::index::CrdFollower;
pub use error::{Cause, RegistryError};
pub use list::{Filter, ListOptions, ListResult};
pub use meta::{now, seconds_since};
pub use store::{ALL_CLUSTERS, DeleteOutcome, PatchWith, Registry, Target};
pub use watch::WatchEvent;
pub use wildcard::{ClusterEvent, ClusterObject};
