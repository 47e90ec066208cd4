//! What the embedded store keeps across a clean close and reopen.

use bytes::Bytes;
use futures::StreamExt;
use kcp_storage::{RangeRequest, Storage, StorageError, WatchRequest};
use kcp_storage_redb::RedbStorage;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revisions_history_and_compaction_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/dir/kcp.redb");
    let store = RedbStorage::open(&path).unwrap();
    let a = store.create(b"/k/a", Bytes::from("1")).await.unwrap();
    let a2 = store
        .update(b"/k/a", Bytes::from("2"), a.mod_revision)
        .await
        .unwrap();
    store.create(b"/k/b", Bytes::from("b")).await.unwrap();
    store.compact(a2.mod_revision).await.unwrap();
    store.delete(b"/k/b", None).await.unwrap();
    let revision = store.current_revision().await.unwrap();
    store.close().await;

    let store = RedbStorage::open(&path).unwrap();
    assert_eq!(store.current_revision().await.unwrap(), revision);
    let listed = store.range(RangeRequest::prefix("/k/")).await.unwrap();
    assert_eq!(listed.kvs, vec![a2.clone()]);
    assert!(matches!(
        store.get(b"/k/a", a.mod_revision).await,
        Err(StorageError::Compacted { .. })
    ));
    let mut watch = store
        .watch(WatchRequest::prefix("/k/", a2.mod_revision))
        .await
        .unwrap();
    let mut revisions = Vec::new();
    for _ in 0..3 {
        revisions.push(watch.next().await.unwrap().unwrap().revision());
    }
    assert_eq!(
        revisions,
        vec![a2.mod_revision, a2.mod_revision + 1, revision]
    );
    let next = store.create(b"/k/c", Bytes::from("c")).await.unwrap();
    assert_eq!(
        next.mod_revision,
        revision + 1,
        "revisions continue where they stopped"
    );
}

#[tokio::test]
async fn writes_after_close_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let store = RedbStorage::open(&dir.path().join("kcp.redb")).unwrap();
    let other = store.clone();
    store.close().await;
    assert!(matches!(
        other.create(b"/x", Bytes::from("x")).await,
        Err(StorageError::Unavailable(_))
    ));
}

/// A store written before the `live` table was kept has it built when it is opened: a page of a
/// range counts the keys that exist, not the versions or the deleted ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_without_its_live_keys_gets_them_when_opened() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kcp.redb");
    let store = RedbStorage::open(&path).unwrap();
    let a = store.create(b"/k/a", Bytes::from("1")).await.unwrap();
    store
        .update(b"/k/a", Bytes::from("2"), a.mod_revision)
        .await
        .unwrap();
    for key in ["/k/b", "/k/c", "/k/d"] {
        store
            .create(key.as_bytes(), Bytes::from("x"))
            .await
            .unwrap();
    }
    store.delete(b"/k/c", None).await.unwrap();
    store.close().await;

    // What an older version left: no `live` table, no mark that it is kept.
    {
        let db = redb::Database::open(&path).unwrap();
        let tx = db.begin_write().unwrap();
        assert!(
            tx.delete_table(redb::TableDefinition::<&[u8], ()>::new("live"))
                .unwrap()
        );
        tx.open_table(redb::TableDefinition::<&str, u64>::new("meta"))
            .unwrap()
            .remove("live_keys_kept")
            .unwrap()
            .expect("the mark was there");
        tx.commit().unwrap();
    }

    let store = RedbStorage::open(&path).unwrap();
    let page = store
        .range(RangeRequest::prefix("/k/").with_limit(1))
        .await
        .unwrap();
    assert_eq!((page.kvs.len(), page.count, page.more), (1, 3, true));
    // Kept from then on.
    store.delete(b"/k/a", None).await.unwrap();
    store.create(b"/k/e", Bytes::from("e")).await.unwrap();
    let page = store
        .range(RangeRequest::prefix("/k/").with_limit(2))
        .await
        .unwrap();
    let keys: Vec<_> = page.kvs.iter().map(|kv| kv.key.clone()).collect();
    assert_eq!(keys, [Bytes::from("/k/b"), Bytes::from("/k/d")]);
    assert_eq!((page.count, page.more), (3, true));
}
