//! Watch: replay from old revisions, live events, compaction, prefix isolation, slow watchers.

use std::sync::Arc;

use super::{assert_no_event, base_revision, bytes, next_event};
use crate::{EventKind, Op, RangeRequest, Storage, StorageError, Txn, WatchRequest};

pub async fn watch_from_old_revision_replays_in_order(store: Arc<dyn Storage>) {
    let base = base_revision(&*store).await;
    let a = store.create(b"/w/a", bytes("1")).await.unwrap();
    let a2 = store
        .update(b"/w/a", bytes("2"), a.mod_revision)
        .await
        .unwrap();
    store
        .txn(Txn {
            compares: vec![],
            success: vec![Op::put(b"/w/b", "b"), Op::put(b"/w/c", "c")],
            failure: vec![],
        })
        .await
        .unwrap();
    store.delete(b"/w/a", None).await.unwrap();

    let mut watch = store
        .watch(WatchRequest::prefix("/w/", base + 1))
        .await
        .unwrap();
    let e1 = next_event(&mut watch).await;
    assert_eq!(
        (e1.kind, e1.revision(), e1.kv.value.clone()),
        (EventKind::Put, base + 1, bytes("1"))
    );
    assert!(e1.prev.is_none());
    let e2 = next_event(&mut watch).await;
    assert_eq!(e2.kv, a2);
    assert_eq!(
        e2.prev.as_ref().unwrap(),
        &a,
        "a put carries the value it replaced"
    );
    let (e3, e4) = (next_event(&mut watch).await, next_event(&mut watch).await);
    assert_eq!((e3.revision(), e4.revision()), (base + 3, base + 3));
    assert_eq!(
        (e3.kv.key.clone(), e4.kv.key.clone()),
        (bytes("/w/b"), bytes("/w/c"))
    );
    let e5 = next_event(&mut watch).await;
    assert_eq!((e5.kind, e5.revision()), (EventKind::Delete, base + 4));
    assert_eq!(e5.kv.key, bytes("/w/a"));
    assert_eq!(
        e5.prev.as_ref().unwrap(),
        &a2,
        "a delete carries the deleted value"
    );

    // The same watch goes on with live events.
    store.create(b"/w/d", bytes("d")).await.unwrap();
    let e6 = next_event(&mut watch).await;
    assert_eq!(
        (e6.revision(), e6.kv.key.clone()),
        (base + 5, bytes("/w/d"))
    );

    // Starting in the middle skips what came before.
    let mut middle = store
        .watch(WatchRequest::prefix("/w/", base + 4))
        .await
        .unwrap();
    assert_eq!(next_event(&mut middle).await.revision(), base + 4);
    assert_eq!(next_event(&mut middle).await.revision(), base + 5);
    assert_no_event(&mut middle).await;
}

pub async fn watch_from_current_revision_sees_only_new_events(store: Arc<dyn Storage>) {
    store.create(b"/n/old", bytes("old")).await.unwrap();
    let mut watch = store.watch(WatchRequest::prefix("/n/", 0)).await.unwrap();
    let current = store.current_revision().await.unwrap();
    let mut future = store
        .watch(WatchRequest::prefix("/n/", current + 2))
        .await
        .unwrap();
    assert_no_event(&mut watch).await;
    for i in 0..3 {
        store
            .create(format!("/n/new{i}").as_bytes(), bytes("x"))
            .await
            .unwrap();
    }
    for i in 0..3 {
        let event = next_event(&mut watch).await;
        assert_eq!(event.kv.key, bytes(&format!("/n/new{i}")));
        assert_eq!(event.revision(), current + 1 + i);
    }
    assert_eq!(
        next_event(&mut future).await.revision(),
        current + 2,
        "a future start waits for it"
    );
    assert_eq!(next_event(&mut future).await.revision(), current + 3);
}

pub async fn watch_from_compacted_revision_fails(store: Arc<dyn Storage>) {
    let base = base_revision(&*store).await;
    for i in 0..5 {
        store
            .create(format!("/c/{i}").as_bytes(), bytes("x"))
            .await
            .unwrap();
    }
    store.compact(base + 4).await.unwrap();
    match store.watch(WatchRequest::prefix("/c/", base + 2)).await {
        Err(StorageError::Compacted {
            requested,
            compacted,
        }) => {
            assert_eq!((requested, compacted), (base + 2, base + 4));
        }
        Err(other) => panic!("expected Compacted, got {other}"),
        Ok(_) => panic!("expected Compacted, got a watch"),
    }
    let mut watch = store
        .watch(WatchRequest::prefix("/c/", base + 4))
        .await
        .unwrap();
    assert_eq!(next_event(&mut watch).await.kv.key, bytes("/c/3"));
    assert_eq!(next_event(&mut watch).await.kv.key, bytes("/c/4"));
}

pub async fn watch_and_range_never_cross_cluster_prefixes(store: Arc<dyn Storage>) {
    let keys = crate::keys::ResourceKeys::new("", "configmaps");
    let mut watch_a = store
        .watch(WatchRequest::prefix(keys.cluster("root:a"), 0))
        .await
        .unwrap();
    let mut watch_ns = store
        .watch(WatchRequest::prefix(keys.namespace("root:a", "ns"), 0))
        .await
        .unwrap();
    for cluster in ["root:ab", "root:b", "root", "root:a", "root:a:b"] {
        for ns in ["ns", "ns2"] {
            store
                .create(&keys.object(cluster, Some(ns), "cm"), bytes(cluster))
                .await
                .unwrap();
        }
    }
    for ns in ["ns", "ns2"] {
        let event = next_event(&mut watch_a).await;
        assert_eq!(
            event.kv.key,
            bytes(&format!("/registry/core/configmaps/root:a/{ns}/cm"))
        );
    }
    assert_no_event(&mut watch_a).await;
    let event = next_event(&mut watch_ns).await;
    assert_eq!(
        event.kv.key,
        bytes("/registry/core/configmaps/root:a/ns/cm")
    );
    assert_no_event(&mut watch_ns).await;

    let listed = store
        .range(RangeRequest::prefix(keys.cluster("root:a")))
        .await
        .unwrap();
    assert_eq!(listed.count, 2);
    assert!(listed.kvs.iter().all(|kv| kv.value == bytes("root:a")));
    let all = store
        .range(RangeRequest::prefix(keys.all_clusters()))
        .await
        .unwrap();
    assert_eq!(all.count, 10, "the wildcard prefix sees every cluster");
}

pub async fn watch_delivers_a_burst_to_a_slow_watcher(store: Arc<dyn Storage>) {
    let base = base_revision(&*store).await;
    let mut watch = store.watch(WatchRequest::prefix("/s/", 0)).await.unwrap();
    const N: u64 = 3000;
    let writers: Vec<_> = (0..8u64)
        .map(|w| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                for i in (w..N).step_by(8) {
                    store
                        .create(format!("/s/{i:05}").as_bytes(), bytes("x"))
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap();
    }
    // Only now does the watcher read: every event is still delivered, once, in order.
    let mut seen = std::collections::HashSet::new();
    let mut last = base;
    for _ in 0..N {
        let event = next_event(&mut watch).await;
        assert!(event.revision() > last, "revisions strictly increase");
        last = event.revision();
        assert!(seen.insert(event.kv.key.clone()), "no event twice");
    }
    assert_eq!(last, base + N);
    assert_no_event(&mut watch).await;
}
