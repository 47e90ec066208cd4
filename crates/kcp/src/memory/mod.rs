//! The process's allocator, and giving freed memory back to the system.
//!
//! mimalloc (v3, transparent huge pages off) rather than glibc's malloc: under many concurrent
//! writes glibc spent about a quarter of the server's CPU in its arenas' locks and consolidation.
//! Its C build gets two layout settings from `.cargo/config.toml`: page headers inside their
//! pages, and 16 KiB pages of small blocks (see there and the tests below).
//!
//! mimalloc's pages belong to the thread that took them. A block another thread frees waits in
//! its page until the owner collects, and a thread that sleeps for good (an idle tokio worker,
//! the embedded store's writer after a burst) never does. So these threads give up their pages
//! ([`release_thread_pages`]: mimalloc abandons them, as when a thread exits) when they run out
//! of work: each worker when it parks (at most every [`PARK_RELEASE_EVERY`]), the store's writer
//! once it has nothing left to write. In an abandoned page, whoever
//! frees a block takes it in, and frees the page with its last block. A thread of ours purges
//! mimalloc's arenas every [`PURGE_EVERY`] (what `malloc_trim` did for glibc): mimalloc gives a
//! free page back to the system only when a thread collects at least a second after it was
//! freed, and after a burst that thread is this one. Measured with `kcp-bench workspaces` after
//! 200,000 workspaces were deleted (RSS once compacted over RSS before): 1.57x with the purging
//! alone, 1.33x with the threads also giving their pages up. `kcp-bench crds`, `kcp-bench lists`
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

/// The least time between two times one worker thread gives up its pages ([`release_on_park`]).
const PARK_RELEASE_EVERY: Duration = Duration::from_millis(100);

/// How often every free page in mimalloc's arenas goes back to the system.
const PURGE_EVERY: Duration = Duration::from_secs(5);

thread_local! {
    static LAST_RELEASE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// For tokio's `on_thread_park`: this worker gives up its pages ([`release_thread_pages`]),
/// unless it did so in the last [`PARK_RELEASE_EVERY`].
pub fn release_on_park() {
    let now = Instant::now();
    let due = LAST_RELEASE.with(|last| match last.get() {
        Some(then) if now.duration_since(then) < PARK_RELEASE_EVERY => false,
        _ => {
            last.set(Some(now));
            true
        }
    });
    if due {
        release_thread_pages();
    }
}

/// Gives up the calling thread's pages (see the module doc): mimalloc frees the empty ones and
/// abandons the others, as when a thread exits; the thread's next allocation starts afresh,
/// taking abandoned pages back where they fit. Also what the server's own threads call when
/// they run out of work (the embedded store's writer: at most every second, and always before
/// it waits with nothing left to do). The main thread only collects: mimalloc's data for it is
/// static, never given up.
///
/// The thread is set up again at once, not at its next allocation: mimalloc frees the thread's
/// data but leaves the pointer to it that its thread-exit hook (a pthread key) receives, and a
/// thread that exited before allocating again (a tokio worker that parked, then was shut
/// down) had that hook read freed data, which another thread's may since have reused: the
/// server crashed on shutdown (SIGSEGV in `_mi_thread_done`, about 1 stop in 10 with 16 KiB
/// slices). Setting the thread up points the key at live data.
pub fn release_thread_pages() {
    if std::thread::current().name() == Some("main") {
        collect();
        return;
    }
    // SAFETY: mi_thread_done takes no argument and touches only the calling thread's heap data
    // (and mimalloc's arenas under its own synchronisation): it frees no live allocation.
    // mi_thread_init takes no argument and only sets up the calling thread's heap data.
    #[allow(unsafe_code)]
    unsafe {
        libmimalloc_sys::mi_thread_done();
        libmimalloc_sys::mi_thread_init();
    };
}

/// Starts the thread that purges mimalloc's arenas every [`PURGE_EVERY`].
pub fn purge_periodically() {
    std::thread::spawn(|| {
        loop {
            std::thread::sleep(PURGE_EVERY);
            purge();
        }
    });
}

/// Gives every free page of mimalloc's arenas back to the system, whoever freed it (see the
/// module doc for when that happens). A thread mimalloc has not set up (one that never
/// allocated, as the purging thread need not) collects nothing, so it is set up first.
fn purge() {
    #[allow(unsafe_code)]
    // SAFETY: mi_thread_init takes no argument and only sets up the calling thread's heap data
    // (nothing when it is set up already).
    unsafe {
        libmimalloc_sys::mi_thread_init()
    };
    collect();
}

/// A forced collection of the calling thread's pages (pages last seen full too) and a purge of
/// every free page in the arenas. mimalloc's calls have no safe wrapper; this module and its
/// diagnostics are the crate's only `unsafe` code.
#[allow(unsafe_code)]
fn collect() {
    // SAFETY: mi_collect takes a plain bool and works on the calling thread's own heap and on
    // mimalloc's arenas under mimalloc's own synchronisation; it frees no live allocation.
    unsafe { libmimalloc_sys::mi_collect(true) };
}

/// The process's resident anonymous memory (`RssAnon` of `/proc/self/status`), in KiB; `None`
/// where the system does not say.
#[cfg(any(
    feature = "allocator-census",
    all(test, not(feature = "system-allocator"))
))]
fn resident_anonymous_kib() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("RssAnon:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(all(
    test,
    not(any(feature = "system-allocator", feature = "allocator-provenance"))
))]
mod tests {
    use std::ffi::c_void;
    use std::sync::mpsc;

    use libmimalloc_sys::{mi_heap_area_t, mi_heap_t};

    /// The size of the blocks the test allocates, one no other code of the test binary makes
    /// in bulk.
    const BLOCK: usize = 1500;

    /// Blocks of one size class in mimalloc's pages: counted as in use (including freed blocks
    /// that wait for their page's owner), and how many one page holds.
    #[derive(Default)]
    struct Class {
        block_size: usize,
        in_use: usize,
        per_page: usize,
    }

    #[allow(unsafe_code)]
    unsafe extern "C" fn tally(
        _heap: *const mi_heap_t,
        area: *const mi_heap_area_t,
        _block: *mut c_void,
        _block_size: usize,
        class: *mut c_void,
    ) -> bool {
        // SAFETY: mimalloc passes a valid area; `class` is the `Class` lent by `in_use`.
        let (area, class) = unsafe { (&*area, &mut *(class as *mut Class)) };
        if area.block_size == class.block_size {
            class.in_use += area.used;
            class.per_page = class.per_page.max(area.reserved / area.block_size.max(1));
        }
        true
    }

    /// What mimalloc's pages count in use for blocks of `block_size`.
    #[allow(unsafe_code)]
    fn in_use(block_size: usize) -> Class {
        let mut class = Class {
            block_size,
            ..Class::default()
        };
        // SAFETY: visiting pages without their blocks only reads them; a null heap is the
        // process's; `class` outlives the call.
        unsafe {
            libmimalloc_sys::mi_heap_visit_blocks(
                std::ptr::null_mut(),
                false,
                Some(tally),
                &mut class as *mut Class as *mut c_void,
            )
        };
        class
    }

    /// Taken by each test: what one test's threads allocate, free or purge must not move
    /// another's figures.
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Held by each test for its whole run ([`ONE_AT_A_TIME`]).
    fn alone() -> std::sync::MutexGuard<'static, ()> {
        ONE_AT_A_TIME
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A thread allocates `blocks` blocks of 4 KiB, frees them and exits.
    fn burst_of_4_kib_blocks(blocks: usize) {
        std::thread::spawn(move || {
            let made: Vec<Box<[u8; 4096]>> = (0..blocks).map(|_| Box::new([1; 4096])).collect();
            drop(made);
        })
        .join()
        .unwrap();
    }

    fn resident_anonymous_kib() -> usize {
        super::resident_anonymous_kib().expect("the system tells resident anonymous memory")
    }

    /// Resident anonymous memory once what was freed has been purged: after longer than
    /// mimalloc waits before a freed page may be purged.
    fn settled_resident_kib() -> usize {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        std::thread::spawn(super::purge).join().unwrap();
        resident_anonymous_kib()
    }

    /// A thread frees 64 MiB and exits before mimalloc would purge them; the purge, from a
    /// thread that never allocated (the purging thread allocates nothing), gives them back.
    #[test]
    fn a_purge_gives_back_what_an_exited_thread_freed() {
        let _alone = alone();
        burst_of_4_kib_blocks(16_384);
        let freed = resident_anonymous_kib();
        let purged = settled_resident_kib();
        assert!(
            purged + 32 * 1024 < freed,
            "resident anonymous memory went from {freed} KiB to {purged} KiB"
        );
    }

    /// A burst of 512 MiB of 4 KiB blocks, freed and purged, leaves nothing resident behind.
    /// mimalloc keeps each page's header in the page itself (`MI_PAGE_META_IS_SEPARATED=0`, set
    /// for the C build in `.cargo/config.toml`); in its default layout the headers sit in a
    /// table at the start of the arena, and the burst's entries (about 1 MiB of it with 64 KiB
    /// pages, 4 MiB with 16 KiB ones) would stay resident for good.
    #[test]
    fn a_purged_burst_leaves_no_page_headers_behind() {
        let _alone = alone();
        let before = settled_resident_kib();
        burst_of_4_kib_blocks(131_072);
        let after = settled_resident_kib();
        assert!(
            after < before + 512,
            "resident anonymous memory went from {before} KiB to {after} KiB"
        );
    }

    /// A block that outlives a burst keeps its page resident, and mimalloc's pages of small
    /// blocks are 16 KiB (`MI_ARENA_SLICE_SHIFT=14`, `.cargo/config.toml`), not 64 KiB as by
    /// default. A thread allocates 64 MiB of 64-byte blocks and keeps one in 1,024 (one per
    /// 64 KiB); once the rest is freed and purged, about 16 MiB stays resident, not 64.
    #[test]
    fn a_block_kept_from_a_burst_keeps_only_a_small_page_resident() {
        let _alone = alone();
        let before = settled_resident_kib();
        let kept = std::thread::spawn(|| {
            let mut made: Vec<Option<Box<[u8; 64]>>> =
                (0..1 << 20).map(|_| Some(Box::new([1; 64]))).collect();
            made.iter_mut()
                .step_by(1024)
                .filter_map(Option::take)
                .collect::<Vec<_>>()
        })
        .join()
        .unwrap();
        let after = settled_resident_kib();
        assert_eq!(kept.len(), 1024);
        drop(kept);
        assert!(
            after < before + 24 * 1024,
            "resident anonymous memory went from {before} KiB to {after} KiB with one block \
             in 1,024 kept"
        );
    }

    /// Threads give up their pages, then other threads start (mimalloc puts their data where
    /// the first ones' was), then the first ones exit without allocating again: every one
    /// exits cleanly. The thread-exit hook must not read what `release_thread_pages` freed
    /// (it did, and crashed the server on shutdown with SIGSEGV).
    #[test]
    fn threads_that_gave_up_their_pages_exit_cleanly() {
        use std::sync::{Arc, Barrier};
        let _alone = alone();
        const EACH: usize = 16;
        for _ in 0..20 {
            let released = Arc::new(Barrier::new(EACH + 1));
            let exit = Arc::new(Barrier::new(2 * EACH + 1));
            let spawn = |give_up: bool| {
                let (released, exit) = (released.clone(), exit.clone());
                std::thread::spawn(move || {
                    drop(std::hint::black_box(vec![1u8; 100]));
                    if give_up {
                        super::release_thread_pages();
                        released.wait();
                    }
                    exit.wait();
                })
            };
            let first: Vec<_> = (0..EACH).map(|_| spawn(true)).collect();
            released.wait();
            let second: Vec<_> = (0..EACH).map(|_| spawn(false)).collect();
            exit.wait();
            for thread in first.into_iter().chain(second) {
                thread.join().unwrap();
            }
        }
    }

    /// A thread allocates, gives up its pages and sleeps, as an idle worker does; another
    /// thread frees everything it allocated. The pages take the freed blocks back at once:
    /// nothing waits for the sleeping owner to collect.
    #[test]
    fn a_thread_that_gave_up_its_pages_leaves_nothing_waiting_in_them() {
        let _alone = alone();
        let (send_blocks, blocks) = mpsc::channel();
        let (wake, sleep) = mpsc::channel::<()>();
        let owner = std::thread::spawn(move || {
            let made: Vec<Box<[u8; BLOCK]>> = (0..2_000).map(|_| Box::new([1; BLOCK])).collect();
            super::release_thread_pages();
            send_blocks.send(made).unwrap();
            let _ = sleep.recv();
        });
        let made = blocks.recv().unwrap();
        #[allow(unsafe_code)]
        // SAFETY: the pointer is a live allocation of the global allocator, mimalloc.
        let block_size = unsafe { libmimalloc_sys::mi_usable_size(made[0].as_ptr().cast()) };
        let before = in_use(block_size);
        assert!(before.in_use >= made.len(), "the blocks were not found");
        drop(made);
        let after = in_use(block_size);
        wake.send(()).unwrap();
        owner.join().unwrap();
        let waiting = after.in_use;
        assert!(
            waiting < before.per_page / 4,
            "{waiting} freed blocks of {block_size} bytes wait in pages of a sleeping thread \
             (a page holds {})",
            before.per_page
        );
    }
}
