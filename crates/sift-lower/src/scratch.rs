//! libpcap's scratch registers (`M[0]`..`M[15]`): which register each value gets, and the stores
//! the generated code makes.
//!
//! libpcap keeps every arithmetic value, the offsets `geneve` computes and `protochain`'s saved
//! protocol in scratch registers, handed out by `alloc_reg` and given back by `free_reg`. The
//! numbering is visible in one place: a test that reads `geneve`'s offsets on a path where that
//! `geneve` did not match reads whatever the path last stored in the register, which may be an
//! earlier arithmetic value that had the same number. So the allocation is reproduced exactly
//! and every store is logged with its block, for [`crate::offset_reads`].

use sift_ir::protochain::Chain;
use sift_ir::{Block, Value};

/// A scratch register's number.
pub(crate) type Register = u8;

/// libpcap's `alloc_reg`/`free_reg`, shared with the rebuild of libpcap's statements (its slot
/// numbers are `u32`; they are below 16, so a [`Register`]).
pub(crate) use sift_pcapgen::Registers;

/// A store to a scratch register. Stores are logged in the order they execute within their
/// block.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RegisterWrite {
    pub block: Block,
    pub register: Register,
    pub value: Stored,
}

/// What a store puts in its register.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Stored {
    Value(Value),
    /// `protochain`'s loop, which saves the protocol of each header it steps to: after the
    /// walk from protocol `first` that stopped at `last`, the register holds `last` if the walk
    /// took a step, else what it held before.
    Walk {
        chain: Chain,
        first: Value,
        last: Value,
        target: u32,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocation_follows_libpcap() {
        let mut r = Registers::default();
        assert_eq!(r.alloc(), Some(0));
        assert_eq!(r.alloc(), Some(1));
        r.free(0);
        // The search starts at the current register and goes on from there: 0 is free again,
        // but 1 is the current one and taken, so 2 comes next.
        assert_eq!(r.alloc(), Some(2));
        r.free(2);
        r.free(1);
        assert_eq!(r.alloc(), Some(2));
        for k in 3..16 {
            assert_eq!(r.alloc(), Some(k));
        }
        // Wraps around to the registers freed before.
        assert_eq!(r.alloc(), Some(0));
        assert_eq!(r.alloc(), Some(1));
        assert_eq!(r.alloc(), None);
    }
}
