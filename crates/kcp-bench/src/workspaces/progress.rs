//! A line every few seconds while workspaces are created or deleted: how many exist and are
//! Ready, the rate in the last interval, the server's RSS and the size of its store, so a long
//! run shows how the rate changes as the tree grows.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::follow::Seen;
use crate::api::kcp_process::read_status_kib;

const INTERVAL: Duration = Duration::from_secs(10);

/// The running reporter; it stops when dropped.
pub struct Progress {
    task: tokio::task::JoinHandle<()>,
}

impl Progress {
    pub fn start(seen: watch::Receiver<Seen>, pid: u32, store: PathBuf) -> Progress {
        let task = tokio::spawn(async move {
            let began = Instant::now();
            let mut last = seen.borrow().clone();
            let mut ticks =
                tokio::time::interval_at(tokio::time::Instant::now() + INTERVAL, INTERVAL);
            loop {
                ticks.tick().await;
                let now = seen.borrow().clone();
                let per_second =
                    |a: usize, b: usize| (a as f64 - b as f64) / INTERVAL.as_secs_f64();
                let rss = read_status_kib(pid, "VmRSS:").unwrap_or_default() / 1024;
                let store_mib = std::fs::metadata(&store).map_or(0, |m| m.len() >> 20);
                eprintln!(
                    "  {:>6.0} s: {} exist, {} Ready ({:+.0}/s Ready, {:+.0}/s existing); RSS {rss} MiB, store {store_mib} MiB",
                    began.elapsed().as_secs_f64(),
                    now.existing,
                    now.ready,
                    per_second(now.ready, last.ready),
                    per_second(now.existing, last.existing),
                );
                last = now;
            }
        });
        Progress { task }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.task.abort();
    }
}
