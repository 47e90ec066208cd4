//! The etcd v3 backend of kcp's [`Storage`](kcp_storage::Storage) trait.
//!
//! [`EtcdStorage`] talks gRPC to a real etcd cluster: reads are linearizable ranges, every write
//! is a compare-and-swap transaction, watches are resumable Watch streams, and storage
//! revisions are etcd's own. The wire types are written by hand ([`proto`]), so building needs
//! no protoc and no build script. (A throwaway etcd for tests and benchmarks is
//! `kcp_testing::etcd::EtcdProcess`, in the test tooling crate.)
//!
//! This crate owns the translation to etcd and the connections to it. It must not know HTTP,
//! Kubernetes objects or any other backend; the semantics it must match are those of
//! [`kcp_storage::MemoryStorage`], checked by the shared conformance suite.
//!
//! Known differences from the in-memory reference, all etcd's own rules: the empty key cannot be
//! written (etcd answers [`StorageError::InvalidRequest`](kcp_storage::StorageError)); a
//! transaction branch holds at most `--max-txn-ops` operations (128 by default); and the
//! `compacted` revision of a [`Compacted`](kcp_storage::StorageError::Compacted) error is 0 when
//! etcd cannot be asked for it in time (see `Shared::compacted_revision`).

mod client;
mod config;
mod convert;
mod error;
pub mod proto;
mod storage;
mod watch;

pub use config::{EtcdConfig, EtcdTls};
pub use storage::EtcdStorage;
