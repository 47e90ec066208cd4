//! Concurrency, large values, and a randomized comparison against the in-memory reference.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::Bytes;

use super::{base_revision, bytes, next_event};
use crate::{
    Compare, CompareOp, CompareTarget, EventKind, KeyRange, KeyValue, MemoryStorage, Op, OpResult,
    RangeRequest, Revision, Storage, StorageError, Txn, WatchRequest,
};

pub async fn concurrent_writers_get_unique_ordered_revisions(store: Arc<dyn Storage>) {
    const WRITERS: u64 = 128;
    const KEYS_EACH: u64 = 5;
    const INCREMENTERS: u64 = 16;
    const INCREMENTS_EACH: u64 = 10;
    let base = base_revision(&*store).await;
    let mut watch = store
        .watch(WatchRequest::prefix("/cc/", base + 1))
        .await
        .unwrap();
    store.create(b"/cc/counter", bytes("0")).await.unwrap();

    let mut tasks = Vec::new();
    for w in 0..WRITERS {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            let mut revisions = Vec::new();
            for k in 0..KEYS_EACH {
                let kv = store
                    .create(format!("/cc/w{w}/{k}").as_bytes(), bytes("v"))
                    .await
                    .unwrap();
                revisions.push(kv.mod_revision);
            }
            revisions
        }));
    }
    for _ in 0..INCREMENTERS {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            let mut revisions = Vec::new();
            let mut current = store.get(b"/cc/counter", 0).await.unwrap().kv.unwrap();
            let mut done = 0;
            while done < INCREMENTS_EACH {
                let n: u64 = std::str::from_utf8(&current.value)
                    .unwrap()
                    .parse()
                    .unwrap();
                let next = bytes(&(n + 1).to_string());
                match store
                    .update(b"/cc/counter", next, current.mod_revision)
                    .await
                {
                    Ok(kv) => {
                        revisions.push(kv.mod_revision);
                        current = kv;
                        done += 1;
                    }
                    Err(StorageError::Conflict {
                        current: Some(latest),
                        ..
                    }) => current = *latest,
                    Err(other) => panic!("increment failed: {other}"),
                }
            }
            revisions
        }));
    }
    let mut acknowledged = HashSet::new();
    for task in tasks {
        for revision in task.await.unwrap() {
            assert!(
                acknowledged.insert(revision),
                "revision {revision} acknowledged twice"
            );
        }
    }
    let total = WRITERS * KEYS_EACH + INCREMENTERS * INCREMENTS_EACH + 1;
    assert_eq!(acknowledged.len() as u64 + 1, total);
    assert_eq!(store.current_revision().await.unwrap(), base + total);
    let counter = store.get(b"/cc/counter", 0).await.unwrap().kv.unwrap();
    assert_eq!(
        counter.value,
        bytes(&(INCREMENTERS * INCREMENTS_EACH).to_string()),
        "no lost update"
    );

    for expected in base + 1..=base + total {
        let event = next_event(&mut watch).await;
        assert_eq!(
            event.revision(),
            expected,
            "the watch sees every revision in order"
        );
    }
    let listed = store.range(RangeRequest::prefix("/cc/")).await.unwrap();
    assert_eq!(listed.count, WRITERS * KEYS_EACH + 1);
}

pub async fn large_values_round_trip(store: Arc<dyn Storage>) {
    const SIZE: usize = 1536 * 1024;
    let big = |seed: u8| -> Bytes {
        (0..SIZE)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    };
    let base = base_revision(&*store).await;
    let first = store.create(b"/big/a", big(1)).await.unwrap();
    let second = store
        .update(b"/big/a", big(2), first.mod_revision)
        .await
        .unwrap();
    assert_eq!(
        store.get(b"/big/a", 0).await.unwrap().kv.unwrap().value,
        big(2)
    );
    assert_eq!(
        store
            .get(b"/big/a", first.mod_revision)
            .await
            .unwrap()
            .kv
            .unwrap()
            .value,
        big(1)
    );
    let listed = store.range(RangeRequest::prefix("/big/")).await.unwrap();
    assert_eq!(listed.kvs, vec![second.clone()]);
    let mut watch = store
        .watch(WatchRequest::prefix("/big/", base + 1))
        .await
        .unwrap();
    assert_eq!(next_event(&mut watch).await.kv.value, big(1));
    let update = next_event(&mut watch).await;
    assert_eq!(update.kv, second);
    assert_eq!(update.prev.unwrap().value, big(1));
    store.delete(b"/big/a", None).await.unwrap();
    let delete = next_event(&mut watch).await;
    assert_eq!(delete.kind, EventKind::Delete);
    assert_eq!(delete.prev.unwrap().value, big(2));
}

/// Applies the same random operations to the store and to a fresh [`MemoryStorage`] and requires
/// identical answers, revisions taken relative to each store's starting revision.
pub async fn random_operations_match_the_reference_model(store: Arc<dyn Storage>) {
    let model: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
    let store_base = base_revision(&*store).await;
    let mut rng = fastrand::Rng::with_seed(0x006b_6370);
    let keys: Vec<Vec<u8>> = (0..6).map(|i| format!("/m/{i}").into_bytes()).collect();
    let mut compacted: Revision = 0;
    for step in 0..400 {
        let current = model.current_revision().await.unwrap();
        let op = RandomOp::generate(&mut rng, &keys, compacted, current);
        let expected = op.run(&*model, 0).await;
        let actual = op.run(&*store, store_base).await;
        assert_eq!(actual, expected, "step {step}: {op:?}");
        if let RandomOp::Compact(revision) = op
            && expected.starts_with("ok")
        {
            compacted = revision;
        }
    }
}

#[derive(Debug)]
enum RandomOp {
    Create(Vec<u8>, Bytes),
    Update(Vec<u8>, Bytes, Revision),
    Delete(Vec<u8>, Option<Revision>),
    Get(Vec<u8>, Revision),
    Range(KeyRange, usize, Revision),
    Txn(Txn),
    Compact(Revision),
}

impl RandomOp {
    /// Revisions here are relative to the model (base 0).
    fn generate(
        rng: &mut fastrand::Rng,
        keys: &[Vec<u8>],
        compacted: Revision,
        current: Revision,
    ) -> Self {
        let key = |rng: &mut fastrand::Rng| keys[rng.usize(..keys.len())].clone();
        let value = |rng: &mut fastrand::Rng| bytes(&format!("v{}", rng.u32(..1000)));
        let revision = |rng: &mut fastrand::Rng| {
            if rng.bool() {
                0
            } else {
                rng.u64(compacted.saturating_sub(1)..=current + 1)
            }
        };
        match rng.u32(..100) {
            0..=19 => RandomOp::Create(key(rng), value(rng)),
            20..=39 => RandomOp::Update(key(rng), value(rng), rng.u64(0..=current)),
            40..=49 => RandomOp::Delete(key(rng), rng.bool().then(|| rng.u64(0..=current))),
            50..=59 => RandomOp::Get(key(rng), revision(rng)),
            60..=69 => {
                let (a, b) = (key(rng), key(rng));
                let mut end = a.clone().max(b.clone());
                end.push(0);
                let range = KeyRange {
                    start: a.min(b),
                    end,
                };
                RandomOp::Range(range, rng.usize(0..4), revision(rng))
            }
            70..=97 => {
                let ops = |rng: &mut fastrand::Rng| {
                    let mut used = HashSet::new();
                    (0..rng.usize(0..4))
                        .filter_map(|_| {
                            let k = key(rng);
                            match rng.u32(..3) {
                                0 => Some(Op::Get(k)),
                                1 if used.insert(k.clone()) => Some(Op::put(k, value(rng))),
                                2 if used.insert(k.clone()) => Some(Op::Delete(k)),
                                _ => None,
                            }
                        })
                        .collect::<Vec<_>>()
                };
                let compares = (0..rng.usize(0..3))
                    .map(|_| Compare {
                        key: key(rng),
                        target: match rng.u32(..4) {
                            0 => CompareTarget::ModRevision(rng.u64(0..=current)),
                            1 => CompareTarget::CreateRevision(rng.u64(0..=current)),
                            2 => CompareTarget::Version(rng.u64(0..4)),
                            _ => CompareTarget::Value(value(rng)),
                        },
                        op: [
                            CompareOp::Equal,
                            CompareOp::NotEqual,
                            CompareOp::Less,
                            CompareOp::Greater,
                        ][rng.usize(..4)],
                    })
                    .collect();
                let success = ops(rng);
                let failure = ops(rng);
                RandomOp::Txn(Txn {
                    compares,
                    success,
                    failure,
                })
            }
            _ => RandomOp::Compact(rng.u64(compacted.max(1)..=current.max(1))),
        }
    }

    /// Runs the operation against `store` (whose revisions start at `base`) and describes the
    /// outcome with revisions made relative to `base`.
    async fn run(&self, store: &dyn Storage, base: Revision) -> String {
        let abs = |r: Revision| if r == 0 { 0 } else { r + base };
        let rel = |r: Revision| r.saturating_sub(base);
        let kv = |kv: &KeyValue| {
            format!(
                "{}={}@c{}m{}v{}",
                String::from_utf8_lossy(&kv.key),
                String::from_utf8_lossy(&kv.value),
                rel(kv.create_revision),
                rel(kv.mod_revision),
                kv.version
            )
        };
        let opt = |o: &Option<KeyValue>| o.as_ref().map_or("none".to_string(), kv);
        let err = |e: StorageError| -> String {
            match e {
                StorageError::NotFound { .. } => "err NotFound".into(),
                StorageError::AlreadyExists { .. } => "err AlreadyExists".into(),
                StorageError::Conflict { current, .. } => {
                    format!("err Conflict {}", opt(&current.map(|b| *b)))
                }
                StorageError::Compacted { .. } => "err Compacted".into(),
                StorageError::FutureRevision { .. } => "err FutureRevision".into(),
                other => format!("err {other}"),
            }
        };
        let shift_compare = |c: &Compare| Compare {
            target: match &c.target {
                CompareTarget::ModRevision(r) => CompareTarget::ModRevision(abs(*r)),
                CompareTarget::CreateRevision(r) => CompareTarget::CreateRevision(abs(*r)),
                other => other.clone(),
            },
            ..c.clone()
        };
        match self {
            RandomOp::Create(k, v) => store
                .create(k, v.clone())
                .await
                .map_or_else(err, |x| format!("ok {}", kv(&x))),
            RandomOp::Update(k, v, r) => store
                .update(k, v.clone(), abs(*r))
                .await
                .map_or_else(err, |x| format!("ok {}", kv(&x))),
            RandomOp::Delete(k, r) => store
                .delete(k, r.map(abs))
                .await
                .map_or_else(err, |x| format!("ok {}", kv(&x))),
            RandomOp::Get(k, r) => store
                .get(k, abs(*r))
                .await
                .map_or_else(err, |g| format!("ok {} at {}", opt(&g.kv), rel(g.revision))),
            RandomOp::Range(range, limit, r) => store
                .range(RangeRequest {
                    range: range.clone(),
                    limit: *limit,
                    revision: abs(*r),
                    skip_count: false,
                })
                .await
                .map_or_else(err, |g| {
                    let kvs: Vec<_> = g.kvs.iter().map(kv).collect();
                    format!(
                        "ok {kvs:?} more={} count={} at {}",
                        g.more,
                        g.count,
                        rel(g.revision)
                    )
                }),
            RandomOp::Txn(txn) => {
                let txn = Txn {
                    compares: txn.compares.iter().map(shift_compare).collect(),
                    ..txn.clone()
                };
                store.txn(txn).await.map_or_else(err, |t| {
                    let results: Vec<_> = t
                        .results
                        .iter()
                        .map(|r| match r {
                            OpResult::Get(x) => format!("get {}", opt(x)),
                            OpResult::Put { prev } => format!("put {}", opt(prev)),
                            OpResult::Delete { prev } => format!("delete {}", opt(prev)),
                        })
                        .collect();
                    format!("ok {} {results:?} at {}", t.succeeded, rel(t.revision))
                })
            }
            RandomOp::Compact(r) => store
                .compact(abs(*r))
                .await
                .map_or_else(err, |()| "ok".into()),
        }
    }
}
