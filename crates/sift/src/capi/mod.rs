//! The C library: `libsift.so` / `libsift.a` with `include/sift.h`.
//!
//! Every function is safe against NULL arguments and never unwinds into C: a panic (a bug in
//! sift) is caught at the boundary and reported as an error result.

use std::ffi::{c_char, CStr};
use std::ptr;

mod demux;
mod filter;
mod fragments;

pub use demux::*;
pub use filter::*;
pub use fragments::*;

/// `SIFT_EXTENSIONS` in `include/sift.h`.
const EXTENSIONS: u32 = 1;
/// `SIFT_NO_OPTIMIZE`.
const NO_OPTIMIZE: u32 = 2;

/// Compile options from the C API's flags (unknown bits are ignored).
fn options(linktype: u32, snaplen: u32, flags: u32) -> crate::Options {
    let mut o = crate::Options::new(linktype, snaplen);
    o.extensions = flags & EXTENSIONS != 0;
    o.optimize = flags & NO_OPTIMIZE == 0;
    o
}

/// Writes `msg` into the caller's `err` buffer of `errlen` bytes, truncated and NUL-terminated.
fn write_error(err: *mut c_char, errlen: usize, msg: &str) {
    if err.is_null() || errlen == 0 {
        return;
    }
    let n = msg.len().min(errlen - 1);
    // SAFETY: the caller promises `err` points to `errlen` writable bytes; we write n < errlen
    // bytes and the terminator at index n.
    unsafe {
        ptr::copy_nonoverlapping(msg.as_ptr(), err.cast::<u8>(), n);
        *err.add(n) = 0;
    }
}

/// The packet bytes behind a C pointer and length (`NULL` means no bytes).
///
/// # Safety
/// `pkt` must be NULL or point to `caplen` readable bytes that stay valid for `'a`.
unsafe fn packet<'a>(pkt: *const u8, caplen: u32) -> &'a [u8] {
    if pkt.is_null() || caplen == 0 {
        &[]
    } else {
        // SAFETY: guaranteed by the caller (see above).
        unsafe { std::slice::from_raw_parts(pkt, caplen as usize) }
    }
}

/// The text of a C string argument, or why it cannot be used.
///
/// # Safety
/// `expr` must be NULL or a NUL-terminated string that stays valid for `'a`.
unsafe fn expression<'a>(expr: *const c_char) -> Result<&'a str, &'static str> {
    if expr.is_null() {
        return Err("expression is NULL");
    }
    // SAFETY: non-NULL and NUL-terminated (caller's promise).
    unsafe { CStr::from_ptr(expr) }
        .to_str()
        .map_err(|_| "expression is not valid UTF-8")
}

/// `const char *sift_version(void)`: the library version, a static string.
#[no_mangle]
pub extern "C" fn sift_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
