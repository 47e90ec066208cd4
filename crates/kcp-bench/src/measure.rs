//! One benchmark measurement: operations counted by concurrent workers, the wall time they took,
//! and their merged latency histogram.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// One measurement: operations, wall time and latency percentiles (microseconds).
pub struct Measured {
    pub ops: u64,
    pub elapsed: Duration,
    pub latency: Histogram<u64>,
}

impl Measured {
    /// Operations per second.
    pub fn rate(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64()
    }

    /// Rate, p50 and p99 as one table cell.
    pub fn cell(&self) -> String {
        format!(
            "{:>9.0}/s  p50 {:>6.2} ms  p99 {:>6.2} ms",
            self.rate(),
            self.latency.value_at_quantile(0.5) as f64 / 1000.0,
            self.latency.value_at_quantile(0.99) as f64 / 1000.0
        )
    }
}

/// A worker task: how many operations it did, and their latencies.
pub type Worker = tokio::task::JoinHandle<anyhow::Result<(u64, Histogram<u64>)>>;

/// Waits for every worker and merges their counts and histograms; the wall time runs from `start`.
pub async fn collect(tasks: Vec<Worker>, start: Instant) -> anyhow::Result<Measured> {
    let mut ops = 0;
    let mut latency = new_histogram();
    for task in tasks {
        let (n, h) = task.await??;
        ops += n;
        latency.add(h)?;
    }
    Ok(Measured {
        ops,
        elapsed: start.elapsed(),
        latency,
    })
}

/// A histogram of latencies in microseconds, 1 µs to 60 s.
pub fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

/// The middle of `times` (the upper one of an even count).
pub fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}
