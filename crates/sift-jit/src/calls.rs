//! The Rust side of calls: what generated code calls for the coprocessors (`contains` and
//! `member`) and the per-packet memo they need, and for `protochain`'s header walk (a loop,
//! which runs the IR's definition rather than a second native copy of it).
//!
//! Generated code receives a pointer to a [`CallContext`] (the program's compiled tables and
//! the running thread's [`Memo`]) as the last argument of both entry points, and passes it,
//! with the packet and the call's operands, to the `extern "C"` functions below, whose
//! addresses it embeds as constants. Programs without calls never touch the pointer (their
//! callers pass null and skip the memo).
//!
//! Each call is pure for the filter: it returns 0 or 1, never rejects, and reads the packet only
//! through the slice it is given (the whole captured packet), so it needs no bounds check of
//! the generated code and does not disturb the aggregated ones.

#![allow(unsafe_code)]

use std::cell::RefCell;

use sift_coproc::{Coprocessors, Memo};
use sift_ir::Chain;

/// What a call needs besides its operands. Built on the caller's stack for one run (one packet,
/// or one batch), so both references outlive every call the run makes. `memo` is `None` in
/// programs without `contains` calls.
#[repr(C)]
pub(crate) struct CallContext<'a> {
    coprocessors: &'a Coprocessors,
    memo: Option<&'a mut Memo>,
}

thread_local! {
    /// The memo of this thread's runs: its memory is reused from packet to packet.
    static MEMO: RefCell<Memo> = RefCell::new(Memo::new());
}

/// Runs `f` with a context for `coprocessors` and, when the program searches (`searches`: it
/// has `contains` calls), this thread's memo (a fresh one if the thread's is unavailable: during
/// thread teardown, or if a run were ever nested in another). A program that only looks keys up
/// never touches the memo and gets none (sparing the thread-local access).
pub(crate) fn with_context<R>(
    coprocessors: &Coprocessors,
    searches: bool,
    f: impl FnOnce(&mut CallContext<'_>) -> R,
) -> R {
    if !searches {
        let mut ctx = CallContext {
            coprocessors,
            memo: None,
        };
        return f(&mut ctx);
    }
    let mut f = Some(f);
    let mut run = |memo: &mut Memo| {
        let mut ctx = CallContext {
            coprocessors,
            memo: Some(memo),
        };
        (f.take().expect("called once"))(&mut ctx)
    };
    let done = MEMO.try_with(|m| m.try_borrow_mut().ok().map(|mut memo| run(&mut memo)));
    match done {
        Ok(Some(r)) => r,
        _ => run(&mut Memo::new()),
    }
}

impl CallContext<'_> {
    /// Starts a new packet (the memo's results belong to the previous one).
    pub(crate) fn next_packet(&mut self) {
        if let Some(memo) = &mut self.memo {
            memo.next_packet();
        }
    }
}

/// `next_packet(ctx)`: called by the batch loop before each packet of a program that searches.
pub(crate) extern "C" fn next_packet(ctx: *mut CallContext<'_>) {
    // SAFETY: generated code passes the pointer its entry point received, which the callers in
    // `native` make from a live `&mut CallContext` that no one else uses during the run.
    let ctx = unsafe { &mut *ctx };
    ctx.next_packet();
}

/// `contains(ctx, packet, caplen, set, pattern, start) -> 0 or 1`.
pub(crate) extern "C" fn contains(
    ctx: *mut CallContext<'_>,
    data: *const u8,
    caplen: u64,
    set: u32,
    pattern: u32,
    start: u32,
) -> u32 {
    // SAFETY: as in `next_packet`; `data` and `caplen` are the pointer and length of the packet
    // slice the run was called with (single entry: its arguments; batch: the descriptor built
    // from a live `&[u8]`), borrowed for the whole run.
    let (ctx, packet) = unsafe { (&mut *ctx, std::slice::from_raw_parts(data, caplen as usize)) };
    let found = match &mut ctx.memo {
        Some(memo) => ctx.coprocessors.contains(memo, set, pattern, packet, start),
        // Not reached: programs with `contains` calls run with a memo.
        None => ctx
            .coprocessors
            .contains(&mut Memo::new(), set, pattern, packet, start),
    };
    u32::from(found)
}

/// `member32(ctx, set, key) -> 0 or 1`.
pub(crate) extern "C" fn member32(ctx: *mut CallContext<'_>, set: u32, key: u32) -> u32 {
    // SAFETY: as in `next_packet`.
    let ctx = unsafe { &*ctx };
    u32::from(ctx.coprocessors.member(set, &[key]))
}

/// `member128(ctx, set, k0, k1, k2, k3) -> 0 or 1` (most significant word first).
pub(crate) extern "C" fn member128(
    ctx: *mut CallContext<'_>,
    set: u32,
    k0: u32,
    k1: u32,
    k2: u32,
    k3: u32,
) -> u32 {
    // SAFETY: as in `next_packet`.
    let ctx = unsafe { &*ctx };
    u32::from(ctx.coprocessors.member(set, &[k0, k1, k2, k3]))
}

/// `protochain(packet, caplen, ip6, base, proto, offset, target)`: the protocol the walk stops
/// at, with bit 32 set, or 0 when it rejects the packet.
pub(crate) extern "C" fn protochain(
    data: *const u8,
    caplen: u64,
    ip6: u32,
    base: u32,
    proto: u32,
    offset: u32,
    target: u32,
) -> u64 {
    // SAFETY: as in `contains`: the packet slice the run was called with.
    let packet = unsafe { std::slice::from_raw_parts(data, caplen as usize) };
    let chain = if ip6 != 0 { Chain::Ip6 } else { Chain::Ip };
    match sift_ir::protochain::walk(packet, chain, base, proto, offset, target) {
        Some(p) => 1 << 32 | u64::from(p),
        None => 0,
    }
}

/// The helpers' addresses and signatures, as generated code calls them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Helper {
    NextPacket,
    Contains,
    Member32,
    Member128,
    Protochain,
}

impl Helper {
    pub(crate) fn address(self) -> usize {
        match self {
            Helper::NextPacket => next_packet as extern "C" fn(*mut CallContext<'_>) as usize,
            Helper::Contains => {
                contains
                    as extern "C" fn(*mut CallContext<'_>, *const u8, u64, u32, u32, u32) -> u32
                    as usize
            }
            Helper::Member32 => {
                member32 as extern "C" fn(*mut CallContext<'_>, u32, u32) -> u32 as usize
            }
            Helper::Member128 => {
                member128 as extern "C" fn(*mut CallContext<'_>, u32, u32, u32, u32, u32) -> u32
                    as usize
            }
            Helper::Protochain => {
                protochain as extern "C" fn(*const u8, u64, u32, u32, u32, u32, u32) -> u64 as usize
            }
        }
    }
}
