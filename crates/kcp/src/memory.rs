//! The process's allocator, and giving freed memory back to the system.
//!
//! jemalloc (built from source by `tikv-jemalloc-sys`) rather than glibc's malloc or mimalloc:
//! - glibc spent about a quarter of the server's CPU in its arenas' locks under concurrent
//!   writes, and kept freed memory;
//! - mimalloc (v3) created workspaces 20% slower than jemalloc (`kcp-bench workspaces
//!   --workspaces 20000`, alternated runs: 723-750/s against 898-925/s) and, after a burst was
//!   deleted, held as much memory as jemalloc does (`kcp-bench workspaces`: 33-35 MiB either
//!   way). Most of what it held was pages kept for the few blocks still live in them.
//!
//! jemalloc's own background threads give free pages back: a page unused for
//! [`CONFIGURATION`]'s `dirty_decay_ms` goes back to the system (`muzzy_decay_ms:0`: at once,
//! not after a second lazy stage). What jemalloc cannot see as unused is what each thread keeps
//! in its cache of freed blocks: a thread that goes idle after a burst keeps its cache until it
//! allocates again. So each tokio worker empties its cache when it parks (at most every
//! [`FLUSH_EVERY`]), and the embedded store's writer when it runs out of work
//! ([`flush_idle_thread`]).

use std::cell::Cell;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's configuration, read by jemalloc from this symbol when it starts (an environment
/// variable `_RJEM_MALLOC_CONF` given to the process overrides it).
const CONFIGURATION: &[u8] = b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

/// The symbol jemalloc reads its configuration from: a C string pointer.
#[allow(non_upper_case_globals, unsafe_code)]
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static malloc_conf: Option<&'static u8> = Some(&CONFIGURATION[0]);

/// The least time between two cache flushes by one worker thread.
const FLUSH_EVERY: Duration = Duration::from_secs(1);

thread_local! {
    static LAST_FLUSH: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// For tokio's `on_thread_park`: empties this thread's cache of freed blocks, unless it did so
/// lately.
pub fn flush_on_park() {
    let now = Instant::now();
    let due = LAST_FLUSH.with(|last| match last.get() {
        Some(then) if now.duration_since(then) < FLUSH_EVERY => false,
        _ => {
            last.set(Some(now));
            true
        }
    });
    if due {
        flush_thread_cache();
    }
}

/// For the server's own threads when they run out of work (the embedded store's writer calls
/// it at most every second, once after each burst of writes).
pub fn flush_idle_thread() {
    flush_thread_cache();
}

/// The crate's only `unsafe` code: jemalloc's control interface is a C function.
#[allow(unsafe_code)]
fn flush_thread_cache() {
    // SAFETY: `thread.tcache.flush` takes and returns nothing (all pointers null, length 0);
    // it hands the calling thread's cached free blocks back to their arenas and frees no live
    // allocation. The name is a NUL-terminated literal.
    unsafe {
        tikv_jemalloc_sys::mallctl(
            c"thread.tcache.flush".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
    }
}
