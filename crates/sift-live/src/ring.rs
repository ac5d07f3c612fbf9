//! The memory-mapped `TPACKET_V3` receive ring: a fixed number of equally sized blocks, each
//! owned either by the kernel (which fills it with packets) or by us (after the kernel retires it,
//! full or on the block timeout), as told by the block's status word.
//!
//! This module is one of the two allowed to use `unsafe` (with [`crate::sys`]): it maps the ring,
//! reads and writes the status words atomically, and lends out a block's bytes as a slice while
//! the block belongs to user space. It does not interpret the bytes; [`crate::block`] parses
//! them, treating them as untrusted.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

/// Byte offset of `block_status` in `struct tpacket_block_desc` (after `version` and
/// `offset_to_priv`).
const BLOCK_STATUS_OFFSET: usize = 8;

/// The geometry asked of the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingLayout {
    /// Bytes per block: a multiple of the page size.
    pub block_size: usize,
    /// Number of blocks.
    pub block_count: usize,
    /// The `tp_frame_size` the kernel checks (V3 frames are variable; this only has to divide
    /// a block and be 16-aligned).
    pub frame_size: usize,
    /// Milliseconds after which the kernel hands over a block that is not full
    /// (`tp_retire_blk_tov`), so that low-rate traffic is delivered.
    pub retire_timeout_ms: u32,
}

impl RingLayout {
    /// The `PACKET_RX_RING` request for this layout, or `None` if a field does not fit the
    /// kernel's 32-bit fields.
    pub fn request(&self) -> Option<libc::tpacket_req3> {
        let frames_per_block = self.block_size / self.frame_size;
        Some(libc::tpacket_req3 {
            tp_block_size: u32::try_from(self.block_size).ok()?,
            tp_block_nr: u32::try_from(self.block_count).ok()?,
            tp_frame_size: u32::try_from(self.frame_size).ok()?,
            tp_frame_nr: u32::try_from(frames_per_block.checked_mul(self.block_count)?).ok()?,
            tp_retire_blk_tov: self.retire_timeout_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        })
    }

    /// Total bytes of the mapping.
    pub fn total_size(&self) -> Option<usize> {
        self.block_size.checked_mul(self.block_count)
    }
}

/// The mapped ring. Dropping it unmaps the memory (the socket must stay open until then, which
/// [`crate::Capture`]'s field order guarantees).
#[derive(Debug)]
pub struct Ring {
    base: NonNull<u8>,
    block_size: usize,
    block_count: usize,
}

// SAFETY: the mapping is owned by this value alone; nothing in it is tied to the creating
// thread, and every access goes through `&self`/`&mut self`.
unsafe impl Send for Ring {}

impl Ring {
    /// Maps the ring the kernel set up on `fd` with `layout`.
    pub fn map(fd: BorrowedFd<'_>, layout: &RingLayout) -> io::Result<Ring> {
        let len = layout
            .total_size()
            .filter(|&l| l > 0 && layout.block_size >= BLOCK_STATUS_OFFSET + 4)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "ring size"))?;
        // SAFETY: a fresh shared mapping of the socket's ring; the kernel validated the length
        // when it accepted PACKET_RX_RING with the same layout.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base =
            NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Ring {
            base,
            block_size: layout.block_size,
            block_count: layout.block_count,
        })
    }

    /// Number of blocks.
    pub fn block_count(&self) -> usize {
        self.block_count
    }

    /// Bytes per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// The status word of block `index`, shared with the kernel.
    fn status_word(&self, index: usize) -> &AtomicU32 {
        assert!(index < self.block_count, "block index out of range");
        // SAFETY: `index < block_count`, so the word lies inside the mapping; blocks are
        // page-aligned and the offset is 8, so it is 4-aligned; the kernel accesses it as a
        // 32-bit word too, and the mapping lives as long as `self`.
        unsafe {
            &*self
                .base
                .as_ptr()
                .add(index * self.block_size + BLOCK_STATUS_OFFSET)
                .cast::<AtomicU32>()
        }
    }

    /// The status of block `index` (`TP_STATUS_*` bits). Acquire ordering: when the kernel has
    /// set `TP_STATUS_USER`, everything it wrote into the block before is visible.
    pub fn status(&self, index: usize) -> u32 {
        self.status_word(index).load(Ordering::Acquire)
    }

    /// Whether block `index` has been handed to user space.
    pub fn is_user_owned(&self, index: usize) -> bool {
        self.status(index) & libc::TP_STATUS_USER != 0
    }

    /// The bytes of block `index`. Only meaningful while [`Ring::is_user_owned`] holds: the
    /// kernel does not write a block it has handed over until [`Ring::release`] gives it back,
    /// and `release` takes `&mut self`, so no slice outlives the ownership.
    pub fn block(&self, index: usize) -> &[u8] {
        assert!(index < self.block_count, "block index out of range");
        // SAFETY: the range lies inside the mapping (index < block_count), which lives as long
        // as `self`; the kernel leaves a user-owned block alone, and we never write it except
        // through the status word in `release`, which needs `&mut self`.
        unsafe {
            std::slice::from_raw_parts(
                self.base.as_ptr().add(index * self.block_size),
                self.block_size,
            )
        }
    }

    /// Gives block `index` back to the kernel. Release ordering: our reads of the block happen
    /// before the kernel may overwrite it.
    pub fn release(&mut self, index: usize) {
        self.status_word(index)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `base` and the length are exactly what `mmap` returned and accepted; no slice
        // of the mapping can be alive while `self` is being dropped.
        unsafe {
            libc::munmap(
                self.base.as_ptr().cast(),
                self.block_size * self.block_count,
            );
        }
    }
}
