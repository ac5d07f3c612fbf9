//! Batch matching: the table lookups of several packets overlapped.
//!
//! In a large table the one costly step of a match is the probe's first slot, a cache miss
//! (tens of nanoseconds from main memory). Matching packets one by one serializes those
//! misses: each packet's extraction, hash, probe and delivery make too long a stretch of
//! work for the processor to reach the next packet's probe before the current one's data
//! arrives. A batch is matched in chunks, in two phases:
//!
//! 1. for every packet of the chunk and every shape: run the extractor and, where it
//!    accepts, hash the key and read the probe's first slot (a software prefetch: the loads
//!    are independent of one another, and nothing waits on their values, so they are all in
//!    flight together);
//! 2. for every packet: probe with the saved key and hash (now in cache) and resolve the
//!    delivery exactly as a single match does ([`Snapshot::resolve`] and
//!    [`deliver_in_order`] are shared), then hand it to the caller.
//!
//! The phase-1 state of a chunk is a fixed array on the stack ([`LOOKUPS`] lookups), so a
//! batch allocates nothing per packet; a chunk holds `LOOKUPS / shapes` packets, and a
//! snapshot with more shapes than that is matched packet by packet (its matching cost is in
//! the extractors, not in one probe). The whole batch uses one snapshot: an update published
//! during the batch is seen by the next batch, not by later packets of this one.

use crate::shape::Key;
use crate::snapshot::{deliver_in_order, Matches, ShapeView, Snapshot};
use crate::table::TableSpot;

/// Lookups (packets × shapes) per chunk. 32 one-shape packets are enough to keep the
/// processor's outstanding misses busy (about 10-12 at once on current x86-64 cores) while
/// the chunk's keys (2 KB) stay in L1.
const LOOKUPS: usize = 32;

/// One lookup's phase-1 result: the packet's key and, when the shape's checks accepted
/// it, where its probe searches (computed once: phase 2 does not walk the table again).
#[derive(Clone, Copy, Default)]
struct Pending<'s> {
    key: Key,
    /// The shape's checks accepted the packet (the key is valid).
    accepted: bool,
    spot: Option<TableSpot<'s>>,
}

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
        if shapes > LOOKUPS || shapes == 0 {
            for (i, (pkt, wire_len)) in packets.enumerate() {
                self.run(pkt, wire_len, m, false);
                deliver(i, m);
            }
            return;
        }
        if let Some(shape) = self.one_shape(false) {
            return self.run_batch_one_shape(shape, packets, m, deliver);
        }
        let per_chunk = LOOKUPS / shapes;
        let mut chunk: [(&[u8], u32); LOOKUPS] = [(&[], 0); LOOKUPS];
        let mut pending = [Pending::default(); LOOKUPS];
        let mut first = 0;
        loop {
            let mut n = 0;
            for (slot, p) in chunk[..per_chunk].iter_mut().zip(&mut packets) {
                *slot = p;
                n += 1;
            }
            if n == 0 {
                return;
            }
            self.prepare(&chunk[..n], &mut pending, m);
            for (j, &(pkt, wire_len)) in chunk[..n].iter().enumerate() {
                let mine = &pending[j * shapes..(j + 1) * shapes];
                self.resolve(pkt, wire_len, m, false, |s, _, _| {
                    let p = &mine[s];
                    p.spot.and_then(|spot| spot.get(&p.key))
                });
                deliver(first + j, m);
            }
            first += n;
            if n < per_chunk {
                return;
            }
        }
    }

    /// [`Snapshot::run_batch`] when every filter is in one shape (the common server case),
    /// with the bookkeeping of several shapes left out: its per-packet overhead is what a
    /// small, cached table pays.
    fn run_batch_one_shape<'p>(
        &self,
        shape: &ShapeView,
        mut packets: impl Iterator<Item = (&'p [u8], u32)>,
        m: &mut Matches,
        mut deliver: impl FnMut(usize, &Matches),
    ) {
        let table = &shape.table;
        let mut keys = [Key::default(); LOOKUPS];
        let mut spots: [Option<TableSpot<'_>>; LOOKUPS] = [None; LOOKUPS];
        let mut accepted = [false; LOOKUPS];
        let mut first = 0;
        loop {
            let mut n = 0;
            for (i, (pkt, wire_len)) in (&mut packets).take(LOOKUPS).enumerate() {
                keys[i] = Key::default();
                accepted[i] = shape
                    .extractor
                    .extract(pkt, wire_len, &mut m.regs, &mut keys[i]);
                n = i + 1;
            }
            let mut touched = 0u64;
            for i in 0..n {
                spots[i] = None;
                if accepted[i] {
                    let spot = table.spot(&keys[i], &self.hasher);
                    touched ^= spot.touch();
                    spots[i] = Some(spot);
                }
            }
            std::hint::black_box(touched);
            for i in 0..n {
                let entries = spots[i].and_then(|spot| spot.get(&keys[i]));
                deliver_in_order(entries, m);
                deliver(first + i, m);
            }
            first += n;
            if n < LOOKUPS {
                return;
            }
        }
    }

    /// Phase 1 for a chunk: extract every packet's key in every shape, hash it and touch
    /// the slot its probe starts at. `pending[j * shapes + s]` is packet `j` in shape `s`.
    #[inline]
    fn prepare<'s>(
        &'s self,
        chunk: &[(&[u8], u32)],
        pending: &mut [Pending<'s>; LOOKUPS],
        m: &mut Matches,
    ) {
        let shapes = self.shapes.len();
        for (j, &(pkt, wire_len)) in chunk.iter().enumerate() {
            for (s, shape) in self.shapes.iter().enumerate() {
                let p = &mut pending[(j * shapes + s) % LOOKUPS];
                p.key = Key::default();
                p.spot = None;
                p.accepted = shape
                    .extractor
                    .extract(pkt, wire_len, &mut m.regs, &mut p.key);
            }
        }
        // A separate loop: short, so that many of its loads are in flight at once.
        let mut touched = 0u64;
        for (i, p) in pending[..chunk.len() * shapes].iter_mut().enumerate() {
            if p.accepted {
                let spot = self.shapes[i % shapes].table.spot(&p.key, &self.hasher);
                touched ^= spot.touch();
                p.spot = Some(spot);
            }
        }
        std::hint::black_box(touched);
    }
}
