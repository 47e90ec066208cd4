//! Several endpoints: a dead one next to a live etcd does not break reads, writes or watches,
//! and a configuration where nothing answers fails with Unavailable in a few seconds.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use kcp_storage::{RangeRequest, Storage, StorageError, WatchRequest};
use kcp_storage_etcd::{EtcdConfig, EtcdStorage};
use kcp_testing::etcd::EtcdProcess;

use crate::support::{assert_no_event, bytes, next_event};

/// A loopback URL where nothing listens.
fn dead_endpoint() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

async fn exercise(store: &EtcdStorage, prefix: &str) {
    let mut watch = store
        .watch(WatchRequest::prefix(prefix.to_string(), 0))
        .await
        .unwrap();
    for round in 0..5 {
        let key = format!("{prefix}{round}");
        let created = store.create(key.as_bytes(), bytes("1")).await.unwrap();
        let updated = store
            .update(key.as_bytes(), bytes("2"), created.mod_revision)
            .await
            .unwrap();
        let read = store.get(key.as_bytes(), 0).await.unwrap();
        assert_eq!(read.kv.unwrap(), updated);
        for expected in [created.mod_revision, updated.mod_revision] {
            let event = next_event(&mut watch).await;
            assert_eq!(event.revision(), expected);
        }
    }
    let listed = store
        .range(RangeRequest::prefix(prefix.to_string()))
        .await
        .unwrap();
    assert_eq!(listed.count, 5);
    store
        .delete(format!("{prefix}0").as_bytes(), None)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_endpoint_before_or_after_a_live_one_does_not_break_operations() {
    let etcd = EtcdProcess::start().await;
    let dead_first = EtcdConfig::new([dead_endpoint(), etcd.endpoint()]);
    let store = EtcdStorage::connect(dead_first).await.unwrap();
    exercise(&store, "/dead-first/").await;

    let dead_last = EtcdConfig::new([etcd.endpoint(), dead_endpoint()]);
    let store = EtcdStorage::connect(dead_last).await.unwrap();
    exercise(&store, "/dead-last/").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_fails_with_unavailable_when_no_endpoint_answers() {
    let mut config = EtcdConfig::new([dead_endpoint(), dead_endpoint()]);
    config.connect_timeout = Duration::from_secs(2);
    let started = Instant::now();
    match EtcdStorage::connect(config).await {
        Err(StorageError::Unavailable(message)) => {
            assert!(message.contains("127.0.0.1"), "{message}");
        }
        Err(other) => panic!("expected Unavailable, got {other}"),
        Ok(_) => panic!("connected to nothing"),
    }
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "gave up after {:?}",
        started.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stores_with_different_key_prefixes_do_not_see_each_other() {
    let etcd = EtcdProcess::start().await;
    let a = EtcdStorage::connect(etcd.config().with_key_prefix("/tenant-a"))
        .await
        .unwrap();
    let b = EtcdStorage::connect(etcd.config().with_key_prefix("/tenant-b"))
        .await
        .unwrap();
    let mut watch_a = a.watch(WatchRequest::prefix("", 0)).await.unwrap();
    a.create(b"/k", bytes("a")).await.unwrap();
    b.create(b"/k", bytes("b")).await.unwrap();
    a.create(b"/l", bytes("a")).await.unwrap();

    let all_a = a.range(RangeRequest::prefix("")).await.unwrap();
    let keys: Vec<_> = all_a.kvs.iter().map(|kv| kv.key.clone()).collect();
    assert_eq!(keys, [bytes("/k"), bytes("/l")]);
    assert_eq!(b.get(b"/k", 0).await.unwrap().kv.unwrap().value, bytes("b"));
    for key in ["/k", "/l"] {
        let event = next_event(&mut watch_a).await;
        assert_eq!(event.kv.key, bytes(key));
        assert_eq!(event.kv.value, bytes("a"));
    }
    // Nothing of prefix b arrives: checked by waiting a short while for an event that must not come.
    assert_no_event(&mut watch_a).await;

    let plain = EtcdStorage::connect(etcd.config()).await.unwrap();
    let everything = plain.range(RangeRequest::prefix("")).await.unwrap();
    let keys: Vec<_> = everything.kvs.iter().map(|kv| kv.key.clone()).collect();
    assert_eq!(
        keys,
        [
            bytes("/tenant-a/k"),
            bytes("/tenant-a/l"),
            bytes("/tenant-b/k")
        ]
    );
}
