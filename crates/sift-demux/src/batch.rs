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

impl Snapshot {
    /// Matches `packets` with CSPF delivery, calling `deliver(i, m)` for the `i`-th, in order;
    /// the same deliveries as [`Snapshot::run`] packet by packet.
    pub(crate) fn run_batch<'p>(
        &self,
        packets: impl IntoIterator<Item = (&'p [u8], u32)>,
        m: &mut Matches,
        mut deliver: impl FnMut(usize, &Matches),
    ) {
        let mut packets = packets.into_iter();
        let shapes = self.shapes.len();
        if shapes > MAX_SHAPES || shapes == 0 {
            for (i, (pkt, wire_len)) in packets.enumerate() {
                self.run(pkt, wire_len, m, false);
                deliver(i, m);
            }
            return;
        }
        if let Some(shape) = self.one_shape(false) {
            return run_batch_one_shape(shape, packets, m, deliver);
        }
        let mut chunk: [(&[u8], u32); BATCH] = [(&[], 0); BATCH];
        let mut refs = [PacketRef::new(&[], 0); BATCH];
        let mut found: [[Option<Found<'_>>; BATCH]; MAX_SHAPES] = [[None; BATCH]; MAX_SHAPES];
        let mut first = 0;
        loop {
            let n = fill(&mut packets, &mut chunk, &mut refs);
            if n == 0 {
                return;
            }
            for (shape, out) in self.shapes.iter().zip(&mut found) {
                shape.lookup_batch(&chunk[..n], &refs[..n], &mut m.regs, &mut out[..n]);
            }
            for (j, &(pkt, wire_len)) in chunk[..n].iter().enumerate() {
                self.resolve(pkt, wire_len, m, false, |s, _, _| found[s][j]);
                deliver(first + j, m);
            }
            first += n;
            if n < BATCH {
                return;
            }
        }
    }
}

/// Takes up to [`BATCH`] packets into `chunk` and `refs`; how many.
#[inline]
fn fill<'p>(
    packets: &mut impl Iterator<Item = (&'p [u8], u32)>,
    chunk: &mut [(&'p [u8], u32); BATCH],
    refs: &mut [PacketRef<'p>; BATCH],
) -> usize {
    let mut n = 0;
    for ((slot, r), (pkt, wire_len)) in chunk.iter_mut().zip(refs.iter_mut()).zip(packets) {
        *slot = (pkt, wire_len);
        *r = PacketRef::new(pkt, wire_len);
        n += 1;
    }
    n
}

/// [`Snapshot::run_batch`] when every filter is in one shape (the common server case), with
/// the bookkeeping of several shapes left out: its per-packet overhead is what a small,
/// cached table pays.
fn run_batch_one_shape<'p>(
    shape: &ShapeView,
    mut packets: impl Iterator<Item = (&'p [u8], u32)>,
    m: &mut Matches,
    mut deliver: impl FnMut(usize, &Matches),
) {
    if let (Some(Matcher::Narrow(x)), Dispatch::Narrow(t)) = (&shape.extractor.native, &shape.table)
    {
        // The common case (native code, two-word keys) without `Found`s.
        let mut refs = [PacketRef::new(&[], 0); BATCH];
        let mut values = [None; BATCH];
        let mut first = 0;
        loop {
            let mut n = 0;
            for (r, (pkt, wire_len)) in refs.iter_mut().zip(&mut packets) {
                *r = PacketRef::new(pkt, wire_len);
                n += 1;
            }
            if n == 0 {
                return;
            }
            x.lookup_batch(&t.keys, &refs[..n], &mut values);
            for (i, (value, r)) in values[..n].iter().zip(&refs).enumerate() {
                t.deliver_value(*value, m, || x.lookup_ref(&t.keys, r));
                deliver(first + i, m);
            }
            first += n;
            if n < BATCH {
                return;
            }
        }
    }
    let mut chunk: [(&[u8], u32); BATCH] = [(&[], 0); BATCH];
    let mut refs = [PacketRef::new(&[], 0); BATCH];
    let mut found = [None; BATCH];
    let mut first = 0;
    loop {
        let n = fill(&mut packets, &mut chunk, &mut refs);
        if n == 0 {
            return;
        }
        shape.lookup_batch(&chunk[..n], &refs[..n], &mut m.regs, &mut found[..n]);
        for (i, f) in found[..n].iter().enumerate() {
            deliver_in_order(*f, m);
            deliver(first + i, m);
        }
        first += n;
        if n < BATCH {
            return;
        }
    }
}
