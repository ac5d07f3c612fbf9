//! The result of a branch-free program, assembled backwards from what each block leads to.
//!
//! [`crate::branchless`] evaluates every block's instructions forwards (loads, arithmetic and
//! conditions need the registers as they are on entry to the block). The program's *result* is
//! then a decision diagram over those conditions: a block either returns, or goes to one of its
//! successors according to its conditions, after guards (bounds checks, non-zero divisors) that
//! return 0 when they fail. Because every edge goes forward, one walk from the last block to the
//! first gives each block's outcome as a function of its successors' outcomes:
//!
//! ```text
//! outcome(block) = guards ? (cond ? outcome(then) : outcome(else)) : 0
//! ```
//!
//! Folded forwards instead, every `ret` costs a `select` over its block's reach, and the reach
//! itself an `and`/`and not` per branch: about three operations per test. Walked backwards, a
//! chain of tests whose other edge rejects (or accepts) becomes one `and` (or `or`) per test.
//!
//! Filters almost always return 0 or one constant (the snapshot length), so outcomes are then
//! booleans ([`Domain::Accept`]), built with `and`, `or` and `and not`; the result is one select
//! at the end. Programs that return registers or several constants use `select`s on `i32`
//! values ([`Domain::Values`]).

use cranelift_codegen::ir::{types, InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;
use sift_bytecode::{Insn, Operand, Program};

/// What outcomes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Domain {
    /// Whether the program accepts: every `ret` returns 0 or this constant. Outcomes are `i8`
    /// values 0 or 1.
    Accept(u32),
    /// The returned value itself (`i32`).
    Values,
}

impl Domain {
    /// The domain for the reachable `ret`s of `p`.
    pub(crate) fn of(p: &Program, reachable: &[bool]) -> Domain {
        let mut accept = None;
        for (insn, _) in p.code.iter().zip(reachable).filter(|(_, &r)| r) {
            match *insn {
                Insn::Return {
                    value: Operand::Imm(0),
                } => {}
                Insn::Return {
                    value: Operand::Imm(k),
                } if accept.is_none() || accept == Some(k) => accept = Some(k),
                Insn::Return { .. } => return Domain::Values,
                _ => {}
            }
        }
        // Nothing but rejections: any constant will do, no block ever accepts.
        Domain::Accept(accept.unwrap_or(1))
    }
}

/// A block's outcome: known at compile time (in [`Domain::Accept`], 0 or 1), or computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    Const(u32),
    Value(Value),
}

/// How a block ends, after its guards.
#[derive(Clone, Debug)]
pub(crate) enum Term {
    /// Returns this (in the program's terms: a constant or a register's `i32` value).
    Return(Outcome),
    /// Goes on to the block starting at this instruction.
    Goto(usize),
    /// Goes to the target of the first case whose `i8` condition holds, else to the default.
    /// The conditions exclude each other (branch: one; switch: distinct keys).
    Cases {
        cases: Vec<(Value, usize)>,
        default: usize,
    },
}

/// The blocks' exits as the forward evaluation records them, by first instruction.
pub(crate) struct Outcomes {
    domain: Domain,
    exits: Vec<Option<(Vec<Value>, Term)>>,
    /// The block whose outcome is the program's result in the code emitted from now on (0, or
    /// where an early exit left every other path, see [`Outcomes::start_at`]).
    start: usize,
}

impl Outcomes {
    pub(crate) fn new(domain: Domain, code_len: usize) -> Outcomes {
        Outcomes {
            domain,
            exits: vec![None; code_len + 1],
            start: 0,
        }
    }

    /// Block `block` ends with `term`, if every one of `guards` (`i8` conditions) holds, and
    /// returns 0 otherwise. A block is recorded at most once.
    pub(crate) fn record(&mut self, block: usize, guards: Vec<Value>, term: Term) {
        debug_assert!(self.exits[block].is_none(), "block {block} recorded twice");
        self.exits[block] = Some((guards, term));
    }

    /// In the code emitted from now on, every path that can end in a nonzero result has gone
    /// through block `block` (an early exit has left on every other path, and what led to
    /// `block` held): results start from `block`'s outcome instead of the first block's.
    pub(crate) fn start_at(&mut self, block: usize) {
        self.start = block;
    }

    /// The program's result (`i32`) as far as the blocks recorded below `upto` decide it:
    /// blocks from `upto` on count as returning 0 (exact when no path reaches them). `entry`,
    /// when present, must hold for the result to be nonzero.
    pub(crate) fn result(
        &self,
        b: &mut FunctionBuilder<'_>,
        upto: usize,
        entry: Option<Value>,
    ) -> Value {
        let upto = upto.min(self.exits.len());
        // Results computed before the start moved (an early exit's own) start at block 0.
        let start = if self.start < upto { self.start } else { 0 };
        let mut outcome = vec![Outcome::Const(0); self.exits.len()];
        for block in (start..upto).rev() {
            let Some((guards, term)) = &self.exits[block] else {
                continue;
            };
            let after = |t: usize| outcome.get(t).copied().unwrap_or(Outcome::Const(0));
            let mut o = match term {
                Term::Return(v) => self.returned(*v),
                Term::Goto(t) => after(*t),
                Term::Cases { cases, default } => {
                    let mut o = after(*default);
                    for &(cond, target) in cases.iter().rev() {
                        o = self.choose(b, cond, after(target), o);
                    }
                    o
                }
            };
            for &g in guards.iter().rev() {
                o = self.guard(b, g, o);
            }
            outcome[block] = o;
        }
        let mut o = outcome[start];
        if let Some(fits) = entry {
            o = self.guard(b, fits, o);
        }
        match (self.domain, o) {
            (Domain::Accept(k), Outcome::Const(c)) => b
                .ins()
                .iconst(types::I32, i64::from(if c != 0 { k } else { 0 })),
            (Domain::Accept(k), Outcome::Value(v)) => accept_times(b, v, k),
            (Domain::Values, o) => self.materialize(b, o),
        }
    }

    /// The outcome of `ret value`.
    fn returned(&self, value: Outcome) -> Outcome {
        match (self.domain, value) {
            (Domain::Accept(_), Outcome::Const(k)) => Outcome::Const(u32::from(k != 0)),
            // Not in this domain (see `Domain::of`); the evaluation never records one.
            (Domain::Accept(_), Outcome::Value(_)) => Outcome::Const(0),
            (Domain::Values, v) => v,
        }
    }

    fn materialize(&self, b: &mut FunctionBuilder<'_>, o: Outcome) -> Value {
        match o {
            Outcome::Value(v) => v,
            Outcome::Const(k) => {
                let ty = match self.domain {
                    Domain::Accept(_) => types::I8,
                    Domain::Values => types::I32,
                };
                b.ins().iconst(ty, i64::from(k))
            }
        }
    }

    /// `cond ? then_ : else_`, with the boolean identities that make chains one operation per
    /// test.
    fn choose(
        &self,
        b: &mut FunctionBuilder<'_>,
        cond: Value,
        then_: Outcome,
        else_: Outcome,
    ) -> Outcome {
        use Outcome::{Const, Value as V};
        if then_ == else_ {
            return then_;
        }
        let v = match (self.domain, then_, else_) {
            (Domain::Accept(_), Const(1), Const(_)) => cond,
            (Domain::Accept(_), Const(_), Const(1)) => b.ins().bxor_imm_u(cond, 1),
            (Domain::Accept(_), Const(1), V(e)) => b.ins().bor(cond, e),
            (Domain::Accept(_), Const(_), V(e)) => b.ins().band_not(e, cond),
            (Domain::Accept(_), V(t), Const(0)) => b.ins().band(cond, t),
            (Domain::Accept(_), V(t), Const(_)) => {
                let not = b.ins().bxor_imm_u(cond, 1);
                b.ins().bor(not, t)
            }
            _ => {
                let (t, e) = (self.materialize(b, then_), self.materialize(b, else_));
                b.ins().select(cond, t, e)
            }
        };
        V(v)
    }

    /// `fits ? o : 0`.
    fn guard(&self, b: &mut FunctionBuilder<'_>, fits: Value, o: Outcome) -> Outcome {
        self.choose(b, fits, o, Outcome::Const(0))
    }
}

/// `k` when the 0/1 value `v` is 1, else 0, without a `select` (which x86-64 makes a zeroing,
/// a test and a conditional move from a constant in memory): a shift when `k` is a power of
/// two (the usual snapshot lengths), else a multiplication.
fn accept_times(b: &mut FunctionBuilder<'_>, v: Value, k: u32) -> Value {
    let one = b.ins().uextend(types::I32, v);
    match k {
        0 => b.ins().iconst(types::I32, 0),
        1 => one,
        k if k.is_power_of_two() => b.ins().ishl_imm_u(one, i64::from(k.trailing_zeros())),
        k => b.ins().imul_imm_u(one, i64::from(k)),
    }
}
