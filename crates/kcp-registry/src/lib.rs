//! Resource semantics for any kind, over the [`Storage`](kcp_storage::Storage) trait.
//!
//! The registry turns verbs on objects (`serde_json::Value`) into storage operations. Every
//! write, whoever makes it (the API server, the server's own controllers), passes the same
//! stages in this order:
//!
//! 1. decoding: the body is normalized to its target, fields its kind does not declare are
//!    pruned, defaults are set (`validation::prepare`, the kind's `decode`);
//! 2. admission's mutating phase: the plugins of [`admission::MUTATING`] (NamespaceLifecycle,
//!    kcp's tenancy, RBAC escalation);
//! 3. validation: metadata, then the kind's rules ([`kinds`]) and CRD schemas and CEL rules,
//!    then admission's validating phase ([`admission::VALIDATING`]: kcp's reserved CRD groups,
//!    ResourceQuota);
//! 4. what the server sets: uid, timestamps, generation, the parts a subresource may change
//!    ([`strategy`]), the nesting limit, the storage version;
//! 5. the generic store (`generic`): bytes at keys, written only at the revision read, dry runs
//!    checked and not written.
//!
//! Reads page lists over one storage snapshot; watches go through a shared watch cache;
//! cross-cluster lists and watches ([`Registry::list_all_clusters`]) serve controllers. The
//! registry also owns the index of each logical cluster's custom resources and the follower that
//! keeps it true ([`Registry::start_crd_follower`]). Errors are typed ([`RegistryError`]) and
//! turned into HTTP `Status` by the API server in one place.
//!
//! It must not know HTTP, content types or which backend stores the bytes.

pub mod admission;
pub mod apis;
mod collection;
pub mod custom;
mod decoded;
pub mod delete_options;
mod error;
mod escalation;
pub mod followed;
mod generic;
pub mod kinds;
mod list;
mod managed;
mod meta;
mod names;
mod namespaces;
pub mod ownership;
pub mod quota;
mod reserved_crds;
pub mod room;
pub mod served;
pub mod serviceaccounts;
mod store;
pub mod strategy;
mod summary;
pub mod tenancy;
mod validation;
mod watch;
mod watch_cache;
mod wildcard;

pub use collection::{DeletedCollection, Held};
pub use custom::index::CrdFollower;
pub use delete_options::{DeleteOptions, Propagation};
pub use error::{Cause, RegistryError};
pub use list::{Filter, JsonAnswer, ListOptions, ListResult, as_list_item};
pub use managed::{ApplyWith, DEFAULT_MANAGER};
pub use meta::{now, seconds_since};
pub use served::ServedResources;
pub use store::{
    ALL_CLUSTERS, AccessCheck, DeleteOutcome, PatchWith, Place, Registry, Requester, Target,
};
pub use summary::Summary;
pub use watch::WatchEvent;
pub use wildcard::{ClusterEvent, ClusterObject, DecodedEvent, Watched};
