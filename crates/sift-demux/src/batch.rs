//! Batch matching: the table lookups of several packets overlapped.
//!
//! In a large table the one costly step of a match is the probe's first slot, a cache miss
//! (tens of nanoseconds from main memory). Matching packets one by one serializes those
//! misses: each packet's extraction, hash, probe and delivery make too long a stretch of
//! work for the processor to reach the next packet's probe before the current one's data
//! arrives. A batch is matched in chunks of [`BATCH`] packets: for each shape, one call of its
//! native batch matcher (`sift_jit::demux_matcher`) checks, keys, hashes and walks to the
//! leaf every packet of the chunk, then reads the first slot of every probe in a short loop
//! (the loads are independent, so they are all in flight together), then probes, now in
//! cache; over a table small enough to stay in cache it matches the chunk's packets one after
//! the other in one loop of generated code instead.
//! Then every packet's delivery is resolved exactly as a single match resolves it
//! ([`Snapshot::resolve`] and [`deliver_in_order`] are shared) and handed to the caller.
//! Interpreted shapes are looked up packet by packet within the chunk.
//!
//! A chunk is a piece of the caller's slice when the caller holds its packets as descriptors
//! ([`crate::Reader::match_batch_refs`]), or built on the stack from its iterator (a copy of
//! each packet's pointer and lengths, which measured a few tenths of a nanosecond per packet).
//! A chunk's state is a fixed array on the stack, so a batch allocates nothing per packet; a
//! snapshot with more than [`MAX_SHAPES`] shapes is matched packet by packet (its matching
//! cost is in the shapes' checks, not in one probe). The whole batch uses one snapshot: an
//! update published during the batch is seen by the next batch, not by later packets of
//! this one.

use sift_jit::demux_matcher::BATCH;
use sift_jit::PacketRef;

use crate::dispatch::{Dispatch, Found};
use crate::native::Matcher;
use crate::snapshot::{deliver_in_order, Matches, ShapeView, Snapshot};

/// Most shapes a snapshot may have to be matched in chunks (beyond, its cost is in the
/// shapes' checks, not in one probe, and it is matched packet by packet).
const MAX_SHAPES: usize = 8;

/// A batch's packets, taken in chunks of descriptors (the native matchers' input).
pub(crate) trait Chunks<'p> {
    /// The next up to [`BATCH`] packets, empty at the end; `room`, to build them in where the
    /// source does not hold them as descriptors already.
    fn next_chunk<'c>(&'c mut self, room: &'c mut [PacketRef<'p>; BATCH]) -> &'c [PacketRef<'p>];
}

/// Packets as `(bytes, wire length)` pairs: each chunk is built.
pub(crate) struct Pairs<I>(pub(crate) I);

impl<'p, I: Iterator<Item = (&'p [u8], u32)>> Chunks<'p> for Pairs<I> {
    #[inline]
    fn next_chunk<'c>(&'c mut self, room: &'c mut [PacketRef<'p>; BATCH]) -> &'c [PacketRef<'p>] {
        let mut n = 0;
        for (r, (pkt, wire_len)) in room.iter_mut().zip(&mut self.0) {
            *r = PacketRef::new(pkt, wire_len);
            n += 1;
        }
        &room[..n]
    }
}

/// Packets as descriptors already: each chunk is a piece of the caller's slice.
pub(crate) struct Refs<'s, 'p>(pub(crate) &'s [PacketRef<'p>]);

impl<'p> Chunks<'p> for Refs<'_, 'p> {
    #[inline]
    fn next_chunk<'c>(&'c mut self, _: &'c mut [PacketRef<'p>; BATCH]) -> &'c [PacketRef<'p>] {
        let (now, rest) = self.0.split_at(self.0.len().min(BATCH));
        self.0 = rest;
        now
    }
}

/// Calls `f(first, chunk)` for each chunk of `packets` (`first`: the index of the chunk's
/// first packet in the batch). A chunk shorter than [`BATCH`] is the last: the source is not
/// asked again (an iterator need not be fused).
#[inline(always)]
fn for_each_chunk<'p>(mut packets: impl Chunks<'p>, mut f: impl FnMut(usize, &[PacketRef<'p>])) {
    let mut room = [PacketRef::new(&[], 0); BATCH];
    let mut first = 0;
    loop {
        let chunk = packets.next_chunk(&mut room);
        let n = chunk.len();
        if n == 0 {
            return;
        }
        f(first, chunk);
        first += n;
        if n < BATCH {
            return;
        }
    }
}

impl Snapshot {
    /// Matches `packets` with CSPF delivery, calling `deliver(i, m)` for the `i`-th, in order;
    /// the same deliveries as [`Snapshot::run`] packet by packet.
    pub(crate) fn run_batch<'p>(
        &self,
        packets: impl Chunks<'p>,
        m: &mut Matches,
        mut deliver: impl FnMut(usize, &Matches),
    ) {
        let shapes = self.shapes.len();
        if shapes > MAX_SHAPES || shapes == 0 {
            return for_each_chunk(packets, |first, chunk| {
                for (j, r) in chunk.iter().enumerate() {
                    self.run(r.data(), r.wire_len(), m, false);
                    deliver(first + j, m);
                }
            });
        }
        if let Some(shape) = self.one_shape(false) {
            return run_batch_one_shape(shape, packets, m, deliver);
        }
        let mut found: [[Option<Found<'_>>; BATCH]; MAX_SHAPES] = [[None; BATCH]; MAX_SHAPES];
        for_each_chunk(packets, |first, chunk| {
            let n = chunk.len();
            for (shape, out) in self.shapes.iter().zip(&mut found) {
                shape.lookup_batch(chunk, &mut m.regs, &mut out[..n]);
            }
            for (j, r) in chunk.iter().enumerate() {
                self.resolve(r.data(), r.wire_len(), m, false, |s, _, _| found[s][j]);
                deliver(first + j, m);
            }
        });
    }
}

/// [`Snapshot::run_batch`] when every filter is in one shape (the common server case), with
/// the bookkeeping of several shapes left out: its per-packet overhead is what a small,
/// cached table pays.
fn run_batch_one_shape<'p>(
    shape: &ShapeView,
    packets: impl Chunks<'p>,
    m: &mut Matches,
    mut deliver: impl FnMut(usize, &Matches),
) {
    if let (Some(Matcher::Narrow(x)), Dispatch::Narrow(t)) = (&shape.extractor.native, &shape.table)
    {
        // The common case (native code, two-word keys) without `Found`s: the native code
        // gives each packet's slot value, and most deliveries are decided by it alone.
        let mut values = [None; BATCH];
        return for_each_chunk(packets, |first, chunk| {
            let n = x.lookup_batch(&t.keys, chunk, &mut values);
            for (i, value) in values[..n].iter().enumerate() {
                t.deliver_value(*value, m, || x.lookup_ref(&t.keys, &chunk[i]));
                deliver(first + i, m);
            }
        });
    }
    let mut found = [None; BATCH];
    for_each_chunk(packets, |first, chunk| {
        let n = chunk.len();
        shape.lookup_batch(chunk, &mut m.regs, &mut found[..n]);
        for (i, f) in found[..n].iter().enumerate() {
            deliver_in_order(*f, m);
            deliver(first + i, m);
        }
    });
}
