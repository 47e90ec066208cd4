//! The conformance suite every [`Storage`](crate::Storage) backend runs.
//!
//! A backend's test file calls [`storage_conformance_tests!`](crate::storage_conformance_tests)
//! with an async expression that yields a fresh, empty store and a guard that keeps whatever the
//! store needs alive (a temporary directory, an etcd process). Every case works with revisions
//! relative to the store's revision at the start, since etcd starts at 1 and the others at 0.

mod kv;
mod stress;
mod watch;

pub use kv::*;
pub use stress::*;
pub use watch::*;

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;

use crate::{Event, Storage, WatchStream};

/// Generates one `#[tokio::test]` per conformance case. `$factory` is evaluated anew in each test
/// and must be a future of `(impl Storage, guard)`.
#[macro_export]
macro_rules! storage_conformance_tests {
    ($factory:expr) => {
        $crate::storage_conformance_tests!(@cases $factory;
            revisions_start_after_the_base_and_grow_per_write,
            create_fails_on_existing_key,
            update_and_delete_are_guarded_by_modification_revision,
            txn_runs_one_branch_at_one_revision,
            txn_compares_every_target,
            range_orders_limits_and_counts,
            range_pages_share_a_snapshot_while_writes_happen,
            reads_at_old_revisions_until_compacted,
            watch_from_old_revision_replays_in_order,
            watch_from_current_revision_sees_only_new_events,
            watch_from_compacted_revision_fails,
            watch_and_range_never_cross_cluster_prefixes,
            watch_delivers_a_burst_to_a_slow_watcher,
            concurrent_writers_get_unique_ordered_revisions,
            large_values_round_trip,
            random_operations_match_the_reference_model
        );
    };
    (@cases $factory:expr; $($case:ident),* $(,)?) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                let (store, _guard) = $factory.await;
                $crate::conformance::$case(::std::sync::Arc::new(store)).await;
            }
        )*
    };
}

/// How long a case waits for an expected watch event before failing.
pub const WATCH_TIMEOUT: Duration = Duration::from_secs(20);

/// The next event of a watch, failing the test on error, end of stream or timeout.
pub async fn next_event(stream: &mut WatchStream) -> Event {
    match tokio::time::timeout(WATCH_TIMEOUT, stream.next()).await {
        Ok(Some(Ok(event))) => event,
        Ok(Some(Err(error))) => panic!("watch failed: {error}"),
        Ok(None) => panic!("watch ended"),
        Err(_) => panic!("no watch event within {WATCH_TIMEOUT:?}"),
    }
}

/// Asserts that no event arrives within a short time.
pub async fn assert_no_event(stream: &mut WatchStream) {
    if let Ok(item) = tokio::time::timeout(Duration::from_millis(300), stream.next()).await {
        panic!("unexpected watch item: {item:?}");
    }
}

pub(crate) fn bytes(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

pub(crate) async fn base_revision(store: &dyn Storage) -> u64 {
    store.current_revision().await.expect("current revision")
}
