//! The analyses' decisions for one program, shared by the single and batch functions.

use sift_bytecode::{Insn, Program, Width};

use crate::bounds::Bounds;
use crate::branchless;
use crate::coalesce::{pair_at, Pair};
use crate::flow::Flow;
use crate::Options;

/// Size of [`crate::PacketRef`] and the offsets of its fields (checked by a test in lib.rs).
pub(crate) const PACKET_REF_SIZE: i64 = 24;
pub(crate) const PACKET_REF_LEN: i32 = 8;
pub(crate) const PACKET_REF_WIRE_LEN: i32 = 16;

/// Which function is being emitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `(packet: ptr, caplen: i64, wire_len: i32, ctx: ptr) -> i32`.
    Single,
    /// `(packets: *const PacketRef, count: i64, out: *mut u32, ctx: ptr)`.
    Batch,
}

/// Everything the analyses decided, shared by both shapes.
pub(crate) struct Plan<'p> {
    pub program: &'p Program,
    pub flow: Flow,
    pub bounds: Bounds,
    pub pairs: Vec<Option<Pair>>,
    /// Emit the program without conditional branches ([`crate::branchless`]).
    pub branchless: bool,
    /// In branch-free code, the result needs no test of the entry bound: a packet shorter than
    /// it, whose loads then read zeros, is rejected by the tests themselves (set by
    /// [`crate::branchless::short_packets_fail`], which runs the program on zeros).
    pub short_packets_fail: bool,
    pub options: Options,
}

impl<'p> Plan<'p> {
    /// The native byte order width of the definition instruction `i` reads in slot 0, if any.
    pub(crate) fn native_operand(&self, i: usize) -> Option<Width> {
        self.flow.native_read(i, 0)
    }

    pub(crate) fn new(program: &'p Program, options: &Options) -> Plan<'p> {
        let flow = Flow::new(program);
        let bounds = Bounds::new(program, &flow, options.aggregate_bounds);
        let mut flow = flow;
        if !options.native_byte_order {
            flow.native_order.iter_mut().for_each(|w| *w = None);
        }
        let pairs = (0..program.code.len())
            .map(|i| {
                (options.coalesce && options.native_byte_order)
                    .then(|| pair_at(program, &flow, &bounds, i))
                    .flatten()
            })
            .collect();
        let branchless = options.branchless && branchless::eligible(program, &flow.reachable);
        Plan {
            program,
            flow,
            bounds,
            pairs,
            branchless,
            short_packets_fail: false,
            options: options.clone(),
        }
    }
}

/// Whether the program has `contains` calls (which keep results in the per-packet memo).
pub(crate) fn searches(p: &Program) -> bool {
    p.code.iter().any(|i| matches!(i, Insn::Contains { .. }))
}
