//! The predicate IR: the middle of sift's pipeline.
//!
//! Front ends (the pcap-filter lowering, classic BPF import, the seeds' languages) produce a
//! [`Function`]: a control-flow graph of basic blocks in SSA form. Each block computes values
//! (constants, packet loads, arithmetic) and ends in a [`Terminator`]: a two-way branch on a
//! comparison, a multiway `Switch` on a value (a lookup table), an unconditional jump, or a
//! return of the number of bytes to keep (a constant or a computed value; 0 rejects).
//! Blocks take parameters instead of phi nodes, as in Cranelift. The graph is acyclic: filters
//! always terminate.
//!
//! Back ends (optimizer, bytecode, classic BPF, eBPF) consume it. Two pieces live here because
//! every stage relies on them:
//!
//! * [`verify`](mod@verify) checks every structural invariant (targets exist, the graph is acyclic, every
//!   value is defined before it is used and dominates its uses, argument counts match);
//! * [`interp`] is the reference interpreter. Its semantics are the semantics of the IR, and so
//!   of every engine: a packet load outside the captured bytes rejects the packet, as does a
//!   division by zero, exactly as classic BPF does.
//!
//! Back ends that give block parameters registers share [`moves`], which orders the parallel
//! copies of an edge's arguments.
//!
//! Two instructions call coprocessors (NetVM's term): [`Inst::Contains`] searches the payload
//! for a pattern, [`Inst::Member`] looks a key up in a set. They are pure and never reject;
//! [`coproc`] defines them, and the tables they use travel with the function. Back ends without
//! the coprocessor write set lookups as comparisons ([`set_lookups`]).
//!
//! One instruction loops: [`Inst::Protochain`] walks a chain of IPv6 extension / AH headers
//! as libpcap's `protochain` does. The walk always ends (see [`protochain`]); back ends that
//! cannot loop unroll it ([`protochain::unroll`]).

#![forbid(unsafe_code)]

pub mod coproc;
mod display;
mod dominance;
mod function;
pub mod interp;
pub mod moves;
mod order;
mod parse;
pub mod protochain;
pub mod runs;
pub mod set_lookups;
pub mod verify;

pub use coproc::{KeyWidth, Pattern, PatternError, PatternSet, ValueSet};
pub use display::write_tables;
pub use function::{
    thin_vec, BinOp, Block, BlockData, CmpOp, Function, Inst, Insts, LoadSize, Target, Terminator,
    ThinVec, Value, INLINE_INSTS,
};
pub use interp::{Cache, Interpreter};
pub use parse::{parse_function, ParseError};
pub use protochain::Chain;
pub use verify::{verify, VerifyError};
