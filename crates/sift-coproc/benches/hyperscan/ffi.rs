//! A minimal binding of Hyperscan 5.4 (`libhs`), only what the search benchmark compares
//! against: compile literals into a block-mode database, scan a buffer, report which
//! patterns occur. The only `unsafe` code of the crate lives here (the library itself forbids
//! it); every block says why it is sound.

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void, CStr, CString};
use std::ptr;

#[repr(C)]
struct HsDatabase {
    _opaque: [u8; 0],
}

#[repr(C)]
struct HsScratch {
    _opaque: [u8; 0],
}

#[repr(C)]
struct HsCompileError {
    message: *mut c_char,
    expression: c_int,
}

type MatchHandler = unsafe extern "C" fn(
    id: c_uint,
    from: c_ulonglong,
    to: c_ulonglong,
    flags: c_uint,
    context: *mut c_void,
) -> c_int;

const HS_SUCCESS: c_int = 0;
const HS_FLAG_CASELESS: c_uint = 1;
const HS_FLAG_SINGLEMATCH: c_uint = 8;
const HS_MODE_BLOCK: c_uint = 1;

// Linked by build.rs (`cargo:rustc-link-lib=hs`) when the `hyperscan` feature is on.
extern "C" {
    fn hs_compile_multi(
        expressions: *const *const c_char,
        flags: *const c_uint,
        ids: *const c_uint,
        elements: c_uint,
        mode: c_uint,
        platform: *const c_void,
        db: *mut *mut HsDatabase,
        error: *mut *mut HsCompileError,
    ) -> c_int;
    fn hs_free_compile_error(error: *mut HsCompileError) -> c_int;
    fn hs_free_database(db: *mut HsDatabase) -> c_int;
    fn hs_alloc_scratch(db: *const HsDatabase, scratch: *mut *mut HsScratch) -> c_int;
    fn hs_free_scratch(scratch: *mut HsScratch) -> c_int;
    fn hs_scan(
        db: *const HsDatabase,
        data: *const c_char,
        length: c_uint,
        flags: c_uint,
        scratch: *mut HsScratch,
        on_event: MatchHandler,
        context: *mut c_void,
    ) -> c_int;
}

/// A compiled database of literals plus its scratch space.
pub struct Hyperscan {
    db: *mut HsDatabase,
    scratch: *mut HsScratch,
}

/// A literal as a Hyperscan expression: every byte escaped as `\xHH`, so that no byte has a
/// regex meaning.
fn escape(literal: &[u8]) -> CString {
    let text: String = literal.iter().map(|b| format!("\\x{b:02x}")).collect();
    CString::new(text).expect("escaped text has no NUL")
}

impl Hyperscan {
    /// Compiles `(bytes, nocase)` literals; pattern `i` reports id `i`, at most once per scan.
    pub fn compile(literals: &[(Vec<u8>, bool)]) -> Result<Hyperscan, String> {
        let expressions: Vec<CString> = literals.iter().map(|(b, _)| escape(b)).collect();
        let pointers: Vec<*const c_char> = expressions.iter().map(|e| e.as_ptr()).collect();
        let flags: Vec<c_uint> = literals
            .iter()
            .map(|&(_, nocase)| HS_FLAG_SINGLEMATCH | if nocase { HS_FLAG_CASELESS } else { 0 })
            .collect();
        let ids: Vec<c_uint> = (0..literals.len() as c_uint).collect();
        let mut db = ptr::null_mut();
        let mut error = ptr::null_mut();
        // SAFETY: the three arrays hold `literals.len()` elements each and outlive the call;
        // every expression pointer is a NUL-terminated string owned by `expressions`; a null
        // platform means "this machine"; `db` and `error` are valid places for the out-pointers.
        let status = unsafe {
            hs_compile_multi(
                pointers.as_ptr(),
                flags.as_ptr(),
                ids.as_ptr(),
                literals.len() as c_uint,
                HS_MODE_BLOCK,
                ptr::null(),
                &mut db,
                &mut error,
            )
        };
        if status != HS_SUCCESS {
            if error.is_null() {
                return Err(format!("hs_compile_multi failed with status {status}"));
            }
            // SAFETY: on failure Hyperscan sets `error` to a valid compile error whose message
            // is a NUL-terminated string; we read it before freeing the error exactly once.
            let message = unsafe {
                let message = CStr::from_ptr((*error).message)
                    .to_string_lossy()
                    .into_owned();
                let expression = (*error).expression;
                hs_free_compile_error(error);
                format!("expression {expression}: {message}")
            };
            return Err(message);
        }
        let mut scratch = ptr::null_mut();
        // SAFETY: `db` is the valid database just compiled; `scratch` is a valid out-pointer
        // (null asks for a new allocation).
        let status = unsafe { hs_alloc_scratch(db, &mut scratch) };
        if status != HS_SUCCESS {
            // SAFETY: `db` is valid and freed once, here, as it will not be returned.
            unsafe { hs_free_database(db) };
            return Err(format!("hs_alloc_scratch failed with status {status}"));
        }
        Ok(Hyperscan { db, scratch })
    }

    /// Sets `found[id]` for every pattern that occurs in `data`; returns the number of
    /// reported matches.
    pub fn scan(&mut self, data: &[u8], found: &mut [bool]) -> usize {
        struct Context<'a> {
            found: &'a mut [bool],
            matches: usize,
        }
        unsafe extern "C" fn on_match(
            id: c_uint,
            _from: c_ulonglong,
            _to: c_ulonglong,
            _flags: c_uint,
            context: *mut c_void,
        ) -> c_int {
            // SAFETY: `context` is the `&mut Context` passed to `hs_scan` below, which is
            // alive and not otherwise accessed for the duration of the scan.
            let context = unsafe { &mut *context.cast::<Context>() };
            if let Some(slot) = context.found.get_mut(id as usize) {
                *slot = true;
            }
            context.matches += 1;
            0
        }
        let mut context = Context { found, matches: 0 };
        let length = c_uint::try_from(data.len()).expect("buffer under 4 GiB");
        // SAFETY: `db` and `scratch` are valid and owned by `self` (the `&mut self` borrow
        // guarantees the scratch is not used concurrently); `data` is valid for `length`
        // bytes; the callback only touches `context`, which outlives the call.
        let status = unsafe {
            hs_scan(
                self.db,
                data.as_ptr().cast(),
                length,
                0,
                self.scratch,
                on_match,
                ptr::addr_of_mut!(context).cast(),
            )
        };
        assert_eq!(status, HS_SUCCESS, "hs_scan failed");
        context.matches
    }
}

impl Drop for Hyperscan {
    fn drop(&mut self) {
        // SAFETY: both were allocated by Hyperscan in `compile`, are owned by `self` and are
        // freed exactly once, here.
        unsafe {
            hs_free_scratch(self.scratch);
            hs_free_database(self.db);
        }
    }
}
