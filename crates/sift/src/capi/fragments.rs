//! `sift_fragments_*`: fragment dispatch in front of a demultiplexer (MPF section 3). IP
//! fragments go where their datagram's first fragment went; fragments that come before their
//! first are held and handed back later through `sift_fragments_next_release`. One
//! `sift_fragments` is one stream of packets: it is not shared between threads (each thread
//! may have its own over the same demultiplexer).

use std::panic::{catch_unwind, AssertUnwindSafe};

use super::demux::CDemux;
use super::packet;
use crate::demux::{FilterId, FragmentConfig, FragmentDemux, FragmentOutcome, Matches, Verdict};

/// What a `sift_fragments *` points to; held packets are known by the caller's cookie.
pub struct CFragments {
    inner: FragmentDemux<u64>,
    matches: Matches,
}

/// `sift_fragments_dispatch` results.
const DELIVERED: i32 = 0;
const POSTPONED: i32 = 1;
const DROPPED: i32 = 2;
const BAD_ARGUMENT: i32 = -1;

/// `sift_fragments *sift_fragments_new(const sift_demux *d, uint32_t linktype, uint64_t
/// timeout_ns, size_t max_postponed)`: NULL for an unsupported link type. `max_postponed` 0
/// keeps the default bound (8192 held fragments).
///
/// # Safety
/// `d` must be NULL or a live demultiplexer that outlives the result.
#[no_mangle]
pub unsafe extern "C" fn sift_fragments_new(
    d: *const CDemux,
    linktype: u32,
    timeout_ns: u64,
    max_postponed: usize,
) -> *mut CFragments {
    // SAFETY: `d` is NULL or live (caller's promise).
    let Some(d) = (unsafe { d.as_ref() }) else {
        return std::ptr::null_mut();
    };
    let defaults = FragmentConfig::default();
    let config = FragmentConfig {
        timeout_ns,
        max_postponed: if max_postponed == 0 {
            defaults.max_postponed
        } else {
            max_postponed
        },
        ..defaults
    };
    match FragmentDemux::new(d.reader(), linktype, config) {
        Ok(inner) => Box::into_raw(Box::new(CFragments {
            inner,
            matches: Matches::new(),
        })),
        Err(_) => std::ptr::null_mut(),
    }
}

/// `int sift_fragments_dispatch(sift_fragments *f, const uint8_t *pkt, uint32_t caplen,
/// uint32_t wirelen, uint64_t now_ns, uint64_t cookie, int64_t *best)`: 0 when the packet is
/// delivered now (`*best`: the exclusive filter's id, 0 for none), 1 when it is held (it comes
/// back with `cookie` from `sift_fragments_next_release`), 2 when it is dropped, -1 on bad
/// arguments. Call `sift_fragments_next_release` after each dispatch: held fragments may have
/// been decided.
///
/// # Safety
/// `f` NULL or live; `pkt` NULL or `caplen` readable bytes; `best` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sift_fragments_dispatch(
    f: *mut CFragments,
    pkt: *const u8,
    caplen: u32,
    wirelen: u32,
    now_ns: u64,
    cookie: u64,
    best: *mut i64,
) -> i32 {
    // SAFETY: `f` is NULL or live and not used elsewhere meanwhile (caller's promise).
    let Some(f) = (unsafe { f.as_mut() }) else {
        return BAD_ARGUMENT;
    };
    // SAFETY: `pkt` is NULL or `caplen` readable bytes (caller's promise).
    let data = unsafe { packet(pkt, caplen) };
    let CFragments { inner, matches } = f;
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        inner.dispatch(data, wirelen, now_ns, || cookie, matches)
    }));
    let (code, id) = match outcome {
        Ok(o) if o.delivers_now() => (DELIVERED, matches.exclusive()),
        Ok(FragmentOutcome::Postponed) => (POSTPONED, None),
        Ok(_) => (DROPPED, None),
        Err(_) => (BAD_ARGUMENT, None),
    };
    if !best.is_null() {
        // SAFETY: `best` is writable (caller's promise), checked non-NULL.
        unsafe { *best = id.map_or(0, |FilterId(id)| id as i64) };
    }
    code
}

/// `int sift_fragments_next_release(sift_fragments *f, uint64_t *cookie, int64_t *best)`: 1
/// when a held fragment was decided (`*cookie` names it; `*best` is the exclusive filter it
/// goes to, 0 when it is dropped or goes to none), 0 when none is waiting.
///
/// # Safety
/// `f` NULL or live; `cookie` and `best` NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn sift_fragments_next_release(
    f: *mut CFragments,
    cookie: *mut u64,
    best: *mut i64,
) -> i32 {
    // SAFETY: `f` is NULL or live (caller's promise).
    let Some(f) = (unsafe { f.as_mut() }) else {
        return 0;
    };
    let Some(release) = f.inner.next_release() else {
        return 0;
    };
    let id = match &release.verdict {
        Verdict::Deliver(recipients) => recipients.exclusive(),
        Verdict::Drop(_) => None,
    };
    // SAFETY: both are NULL or writable (caller's promise), checked non-NULL.
    unsafe {
        if !cookie.is_null() {
            *cookie = release.handle;
        }
        if !best.is_null() {
            *best = id.map_or(0, |FilterId(id)| id as i64);
        }
    }
    1
}

/// `void sift_fragments_flush(sift_fragments *f)`: end of input: every held fragment is
/// dropped (and comes back through `sift_fragments_next_release`).
///
/// # Safety
/// `f` must be NULL or live.
#[no_mangle]
pub unsafe extern "C" fn sift_fragments_flush(f: *mut CFragments) {
    // SAFETY: `f` is NULL or live (caller's promise).
    if let Some(f) = unsafe { f.as_mut() } {
        f.inner.flush();
    }
}

/// `void sift_fragments_free(sift_fragments *f)`: NULL is ignored.
///
/// # Safety
/// `f` must be NULL or from `sift_fragments_new`, not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sift_fragments_free(f: *mut CFragments) {
    if !f.is_null() {
        // SAFETY: from Box::into_raw in sift_fragments_new, freed once.
        drop(unsafe { Box::from_raw(f) });
    }
}
