//! Where the blocks that keep sparse pages were allocated (feature `allocator-provenance`,
//! never for serving).
//!
//! Every block carries a header in front of what the code asked for: when it was allocated
//! (seconds since start) and the return addresses of the allocating call stack's first frames
//! (a frame already kept is skipped, so recursion shows once and its caller follows), taken with
//! the unwinder on every allocation (slow: the server runs several times slower).
//! When the file named by `KCP_PROVENANCE_DUMP` appears, the census thread removes it and writes
//! to stderr (with `KCP_PROVENANCE_ALL` set, the call stacks of every live block, by the bytes
//! they hold, instead of those in sparse pages):
//! - mimalloc's pages by the age of their oldest live block and by how full they are: pages
//!   filled during a burst and kept by a few older blocks show up as old, sparse pages;
//! - for every call stack with blocks in sparse pages (less than a quarter in use), how many
//!   such blocks it holds and how much of those pages it keeps resident (each page's span
//!   shared among its blocks).
//!
//! Addresses are printed relative to the executable's load address, for
//! `addr2line -f -C -i -e target/release/kcp`. Dump only when the server is idle: mimalloc
//! visits pages assuming nothing else changes them. The dump's own buffer (about 20 MiB) shows
//! up as two full pages younger than every other.
//!
//! What it found (ARCHITECTURE, memory): after 10,000 workspaces were deleted, the sparse pages
//! were nearly all filled in the first seconds after the server restarted, when its first large
//! lists and watches ran among the state it builds on first use.

use std::alloc::Layout;
use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use libmimalloc_sys::{mi_heap_area_t, mi_heap_t};

/// Return addresses kept per block.
pub const FRAMES: usize = 10;

const MAGIC: u32 = 0x6b63_7072;

/// The header at the start of every block.
#[repr(C)]
#[derive(Clone, Copy)]
struct Header {
    magic: u32,
    second: u32,
    frames: [usize; FRAMES],
}

const HEADER: usize = std::mem::size_of::<Header>();

/// Seconds since start, kept by the census thread.
static SECOND: AtomicU32 = AtomicU32::new(0);

thread_local! {
    static TRACING: Cell<bool> = const { Cell::new(false) };
}

/// Bytes in front of the code's block for a block of this alignment.
pub fn prefix(align: usize) -> usize {
    HEADER.div_ceil(align) * align
}

/// The layout mimalloc is asked for; `None` if the header does not fit in a layout.
pub fn padded(layout: Layout) -> Option<Layout> {
    let align = align(layout);
    let size = layout.size().checked_add(prefix(align))?;
    Layout::from_size_align(size, align).ok()
}

/// The alignment mimalloc is asked for (the header needs 16).
pub fn align(layout: Layout) -> usize {
    layout.align().max(16)
}

#[repr(C)]
struct Frames {
    seen: usize,
    /// Frames walked, kept or not.
    walked: usize,
    frames: [usize; FRAMES + 2],
}

/// The most frames walked per allocation (recursive ones are walked, not kept).
const MAX_WALKED: usize = 256;

#[allow(unsafe_code)]
unsafe extern "C" {
    fn _Unwind_Backtrace(
        trace: extern "C" fn(*mut c_void, *mut c_void) -> i32,
        arg: *mut c_void,
    ) -> i32;
    fn _Unwind_GetIP(context: *mut c_void) -> usize;
}

#[allow(unsafe_code)]
extern "C" fn one_frame(context: *mut c_void, arg: *mut c_void) -> i32 {
    // SAFETY: `arg` is the `Frames` that `stamp` lent, and the unwinder passes a live context.
    let frames = unsafe { &mut *(arg as *mut Frames) };
    frames.walked += 1;
    if frames.seen >= frames.frames.len() || frames.walked > MAX_WALKED {
        return 9;
    }
    // SAFETY: as above.
    let ip = unsafe { _Unwind_GetIP(context) };
    // A frame already kept is recursion (a JSON value decoded or cloned level by level):
    // skipped, so that the frames kept reach the caller that holds the result.
    if !frames.frames[..frames.seen].contains(&ip) {
        frames.frames[frames.seen] = ip;
        frames.seen += 1;
    }
    0
}

/// Writes the header at `base`.
#[allow(unsafe_code)]
pub unsafe fn stamp(base: *mut u8) {
    let mut header = Header {
        magic: MAGIC,
        second: SECOND.load(Ordering::Relaxed),
        frames: [0; FRAMES],
    };
    let reentered = TRACING.with(|tracing| tracing.replace(true));
    if !reentered {
        let mut frames = Frames {
            seen: 0,
            walked: 0,
            frames: [0; FRAMES + 2],
        };
        // SAFETY: `one_frame` only writes into `frames`, which outlives the call.
        unsafe { _Unwind_Backtrace(one_frame, &mut frames as *mut Frames as *mut c_void) };
        // The first two frames are this function and the allocator's.
        header.frames.copy_from_slice(&frames.frames[2..]);
        TRACING.with(|tracing| tracing.set(false));
    }
    // SAFETY: the caller gives a block at least `HEADER` long and 16-aligned.
    unsafe { (base as *mut Header).write(header) };
}

/// One live block, and the page it is in.
#[derive(Clone, Copy)]
struct Found {
    page: usize,
    page_span: usize,
    page_blocks: usize,
    size: usize,
    header: Header,
}

impl Found {
    /// How many quarters of its page are in use (0: a sparse page).
    fn page_quarters_used(&self) -> usize {
        self.page_blocks * self.size * 4 / self.page_span.max(1)
    }
}

/// The upper bounds of the age bands, in seconds since start.
const BANDS: [u32; 6] = [10, 60, 120, 180, 240, u32::MAX];

/// The age band of a block made at `second`.
fn band_of(second: u32) -> usize {
    BANDS
        .iter()
        .position(|bound| second < *bound)
        .unwrap_or(BANDS.len() - 1)
}

struct Visit {
    found: Vec<Found>,
    blocks: usize,
}

#[allow(unsafe_code)]
unsafe extern "C" fn visit_block(
    _heap: *const mi_heap_t,
    area: *const mi_heap_area_t,
    block: *mut c_void,
    block_size: usize,
    arg: *mut c_void,
) -> bool {
    // SAFETY: mimalloc passes a valid area and `arg` is the `Visit` that `dump` lent.
    let (area, visit) = unsafe { (&*area, &mut *(arg as *mut Visit)) };
    if block.is_null() {
        return true;
    }
    visit.blocks += 1;
    if visit.found.len() == visit.found.capacity() {
        return true;
    }
    // SAFETY: every block mimalloc hands out through the global allocator starts with a header;
    // a block of mimalloc's own has no magic and is skipped.
    let header = unsafe { (block as *const Header).read_unaligned() };
    if header.magic != MAGIC || block_size < HEADER {
        return true;
    }
    visit.found.push(Found {
        page: area.blocks as usize,
        page_span: area.committed,
        page_blocks: area.used,
        size: block_size,
        header,
    });
    true
}

/// Pages by the age of their oldest live block and by how full they are.
fn age_table(found: &[Found]) {
    // Each page's oldest block.
    let mut pages: HashMap<usize, &Found> = HashMap::new();
    for block in found {
        let oldest = pages.entry(block.page).or_insert(block);
        if block.header.second < oldest.header.second {
            *oldest = block;
        }
    }
    // By band, then by fullness (<25%, 25-50%, more): pages, bytes spanned, bytes used.
    let mut table = [[(0usize, 0usize, 0usize); 3]; BANDS.len()];
    for oldest in pages.values() {
        let density = oldest.page_quarters_used().min(2);
        let cell = &mut table[band_of(oldest.header.second)][density];
        cell.0 += 1;
        cell.1 += oldest.page_span;
        cell.2 += oldest.page_blocks * oldest.size;
    }
    for (band, row) in table.iter().enumerate() {
        let from = band.checked_sub(1).map_or(0, |before| BANDS[before]);
        let to = match BANDS[band] {
            u32::MAX => "on".to_string(),
            to => format!("to {to}"),
        };
        eprintln!(
            "provenance: pages whose oldest block is from second {from} {to}: <25% full {} pages {} KiB ({} KiB used); 25-50% {} pages {} KiB ({}); >50% {} pages {} KiB ({})",
            row[0].0,
            row[0].1 / 1024,
            row[0].2 / 1024,
            row[1].0,
            row[1].1 / 1024,
            row[1].2 / 1024,
            row[2].0,
            row[2].1 / 1024,
            row[2].2 / 1024,
        );
    }
    let mut seconds = [0usize; BANDS.len()];
    for block in found {
        seconds[band_of(block.header.second)] += 1;
    }
    eprintln!("provenance: live blocks by second band {seconds:?}");
}

/// The executable's load address, from /proc/self/maps.
fn load_address() -> usize {
    let exe = std::fs::read_link("/proc/self/exe").unwrap_or_default();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    maps.lines()
        .find(|line| line.ends_with(&*exe.to_string_lossy()))
        .and_then(|line| line.split('-').next())
        .and_then(|start| usize::from_str_radix(start, 16).ok())
        .unwrap_or(0)
}

/// Visits every block and writes the call stacks that keep sparse pages.
#[allow(unsafe_code)]
fn dump() {
    let mut visit = Visit {
        found: Vec::with_capacity(2_000_000),
        blocks: 0,
    };
    // SAFETY: a null heap is the process's heap; `visit_block` only reads and pushes within
    // capacity, so nothing is allocated while mimalloc walks its pages.
    unsafe {
        libmimalloc_sys::mi_heap_visit_blocks(
            std::ptr::null_mut(),
            true,
            Some(visit_block),
            &mut visit as *mut Visit as *mut c_void,
        );
    }
    let base = load_address();
    age_table(&visit.found);
    // With `KCP_PROVENANCE_ALL` set, every live block counts, sites by the bytes they hold:
    // for what is kept rather than for what fragments.
    let all = std::env::var_os("KCP_PROVENANCE_ALL").is_some();
    if !all {
        visit.found.retain(|found| found.page_quarters_used() == 0);
    }
    struct Site {
        blocks: usize,
        bytes: usize,
        kept: f64,
        seconds: (u32, u32),
    }
    let mut sites: HashMap<[usize; FRAMES], Site> = HashMap::new();
    // The sparse pages and what each spans.
    let pages: HashMap<usize, usize> = visit
        .found
        .iter()
        .map(|found| (found.page, found.page_span))
        .collect();
    for found in &visit.found {
        let site = sites.entry(found.header.frames).or_insert(Site {
            blocks: 0,
            bytes: 0,
            kept: 0.0,
            seconds: (u32::MAX, 0),
        });
        site.blocks += 1;
        site.bytes += found.size;
        site.kept += found.page_span as f64 / found.page_blocks.max(1) as f64;
        site.seconds.0 = site.seconds.0.min(found.header.second);
        site.seconds.1 = site.seconds.1.max(found.header.second);
    }
    let mut sites: Vec<_> = sites.into_iter().collect();
    match all {
        true => sites.sort_by(|a, b| b.1.bytes.cmp(&a.1.bytes)),
        false => sites.sort_by(|a, b| b.1.kept.total_cmp(&a.1.kept)),
    }
    eprintln!(
        "provenance: {} blocks visited; {} in {} sparse pages spanning {} KiB; load address {base:#x}",
        visit.blocks,
        visit.found.len(),
        pages.len(),
        pages.values().sum::<usize>() / 1024
    );
    for (frames, site) in sites.iter().take(80) {
        let frames: Vec<String> = frames
            .iter()
            .map(|ip| format!("{:#x}", ip.wrapping_sub(base)))
            .collect();
        eprintln!(
            "provenance: site blocks={} bytes={} kept_kib={:.1} seconds={}..{} frames={}",
            site.blocks,
            site.bytes,
            site.kept / 1024.0,
            site.seconds.0,
            site.seconds.1,
            frames.join(",")
        );
    }
}

/// Called by the census thread every second: keeps the clock, and dumps when asked.
pub fn tick(started: Instant) {
    SECOND.store(started.elapsed().as_secs() as u32, Ordering::Relaxed);
    if super::census::asked("KCP_PROVENANCE_DUMP") {
        dump();
    }
}
