//! A census of the heap, for finding where resident memory goes (feature `allocator-census`,
//! never for serving).
//!
//! Every [`CENSUS_EVERY`] the server writes to stderr the bytes its code holds allocated (counted
//! by a wrapper around mimalloc: one atomic add per allocation and free), the process's resident
//! anonymous memory, and, by size class, the pages mimalloc holds for them: how many, the bytes
//! they span, of those the bytes the system holds in memory (`mincore`), the bytes in use, and
//! which of them belong to no thread (abandoned by a thread that exited or gave its pages up:
//! `super::release_thread_pages`). Resident anonymous memory above the pages' resident bytes is
//! mimalloc's free memory not yet purged, its own data, and the rest of the process (stacks,
//! statics, C code's malloc). A page's "in use"
//! is mimalloc's count, which still includes blocks other threads freed into it until its owner
//! takes them back: when the file named by `KCP_CENSUS_LIVE` appears, the census visits every
//! block (which takes them back) and writes the live blocks and the pages again. What stays
//! above the live blocks then, spread over pages of small blocks, is fragmentation: pages that a
//! few long-lived blocks keep. When the file named by `KCP_CENSUS_ARENAS` appears, it writes
//! mimalloc's map of its arena (what each 16 KiB slice holds) and the resident bytes outside
//! every page: mimalloc's own data, and free memory not yet given back.
//!
//! mimalloc visits its pages assuming no other thread changes them meanwhile; the server keeps
//! running, so a census taken under load may count a page twice or miss one. Taken when the
//! server is idle (what it is for: after a benchmark's load), it is exact.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::time::Duration;

use libmimalloc_sys::{mi_block_visit_fun, mi_heap_area_t, mi_heap_t};

/// How often the census is written.
const CENSUS_EVERY: Duration = Duration::from_secs(5);

/// Bytes allocated and not yet freed, as the code asked for them.
static IN_USE: AtomicIsize = AtomicIsize::new(0);

/// mimalloc, counting what passes through it into [`IN_USE`].
pub struct Counting;

fn count(bytes: isize) {
    IN_USE.fetch_add(bytes, Ordering::Relaxed);
}

fn signed(bytes: usize) -> isize {
    isize::try_from(bytes).unwrap_or(isize::MAX)
}

// SAFETY: every call is passed on to mimalloc unchanged (with `allocator-provenance`, for a
// block with a header in front); only a counter is kept beside it.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(signed(layout.size()));
        #[cfg(feature = "allocator-provenance")]
        {
            use super::provenance;
            let Some(padded) = provenance::padded(layout) else {
                return std::ptr::null_mut();
            };
            // SAFETY: the padded layout is a valid layout for mimalloc; the header fits in front.
            unsafe {
                let base = mimalloc::MiMalloc.alloc(padded);
                if base.is_null() {
                    return base;
                }
                provenance::stamp(base);
                base.add(provenance::prefix(provenance::align(layout)))
            }
        }
        #[cfg(not(feature = "allocator-provenance"))]
        // SAFETY: the caller's contract is mimalloc's.
        unsafe {
            mimalloc::MiMalloc.alloc(layout)
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        unsafe {
            let block = self.alloc(layout);
            if !block.is_null() {
                block.write_bytes(0, layout.size());
            }
            block
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-signed(layout.size()));
        #[cfg(feature = "allocator-provenance")]
        {
            use super::provenance;
            // SAFETY: `ptr` came from `alloc` with this layout, so its header is in front and
            // the padded layout exists (else `alloc` had answered null).
            unsafe {
                let base = ptr.sub(provenance::prefix(provenance::align(layout)));
                let padded = provenance::padded(layout).unwrap_unchecked();
                mimalloc::MiMalloc.dealloc(base, padded)
            }
        }
        #[cfg(not(feature = "allocator-provenance"))]
        // SAFETY: as above.
        unsafe {
            mimalloc::MiMalloc.dealloc(ptr, layout)
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        #[cfg(feature = "allocator-provenance")]
        // SAFETY: a new block, the old one's bytes copied, the old one freed.
        unsafe {
            let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
            let new = self.alloc(new_layout);
            if !new.is_null() {
                std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                self.dealloc(ptr, layout);
            }
            new
        }
        #[cfg(not(feature = "allocator-provenance"))]
        {
            count(signed(new_size) - signed(layout.size()));
            // SAFETY: as above.
            unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
        }
    }
}

/// Size classes of blocks, by their upper bound in bytes (the last one takes the rest).
const CLASSES: [(usize, &str); 5] = [
    (256, "<=256 B"),
    (2048, "<=2 KiB"),
    (10 * 1024, "<=10 KiB"),
    (96 * 1024, "<=96 KiB"),
    (usize::MAX, "larger"),
];

/// Pages of one size class.
#[derive(Default)]
struct Tally {
    pages: AtomicUsize,
    spanned: AtomicUsize,
    /// Of `spanned`, the bytes the system holds in memory (`mincore`): what the page costs.
    resident: AtomicUsize,
    in_use: AtomicUsize,
}

struct Tallies([Tally; CLASSES.len()]);

impl Tallies {
    fn new() -> Self {
        Tallies(Default::default())
    }

    fn line(&self, what: &str) -> String {
        let mut line = format!("heap census: {what}:");
        for (tally, (_, name)) in self.0.iter().zip(CLASSES) {
            let kib = |bytes: &AtomicUsize| bytes.load(Ordering::Relaxed) / 1024;
            line += &format!(
                " {name} {} pages, {} KiB spanned, {} KiB resident, {} KiB in use;",
                tally.pages.load(Ordering::Relaxed),
                kib(&tally.spanned),
                kib(&tally.resident),
                kib(&tally.in_use)
            );
        }
        line
    }
}

/// Called by mimalloc once for each page (`block` null: pages only, not their blocks).
#[allow(unsafe_code)]
unsafe extern "C" fn tally_page(
    _heap: *const mi_heap_t,
    area: *const mi_heap_area_t,
    _block: *mut c_void,
    _block_size: usize,
    tallies: *mut c_void,
) -> bool {
    // SAFETY: mimalloc passes a valid area, and `tallies` is the `Tallies` that `visit` lent.
    let (area, tallies) = unsafe { (&*area, &*(tallies as *const Tallies)) };
    let class = CLASSES
        .iter()
        .position(|(most, _)| area.full_block_size <= *most)
        .unwrap_or(CLASSES.len() - 1);
    let tally = &tallies.0[class];
    tally.pages.fetch_add(1, Ordering::Relaxed);
    tally.spanned.fetch_add(area.committed, Ordering::Relaxed);
    tally.resident.fetch_add(
        resident(area.blocks as usize, area.committed),
        Ordering::Relaxed,
    );
    tally
        .in_use
        .fetch_add(area.used * area.full_block_size, Ordering::Relaxed);
    true
}

/// The bytes of `[start, start + len)` the system holds in memory, by 4 KiB page. Allocates
/// nothing: it runs while mimalloc visits its pages.
#[allow(unsafe_code)]
fn resident(start: usize, len: usize) -> usize {
    const PAGE: usize = 4096;
    let mut page = start & !(PAGE - 1);
    let end = start.saturating_add(len);
    let mut resident = 0;
    let mut flags = [0u8; 256];
    while page < end {
        let count = (end - page).div_ceil(PAGE).min(flags.len());
        // SAFETY: `page` is page-aligned and mapped (mimalloc's own page), and `flags` holds
        // one byte for each of the `count` pages asked about.
        let asked = unsafe { libc::mincore(page as *mut c_void, count * PAGE, flags.as_mut_ptr()) };
        if asked != 0 {
            return resident;
        }
        resident += flags[..count].iter().filter(|flag| **flag & 1 == 1).count() * PAGE;
        page += count * PAGE;
    }
    resident
}

#[allow(unsafe_code)]
unsafe extern "C" {
    // Exported by mimalloc v3, not declared by libmimalloc-sys.
    fn mi_heap_visit_abandoned_blocks(
        heap: *mut mi_heap_t,
        visit_blocks: bool,
        visitor: mi_block_visit_fun,
        arg: *mut c_void,
    ) -> bool;
}

/// Tallies the pages of the whole process's heap, or only the abandoned ones.
#[allow(unsafe_code)]
fn visit(abandoned_only: bool) -> Tallies {
    let tallies = Tallies::new();
    let arg = &tallies as *const Tallies as *mut c_void;
    // SAFETY: a null heap is the process's main heap; `tally_page` only reads the areas it is
    // given and adds to `tallies`, which outlives the call.
    unsafe {
        if abandoned_only {
            mi_heap_visit_abandoned_blocks(std::ptr::null_mut(), false, Some(tally_page), arg);
        } else {
            libmimalloc_sys::mi_heap_visit_blocks(
                std::ptr::null_mut(),
                false,
                Some(tally_page),
                arg,
            );
        }
    }
    tallies
}

/// Starts the thread that writes the census every [`CENSUS_EVERY`].
pub fn write_periodically() {
    std::thread::spawn(|| {
        #[cfg(feature = "allocator-provenance")]
        let started = std::time::Instant::now();
        loop {
            #[cfg(feature = "allocator-provenance")]
            for _ in 0..CENSUS_EVERY.as_secs() {
                std::thread::sleep(Duration::from_secs(1));
                super::provenance::tick(started);
            }
            #[cfg(not(feature = "allocator-provenance"))]
            std::thread::sleep(CENSUS_EVERY);
            let anonymous = super::resident_anonymous_kib().unwrap_or_default();
            eprintln!(
                "heap census: {} KiB in use; resident anonymous memory {anonymous} KiB",
                IN_USE.load(Ordering::Relaxed) / 1024
            );
            eprintln!("{}", visit(false).line("all pages"));
            eprintln!("{}", visit(true).line("abandoned pages"));
            if asked("KCP_CENSUS_ARENAS") {
                show_arenas();
            }
            if asked("KCP_CENSUS_LIVE") {
                let (blocks, bytes) = live_blocks();
                eprintln!(
                    "heap census: visiting found {blocks} live blocks of {} KiB",
                    bytes / 1024
                );
                eprintln!("{}", visit(false).line("all pages, once visited"));
            }
        }
    });
}

/// Writes mimalloc's map of its arenas to stderr: for every slice, whether it holds a page
/// (and whose), mimalloc's own data, or is free (and then whether still committed, waiting
/// for a purge, or given back). When the file named by `KCP_CENSUS_ARENAS` appears.
#[allow(unsafe_code)]
fn show_arenas() {
    unsafe extern "C" {
        fn mi_debug_show_arenas();
    }
    // SAFETY: mimalloc's own diagnostic; it only reads the arenas' bitmaps.
    unsafe { mi_debug_show_arenas() };
    resident_outside_pages();
}

/// Finds the mapping holding mimalloc's arena (the one a fresh block lies in) and writes, by
/// 16 KiB slice (mimalloc's, as `.cargo/config.toml` builds it), the resident bytes that no
/// page covers: mimalloc's own data, and free memory not given back.
#[allow(unsafe_code)]
fn resident_outside_pages() {
    const SLICE: usize = 16 * 1024;
    let probe = Box::new(0u64);
    let at = &*probe as *const u64 as usize;
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    let Some((start, end)) = maps.lines().find_map(|line| {
        let (range, _) = line.split_once(' ')?;
        let (a, b) = range.split_once('-')?;
        let (a, b) = (
            usize::from_str_radix(a, 16).ok()?,
            usize::from_str_radix(b, 16).ok()?,
        );
        (a <= at && at < b).then_some((a, b))
    }) else {
        return;
    };
    let mut covered = vec![false; (end - start) / SLICE + 1];
    let mut spans: Vec<(usize, usize)> = Vec::with_capacity(1 << 20);
    unsafe extern "C" fn collect(
        _heap: *const mi_heap_t,
        area: *const mi_heap_area_t,
        _block: *mut c_void,
        _block_size: usize,
        spans: *mut c_void,
    ) -> bool {
        // SAFETY: as in `tally_page`; `spans` has room for far more pages than exist.
        let (area, spans) = unsafe { (&*area, &mut *(spans as *mut Vec<(usize, usize)>)) };
        if spans.len() < spans.capacity() {
            spans.push((area.blocks as usize, area.reserved));
        }
        true
    }
    let arg = &mut spans as *mut Vec<(usize, usize)> as *mut c_void;
    // SAFETY: as in `visit`. Visiting the whole heap visits its abandoned pages too.
    unsafe {
        libmimalloc_sys::mi_heap_visit_blocks(std::ptr::null_mut(), false, Some(collect), arg);
    }
    for (blocks, reserved) in &spans {
        if *blocks < start || *blocks >= end {
            continue;
        }
        let first = (blocks - start) / SLICE;
        let last = (blocks + (*reserved).max(1) - 1 - start) / SLICE;
        for slice in first..=last.min(covered.len() - 1) {
            covered[slice] = true;
        }
    }
    let mut total = 0;
    let mut listed = String::new();
    for (slice, covered) in covered.iter().enumerate() {
        let at = start + slice * SLICE;
        if *covered || at + SLICE > end {
            continue;
        }
        let kib = resident(at, SLICE) / 1024;
        if kib > 0 {
            total += kib;
            listed += &format!(" {slice}:{kib}");
        }
    }
    eprintln!(
        "heap census: arena {start:#x}-{end:#x}: {} pages; resident outside pages {total} KiB in slices (index:KiB){listed}",
        spans.len()
    );
}

/// Whether the file named by the environment variable `var` appeared (it is removed: one
/// answer per appearance). How a census that visits blocks, safe only on an idle server, is
/// asked for.
pub(super) fn asked(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|path| std::fs::remove_file(path).is_ok())
}

/// Counts the blocks mimalloc holds as live by visiting each one. Visiting a page first takes
/// in the blocks other threads freed into it, which its owner may not have done yet: so the
/// pages' `used` after this, against before, says how many freed blocks were waiting there.
/// Only for an idle server (the visit changes other threads' pages), when the file named by
/// `KCP_CENSUS_LIVE` appears.
#[allow(unsafe_code)]
fn live_blocks() -> (usize, usize) {
    unsafe extern "C" fn count_block(
        _heap: *const mi_heap_t,
        _area: *const mi_heap_area_t,
        block: *mut c_void,
        block_size: usize,
        totals: *mut c_void,
    ) -> bool {
        if !block.is_null() {
            // SAFETY: `totals` is the pair `live_blocks` lent.
            let totals = unsafe { &mut *(totals as *mut (usize, usize)) };
            totals.0 += 1;
            totals.1 += block_size;
        }
        true
    }
    let mut totals = (0usize, 0usize);
    // SAFETY: a null heap is the process's main heap; `count_block` only adds to `totals`,
    // which outlives the call, and allocates nothing.
    unsafe {
        libmimalloc_sys::mi_heap_visit_blocks(
            std::ptr::null_mut(),
            true,
            Some(count_block),
            &mut totals as *mut (usize, usize) as *mut c_void,
        );
    }
    totals
}
