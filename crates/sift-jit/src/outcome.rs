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
//! chain of tests whose other edge rejects (or accepts) becomes one `select` per test.
//!
//! Outcomes are the `i32` results themselves, and each `?:` is a `select` on them. A `select`
//! whose condition is a comparison used nowhere else becomes a compare and a conditional move
//! on x86-64, so a test costs two instructions. Outcomes kept as 0/1 booleans instead (one
//! `and` or `or` per test, and a shift by the snapshot length's bit at the end) cost a compare,
//! a `setcc` and the `and`/`or` per test, and measured slower on every filter tried: `jitloop
//! EXPR shuffled`, 4,000 packets, ns/packet booleans against selects: the or-chain of 5 5.33
//! against 4.72, `tcp[tcpflags] & tcp-syn != 0` 6.66 against 4.64, `tcp port 80` 10.7 against
//! 9.6, `ip src 10.1.1.1` 2.42 against 2.14, `ip` 2.09 against 2.10.

use cranelift_codegen::ir::{
    types, DataFlowGraph, InstBuilder, InstructionData, Opcode, Value, ValueDef,
};
use cranelift_frontend::FunctionBuilder;

/// A block's outcome: a result known at compile time, or computed (`i32`).
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
    exits: Vec<Option<(Vec<Value>, Term)>>,
    /// The block whose outcome is the program's result in the code emitted from now on (0, or
    /// where an early exit left every other path, see [`Outcomes::start_at`]).
    start: usize,
}

impl Outcomes {
    pub(crate) fn new(code_len: usize) -> Outcomes {
        Outcomes {
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
                Term::Return(v) => *v,
                Term::Goto(t) => after(*t),
                Term::Cases { cases, default } => {
                    let mut o = after(*default);
                    for &(cond, target) in cases.iter().rev() {
                        o = choose(b, cond, after(target), o);
                    }
                    o
                }
            };
            for &g in guards.iter().rev() {
                o = guard(b, g, o);
            }
            outcome[block] = o;
        }
        let mut o = outcome[start];
        if let Some(fits) = entry {
            o = guard(b, fits, o);
        }
        materialize(b, o)
    }
}

/// `cond ? then_ : else_`.
///
/// Two set tests that lead to the same outcome (a host set's source and destination) share
/// one "any lane equal": `any(a) ? x : (any(b) ? x : y)` is `any(a | b) ? x : y`, a vector
/// `or` instead of a second test and conditional move.
fn choose(b: &mut FunctionBuilder<'_>, cond: Value, then_: Outcome, else_: Outcome) -> Outcome {
    if then_ == else_ {
        return then_;
    }
    if let Some(merged) = merge_set_tests(b, cond, then_, else_) {
        return merged;
    }
    let (t, e) = (materialize(b, then_), materialize(b, else_));
    Outcome::Value(b.ins().select(cond, t, e))
}

/// `cond ? then_ : else_` as one set test, when `cond` is "any lane of a vector" and `else_`
/// is `any(other) ? then_ : rest`. The select that was `else_` is left unused (Cranelift drops
/// it).
fn merge_set_tests(
    b: &mut FunctionBuilder<'_>,
    cond: Value,
    then_: Outcome,
    else_: Outcome,
) -> Option<Outcome> {
    let dfg = &b.func.dfg;
    let lanes = any_lane_of(dfg, cond)?;
    let Outcome::Value(inner) = else_ else {
        return None;
    };
    let InstructionData::Ternary {
        opcode: Opcode::Select,
        args: [inner_cond, inner_then, rest],
    } = *defined_by(dfg, inner)?
    else {
        return None;
    };
    let other = any_lane_of(dfg, inner_cond)?;
    let same_then = match then_ {
        Outcome::Value(v) => v == inner_then,
        Outcome::Const(k) => matches!(
            defined_by(dfg, inner_then),
            Some(&InstructionData::UnaryImm { opcode: Opcode::Iconst, imm }) if imm.bits() == i64::from(k)
        ),
    };
    if !same_then || dfg.value_type(lanes) != dfg.value_type(other) {
        return None;
    }
    let either = b.ins().bor(lanes, other);
    let any = b.ins().vany_true(either);
    Some(Outcome::Value(b.ins().select(any, inner_then, rest)))
}

/// The instruction whose only or first result `v` is.
fn defined_by(dfg: &DataFlowGraph, v: Value) -> Option<&InstructionData> {
    match dfg.value_def(v) {
        ValueDef::Result(inst, 0) => Some(&dfg.insts[inst]),
        _ => None,
    }
}

/// The vector `v` tests when it is `vany_true(vector)`.
fn any_lane_of(dfg: &DataFlowGraph, v: Value) -> Option<Value> {
    match *defined_by(dfg, v)? {
        InstructionData::Unary {
            opcode: Opcode::VanyTrue,
            arg,
        } => Some(arg),
        _ => None,
    }
}

/// `fits ? o : 0`.
fn guard(b: &mut FunctionBuilder<'_>, fits: Value, o: Outcome) -> Outcome {
    choose(b, fits, o, Outcome::Const(0))
}

fn materialize(b: &mut FunctionBuilder<'_>, o: Outcome) -> Value {
    match o {
        Outcome::Value(v) => v,
        Outcome::Const(k) => b.ins().iconst(types::I32, i64::from(k)),
    }
}
