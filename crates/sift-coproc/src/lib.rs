//! The fast runtime of sift's coprocessor calls.
//!
//! `sift-ir` gives filters two NetVM-style "coprocessor" instructions and defines what they
//! compute, as plainly as possible:
//! - [`Inst::Contains`](sift_ir::Inst::Contains): whether a pattern of a
//!   [`PatternSet`] occurs in the packet from some offset on (reference:
//!   [`PatternSet::occurs`](sift_ir::PatternSet::occurs), a window-by-window search);
//! - [`Inst::Member`](sift_ir::Inst::Member): whether a key lies in a
//!   [`ValueSet`] (reference: a binary search over sorted ranges).
//!
//! This crate computes the same answers fast, for the engines that run filters on live traffic:
//! the bytecode interpreter, the Cranelift JIT and the demultiplexer. [`Coprocessors::compile`]
//! turns a function's tables into search structures once; the engines then call
//! [`Coprocessors::contains`] and [`Coprocessors::member`] per packet, with a per-thread
//! [`Memo`] that lets every `contains` call on a packet share one pass over the payload.
//!
//! Modules, one concept each:
//! - `patterns`: multi-pattern search finding every pattern of a set in one pass over the
//!   payload (`aho-corasick` with its SIMD prefilters for small literal sets, a hashed 4-byte
//!   window filter for large ones, one `RegexSet` for the regular expressions);
//! - `sets`: constant-time membership (bitmaps, hashed address prefixes after prefix
//!   expansion);
//! - `memo`: the per-packet memory of search results;
//! - `shared`: the union of several functions' pattern sets, searched once per packet for all
//!   of them ([`SharedSearch`], used by the demultiplexer);
//! - `error`: why a table failed to compile.
//!
//! Every answer equals the reference's on every input; the differential tests in `tests/`
//! check that on random tables, payloads and keys. Nothing panics on any input: offsets past
//! the packet find nothing, and out-of-range table indexes (which the IR verifier rules out)
//! answer 0.

#![forbid(unsafe_code)]

mod error;
mod memo;
mod patterns;
mod sets;
mod shared;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use sift_ir::{PatternSet, ValueSet};

pub use error::{CompileError, CompileErrorReason};
pub use memo::Memo;
pub use patterns::searches_on_this_thread;
pub use shared::SharedSearch;

use patterns::PatternSearcher;
use sets::SetMatcher;

/// The compiled coprocessor tables of one function.
#[derive(Debug)]
pub struct Coprocessors {
    /// Distinguishes these tables' results from other tables' in a shared [`Memo`].
    id: u64,
    patterns: Vec<PatternSearcher>,
    /// The pattern sets `patterns` were compiled from (a [`SharedSearch`] merges them).
    sources: Vec<Arc<PatternSet>>,
    /// Set once a [`SharedSearch`] includes these tables: only then do `contains` calls look
    /// for a current union (the others never pay for the thread-local access).
    shared: AtomicBool,
    sets: Vec<SetMatcher>,
}

/// Source of [`Coprocessors::id`]; 0 is left for "no owner yet".
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Coprocessors {
    /// Compiles the pattern sets and value sets of a function (in the order of
    /// [`Function::patterns`](sift_ir::Function::patterns) and
    /// [`Function::sets`](sift_ir::Function::sets)).
    pub fn compile(
        patterns: &[Arc<PatternSet>],
        sets: &[Arc<ValueSet>],
    ) -> Result<Coprocessors, CompileError> {
        let sources = patterns.to_vec();
        let patterns = patterns
            .iter()
            .enumerate()
            .map(|(i, set)| PatternSearcher::compile(i as u32, set.patterns()))
            .collect::<Result<Vec<_>, _>>()?;
        let sets = sets.iter().map(SetMatcher::compile).collect();
        Ok(Coprocessors {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            patterns,
            sources,
            shared: AtomicBool::new(false),
            sets,
        })
    }

    /// Compiles the tables of `f`: `compile(&f.patterns, &f.sets)`.
    pub fn for_function(f: &sift_ir::Function) -> Result<Coprocessors, CompileError> {
        Coprocessors::compile(&f.patterns, &f.sets)
    }

    /// Whether the function has pattern sets (`contains` calls search).
    pub fn searches(&self) -> bool {
        !self.patterns.is_empty()
    }

    fn mark_shared(&self) {
        self.shared.store(true, Ordering::Relaxed);
    }

    /// Whether there are no tables at all (the function makes no coprocessor calls).
    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty() && self.sets.is_empty()
    }

    /// Whether pattern `pattern` of pattern set `set` occurs in `packet[start..]`: the same
    /// result as `f.patterns[set].occurs(pattern, packet, start)`.
    ///
    /// The first call for a (set, start) on a packet searches for all patterns of the set in
    /// one pass and remembers which occur in `memo`; later calls on the same packet (until
    /// [`Memo::next_packet`]) answer from the memo. Inside [`SharedSearch::packet`] of a union
    /// these tables are a member of, the answer comes from the union's search instead (the same
    /// answer, one search for all members).
    pub fn contains(
        &self,
        memo: &mut Memo,
        set: u32,
        pattern: u32,
        packet: &[u8],
        start: u32,
    ) -> bool {
        let Some(payload) = packet.get(start as usize..) else {
            return false;
        };
        // Before the searcher is touched: a union answers only for a (set, pattern) it maps,
        // which are those that exist, and reading the searcher would cost every filter a cache
        // miss for nothing.
        if self.shared.load(Ordering::Relaxed) {
            if let Some(found) = shared::answer(self.id, set, pattern, payload, start) {
                return found;
            }
        }
        let Some(searcher) = self.patterns.get(set as usize) else {
            return false;
        };
        if pattern >= searcher.len() {
            return false;
        }
        let found = memo.results(self.id, set, start, searcher.words(), |found| {
            searcher.search(payload, found)
        });
        found[(pattern / 64) as usize] >> (pattern % 64) & 1 == 1
    }

    /// Whether the key formed by `key` (most significant word first) is in value set `set`:
    /// the same result as `f.sets[set].contains(ValueSet::key(key))`.
    pub fn member(&self, set: u32, key: &[u32]) -> bool {
        self.sets
            .get(set as usize)
            .is_some_and(|matcher| matcher.contains(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shareable_between_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Coprocessors>();
        send_sync::<Memo>();
        send_sync::<CompileError>();
    }

    #[test]
    fn compile_errors_name_the_set() {
        let e = CompileError {
            set: 2,
            pattern: Some(5),
            reason: CompileErrorReason::Pattern(sift_ir::PatternError::Empty),
        };
        assert_eq!(e.to_string(), "pattern set 2, pattern 5: empty pattern");
        assert!(std::error::Error::source(&e).is_some());
    }
}
