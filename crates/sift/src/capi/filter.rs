//! `sift_filter_*`: one compiled filter. Compiled filters are immutable, so `sift_filter_run`
//! may be called on one filter from many threads at once.

use std::ffi::c_char;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use super::{expression, packet, write_error};
use crate::Filter;

/// `sift_filter *sift_filter_compile(const char *expr, uint32_t linktype, uint32_t snaplen,
/// char *err, size_t errlen)`: NULL on error, with the message (and a caret line under the
/// problem) in `err`.
///
/// # Safety
/// `expr` must be NULL or a NUL-terminated string; `err` NULL or `errlen` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn sift_filter_compile(
    expr: *const c_char,
    linktype: u32,
    snaplen: u32,
    err: *mut c_char,
    errlen: usize,
) -> *mut Filter {
    // SAFETY: the caller's promises are this function's.
    unsafe { sift_filter_compile_flags(expr, linktype, snaplen, 0, err, errlen) }
}

/// `sift_filter *sift_filter_compile_flags(const char *expr, uint32_t linktype, uint32_t
/// snaplen, uint32_t flags, char *err, size_t errlen)`: as `sift_filter_compile`, with
/// `SIFT_EXTENSIONS` (sift's payload tests and sets) and `SIFT_NO_OPTIMIZE` (`tcpdump -O`).
///
/// # Safety
/// As for `sift_filter_compile`.
#[no_mangle]
pub unsafe extern "C" fn sift_filter_compile_flags(
    expr: *const c_char,
    linktype: u32,
    snaplen: u32,
    flags: u32,
    err: *mut c_char,
    errlen: usize,
) -> *mut Filter {
    let opts = super::options(linktype, snaplen, flags);
    // SAFETY: `expr` is NULL or a NUL-terminated string (caller's promise).
    let text = match unsafe { expression(expr) } {
        Ok(text) => text,
        Err(msg) => {
            write_error(err, errlen, msg);
            return ptr::null_mut();
        }
    };
    match catch_unwind(|| Filter::compile_with(text, &opts)) {
        Ok(Ok(filter)) => Box::into_raw(Box::new(filter)),
        Ok(Err(e)) => {
            write_error(err, errlen, &e.render(text));
            ptr::null_mut()
        }
        Err(_) => {
            write_error(err, errlen, "internal error in sift (please report it)");
            ptr::null_mut()
        }
    }
}

/// `uint32_t sift_filter_run(const sift_filter *f, const uint8_t *pkt, uint32_t caplen,
/// uint32_t wirelen)`: 0 rejects, anything else is the number of bytes to keep (as
/// `bpf_filter`). A NULL filter rejects.
///
/// # Safety
/// `f` must be NULL or a live filter from `sift_filter_compile`; `pkt` NULL or `caplen`
/// readable bytes.
#[no_mangle]
pub unsafe extern "C" fn sift_filter_run(
    f: *const Filter,
    pkt: *const u8,
    caplen: u32,
    wirelen: u32,
) -> u32 {
    // SAFETY: `f` is NULL or a live filter (caller's promise).
    let Some(filter) = (unsafe { f.as_ref() }) else {
        return 0;
    };
    // SAFETY: `pkt` is NULL or `caplen` readable bytes (caller's promise).
    let data = unsafe { packet(pkt, caplen) };
    catch_unwind(AssertUnwindSafe(|| filter.run(data, wirelen))).unwrap_or(0)
}

/// `size_t sift_filter_run_batch(const sift_filter *f, const uint8_t *const *pkts, const
/// uint32_t *caplens, const uint32_t *wirelens, uint32_t *results, size_t count)`: runs the
/// filter on `count` packets, writing each result to `results`; returns how many accepted.
///
/// # Safety
/// `f` as for `sift_filter_run`; `pkts`, `caplens`, `wirelens` and `results` must each be
/// NULL (only when `count` is 0) or arrays of `count` elements, each `pkts[i]` NULL or
/// `caplens[i]` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn sift_filter_run_batch(
    f: *const Filter,
    pkts: *const *const u8,
    caplens: *const u32,
    wirelens: *const u32,
    results: *mut u32,
    count: usize,
) -> usize {
    if count == 0 || pkts.is_null() || caplens.is_null() || wirelens.is_null() {
        return 0;
    }
    if results.is_null() {
        return 0;
    }
    // SAFETY: each array has `count` elements (caller's promise), checked non-NULL above.
    let (pkts, caplens, wirelens, results) = unsafe {
        (
            std::slice::from_raw_parts(pkts, count),
            std::slice::from_raw_parts(caplens, count),
            std::slice::from_raw_parts(wirelens, count),
            std::slice::from_raw_parts_mut(results, count),
        )
    };
    // SAFETY: `f` is NULL or a live filter (caller's promise).
    let Some(filter) = (unsafe { f.as_ref() }) else {
        results.fill(0);
        return 0;
    };
    let packets: Vec<&[u8]> = pkts
        .iter()
        .zip(caplens)
        // SAFETY: `pkts[i]` is NULL or `caplens[i]` readable bytes (caller's promise).
        .map(|(&p, &len)| unsafe { packet(p, len) })
        .collect();
    if catch_unwind(AssertUnwindSafe(|| {
        filter.run_batch(&packets, wirelens, results)
    }))
    .is_err()
    {
        results.fill(0);
    }
    let accepted = results.iter().filter(|&&r| r != 0).count();
    accepted
}

/// `void sift_filter_free(sift_filter *f)`: frees a filter; NULL is ignored.
///
/// # Safety
/// `f` must be NULL or a filter from `sift_filter_compile` not yet freed.
#[no_mangle]
pub unsafe extern "C" fn sift_filter_free(f: *mut Filter) {
    if !f.is_null() {
        // SAFETY: `f` came from Box::into_raw in sift_filter_compile and is freed once.
        drop(unsafe { Box::from_raw(f) });
    }
}
