//! `sift_demux_*`: the demultiplexer. Matching takes a shared handle and may run on many
//! threads while another thread inserts and deletes (updates are serialized by a lock that
//! matching never takes; readers see the set before or after each update).

use std::cell::RefCell;
use std::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Mutex;

use super::{expression, packet, write_error};
use crate::demux::{Delivery, Demux, FilterId, Matches, Reader};

/// What a `sift_demux *` points to.
pub struct CDemux {
    writer: Mutex<Demux>,
    reader: Reader,
}

impl CDemux {
    pub(super) fn reader(&self) -> &Reader {
        &self.reader
    }
}

thread_local! {
    static MATCHES: RefCell<Matches> = RefCell::new(Matches::new());
}

/// Error results of `sift_demux_insert` (negative) and `sift_demux_delete`.
const ERR_BAD_ARGUMENT: i64 = -1;
const ERR_COMPILE: i64 = -2;
const ERR_INTERNAL: i64 = -3;

/// `sift_demux *sift_demux_new(uint32_t linktype)`: an empty demultiplexer.
#[no_mangle]
pub extern "C" fn sift_demux_new(linktype: u32) -> *mut CDemux {
    sift_demux_new_flags(linktype, 0)
}

/// `sift_demux *sift_demux_new_flags(uint32_t linktype, uint32_t flags)`: an empty
/// demultiplexer whose filters are compiled with `flags` (as `sift_filter_compile_flags`).
#[no_mangle]
pub extern "C" fn sift_demux_new_flags(linktype: u32, flags: u32) -> *mut CDemux {
    let demux = Demux::with_options(super::options(linktype, 262144, flags));
    let reader = demux.reader();
    Box::into_raw(Box::new(CDemux {
        writer: Mutex::new(demux),
        reader,
    }))
}

/// Shared body of the two insert functions.
///
/// # Safety
/// As for `sift_demux_insert`.
unsafe fn insert(
    d: *mut CDemux,
    expr: *const c_char,
    priority: i32,
    delivery: Delivery,
    err: *mut c_char,
    errlen: usize,
) -> i64 {
    // SAFETY: `d` is NULL or a live demultiplexer (caller's promise).
    let Some(d) = (unsafe { d.as_ref() }) else {
        write_error(err, errlen, "demultiplexer is NULL");
        return ERR_BAD_ARGUMENT;
    };
    // SAFETY: `expr` is NULL or a NUL-terminated string (caller's promise).
    let text = match unsafe { expression(expr) } {
        Ok(text) => text,
        Err(msg) => {
            write_error(err, errlen, msg);
            return ERR_BAD_ARGUMENT;
        }
    };
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut writer = d.writer.lock().unwrap_or_else(|p| p.into_inner());
        writer.insert(text, priority, delivery)
    }));
    match result {
        Ok(Ok(FilterId(id))) => id as i64,
        Ok(Err(e)) => {
            write_error(err, errlen, &e.render(text));
            ERR_COMPILE
        }
        Err(_) => {
            write_error(err, errlen, "internal error in sift (please report it)");
            ERR_INTERNAL
        }
    }
}

/// `int64_t sift_demux_insert(sift_demux *d, const char *expr, int32_t priority, char *err,
/// size_t errlen)`: installs an exclusive filter; its id (> 0), or < 0 with a message in `err`.
///
/// # Safety
/// `d` NULL or live; `expr` NULL or NUL-terminated; `err` NULL or `errlen` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn sift_demux_insert(
    d: *mut CDemux,
    expr: *const c_char,
    priority: i32,
    err: *mut c_char,
    errlen: usize,
) -> i64 {
    // SAFETY: the caller's promises are the callee's.
    unsafe { insert(d, expr, priority, Delivery::Exclusive, err, errlen) }
}

/// `int64_t sift_demux_insert_copy(...)`: as `sift_demux_insert`, for a filter that gets a copy
/// of the packets it matches and passes them on to lower-ranked filters.
///
/// # Safety
/// As for `sift_demux_insert`.
#[no_mangle]
pub unsafe extern "C" fn sift_demux_insert_copy(
    d: *mut CDemux,
    expr: *const c_char,
    priority: i32,
    err: *mut c_char,
    errlen: usize,
) -> i64 {
    // SAFETY: the caller's promises are the callee's.
    unsafe { insert(d, expr, priority, Delivery::Copy, err, errlen) }
}

/// `int sift_demux_delete(sift_demux *d, int64_t id)`: 0, or -1 for an unknown id.
///
/// # Safety
/// `d` must be NULL or a live demultiplexer.
#[no_mangle]
pub unsafe extern "C" fn sift_demux_delete(d: *mut CDemux, id: i64) -> i32 {
    // SAFETY: `d` is NULL or live (caller's promise).
    let Some(d) = (unsafe { d.as_ref() }) else {
        return -1;
    };
    let Ok(id) = u64::try_from(id) else {
        return -1;
    };
    let removed = catch_unwind(AssertUnwindSafe(|| {
        let mut writer = d.writer.lock().unwrap_or_else(|p| p.into_inner());
        writer.remove(FilterId(id))
    }));
    if matches!(removed, Ok(true)) {
        0
    } else {
        -1
    }
}

/// Matches one packet, leaving the result in the thread's scratch, and calls `f` on it.
fn with_matches<T>(
    d: &CDemux,
    data: &[u8],
    wirelen: u32,
    all: bool,
    f: impl FnOnce(&Matches) -> T,
) -> Option<T> {
    MATCHES.with(|m| {
        let mut m = m.try_borrow_mut().ok()?;
        catch_unwind(AssertUnwindSafe(|| {
            if all {
                d.reader.match_all(data, wirelen, &mut m);
            } else {
                d.reader.match_packet(data, wirelen, &mut m);
            }
            f(&m)
        }))
        .ok()
    })
}

/// `int64_t sift_demux_match(const sift_demux *d, const uint8_t *pkt, uint32_t caplen,
/// uint32_t wirelen)`: the id of the exclusive filter the packet goes to, 0 if none.
///
/// # Safety
/// `d` NULL or live; `pkt` NULL or `caplen` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn sift_demux_match(
    d: *const CDemux,
    pkt: *const u8,
    caplen: u32,
    wirelen: u32,
) -> i64 {
    // SAFETY: `d` is NULL or live (caller's promise).
    let Some(d) = (unsafe { d.as_ref() }) else {
        return 0;
    };
    // SAFETY: `pkt` is NULL or `caplen` readable bytes (caller's promise).
    let data = unsafe { packet(pkt, caplen) };
    with_matches(d, data, wirelen, false, |m| {
        m.exclusive().map_or(0, |FilterId(id)| id as i64)
    })
    .unwrap_or(0)
}

/// `size_t sift_demux_match_ids(const sift_demux *d, const uint8_t *pkt, uint32_t caplen,
/// uint32_t wirelen, int all, int64_t *ids, size_t max)`: the ids the packet is delivered to
/// (the copy filters ranked before the exclusive winner, then the winner; with `all` nonzero,
/// every matching filter), highest rank first. Writes at most `max` ids and returns how many
/// there are (call again with a larger array if that is more than `max`).
///
/// # Safety
/// `d` NULL or live; `pkt` NULL or `caplen` readable bytes; `ids` NULL (with `max` 0) or `max`
/// writable elements.
#[no_mangle]
pub unsafe extern "C" fn sift_demux_match_ids(
    d: *const CDemux,
    pkt: *const u8,
    caplen: u32,
    wirelen: u32,
    all: i32,
    ids: *mut i64,
    max: usize,
) -> usize {
    // SAFETY: `d` is NULL or live (caller's promise).
    let Some(d) = (unsafe { d.as_ref() }) else {
        return 0;
    };
    // SAFETY: `pkt` is NULL or `caplen` readable bytes (caller's promise).
    let data = unsafe { packet(pkt, caplen) };
    let out: &mut [i64] = if ids.is_null() || max == 0 {
        &mut []
    } else {
        // SAFETY: `ids` has `max` writable elements (caller's promise), checked non-NULL.
        unsafe { std::slice::from_raw_parts_mut(ids, max) }
    };
    with_matches(d, data, wirelen, all != 0, |m| {
        let delivered = m.delivered();
        for (slot, &FilterId(id)) in out.iter_mut().zip(delivered) {
            *slot = id as i64;
        }
        delivered.len()
    })
    .unwrap_or(0)
}

/// `void sift_demux_match_batch(const sift_demux *d, const uint8_t *const *pkts, const
/// uint32_t *caplens, const uint32_t *wirelens, int64_t *best, size_t count)`: `best[i]` is
/// `sift_demux_match` of packet `i`, all against one set of filters.
///
/// # Safety
/// `d` NULL or live; the arrays NULL (only with `count` 0) or `count` elements each, each
/// `pkts[i]` NULL or `caplens[i]` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn sift_demux_match_batch(
    d: *const CDemux,
    pkts: *const *const u8,
    caplens: *const u32,
    wirelens: *const u32,
    best: *mut i64,
    count: usize,
) {
    if count == 0 || pkts.is_null() || caplens.is_null() || wirelens.is_null() || best.is_null() {
        return;
    }
    // SAFETY: each array has `count` elements (caller's promise), checked non-NULL above.
    let (pkts, caplens, wirelens, best) = unsafe {
        (
            std::slice::from_raw_parts(pkts, count),
            std::slice::from_raw_parts(caplens, count),
            std::slice::from_raw_parts(wirelens, count),
            std::slice::from_raw_parts_mut(best, count),
        )
    };
    // SAFETY: `d` is NULL or live (caller's promise).
    let Some(d) = (unsafe { d.as_ref() }) else {
        best.fill(0);
        return;
    };
    let mut local = d.reader.local();
    MATCHES.with(|m| {
        let Ok(mut m) = m.try_borrow_mut() else {
            best.fill(0);
            return;
        };
        // One batch, so that the table lookups of a chunk of packets overlap; a packet the
        // batch never reached (only after a panic, which is a bug) stays 0.
        best.fill(0);
        let packets = (0..count).map(|i| {
            // SAFETY: `pkts[i]` is NULL or `caplens[i]` readable bytes (caller's promise).
            (unsafe { packet(pkts[i], caplens[i]) }, wirelens[i])
        });
        let _ = catch_unwind(AssertUnwindSafe(|| {
            local.match_batch(packets, &mut m, |i, m| {
                best[i] = m.exclusive().map_or(0, |FilterId(id)| id as i64);
            });
        }));
    });
}

/// `void sift_demux_free(sift_demux *d)`: frees a demultiplexer; NULL is ignored. No other
/// call may be running on it.
///
/// # Safety
/// `d` must be NULL or a demultiplexer from `sift_demux_new` not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sift_demux_free(d: *mut CDemux) {
    if !d.is_null() {
        // SAFETY: `d` came from Box::into_raw in sift_demux_new and is freed once.
        drop(unsafe { Box::from_raw(d) });
    }
}
