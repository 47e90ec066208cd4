//! Tooling for kcp's tests and benchmarks. Nothing here is part of the server: production crates
//! never depend on this crate, only test targets (as a dev-dependency) and `kcp-bench` do.
//!
//! - `etcd` (feature `etcd`): a real, throwaway etcd process on free loopback ports.
//! - [`wait`]: waiting for a condition by polling it, with a generous deadline, instead of
//!   sleeping for a fixed time and hoping it was long enough.
//! - [`process`]: spawning a child that is killed when the test process exits.
//! - [`signal`]: SIGTERM and SIGKILL for child processes, so test code itself needs no `unsafe`.
//! - [`crd`]: CustomResourceDefinition manifests built from their parts, so each test writes only
//!   what is particular to its CRD.
//! - [`patches`]: hostile JSON patches several tests send.
//! - `https` (feature `https`): a JSON-over-HTTPS server with a certificate for 127.0.0.1, for
//!   the webhooks tests play (conversion, authentication, authorization).
//! - [`kubeconfig`]: the admin tokens a server wrote into its kubeconfig.
//! - [`output`]: reading what a child process (kubectl, mostly) printed, requiring success or
//!   failure, and the lines of one still running, as it prints them.
//!
//! Its unit tests also check the dependency rules between the workspace's crates, as
//! `ARCHITECTURE.md` states them (`architecture`).
//!
//! A failed expectation panics with a message that says what was awaited or expected and what
//! was seen instead: these are test helpers, and a panic is how a test fails.

#[cfg(test)]
mod architecture;
pub mod crd;
#[cfg(feature = "etcd")]
pub mod etcd;
#[cfg(feature = "https")]
pub mod https;
pub mod kubeconfig;
pub mod output;
pub mod patches;
pub mod process;
pub mod signal;
pub mod wait;
