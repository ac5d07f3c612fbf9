//! What the optimizer did: sizes before and after, and changes per pass.

use std::fmt;

use sift_ir::{Function, Terminator};

/// The size of a function (reachable blocks only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub blocks: usize,
    /// Instructions, constants included (parameters excluded).
    pub insts: usize,
    /// Instructions other than constants (constants are immediates in every back end).
    pub ops: usize,
    /// Two-way tests.
    pub branches: usize,
    pub switches: usize,
    pub switch_cases: usize,
}

impl Counts {
    pub fn of(f: &Function) -> Counts {
        Counts::over(f, &crate::cfg::rpo(f))
    }

    /// [`Counts::of`], given the reverse postorder of `f`.
    pub fn over(f: &Function, rpo: &[sift_ir::Block]) -> Counts {
        let mut c = Counts::default();
        for &b in rpo {
            let data = f.block(b);
            c.blocks += 1;
            c.insts += data.insts.len();
            c.ops += data
                .insts
                .iter()
                .filter(|&&v| f.const_value(v).is_none())
                .count();
            match &data.term {
                Terminator::Branch { .. } => c.branches += 1,
                Terminator::Switch { cases, .. } => {
                    c.switches += 1;
                    c.switch_cases += cases.len();
                }
                _ => {}
            }
        }
        c
    }
}

impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} blocks, {} insts ({} non-constant), {} branches, {} switches ({} cases)",
            self.blocks, self.insts, self.ops, self.branches, self.switches, self.switch_cases
        )
    }
}

/// Rewrites counted per pass, summed over rounds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassChanges {
    pub simplify: usize,
    pub gvn: usize,
    pub predicates: usize,
    pub threading: usize,
    pub dce: usize,
    pub merge: usize,
    pub tables: usize,
}

/// The result of one optimization.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub before: Counts,
    pub after: Counts,
    /// Rounds of the pass pipeline run before the fixed point (or the round limit).
    pub rounds: usize,
    pub changes: PassChanges,
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "before: {}", self.before)?;
        writeln!(f, "after:  {}", self.after)?;
        let c = &self.changes;
        write!(
            f,
            "rounds: {}; changes: simplify {}, gvn {}, predicates {}, threading {}, dce {}, merge {}, tables {}",
            self.rounds, c.simplify, c.gvn, c.predicates, c.threading, c.dce, c.merge, c.tables
        )
    }
}
