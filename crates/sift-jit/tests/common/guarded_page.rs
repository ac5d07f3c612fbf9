//! A packet placed right before a page the process may not read (`PROT_NONE`), so that native
//! code reading one byte past the packet faults instead of passing by luck. Generated code is
//! not instrumented by sanitizers; the guard page is what catches its over-reads.
//!
//! The one implementation for sift-jit's integration tests (through `common`) and the fuzz
//! targets `sift-jit/fuzz/fuzz_targets/jit_vs_interpreter.rs` and
//! `sift-demux/fuzz/fuzz_targets/demux_matcher.rs`, which include this file by path: test
//! support needs no place in a library's API. It uses only `std` and `libc`.

/// Two pages; the second is inaccessible. Unmapped on drop.
pub struct GuardedPage {
    base: *mut u8,
    /// The page size: the most bytes [`GuardedPage::place`] takes.
    pub page: usize,
}

impl GuardedPage {
    pub fn new() -> GuardedPage {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        // SAFETY: an anonymous private mapping of two pages; the result is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                2 * page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        let base = base.cast::<u8>();
        // SAFETY: the second page lies inside the mapping just made.
        let rc = unsafe { libc::mprotect(base.add(page).cast(), page, libc::PROT_NONE) };
        assert_eq!(rc, 0);
        GuardedPage { base, page }
    }

    /// Copies `bytes` (at most a page) so they end exactly at the guard page; returns the copy.
    pub fn place(&mut self, bytes: &[u8]) -> &[u8] {
        assert!(bytes.len() <= self.page);
        // SAFETY: the destination range [page - len, page) lies in the readable first page,
        // which this struct owns exclusively; the returned slice borrows `self`.
        unsafe {
            let start = self.base.add(self.page - bytes.len());
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), start, bytes.len());
            std::slice::from_raw_parts(start, bytes.len())
        }
    }
}

impl Drop for GuardedPage {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`; no slice into it outlives `self`.
        unsafe { libc::munmap(self.base.cast(), 2 * self.page) };
    }
}
