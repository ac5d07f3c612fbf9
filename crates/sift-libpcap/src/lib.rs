//! A statement-level model of libpcap 1.10's classic-BPF optimizer.
//!
//! sift reproduces the *meaning-changing* effects of libpcap's optimizer (`pcap_compile` with
//! optimization on): value numbers that go stale when edges move let libpcap delete loads of X
//! that a later indexed load still needs, block-wide deletions drop stores, and so on, and a
//! filter compiled by sift must accept exactly the packets libpcap's program accepts. This crate
//! is the reference for that emulation: a pass-by-pass reimplementation of libpcap's
//! `bpf_optimize` (optimize.c) and of its conversion of the block graph to linear code
//! (`icode_to_fcode`). Given libpcap's *unoptimized* program for an expression,
//! [`optimize`] returns libpcap's optimized program, instruction for instruction. sift's
//! lowering runs it on the code `sift-pcapgen` rebuilds from the IR as lowered (libpcap's own
//! unoptimized code for the filter) and lifts the result back into the IR, for every filter up
//! to a few hundred instructions; larger ones go through the IR-level emulation in
//! `sift-lower`, which is linear in a long chain where this model, like libpcap, is not.
//!
//! [`optimize_traced`] reports a [`Snapshot`] after every pass (blocks with their statements,
//! exit value numbers and use summaries, and the linear code at that point), to see which pass
//! deleted a given statement and why.
//!
//! The model reproduces libpcap's data flow, not a textbook one: analyses are computed once
//! per pass and read stale afterwards, deleted statements stay in place, predecessor lists keep
//! libpcap's order, and blocks keep libpcap's numbering; each of these shows in the output.
//!
//! Layout: [`graph`] (blocks and their recovery from linear code), [`linearize`], `flow`
//! (levels, predecessors, use/def), `dominators` and `edge_dominators` (over a
//! `dominator_tree`), `values` (value numbering), `block_opt` (statement numbering and
//! rewriting), `peephole`, `jumps` (edge moving), `pullups`, `interning` (merging equal
//! blocks), `driver` (the pass loops, root fix-up), [`trace`].

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod atoms;
mod block_opt;
mod dominator_tree;
mod dominators;
mod driver;
mod edge_dominators;
mod error;
mod flow;
pub mod graph;
mod interning;
mod jumps;
pub mod linearize;
mod peephole;
mod pullups;
mod state;
pub mod trace;
mod values;

use sift_bpf::Insn;

pub use error::OptimizeError;
pub use graph::Graph;
pub use trace::{Snapshot, Stage};

/// libpcap's optimized program for its unoptimized program `prog`.
///
/// A result of a single `ret #0` is what `pcap_compile` reports as "expression rejects all
/// packets" instead of returning it (see [`rejects_all`]).
///
/// libpcap's code generator switches the optimizer off for some constructs (`protochain`,
/// whose loop jumps backwards, and Geneve, whose code falls through from one block into
/// another); for those programs libpcap's "optimized" program is the unoptimized one, and the
/// model reports [`OptimizeError::JumpOutOfRange`] or [`OptimizeError::FallsThrough`].
pub fn optimize(prog: &[Insn]) -> Result<Vec<Insn>, OptimizeError> {
    run(prog, None)
}

/// Like [`optimize`], calling `sink` with a snapshot of the graph before the first pass,
/// after every pass, after block interning and after the root fix-up.
pub fn optimize_traced(
    prog: &[Insn],
    sink: &mut dyn FnMut(&Snapshot),
) -> Result<Vec<Insn>, OptimizeError> {
    run(prog, Some(sink))
}

/// The program libpcap would emit for `prog`'s block graph without optimizing it: for a
/// program libpcap emitted, `prog` itself.
pub fn relinearize(prog: &[Insn]) -> Result<Vec<Insn>, OptimizeError> {
    let mut g = Graph::from_program(prog)?;
    Ok(linearize::linearize(&mut g))
}

/// Whether an optimized program is libpcap's "rejects all packets" outcome.
pub fn rejects_all(prog: &[Insn]) -> bool {
    matches!(prog, [only] if only.code == sift_bpf::code::RET | sift_bpf::code::K && only.k == 0)
}

fn run(prog: &[Insn], sink: Option<&mut dyn FnMut(&Snapshot)>) -> Result<Vec<Insn>, OptimizeError> {
    let g = Graph::from_program(prog)?;
    let mut tracer = trace::Tracer::new(sink);
    let mut g = driver::optimize_graph(g, &mut tracer)?;
    Ok(linearize::linearize(&mut g))
}
