//! `kcp-bench`: measures kcp's hot paths against baselines run in the same process and the same
//! minute, and prints the ratios (this machine is noisy; only ratios carry over).
//!
//! Subcommands: `storage` (embedded store against a real etcd).

mod storage;
mod table;

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
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Storage(options) => storage::run(options).await,
    }
}
