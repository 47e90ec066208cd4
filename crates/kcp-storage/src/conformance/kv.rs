//! Point reads, guarded writes, transactions, ranges and compaction.

use std::sync::Arc;

use super::{base_revision, bytes};
use crate::{
    Compare, CompareOp, CompareTarget, KeyRange, Op, OpResult, RangeRequest, Storage, StorageError,
    Txn,
};

pub async fn revisions_start_after_the_base_and_grow_per_write(store: Arc<dyn Storage>) {
    let base = base_revision(&*store).await;
    let created = store.create(b"/t/a", bytes("v1")).await.unwrap();
    assert_eq!(created.mod_revision, base + 1);
    assert_eq!(created.create_revision, base + 1);
    assert_eq!(created.version, 1);
    assert_eq!(store.current_revision().await.unwrap(), base + 1);

    let updated = store.update(b"/t/a", bytes("v2"), base + 1).await.unwrap();
    assert_eq!(
        (
            updated.mod_revision,
            updated.create_revision,
            updated.version
        ),
        (base + 2, base + 1, 2)
    );
    assert_eq!(updated.value, bytes("v2"));

    let latest = store.get(b"/t/a", 0).await.unwrap();
    assert_eq!(latest.revision, base + 2);
    assert_eq!(latest.kv.as_ref().unwrap(), &updated);
    let old = store.get(b"/t/a", base + 1).await.unwrap();
    assert_eq!(old.kv.unwrap().value, bytes("v1"));
    assert!(store.get(b"/t/missing", 0).await.unwrap().kv.is_none());
    store.create(b"/t/later", bytes("x")).await.unwrap();
    assert!(
        store.get(b"/t/later", base + 2).await.unwrap().kv.is_none(),
        "key absent before its creation"
    );

    match store.get(b"/t/a", base + 10).await {
        Err(StorageError::FutureRevision { requested, current }) => {
            assert_eq!((requested, current), (base + 10, base + 3));
        }
        other => panic!("expected FutureRevision, got {other:?}"),
    }
}

pub async fn create_fails_on_existing_key(store: Arc<dyn Storage>) {
    store.create(b"/t/a", bytes("1")).await.unwrap();
    let revision = store.current_revision().await.unwrap();
    assert!(matches!(
        store.create(b"/t/a", bytes("2")).await,
        Err(StorageError::AlreadyExists { key }) if key == b"/t/a"
    ));
    assert_eq!(
        store.current_revision().await.unwrap(),
        revision,
        "a failed create writes nothing"
    );
    assert_eq!(
        store.get(b"/t/a", 0).await.unwrap().kv.unwrap().value,
        bytes("1")
    );
}

pub async fn update_and_delete_are_guarded_by_modification_revision(store: Arc<dyn Storage>) {
    let first = store.create(b"/t/k", bytes("1")).await.unwrap();
    let second = store
        .update(b"/t/k", bytes("2"), first.mod_revision)
        .await
        .unwrap();

    match store
        .update(b"/t/k", bytes("stale"), first.mod_revision)
        .await
    {
        Err(StorageError::Conflict {
            expected, current, ..
        }) => {
            assert_eq!(expected, first.mod_revision);
            assert_eq!(*current.unwrap(), second);
        }
        other => panic!("expected Conflict, got {other:?}"),
    }
    assert!(matches!(
        store.update(b"/t/none", bytes("x"), 0).await,
        Err(StorageError::NotFound { .. })
    ));
    assert!(matches!(
        store
            .update(b"/t/none", bytes("x"), second.mod_revision)
            .await,
        Err(StorageError::NotFound { .. })
    ));
    assert!(
        store.get(b"/t/none", 0).await.unwrap().kv.is_none(),
        "update never creates"
    );

    assert!(matches!(
        store.delete(b"/t/k", Some(first.mod_revision)).await,
        Err(StorageError::Conflict { .. })
    ));
    let deleted = store
        .delete(b"/t/k", Some(second.mod_revision))
        .await
        .unwrap();
    assert_eq!(deleted.value, bytes("2"));
    assert_eq!(
        deleted.mod_revision,
        second.mod_revision + 1,
        "delete reports its own revision"
    );
    assert!(store.get(b"/t/k", 0).await.unwrap().kv.is_none());
    let revision = store.current_revision().await.unwrap();
    assert!(matches!(
        store.delete(b"/t/k", None).await,
        Err(StorageError::NotFound { .. })
    ));
    assert_eq!(
        store.current_revision().await.unwrap(),
        revision,
        "deleting nothing writes nothing"
    );

    let again = store.create(b"/t/k", bytes("3")).await.unwrap();
    assert_eq!(again.version, 1, "a re-created key starts a new life");
    assert_eq!(again.create_revision, revision + 1);
    store.delete(b"/t/k", None).await.unwrap();
}

pub async fn txn_runs_one_branch_at_one_revision(store: Arc<dyn Storage>) {
    let base = base_revision(&*store).await;
    let response = store
        .txn(Txn {
            compares: vec![Compare::absent(b"/t/a"), Compare::absent(b"/t/b")],
            success: vec![
                Op::put(b"/t/a", "a"),
                Op::put(b"/t/b", "b"),
                Op::Get(b"/t/c".to_vec()),
            ],
            failure: vec![Op::Get(b"/t/a".to_vec())],
        })
        .await
        .unwrap();
    assert!(response.succeeded);
    assert_eq!(
        response.revision,
        base + 1,
        "all writes of a transaction share one revision"
    );
    assert_eq!(response.results.len(), 3);
    assert_eq!(response.results[0], OpResult::Put { prev: None });
    assert_eq!(response.results[2], OpResult::Get(None));
    for key in [&b"/t/a"[..], b"/t/b"] {
        assert_eq!(
            store.get(key, 0).await.unwrap().kv.unwrap().mod_revision,
            base + 1
        );
    }

    let response = store
        .txn(Txn {
            compares: vec![Compare::absent(b"/t/a")],
            success: vec![Op::put(b"/t/a", "never")],
            failure: vec![
                Op::Get(b"/t/a".to_vec()),
                Op::Delete(b"/t/b".to_vec()),
                Op::Delete(b"/t/x".to_vec()),
            ],
        })
        .await
        .unwrap();
    assert!(!response.succeeded);
    assert_eq!(response.revision, base + 2);
    match &response.results[..] {
        [
            OpResult::Get(Some(a)),
            OpResult::Delete { prev: Some(b) },
            OpResult::Delete { prev: None },
        ] => {
            assert_eq!(a.value, bytes("a"));
            assert_eq!(b.value, bytes("b"));
        }
        other => panic!("unexpected results {other:?}"),
    }

    let response = store
        .txn(Txn {
            compares: vec![],
            success: vec![
                Op::Get(b"/t/a".to_vec()),
                Op::Delete(b"/t/missing".to_vec()),
            ],
            failure: vec![],
        })
        .await
        .unwrap();
    assert!(response.succeeded);
    assert_eq!(
        response.revision,
        base + 2,
        "a transaction that changes nothing keeps the revision"
    );

    let duplicate = store
        .txn(Txn {
            compares: vec![],
            success: vec![Op::put(b"/t/d", "1"), Op::Delete(b"/t/d".to_vec())],
            failure: vec![],
        })
        .await;
    assert!(
        matches!(duplicate, Err(StorageError::InvalidRequest(_))),
        "{duplicate:?}"
    );
    assert_eq!(store.current_revision().await.unwrap(), base + 2);
}

pub async fn txn_compares_every_target(store: Arc<dyn Storage>) {
    let kv = store.create(b"/t/c", bytes("m")).await.unwrap();
    let cases = [
        (
            CompareTarget::ModRevision(kv.mod_revision),
            CompareOp::Equal,
            true,
        ),
        (
            CompareTarget::ModRevision(kv.mod_revision),
            CompareOp::NotEqual,
            false,
        ),
        (
            CompareTarget::ModRevision(kv.mod_revision + 1),
            CompareOp::Less,
            true,
        ),
        (
            CompareTarget::ModRevision(kv.mod_revision - 1),
            CompareOp::Greater,
            true,
        ),
        (
            CompareTarget::CreateRevision(kv.create_revision),
            CompareOp::Equal,
            true,
        ),
        (CompareTarget::Version(1), CompareOp::Equal, true),
        (CompareTarget::Version(1), CompareOp::Greater, false),
        (CompareTarget::Value(bytes("m")), CompareOp::Equal, true),
        (CompareTarget::Value(bytes("a")), CompareOp::Greater, true),
        (CompareTarget::Value(bytes("z")), CompareOp::Less, true),
    ];
    // A missing key has zero revisions and version, and no value to compare.
    let missing = [
        (CompareTarget::ModRevision(0), CompareOp::Equal, true),
        (CompareTarget::Version(0), CompareOp::Equal, true),
        (CompareTarget::Value(bytes("")), CompareOp::Equal, false),
        (CompareTarget::Value(bytes("")), CompareOp::NotEqual, false),
    ];
    let cases = cases.into_iter().map(|c| (&b"/t/c"[..], c));
    let missing = missing.into_iter().map(|c| (&b"/t/none"[..], c));
    for (key, (target, op, expected)) in cases.chain(missing) {
        let compare = Compare {
            key: key.to_vec(),
            target: target.clone(),
            op,
        };
        let response = store
            .txn(Txn {
                compares: vec![compare],
                success: vec![],
                failure: vec![],
            })
            .await
            .unwrap();
        let key = String::from_utf8_lossy(key);
        assert_eq!(response.succeeded, expected, "{key}: {target:?} {op:?}");
    }
}

pub async fn range_orders_limits_and_counts(store: Arc<dyn Storage>) {
    for name in ["c", "a", "e", "b", "d"] {
        store
            .create(format!("/r/x/{name}").as_bytes(), bytes(name))
            .await
            .unwrap();
    }
    store.create(b"/r/y/a", bytes("other")).await.unwrap();
    store
        .create(b"/r/x", bytes("prefix itself, not under /r/x/"))
        .await
        .unwrap();
    store.delete(b"/r/x/e", None).await.unwrap();

    let all = store.range(RangeRequest::prefix("/r/x/")).await.unwrap();
    let keys: Vec<_> = all.kvs.iter().map(|kv| kv.key.clone()).collect();
    assert_eq!(keys, ["/r/x/a", "/r/x/b", "/r/x/c", "/r/x/d"].map(bytes));
    assert_eq!((all.count, all.more), (4, false));
    assert_eq!(all.revision, store.current_revision().await.unwrap());

    let limited = store
        .range(RangeRequest::prefix("/r/x/").with_limit(3))
        .await
        .unwrap();
    assert_eq!(limited.kvs.len(), 3);
    assert_eq!((limited.count, limited.more), (4, true));

    let exact = store
        .range(RangeRequest::prefix("/r/x/").with_limit(4))
        .await
        .unwrap();
    assert!(!exact.more);

    // Without counting: the same keys and `more`; the count at least what is known.
    for limit in [1, 2, 3, 4, 5, 0] {
        let counted = store
            .range(RangeRequest::prefix("/r/x/").with_limit(limit))
            .await
            .unwrap();
        let uncounted = store
            .range(
                RangeRequest::prefix("/r/x/")
                    .with_limit(limit)
                    .without_count(),
            )
            .await
            .unwrap();
        assert_eq!(uncounted.kvs, counted.kvs, "limit {limit}");
        assert_eq!(uncounted.more, counted.more, "limit {limit}");
        assert!(
            uncounted.count >= uncounted.kvs.len() as u64 + u64::from(uncounted.more)
                && uncounted.count <= counted.count,
            "limit {limit}: count {}",
            uncounted.count
        );
    }

    let single = store
        .range(RangeRequest {
            range: KeyRange::single(b"/r/x/b".to_vec()),
            limit: 0,
            revision: 0,
            skip_count: false,
        })
        .await
        .unwrap();
    assert_eq!(single.kvs.len(), 1);
    assert_eq!(single.kvs[0].value, bytes("b"));

    let everything = store.range(RangeRequest::prefix("")).await.unwrap();
    assert!(
        everything.count >= 6,
        "an empty prefix reads the whole key space"
    );

    let empty = store
        .range(RangeRequest::prefix("/nothing/"))
        .await
        .unwrap();
    assert_eq!((empty.kvs.len(), empty.count, empty.more), (0, 0, false));
}

pub async fn range_pages_share_a_snapshot_while_writes_happen(store: Arc<dyn Storage>) {
    for i in 0..40 {
        store
            .create(format!("/p/{i:03}").as_bytes(), bytes(&format!("v{i}")))
            .await
            .unwrap();
    }
    let snapshot = store.range(RangeRequest::prefix("/p/")).await.unwrap();

    let writer = {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            for i in 0..40u32 {
                let key = format!("/p/{:03}", (i * 7) % 40);
                if let Some(current) = store.get(key.as_bytes(), 0).await.unwrap().kv {
                    store
                        .update(key.as_bytes(), bytes("changed"), current.mod_revision)
                        .await
                        .unwrap();
                }
                store
                    .create(format!("/p/{i:03}-new").as_bytes(), bytes("new"))
                    .await
                    .unwrap();
                if i % 5 == 0 {
                    let _ = store
                        .delete(format!("/p/{:03}", 39 - i).as_bytes(), None)
                        .await;
                }
            }
        })
    };

    let mut request = RangeRequest::prefix("/p/")
        .with_limit(6)
        .at_revision(snapshot.revision);
    let mut pages = Vec::new();
    loop {
        let page = store.range(request.clone()).await.unwrap();
        assert_eq!(
            page.revision, snapshot.revision,
            "later pages read the first page's revision"
        );
        pages.extend(page.kvs.iter().cloned());
        match request.next_page(&page) {
            Some(next) => {
                // remaining = count at the snapshot from this page on
                assert_eq!(
                    page.count as usize,
                    snapshot.kvs.len() - (pages.len() - page.kvs.len())
                );
                request = next;
                tokio::task::yield_now().await;
            }
            None => break,
        }
    }
    writer.await.unwrap();
    assert_eq!(
        pages, snapshot.kvs,
        "paged read equals the snapshot despite concurrent writes"
    );
    let now = store.range(RangeRequest::prefix("/p/")).await.unwrap();
    assert_ne!(now.kvs, snapshot.kvs);
}

pub async fn reads_at_old_revisions_until_compacted(store: Arc<dyn Storage>) {
    let v1 = store.create(b"/o/a", bytes("1")).await.unwrap();
    store.create(b"/o/gone", bytes("g")).await.unwrap();
    let v2 = store
        .update(b"/o/a", bytes("2"), v1.mod_revision)
        .await
        .unwrap();
    store.delete(b"/o/gone", None).await.unwrap();
    let v3 = store
        .update(b"/o/a", bytes("3"), v2.mod_revision)
        .await
        .unwrap();
    store.create(b"/o/b", bytes("b")).await.unwrap();

    let at_v1 = store
        .range(RangeRequest::prefix("/o/").at_revision(v1.mod_revision + 1))
        .await
        .unwrap();
    let values: Vec<_> = at_v1.kvs.iter().map(|kv| kv.value.clone()).collect();
    assert_eq!(values, [bytes("1"), bytes("g")]);

    store.compact(v3.mod_revision).await.unwrap();
    for revision in [v1.mod_revision, v3.mod_revision - 1] {
        assert!(
            matches!(
                store.get(b"/o/a", revision).await,
                Err(StorageError::Compacted { .. })
            ),
            "get at {revision} after compaction"
        );
        assert!(matches!(
            store
                .range(RangeRequest::prefix("/o/").at_revision(revision))
                .await,
            Err(StorageError::Compacted { .. })
        ));
    }
    let at_compaction = store.get(b"/o/a", v3.mod_revision).await.unwrap();
    assert_eq!(
        at_compaction.kv.unwrap().value,
        bytes("3"),
        "the compaction revision stays readable"
    );
    let latest = store.range(RangeRequest::prefix("/o/")).await.unwrap();
    let values: Vec<_> = latest.kvs.iter().map(|kv| kv.value.clone()).collect();
    assert_eq!(
        values,
        [bytes("3"), bytes("b")],
        "compaction keeps every latest value"
    );
    let a = latest.kvs[0].clone();
    assert_eq!((a.create_revision, a.version), (v1.create_revision, 3));

    assert!(matches!(
        store.compact(v3.mod_revision).await,
        Err(StorageError::Compacted { .. })
    ));
    let current = store.current_revision().await.unwrap();
    assert!(matches!(
        store.compact(current + 5).await,
        Err(StorageError::FutureRevision { .. })
    ));

    // Writes after compaction carry on from the same revision counter and history.
    let v4 = store
        .update(b"/o/a", bytes("4"), v3.mod_revision)
        .await
        .unwrap();
    assert_eq!(v4.mod_revision, current + 1);
    assert_eq!(v4.version, 4);
    store.compact(current).await.unwrap();
    assert_eq!(
        store.get(b"/o/a", current).await.unwrap().kv.unwrap().value,
        bytes("3")
    );
}
