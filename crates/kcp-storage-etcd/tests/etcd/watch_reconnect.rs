//! Watches survive etcd crashes: after SIGKILL and a restart on the same ports and data, a watch
//! resumes from the revision after the last one it delivered, losing and repeating nothing, and
//! reports compaction if that revision is gone by then.

use std::time::Duration;

use futures::StreamExt;
use kcp_storage::{Event, EventKind, Op, Storage, StorageError, Txn, WatchRequest, WatchStream};
use kcp_storage_etcd::EtcdStorage;
use kcp_testing::etcd::EtcdProcess;

use crate::support::bytes;

const TIMEOUT: Duration = Duration::from_secs(30);

/// One round of writes under `/rc/`: creates, an update, a delete, a two-key transaction (two
/// events at one revision) and a write outside the watched prefix. Returns the expected events
/// as (revision, kind, key).
async fn write_round(store: &EtcdStorage, round: u32) -> Vec<(u64, EventKind, String)> {
    let mut expected = Vec::new();
    for i in 0..10 {
        let key = format!("/rc/{round}/{i}");
        let kv = store.create(key.as_bytes(), bytes("v")).await.unwrap();
        expected.push((kv.mod_revision, EventKind::Put, key));
    }
    let key = format!("/rc/{round}/0");
    let current = store.get(key.as_bytes(), 0).await.unwrap().kv.unwrap();
    let kv = store
        .update(key.as_bytes(), bytes("v2"), current.mod_revision)
        .await
        .unwrap();
    expected.push((kv.mod_revision, EventKind::Put, key));
    store
        .create(format!("/unwatched/{round}").as_bytes(), bytes("x"))
        .await
        .unwrap();
    let key = format!("/rc/{round}/1");
    let deleted = store.delete(key.as_bytes(), None).await.unwrap();
    expected.push((deleted.mod_revision, EventKind::Delete, key));
    let (a, b) = (format!("/rc/{round}/t1"), format!("/rc/{round}/t2"));
    let txn = store
        .txn(Txn {
            compares: vec![],
            success: vec![Op::put(a.clone(), "a"), Op::put(b.clone(), "b")],
            failure: vec![],
        })
        .await
        .unwrap();
    expected.push((txn.revision, EventKind::Put, a));
    expected.push((txn.revision, EventKind::Put, b));
    expected
}

async fn next(stream: &mut WatchStream) -> kcp_storage::Result<Event> {
    match tokio::time::timeout(TIMEOUT, stream.next()).await {
        Ok(Some(item)) => item,
        Ok(None) => panic!("watch ended"),
        Err(_) => panic!("no watch item within {TIMEOUT:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_resumes_exactly_after_etcd_is_killed_and_restarted() {
    // Shows the watch's reconnection log when the test fails (or with --nocapture).
    let _ = tracing_subscriber::fmt()
        .with_env_filter("kcp_storage_etcd=info")
        .with_test_writer()
        .try_init();
    let mut etcd = EtcdProcess::start().await;
    let store = EtcdStorage::connect(etcd.config()).await.unwrap();
    let watch = store.watch(WatchRequest::prefix("/rc/", 0)).await.unwrap();

    // A reader that keeps polling, so the stream notices the crash and retries while etcd is down.
    let (sender, mut received) = tokio::sync::mpsc::unbounded_channel();
    let reader = tokio::spawn(async move {
        let mut watch = watch;
        while let Some(item) = watch.next().await {
            if sender.send(item).is_err() {
                break;
            }
        }
    });

    let mut expected = Vec::new();
    for round in 0..3 {
        expected.extend(write_round(&store, round).await);
        etcd.kill();
        // Deliberately a fixed outage, not a condition to wait for: etcd stays down long enough
        // for the watch to see the broken stream and fail to reconnect a few times, and the test
        // checks that it neither gives up nor loses or repeats events across such an outage.
        tokio::time::sleep(Duration::from_millis(700)).await;
        etcd.restart().await;
    }
    expected.extend(write_round(&store, 3).await);

    for (index, (revision, kind, key)) in expected.iter().enumerate() {
        let event = match tokio::time::timeout(TIMEOUT, received.recv()).await {
            Ok(Some(Ok(event))) => event,
            Ok(Some(Err(error))) => panic!("watch failed at event {index}: {error}"),
            Ok(None) => panic!("watch ended at event {index}"),
            Err(_) => panic!("event {index} ({revision} {key}) not delivered within {TIMEOUT:?}"),
        };
        assert_eq!(
            (
                event.revision(),
                event.kind,
                String::from_utf8_lossy(&event.kv.key).into_owned()
            ),
            (*revision, *kind, key.clone()),
            "event {index} in order and exactly once"
        );
        if event.kind == EventKind::Delete {
            assert!(event.prev.is_some(), "a delete carries the deleted value");
        }
    }
    if let Ok(item) = tokio::time::timeout(Duration::from_secs(1), received.recv()).await {
        panic!("unexpected extra watch item: {item:?}");
    }
    reader.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_resumed_after_its_revision_was_compacted_fails_with_compacted() {
    let mut etcd = EtcdProcess::start().await;
    let store = EtcdStorage::connect(etcd.config()).await.unwrap();
    let mut watch = store.watch(WatchRequest::prefix("/rcc/", 0)).await.unwrap();
    let first = store.create(b"/rcc/a", bytes("a")).await.unwrap();
    assert_eq!(
        next(&mut watch).await.unwrap().revision(),
        first.mod_revision
    );

    // The watch is not polled while etcd restarts and history moves past it.
    etcd.kill();
    etcd.restart().await;
    store.create(b"/rcc/b", bytes("b")).await.unwrap();
    let last = store.create(b"/rcc/c", bytes("c")).await.unwrap();
    store.compact(last.mod_revision).await.unwrap();

    match next(&mut watch).await {
        Err(StorageError::Compacted {
            requested,
            compacted,
        }) => assert_eq!(
            (requested, compacted),
            (first.mod_revision + 1, last.mod_revision)
        ),
        other => panic!("expected Compacted, got {other:?}"),
    }
    let end = tokio::time::timeout(TIMEOUT, watch.next()).await;
    assert!(
        matches!(end, Ok(None)),
        "the stream ends after Compacted: {end:?}"
    );
}
