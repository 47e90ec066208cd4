//! `kcp-bench`: measures kcp's hot paths against baselines run in the same process and the same
//! minute, and prints the ratios (this machine is noisy; only ratios carry over).
//!
//! Subcommands: `storage` (embedded store against a real etcd), `api` (the real `kcp` binary
//! against a bare TLS server and the raw embedded store; needs `cargo build --release -p kcp`),
//! `workspaces` (a tree of workspaces created, held and deleted by the real `kcp` binary),
//! `crds` (a big CRD updated and deleted by the real `kcp` binary, and the memory it leaves),
//! `crd-corpus` (real-world CRDs created, held and deleted, and the memory throughout),
//! `authz` (GETs by an RBAC-authorized user against the admin's), `lists` (a LIST of 100,000
//! configmaps against a bare TLS server sending the same bytes, and the memory it takes),
//! `watches` (10,000 watches over 1,000 workspaces: memory per idle watch, delivery latency),
//! `gc` (garbage collection of many dependents and of ownership chains in a deleted namespace),
//! `apis` (a thousand workspaces binding one export: rate, memory, the virtual workspace's
//! watch and LIST), `admission`, `compat` (the `compat` binary on the largest CRDs), `physical`
//! (a real cluster's 50 resources imported and published in a workspace), `syncer` (spec down and
//! status up through the syncer, and its memory).

mod admission;
mod api;
mod apis;
mod authz;
mod compat;
mod crds;
mod gc;
mod lists;
mod measure;
mod physical;
mod storage;
mod syncer;
mod table;
mod watches;
pub(crate) mod workspaces;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "kcp-bench",
    about = "Benchmarks for kcp, each against a baseline in the same run"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Durable write throughput and latency, and range-read throughput: embedded store vs etcd.
    Storage(storage::Options),
    /// The kcp binary: GET vs a bare TLS server, creates vs the raw store, idle RSS, start time.
    /// Expects `cargo build --release -p kcp` first (it runs target/release/kcp).
    Api(api::Options),
    /// Workspaces: creating a tree of them to Ready (against configmap creates in the same
    /// run), memory per workspace, and deleting them all. Expects `cargo build --release -p kcp`.
    Workspaces(workspaces::Options),
    /// CRD churn: a 300 KiB CRD updated 1,000 times (distinct specs) and deleted, against
    /// configmap updates of the same size; RSS before, peak and after against a target.
    /// Expects `cargo build --release -p kcp`.
    Crds(crds::Options),
    /// Real-world CRDs (173 from 14 projects, from the Go module proxy) created one `kubectl
    /// create` after the other, held and all deleted: peak RSS, RSS held against their weight,
    /// RSS after against a target. Expects `cargo build --release -p kcp`.
    CrdCorpus(crds::corpus::Options),
    /// Authorization's cost: GETs by a user RBAC authorizes (through 100 RoleBindings) against
    /// the admin's, in the same run. Expects `cargo build --release -p kcp`.
    Authz(authz::Options),
    /// One LIST of a large collection (100,000 configmaps of 1 KiB) against a bare TLS server
    /// sending the same bytes, and the server's RSS during and after it. Expects
    /// `cargo build --release -p kcp`.
    Lists(lists::Options),
    /// Garbage collection: 10,000 dependents of one owner collected, and a namespace of 1,000
    /// objects in ownership chains deleted, each against the client deleting the same objects
    /// itself. Expects `cargo build --release -p kcp`.
    Gc(gc::Options),
    /// Watches at scale: 10,000 watches over 1,000 workspaces and wildcard ones, the memory
    /// each idle one takes and how fast events reach them. Expects `cargo build --release -p kcp`.
    Watches(watches::Options),
    /// API sharing: 1,000 workspaces binding one export (rate to Bound, RSS per binding), one
    /// watch through the export's virtual workspace (delivery latency), and a LIST through it
    /// against the same LIST in the workspace. Expects `cargo build --release -p kcp`.
    Apis(apis::Options),
    /// Admission: creates with a validating webhook, an admission policy, or the audit log,
    /// against the same creates without; memory per webhook configuration. Expects
    /// `cargo build --release -p kcp`.
    Admission(admission::Options),
    /// The `compat` binary on the largest prometheus-operator CRDs, against a one-field CRD.
    /// Expects `cargo build --release -p kcp`.
    Compat(compat::Options),
    /// Physical clusters: a real Kubernetes cluster serving 50 custom resources registered in a
    /// workspace, until all 50 are served there, against applying the same CRDs with kubectl.
    /// Expects `cargo build --release -p kcp` and `scripts/physical-cluster build`.
    Physical(physical::Options),
    /// The syncer against a real Kubernetes cluster: spec down and status up latencies against
    /// a watch's own, and the syncer binary's RSS following 10,000 objects. Expects
    /// `cargo build --release -p kcp` and `scripts/physical-cluster build`.
    Syncer(syncer::Options),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Storage(options) => storage::run(options).await,
        Command::Api(options) => api::run(options).await,
        Command::Workspaces(options) => workspaces::run(options).await,
        Command::Crds(options) => crds::run(options).await,
        Command::CrdCorpus(options) => crds::corpus::run(options).await,
        Command::Authz(options) => authz::run(options).await,
        Command::Lists(options) => lists::run(options).await,
        Command::Watches(options) => watches::run(options).await,
        Command::Apis(options) => apis::run(options).await,
        Command::Admission(options) => admission::run(options).await,
        Command::Compat(options) => compat::run(options).await,
        Command::Physical(options) => physical::run(options).await,
        Command::Syncer(options) => syncer::run(options).await,
        Command::Gc(options) => gc::run(options).await,
    }
}
