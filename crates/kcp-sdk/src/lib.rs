//! Controllers across kcp workspaces, on kube-rs.
//!
//! kcp serves every logical cluster ("workspace") at `/clusters/<path>`, and all of them at once
//! (lists and watches only) at `/clusters/*`, where each object carries the annotation
//! `kcp.io/cluster` naming its logical cluster. kube-rs knows nothing of this; this crate adds
//! what a controller across workspaces needs, built on kube-rs's own types:
//!
//! - [`ClusterConfig`]: one kube-rs configuration, a [`kube::Client`] for any logical cluster
//!   (kept per cluster) and one for all of them;
//! - [`ClusterKey`]: (logical cluster, namespace, name), what identifies an object across
//!   workspaces (kube-rs's `ObjectRef` has no cluster, so two workspaces' `default/app` would be
//!   one);
//! - [`ClusterStore`] and [`reflect`]: a cache of a wildcard watch keyed by [`ClusterKey`],
//!   rebuilt whole when kube-rs's watcher lists again (after a 410 or a restart of the server);
//! - [`Controller`]: a loop over one wildcard watch (of a typed kind, or of
//!   `kube::api::DynamicObject`s of a kind known at run time), with a work queue of
//!   [`ClusterKey`]s, at most one reconcile per key at a time, and rate-limited retries;
//! - [`LeaderElector`]: one active replica of several, through a coordination.k8s.io Lease;
//! - [`kinds`]: kcp's Workspace, WorkspaceType and LogicalCluster as typed kube-rs resources.
//!
//! The `stamper` example (`examples/stamper.rs`, [`examples::stamper`]) is a whole controller.

mod client;
mod controller;
pub mod examples;
pub mod kinds;
mod leader;
mod queue;
mod store;

pub use client::{ClusterConfig, ClusterError, KEPT_CLIENTS};
pub use controller::{Action, Controller};
pub use leader::LeaderElector;
pub use queue::Queue;
pub use store::{CLUSTER_ANNOTATION, ClusterKey, ClusterStore, reflect};
