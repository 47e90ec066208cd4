//! `kcp-bench storage`: the embedded redb store against a real etcd, same workload, same run.
//!
//! Writes: `concurrency` tasks create distinct keys with 1 KiB values for a fixed time; every
//! write is durable before it is acknowledged on both sides. Reads: 16 tasks read pages of 100
//! keys from random starting points of a 10,000-key prefix.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use kcp_storage::{KeyRange, RangeRequest, Storage, prefix_end};
use kcp_storage_etcd::{EtcdConfig, EtcdStorage};
use kcp_storage_redb::RedbStorage;
use kcp_testing::etcd::{EtcdOptions, EtcdProcess};

use crate::measure::{Measured, collect, new_histogram};
use crate::table;

#[derive(clap::Args)]
pub struct Options {
    /// Seconds each measurement runs.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Writer concurrencies to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,16,256")]
    concurrency: Vec<usize>,
    /// Value size in bytes.
    #[arg(long, default_value_t = 1024)]
    value_size: usize,
    /// Keys under the prefix that range reads page through.
    #[arg(long, default_value_t = 10_000)]
    range_keys: usize,
    /// Keys per range read.
    #[arg(long, default_value_t = 100)]
    range_limit: usize,
    /// Concurrent range readers.
    #[arg(long, default_value_t = 16)]
    readers: usize,
}

pub async fn run(options: Options) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let embedded: Arc<dyn Storage> = Arc::new(RedbStorage::open(&dir.path().join("bench.redb"))?);
    // Both stores on the same disk, so both pay the same fsync.
    let etcd_process = EtcdProcess::try_start_with(EtcdOptions {
        data_parent: Some(dir.path().to_path_buf()),
        ..EtcdOptions::default()
    })
    .await
    .map_err(|e| anyhow::anyhow!("start etcd: {e}"))?;
    let etcd: Arc<dyn Storage> = Arc::new(
        EtcdStorage::connect(EtcdConfig::new(vec![etcd_process.endpoint()]))
            .await
            .context("connect to etcd")?,
    );
    let backends = [("embedded (redb)", embedded), ("etcd 3.4", etcd)];
    let value = Bytes::from(vec![b'x'; options.value_size]);
    let duration = Duration::from_secs_f64(options.seconds);

    let mut rows = vec![vec![
        "workload".to_string(),
        backends[0].0.to_string(),
        backends[1].0.to_string(),
        "embedded/etcd".to_string(),
    ]];
    for &concurrency in &options.concurrency {
        let mut cells = Vec::new();
        let mut rates = Vec::new();
        for (name, store) in &backends {
            let measured = writes(store, concurrency, duration, &value).await?;
            eprintln!("writes c={concurrency} {name}: {}", measured.cell());
            rates.push(measured.rate());
            cells.push(measured.cell());
        }
        rows.push(vec![
            format!("durable writes, {concurrency} writers"),
            cells[0].clone(),
            cells[1].clone(),
            format!("{:.2}x", rates[0] / rates[1]),
        ]);
    }

    let mut cells = Vec::new();
    let mut rates = Vec::new();
    for (name, store) in &backends {
        fill_range_prefix(store, options.range_keys, &value).await?;
        let measured = range_reads(store, &options, duration).await?;
        eprintln!("range reads {name}: {}", measured.cell());
        rates.push(measured.rate());
        cells.push(measured.cell());
    }
    rows.push(vec![
        format!(
            "range reads of {} keys, {} readers",
            options.range_limit, options.readers
        ),
        cells[0].clone(),
        cells[1].clone(),
        format!("{:.2}x", rates[0] / rates[1]),
    ]);

    println!(
        "kcp-bench storage: {} B values, {:.1} s per cell, both stores in {}, same run",
        options.value_size,
        options.seconds,
        dir.path().display()
    );
    print!("{}", table::render(&rows));
    Ok(())
}

/// `concurrency` tasks creating distinct keys until `duration` has passed.
pub(crate) async fn writes(
    store: &Arc<dyn Storage>,
    concurrency: usize,
    duration: Duration,
    value: &Bytes,
) -> anyhow::Result<Measured> {
    let run = fastrand::u64(..);
    let start = Instant::now();
    let deadline = start + duration;
    let tasks: Vec<_> = (0..concurrency)
        .map(|worker| {
            let store = Arc::clone(store);
            let value = value.clone();
            tokio::spawn(async move {
                let mut latency = new_histogram();
                let mut n = 0u64;
                while Instant::now() < deadline {
                    let key = format!("/bench/w/{run}/{worker}/{n}");
                    let began = Instant::now();
                    store.create(key.as_bytes(), value.clone()).await?;
                    latency.saturating_record(began.elapsed().as_micros() as u64);
                    n += 1;
                }
                anyhow::Ok((n, latency))
            })
        })
        .collect();
    collect(tasks, start).await
}

/// Writes the keys range reads page through, if they are not there yet.
async fn fill_range_prefix(
    store: &Arc<dyn Storage>,
    keys: usize,
    value: &Bytes,
) -> anyhow::Result<()> {
    let tasks: Vec<_> = (0..64)
        .map(|worker| {
            let store = Arc::clone(store);
            let value = value.clone();
            tokio::spawn(async move {
                for i in (worker..keys).step_by(64) {
                    store.create(range_key(i).as_bytes(), value.clone()).await?;
                }
                anyhow::Ok(())
            })
        })
        .collect();
    for task in tasks {
        task.await??;
    }
    Ok(())
}

fn range_key(i: usize) -> String {
    format!("/bench/r/{i:08}")
}

async fn range_reads(
    store: &Arc<dyn Storage>,
    options: &Options,
    duration: Duration,
) -> anyhow::Result<Measured> {
    let start = Instant::now();
    let deadline = start + duration;
    let (keys, limit) = (options.range_keys, options.range_limit);
    let tasks: Vec<_> = (0..options.readers)
        .map(|_| {
            let store = Arc::clone(store);
            tokio::spawn(async move {
                let mut latency = new_histogram();
                let mut n = 0u64;
                let end = prefix_end(b"/bench/r/");
                while Instant::now() < deadline {
                    let from = fastrand::usize(..keys.saturating_sub(limit).max(1));
                    let request = RangeRequest {
                        range: KeyRange {
                            start: range_key(from).into_bytes(),
                            end: end.clone(),
                        },
                        limit,
                        revision: 0,
                        skip_count: false,
                    };
                    let began = Instant::now();
                    let page = store.range(request).await?;
                    latency.saturating_record(began.elapsed().as_micros() as u64);
                    anyhow::ensure!(
                        page.kvs.len() == limit.min(keys),
                        "short page: {}",
                        page.kvs.len()
                    );
                    n += 1;
                }
                anyhow::Ok((n, latency))
            })
        })
        .collect();
    collect(tasks, start).await
}
