//! The filter languages of sift's seed papers, parsed, checked, and lifted into the IR.
//!
//! sift's pipeline has several front ends that all produce the same predicate IR
//! (`sift_ir::Function`), after which the optimizer, the bytecode verifier, the interpreters, the
//! JIT and the demultiplexer take over. This crate holds three of them, the languages that real
//! programs were written in when the papers in `../shared/seeds/` were published:
//!
//! * [`cspf`] — the 1987 stack language of "The Packet Filter" (Mogul, Rashid, Accetta): 16-bit
//!   word programs with stack actions, binary and short-circuit operators, and a priority;
//! * [`dpf`] — the 1996 declarative atoms of "DPF" (Engler, Kaashoek): conjunctions of
//!   `(offset:bits == value)` comparisons with `SHIFT` for variable-length headers. Besides the
//!   IR, a DPF filter exposes its canonical atom list, which the demultiplexer merges across
//!   filters into a trie;
//! * [`mpf`] — the 1994 Mach Packet Filter (Yuhara et al.): classic BPF plus key matching, so
//!   that filters differing only in their keys collapse into one program and a hash table, and
//!   per-filter state (static memory, postponed packets) for dispatching IP fragments. Stateless
//!   programs lift to the IR through their classic BPF expansion; [`mpf::Session`] runs the
//!   stateful ones.
//!
//! Each language has a text syntax with errors pointing at line and column, a lifting into the IR,
//! and a direct reference evaluator used to test the lifting. Nothing here panics on any input:
//! the parsers are fuzzed (`fuzz/`) and tested on random bytes.
#![forbid(unsafe_code)]

pub mod cspf;
pub mod dpf;
pub mod mpf;
mod number;
pub mod span;

pub use span::{Location, Span};
