//! The process's allocator, and giving freed memory back to the system.
//!
//! mimalloc (v3, transparent huge pages off) rather than glibc's malloc: under many concurrent
//! writes glibc spent about a quarter of the server's CPU in its arenas' locks and consolidation.
//! mimalloc keeps freed memory in per-thread pages that only their own thread collects, and a
//! tokio worker that goes idle after a burst would keep its pages indefinitely. So each worker
//! collects its pages when it parks (at most every [`PARK_COLLECT_EVERY`], forced at most every
//! [`FORCED_COLLECT_EVERY`]), the server's own threads (the embedded store's writer, which frees
//! the store's cached pages) when they run out of work ([`collect_idle_thread`]), and a thread
//! of ours makes mimalloc purge its arenas,
//! the whole process's free memory, every [`PURGE_EVERY`] (what `malloc_trim` did for glibc).
//! Without the writer's collection, deleting 2,000 workspaces left 114 MiB resident after the
//! history was compacted; with it, 32 MiB (fresh: 20 MiB). `kcp-bench crds`, `kcp-bench lists`
//! and `kcp-bench workspaces` measure what comes back.
//!
//! What stays after a large deletion is fragmentation, not memory in use: with the feature
//! `allocator-census` ([`census`]), after 10,000 workspaces were created and deleted and their
//! history compacted, 2.5 MiB were in use in 178 pages of mimalloc spanning 8.7 MiB (of small
//! blocks, up to 256 bytes: 0.5 MiB in use in 73 pages spanning 3.4 MiB); 8 pages were abandoned.
//! A few long-lived blocks allocated among the load's short-lived ones keep each of those pages;
//! with `allocator-provenance` ([`provenance`]) the census says where those blocks were made.

use std::cell::Cell;
use std::time::{Duration, Instant};

#[cfg(feature = "allocator-census")]
pub mod census;
#[cfg(feature = "allocator-provenance")]
pub mod provenance;

// The census counts what passes through mimalloc; with the system's malloc there is nothing
// for it to count or visit.
#[cfg(all(feature = "allocator-census", feature = "system-allocator"))]
compile_error!("the features `allocator-census` and `system-allocator` exclude each other");

#[cfg(not(any(feature = "system-allocator", feature = "allocator-census")))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(feature = "allocator-census")]
#[global_allocator]
static ALLOCATOR: census::Counting = census::Counting;

/// The least time between two collections by one worker thread.
const PARK_COLLECT_EVERY: Duration = Duration::from_millis(100);

/// The least time between two forced collections by one thread. A normal collection leaves
/// alone the pages mimalloc last saw full, even when other threads have since freed every block
/// in them (the store's cached pages are allocated by the threads that read them and freed by
/// the writer that evicts them); a forced one takes those back too, and purges.
const FORCED_COLLECT_EVERY: Duration = Duration::from_secs(1);

/// How often every free page in mimalloc's arenas goes back to the system.
const PURGE_EVERY: Duration = Duration::from_secs(5);

thread_local! {
    static LAST_COLLECT: Cell<Option<Instant>> = const { Cell::new(None) };
    static LAST_FORCED: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// For tokio's `on_thread_park`: collects this thread's free pages, unless it did so lately
/// (forced every [`FORCED_COLLECT_EVERY`]).
pub fn collect_on_park() {
    let now = Instant::now();
    if due(&LAST_FORCED, now, FORCED_COLLECT_EVERY) {
        LAST_COLLECT.with(|last| last.set(Some(now)));
        collect(true);
    } else if due(&LAST_COLLECT, now, PARK_COLLECT_EVERY) {
        collect(false);
    }
}

/// Whether `every` has passed since `last` (marked as now if so).
fn due(
    last: &'static std::thread::LocalKey<Cell<Option<Instant>>>,
    now: Instant,
    every: Duration,
) -> bool {
    last.with(|last| match last.get() {
        Some(then) if now.duration_since(then) < every => false,
        _ => {
            last.set(Some(now));
            true
        }
    })
}

/// For the server's own threads when they run out of work (the embedded store's writer calls
/// it at most every second, once after each burst of writes): a forced collection.
pub fn collect_idle_thread() {
    collect(true);
}

/// Starts the thread that purges mimalloc's arenas every [`PURGE_EVERY`].
pub fn purge_periodically() {
    std::thread::spawn(|| {
        loop {
            std::thread::sleep(PURGE_EVERY);
            collect(true);
        }
    });
}

/// The crate's only `unsafe` code: mimalloc's collection has no safe wrapper.
#[allow(unsafe_code)]
fn collect(force: bool) {
    // SAFETY: mi_collect takes a plain bool and works on the calling thread's own heap and on
    // mimalloc's arenas under mimalloc's own synchronisation; it frees no live allocation.
    unsafe { libmimalloc_sys::mi_collect(force) };
}
