//! Fast runtime for sift's coprocessor calls (`Inst::Contains`, `Inst::Member`).
//!
//! sift-ir defines what the calls mean; this crate makes them fast for the bytecode
//! interpreter, the JIT and the demultiplexer. (Initial version: delegates to the reference.)
#![forbid(unsafe_code)]

use std::fmt;
use std::sync::Arc;

use sift_ir::{PatternSet, ValueSet};

/// Compiled tables of one function.
#[derive(Debug)]
pub struct Coprocessors {
    patterns: Vec<Arc<PatternSet>>,
    sets: Vec<Arc<ValueSet>>,
}

impl Coprocessors {
    pub fn compile(
        patterns: &[Arc<PatternSet>],
        sets: &[Arc<ValueSet>],
    ) -> Result<Coprocessors, CompileError> {
        Ok(Coprocessors {
            patterns: patterns.to_vec(),
            sets: sets.to_vec(),
        })
    }

    pub fn for_function(f: &sift_ir::Function) -> Result<Coprocessors, CompileError> {
        Coprocessors::compile(&f.patterns, &f.sets)
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty() && self.sets.is_empty()
    }

    /// Same result as `f.patterns[set].occurs(pattern, packet, start)`.
    pub fn contains(
        &self,
        _memo: &mut Memo,
        set: u32,
        pattern: u32,
        packet: &[u8],
        start: u32,
    ) -> bool {
        self.patterns
            .get(set as usize)
            .is_some_and(|s| (pattern as usize) < s.len() && s.occurs(pattern, packet, start))
    }

    /// Same result as `f.sets[set].contains(ValueSet::key(key))`.
    pub fn member(&self, set: u32, key: &[u32]) -> bool {
        self.sets
            .get(set as usize)
            .is_some_and(|s| s.contains(ValueSet::key(key)))
    }
}

/// Per-thread scratch: search results of the current packet.
#[derive(Debug, Default)]
pub struct Memo {
    generation: u64,
}

impl Memo {
    pub fn new() -> Memo {
        Memo::default()
    }

    pub fn next_packet(&mut self) {
        self.generation = self.generation.wrapping_add(1);
    }
}

/// A table that cannot be compiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileError {
    pub set: u32,
    pub pattern: Option<u32>,
    pub message: String,
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pattern {
            Some(p) => write!(f, "pattern set {} pattern {}: {}", self.set, p, self.message),
            None => write!(f, "set {}: {}", self.set, self.message),
        }
    }
}

impl std::error::Error for CompileError {}
