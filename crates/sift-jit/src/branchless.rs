//! If-conversion: small programs as straight-line code, with at most a few well-predicted
//! branches.
//!
//! A filter's tests depend on the packet, and on a mix of traffic (truncated packets, IPv4 or
//! not, matching addresses or not) the CPU cannot predict them: each mispredicted branch costs
//! about 15 cycles, several times what the tests themselves cost. Measured on 4,000 generated
//! packets with the branching code of `ip src A and ip dst B and ip proto 6` copied to each of
//! the 64 byte offsets of a cache line: in a new random order each round, 6.2 to 6.6 ns per
//! packet at every offset; replaying one order (which the predictor learns), 2.3 to 5 ns
//! depending only on the offset, that is on how the branches' addresses share the predictor's
//! tables. Without branches, the same filter ran at 1.8 to 1.9 ns (one order) and 2.3 to 2.5
//! ns (random orders) at every offset. `examples/jitloop.rs` shows both orders.
//!
//! So a small program without calls is evaluated on every path at once, as predicated code:
//! each block gets a *reach* predicate (the OR over its incoming edges of the predecessor's reach
//! AND the edge's condition), and each register at a join becomes a `select` over the incoming
//! edges. The result is assembled backwards from the blocks' exits ([`crate::outcome`]): one
//! `and` or `or` per test of a chain. Switch tables of a few keys become one equality per key,
//! larger ones a branch-free lookup in a collision-free hash ([`crate::table`]).
//!
//! **Early exits.** Evaluating everything costs every instruction on every packet, while
//! branching code stops at the first failed test. Where every path still going somewhere other
//! than `ret 0` has passed a *rare* test (equality of a 32-bit or wider field with a constant:
//! an address, a coalesced address pair, a key of a large set), the code branches out with the
//! result so far unless one of those paths holds. That branch almost always leaves, whatever the
//! order of the packets, so it is predicted; on a predictor that has learnt a fixed order it
//! also saves the tail's work, as branching code would.
//!
//! Loads now run on paths that would not have made them, so every load reads a safe address:
//!
//! * `caplen < need(entry)` (the bound of [`crate::bounds`] anticipated at the first
//!   instruction) means the program returns 0 whatever the bytes; so one `select` points the
//!   loads below that bound at the packet or, when it is shorter, at a block of zeros, and the
//!   result is forced to 0 then;
//! * any other load points at the packet only when its own bytes (or the bytes its bounds check
//!   covers) fit below `caplen`, else at the zeros; a bounds check the aggregation placed there
//!   (return 0 unless `caplen` covers `n` bytes) becomes a guard of its block;
//! * a division by a register divides by 1 instead of 0, and the zero divisor is a guard (the
//!   path returns 0), as in the interpreter.
//!
//! The values computed on paths not taken are never observed: they only feed `select`s and
//! outcomes whose condition is false.

use std::collections::HashMap;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, Block, InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;
use sift_bytecode::{AluOp, Cond, Insn, Operand, Program, Reg, Width};

use crate::arith;
use crate::bounds::Guard;
use crate::flow::MULTI;
use crate::outcome::{Domain, Outcome, Outcomes, Term};
use crate::table::{emit_lookup, PerfectHash};
use crate::translate::{
    compare, exit_with, load_packet_value, native_constant, packet_flags, width_mask, Plan, Rhs,
};

/// Largest program (in reachable instructions) evaluated without branches: every instruction
/// runs for every packet, so beyond this the work outweighs the mispredictions saved.
const MAX_INSNS: usize = 64;
/// Most conditional branches, counting each case of a small `switch` and a few for a hashed
/// one (each costs a few instructions of predicate logic).
const MAX_BRANCHES: usize = 16;
/// Largest `switch` tested key by key; larger ones are hashed.
const SMALL_SWITCH: usize = 4;
/// Fewest instructions after an early exit that make it worth a branch.
const MIN_TAIL: usize = 4;
/// Most early exits in one program: the first one already leaves on almost every packet, and a
/// second one on the few that stay would be taken about as often as not.
const MAX_EXITS: usize = 1;

/// Bytes of zeros that loads read instead of the packet on paths not taken. Loads below the
/// entry bound use it only when that bound fits.
const ZEROS_LEN: usize = 512;
static ZEROS: [u64; ZEROS_LEN / 8] = [0; ZEROS_LEN / 8];

/// Whether the program is small and simple enough: no calls, no large tables.
pub(crate) fn eligible(p: &Program, reachable: &[bool]) -> bool {
    let mut insns = 0;
    let mut branches = 0;
    for (insn, _) in p.code.iter().zip(reachable).filter(|(_, &r)| r) {
        insns += 1;
        match insn {
            Insn::Contains { .. } | Insn::Member { .. } | Insn::Protochain { .. } => return false,
            Insn::Branch { .. } => branches += 1,
            Insn::Switch { table, .. } => {
                let Some(t) = p.tables.get(*table as usize) else {
                    return false;
                };
                branches += match t.entries.len() {
                    n if n <= SMALL_SWITCH => n,
                    _ => {
                        let mut targets: Vec<u32> = t.entries.iter().map(|e| e.1).collect();
                        targets.sort_unstable();
                        targets.dedup();
                        // About ten instructions, a dependent chain of two loads: host
                        // sets that look up four keys (source and destination of IPv4 and
                        // ARP) measured 6.3 ns here against 2.5 branching in a fixed packet
                        // order, and 9.1 against 13.9 in random orders; they stay branching.
                        3 + targets.len()
                    }
                };
            }
            _ => {}
        }
    }
    insns <= MAX_INSNS && branches <= MAX_BRANCHES
}

/// A path predicate: statically true, or an `i8` 0/1 value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pred {
    True,
    Value(Value),
}

/// The registers and scratch words along one edge (`None`: not written on that path).
#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    regs: [Option<Value>; 16],
    scratch: Vec<Option<Value>>,
}

/// One incoming edge of a block.
#[derive(Clone, Debug)]
struct Edge {
    pred: Pred,
    state: State,
    /// Every path along this edge passed a rare test (see the module docs).
    rare: bool,
}

struct Emitter<'a, 'b, 'p> {
    b: &'a mut FunctionBuilder<'b>,
    plan: &'a Plan<'p>,
    data: Value,
    caplen: Value,
    wire_len: Value,
    zeros: Value,
    /// Base for loads below the entry bound (the packet, or the zeros when it is shorter),
    /// whether the packet reaches the bound, and the bound; `None` when the bound is 0 or does
    /// not fit the zeros.
    entry: Option<(Value, Value, u64)>,
    /// `caplen` is known to be at least `long` (on the long-packet path; else 0) and below
    /// `short` (on the other path; else `u64::MAX`).
    long: u64,
    short: u64,
    /// Incoming edges of each instruction that starts a block.
    incoming: Vec<Vec<Edge>>,
    /// The block being evaluated (its first instruction), and its guards so far.
    block: usize,
    guards: Vec<Value>,
    outcomes: Outcomes,
    /// Bases already checked: (start, checked bytes) -> (fits, start, start or the zeros).
    bases: HashMap<(Value, u64), (Value, Value, Value)>,
    /// Per instruction: reachable instructions from there on that are not `ret`s.
    tail: Vec<usize>,
    exits_left: usize,
    /// Where results go (batch shape), see [`exit_with`].
    finish: Option<Block>,
    /// Hash tables the code reads; owned by the compiled filter.
    tables: &'a mut Vec<Box<[u32]>>,
}

/// Longest fixed-offset bound worth a separate long-packet path: headers, not payloads.
const MAX_LONG: u64 = 128;

/// The bytes every constant-offset load of the program (with the bound its check covers)
/// needs: at or above this `caplen`, none of them needs a check.
fn fixed_need(plan: &Plan<'_>) -> u64 {
    let p = plan.program;
    let mut need = 0;
    for (i, insn) in p.code.iter().enumerate() {
        if let Insn::Load {
            width,
            base: None,
            offset,
            ..
        } = *insn
        {
            if plan.flow.reachable[i] {
                let units = if plan.pairs[i].is_some() { 2 } else { 1 };
                let end = u64::from(offset) + u64::from(width.bytes()) * units;
                let checked = match plan.bounds.guard[i] {
                    Guard::Check(n) => n.max(end),
                    _ => end,
                };
                need = need.max(checked);
            }
        }
    }
    need
}

/// Emits the whole program into the current block of `b`, ending every way out (the early
/// exits and the end) with its result. The caller checked [`eligible`].
///
/// When some constant-offset loads have bounds beyond the entry bound, packets long enough for
/// all of them (nearly all packets, in real traffic) take a path without bounds logic for
/// those loads: one well-predicted branch instead of a compare and a select per bound, and
/// fewer live registers. Shorter packets take the general path.
pub(crate) fn emit(
    b: &mut FunctionBuilder<'_>,
    plan: &Plan<'_>,
    packet: [Value; 3],
    finish: Option<Block>,
    tables: &mut Vec<Box<[u32]>>,
) {
    let Some(entry_need) = plan.bounds.entry_need else {
        let zero = b.ins().iconst(types::I32, 0);
        return exit_with(b, finish, zero); // every path returns 0
    };
    // Worth a branch (mispredicted on some truncated packets) only when some constant-offset
    // load has a bound of its own beyond the entry's: the entry bound alone costs a compare
    // and two selects.
    let long = fixed_need(plan);
    if long <= entry_need || long > MAX_LONG {
        return evaluate(b, plan, packet, None, u64::MAX, finish, tables);
    }
    let (fast, slow) = (b.create_block(), b.create_block());
    let is_long = b
        .ins()
        .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, packet[1], long as i64);
    b.ins().brif(is_long, fast, &[], slow, &[]);
    b.switch_to_block(fast);
    evaluate(b, plan, packet, Some(long), u64::MAX, finish, tables);
    b.switch_to_block(slow);
    evaluate(b, plan, packet, None, long, finish, tables);
}

/// One evaluation of the program ([`emit`]); `long`: `caplen` is known to be at least this;
/// `short`: known to be below this.
#[allow(clippy::too_many_arguments)]
fn evaluate(
    b: &mut FunctionBuilder<'_>,
    plan: &Plan<'_>,
    [data, caplen, wire_len]: [Value; 3],
    long: Option<u64>,
    short: u64,
    finish: Option<Block>,
    tables: &mut Vec<Box<[u32]>>,
) {
    let p = plan.program;
    let need = plan.bounds.entry_need.unwrap_or(0);
    let zeros = b.ins().iconst(types::I64, ZEROS.as_ptr() as usize as i64);
    let entry = (need > 0 && need <= ZEROS_LEN as u64 && long.is_none()).then(|| {
        let fits = b
            .ins()
            .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, caplen, need as i64);
        (b.ins().select(fits, data, zeros), fits, need)
    });
    let mut tail = vec![0; p.code.len() + 1];
    for i in (0..p.code.len()).rev() {
        let counts = plan.flow.reachable[i] && !matches!(p.code[i], Insn::Return { .. });
        tail[i] = tail[i + 1] + usize::from(counts);
    }
    let mut e = Emitter {
        b,
        plan,
        data,
        caplen,
        wire_len,
        zeros,
        entry,
        long: long.unwrap_or(0),
        short,
        incoming: vec![Vec::new(); p.code.len() + 1],
        block: 0,
        guards: Vec::new(),
        outcomes: Outcomes::new(Domain::of(p, &plan.flow.reachable), p.code.len()),
        bases: HashMap::new(),
        tail,
        exits_left: if plan.options.early_exits {
            MAX_EXITS
        } else {
            0
        },
        finish,
        tables,
    };
    e.incoming[0].push(Edge {
        pred: Pred::True,
        state: State {
            regs: [None; 16],
            scratch: vec![None; usize::from(p.scratch_words)],
        },
        rare: false,
    });
    e.run();
    let fits = e.entry.map(|(_, fits, _)| fits);
    let result = e.outcomes.result(e.b, p.code.len(), fits);
    exit_with(e.b, finish, result);
}

impl Emitter<'_, '_, '_> {
    fn and(&mut self, a: Pred, cond: Value) -> Pred {
        match a {
            Pred::True => Pred::Value(cond),
            Pred::Value(a) => Pred::Value(self.b.ins().band(a, cond)),
        }
    }

    fn and_not(&mut self, a: Pred, cond: Value) -> Pred {
        match a {
            Pred::True => Pred::Value(self.b.ins().bxor_imm_u(cond, 1)),
            Pred::Value(a) => Pred::Value(self.b.ins().band_not(a, cond)),
        }
    }

    fn or(&mut self, a: Pred, b: Pred) -> Pred {
        match (a, b) {
            (Pred::True, _) | (_, Pred::True) => Pred::True,
            (Pred::Value(a), Pred::Value(b)) => Pred::Value(self.b.ins().bor(a, b)),
        }
    }

    /// `value` where `p` holds, else `other`.
    fn pick(&mut self, p: Pred, value: Value, other: Value) -> Value {
        match p {
            Pred::True => value,
            Pred::Value(c) => self.b.ins().select(c, value, other),
        }
    }

    fn push(&mut self, target: u32, pred: Pred, state: &State, rare: bool) {
        self.incoming[target as usize].push(Edge {
            pred,
            state: state.clone(),
            rare,
        });
    }

    /// Ends the current block with `term`.
    fn end(&mut self, term: Term) {
        let guards = std::mem::take(&mut self.guards);
        self.outcomes.record(self.block, guards, term);
    }

    /// The join of the incoming edges of block `i`: its reach, state and rareness (`None`:
    /// unreached).
    fn join(&mut self, i: usize) -> Option<(Pred, State, bool)> {
        let edges = std::mem::take(&mut self.incoming[i]);
        let first = edges.first()?;
        let (mut reach, mut state) = (first.pred, first.state.clone());
        let rare = edges.iter().all(|e| e.rare);
        for e in &edges[1..] {
            reach = self.or(reach, e.pred);
        }
        let merge = |e: &mut Self, pick: &dyn Fn(&State) -> Option<Value>| {
            let first = pick(&edges[0].state);
            if edges.iter().all(|edge| pick(&edge.state) == first) {
                return first;
            }
            // The last edge's value is the default; each earlier edge overrides where it holds.
            let zero = e.b.ins().iconst(types::I32, 0);
            let last = edges.last()?;
            let mut v = pick(&last.state).unwrap_or(zero);
            for edge in edges[..edges.len() - 1].iter().rev() {
                let x = pick(&edge.state).unwrap_or(zero);
                v = e.pick(edge.pred, x, v);
            }
            Some(v)
        };
        for r in 0..16 {
            state.regs[r] = merge(self, &|s: &State| s.regs[r]);
        }
        for w in 0..state.scratch.len() {
            state.scratch[w] = merge(self, &|s: &State| s.scratch[w]);
        }
        Some((reach, state, rare))
    }

    /// Whether block `i` does nothing but `ret 0` (paths into it decide nothing).
    fn rejects(&self, i: usize) -> bool {
        matches!(
            self.plan.program.code.get(i),
            Some(Insn::Return {
                value: Operand::Imm(0)
            })
        )
    }

    /// Before block `x`: leaves with the result so far unless a path into `x` or a later
    /// block (other than a `ret 0`) holds, when every such path is rare and enough work
    /// follows.
    fn early_exit(&mut self, x: usize) {
        if self.exits_left == 0 || self.tail[x] < MIN_TAIL {
            return;
        }
        let mut alive: Option<Pred> = None;
        let mut preds = Vec::new();
        for j in x..self.incoming.len() {
            if self.rejects(j) {
                continue;
            }
            for e in &self.incoming[j] {
                if !e.rare || e.pred == Pred::True {
                    return;
                }
                preds.push(e.pred);
            }
        }
        for p in preds {
            alive = Some(match alive {
                None => p,
                Some(a) => self.or(a, p),
            });
        }
        let Some(Pred::Value(alive)) = alive else {
            return;
        };
        self.exits_left -= 1;
        let fits = self.entry.map(|(_, fits, _)| fits);
        let result = self.outcomes.result(self.b, x, fits);
        let (leave, go_on) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(alive, go_on, &[], leave, &[]);
        self.b.switch_to_block(leave);
        exit_with(self.b, self.finish, result);
        self.b.switch_to_block(go_on);
    }

    fn run(&mut self) {
        let plan = self.plan;
        let p = plan.program;
        // The block being evaluated: its reach, state and rareness; `None` after a terminator
        // or on a path that has returned.
        let mut current: Option<(Pred, State, bool)> = None;
        for i in 0..p.code.len() {
            if plan.flow.block_start[i] {
                if let Some((pred, state, rare)) = current.take() {
                    // Falls through.
                    self.incoming[i].push(Edge { pred, state, rare });
                    self.end(Term::Goto(i));
                }
                self.early_exit(i);
                current = self.join(i);
                self.block = i;
                self.guards.clear();
            }
            if !plan.flow.reachable[i] {
                continue;
            }
            let Some((reach, mut state, rare)) = current.take() else {
                continue;
            };
            if let Some(pair) = plan.pairs[i] {
                // The wide compare replaces this load and the two branches (the second
                // test's block is reached only from here: it gets no edge, so it is skipped).
                if plan.bounds.guard[i] == Guard::Reject {
                    self.end(Term::Return(Outcome::Const(0)));
                    continue;
                }
                let wide = match pair.width {
                    Width::Word => types::I64,
                    _ => types::I32,
                };
                let (reach, address) = self.load_address(i, reach, &state, pair.offset, None, 2);
                let v = self.b.ins().load(wide, packet_flags(), address, 0);
                let equal = self
                    .b
                    .ins()
                    .icmp_imm_u(IntCC::Equal, v, pair.constant as i64);
                let t = self.and(reach, equal);
                let f = self.and_not(reach, equal);
                // Both halves are 16 bits or more: 32 bits or more in all.
                self.push(pair.equal, t, &state, true);
                self.push(pair.unequal, f, &state, rare);
                self.end(Term::Cases {
                    cases: vec![(equal, pair.equal as usize)],
                    default: pair.unequal as usize,
                });
                continue;
            }
            current = self
                .insn(i, reach, &mut state, rare)
                .map(|r| (r, state, rare));
        }
    }

    fn reg(&mut self, state: &State, r: Reg) -> Value {
        match state.regs[r.index() & 15] {
            Some(v) => v,
            // The verifier guarantees a write on every path before a read: this path is
            // not taken.
            None => self.b.ins().iconst(types::I32, 0),
        }
    }

    fn operand(&mut self, state: &State, o: Operand) -> Value {
        match o {
            Operand::Reg(r) => self.reg(state, r),
            Operand::Imm(k) => self.b.ins().iconst(types::I32, i64::from(k)),
        }
    }

    /// Whether the value instruction `i` reads first is a 32-bit field of the packet, which
    /// rarely equals a given constant.
    fn reads_word(&self, i: usize) -> bool {
        let d = self.plan.flow.use_defs[i][0];
        d < MULTI
            && matches!(
                self.plan.program.code.get(d as usize),
                Some(Insn::Load {
                    width: Width::Word,
                    ..
                })
            )
    }

    /// Evaluates instruction `i` on the path `reach`; returns the path's predicate after it
    /// (`None`: the path has left, by a terminator or a certain reject).
    fn insn(&mut self, i: usize, reach: Pred, state: &mut State, rare: bool) -> Option<Pred> {
        let set = |state: &mut State, r: Reg, v: Value| state.regs[r.index() & 15] = Some(v);
        match self.plan.program.code[i] {
            Insn::Mov { dst, src } => {
                let v = self.operand(state, src);
                set(state, dst, v);
            }
            Insn::WireLen { dst } => set(state, dst, self.wire_len),
            Insn::Neg { dst, src } => {
                let v = self.reg(state, src);
                let v = self.b.ins().ineg(v);
                set(state, dst, v);
            }
            Insn::LoadScratch { dst, slot } => {
                let v = state.scratch[usize::from(slot)];
                let v = v.unwrap_or_else(|| self.b.ins().iconst(types::I32, 0));
                set(state, dst, v);
            }
            Insn::StoreScratch { slot, src } => {
                let v = self.reg(state, src);
                state.scratch[usize::from(slot)] = Some(v);
            }
            Insn::Load {
                width,
                dst,
                base,
                offset,
            } => {
                if self.plan.bounds.guard[i] == Guard::Reject {
                    // Every path from here returns 0.
                    self.end(Term::Return(Outcome::Const(0)));
                    return None;
                }
                let (reach, address) = self.load_address(i, reach, state, offset, base, 1);
                let native = self.plan.flow.native_order[i].is_some();
                let v = load_packet_value(self.b, address, width, native);
                set(state, dst, v);
                return Some(reach);
            }
            Insn::Alu { op, dst, lhs, rhs } => {
                let a = self.reg(state, lhs);
                let Some((reach, v)) = self.alu(i, reach, op, a, state, rhs) else {
                    self.end(Term::Return(Outcome::Const(0)));
                    return None;
                };
                set(state, dst, v);
                return Some(reach);
            }
            Insn::Jump { target } => {
                self.push(target, reach, state, rare);
                self.end(Term::Goto(target as usize));
                return None;
            }
            Insn::Branch {
                cond,
                lhs,
                rhs,
                then_,
                else_,
            } => {
                let rare_when_equal = matches!(rhs, Operand::Imm(_)) && self.reads_word(i);
                match self.condition(i, state, cond, lhs, rhs) {
                    _ if then_ == else_ => {
                        self.push(then_, reach, state, rare);
                        self.end(Term::Goto(then_ as usize));
                    }
                    Ok(holds) => {
                        let t = self.and(reach, holds);
                        let f = self.and_not(reach, holds);
                        let then_rare = rare || (rare_when_equal && cond == Cond::Eq);
                        let else_rare = rare || (rare_when_equal && cond == Cond::Ne);
                        self.push(then_, t, state, then_rare);
                        self.push(else_, f, state, else_rare);
                        self.end(Term::Cases {
                            cases: vec![(holds, then_ as usize)],
                            default: else_ as usize,
                        });
                    }
                    Err(decided) => {
                        let target = if decided { then_ } else { else_ };
                        self.push(target, reach, state, rare);
                        self.end(Term::Goto(target as usize));
                    }
                }
                return None;
            }
            Insn::Return { value } => {
                let v = match value {
                    Operand::Imm(k) => Outcome::Const(k),
                    Operand::Reg(r) => Outcome::Value(self.reg(state, r)),
                };
                self.end(Term::Return(v));
                return None;
            }
            Insn::Switch {
                key,
                table,
                default,
            } => {
                self.switch(i, reach, state, rare, key, table, default);
                return None;
            }
            Insn::Contains { .. } | Insn::Member { .. } | Insn::Protochain { .. } => {
                unreachable!("not eligible for if-conversion")
            }
        }
        Some(reach)
    }

    /// A `switch`: one equality per key for a few keys, else a hashed lookup; either way each
    /// distinct target gets one condition, and the default the rest.
    #[allow(clippy::too_many_arguments)]
    fn switch(
        &mut self,
        i: usize,
        reach: Pred,
        state: &State,
        rare: bool,
        key: Reg,
        table: u32,
        default: u32,
    ) {
        let entries = &self.plan.program.tables[table as usize].entries;
        let key = self.reg(state, key);
        let keys: Vec<u32> = entries.iter().map(|e| e.0).collect();
        let hash = (entries.len() > SMALL_SWITCH)
            .then(|| PerfectHash::build(&keys))
            .flatten();
        let mut cases: Vec<(Value, u32)> = Vec::new();
        let mut any: Option<Value> = None;
        if let Some(hash) = hash {
            let targets: Vec<u32> = entries.iter().map(|e| e.1).collect();
            let lookup = emit_lookup(self.b, key, &hash, &targets, self.tables);
            for (n, &target) in lookup.distinct.iter().enumerate() {
                let cond = match lookup.number {
                    None => lookup.found,
                    Some(number) => {
                        let is = self.b.ins().icmp_imm_u(IntCC::Equal, number, n as i64);
                        self.b.ins().band(lookup.found, is)
                    }
                };
                cases.push((cond, target));
            }
            any = Some(lookup.found);
        } else {
            for &(k, target) in entries {
                let equal = self.b.ins().icmp_imm_u(IntCC::Equal, key, i64::from(k));
                cases.push((equal, target));
                any = Some(match any {
                    None => equal,
                    Some(m) => self.b.ins().bor(m, equal),
                });
            }
        }
        let rare_case = rare || self.reads_word(i);
        for &(cond, target) in &cases {
            let edge = self.and(reach, cond);
            self.push(target, edge, state, rare_case);
        }
        let edge = match any {
            None => reach,
            Some(m) => self.and_not(reach, m),
        };
        self.push(default, edge, state, rare);
        self.end(Term::Cases {
            cases: cases.iter().map(|&(c, t)| (c, t as usize)).collect(),
            default: default as usize,
        });
    }

    /// The path predicate after the load's guard and a safe address for the load at `i`
    /// (`units` loads of the instruction's width wide, for a coalesced pair). A bounds check
    /// the aggregation placed here becomes a guard of the block.
    fn load_address(
        &mut self,
        i: usize,
        reach: Pred,
        state: &State,
        offset: u32,
        base: Option<Reg>,
        units: u32,
    ) -> (Pred, Value) {
        let Insn::Load { width, .. } = self.plan.program.code[i] else {
            unreachable!("loads only");
        };
        let end = u64::from(offset) + u64::from(width.bytes()) * u64::from(units);
        let checked = match self.plan.bounds.guard[i] {
            Guard::Check(n) => n,
            _ => end,
        };
        if base.is_none() && checked <= self.long {
            // The long-packet path: every constant-offset bound holds.
            let address = self.b.ins().iadd_imm_u(self.data, i64::from(offset));
            return (reach, address);
        }
        if base.is_none() {
            if let Some((at, _, need)) = self.entry {
                if checked <= need {
                    // Covered by the entry bound; below it the program rejects anyway.
                    let address = self.b.ins().iadd_imm_u(at, i64::from(offset));
                    return (reach, address);
                }
            }
        }
        // `start`: where the checked bytes are counted from (the packet, or the packet plus
        // the base register).
        let start = match base {
            None => self.data,
            Some(r) => self.reg(state, r),
        };
        let (fits, unchecked, safe) = match self.bases.get(&(start, checked)) {
            Some(&known) => known,
            None => {
                let known = self.safe_base(base.map(|_| start), checked);
                self.bases.insert((start, checked), known);
                known
            }
        };
        // The zeros serve as the base only while the load stays inside them; else the
        // address itself is selected.
        let address = if end <= ZEROS_LEN as u64 {
            self.b.ins().iadd_imm_u(safe, i64::from(offset))
        } else {
            let at = self.b.ins().iadd_imm_u(unchecked, i64::from(offset));
            self.b.ins().select(fits, at, self.zeros)
        };
        let reach = match self.plan.bounds.guard[i] {
            // The interpreter rejects here when the checked bytes do not fit.
            Guard::Check(_) => {
                self.guards.push(fits);
                self.and(reach, fits)
            }
            _ => reach,
        };
        (reach, address)
    }

    /// Whether `checked` bytes from the packet (plus `base`, an `i32` register value) fit below
    /// `caplen`, that start, and the start or the zeros when they do not fit.
    fn safe_base(&mut self, base: Option<Value>, checked: u64) -> (Value, Value, Value) {
        let (fits, start) = match base {
            // On the short-packet path these bytes never fit.
            None if checked >= self.short => (self.b.ins().iconst(types::I8, 0), self.data),
            None => {
                let fits = self.b.ins().icmp_imm_u(
                    IntCC::UnsignedGreaterThanOrEqual,
                    self.caplen,
                    checked as i64,
                );
                (fits, self.data)
            }
            Some(v) => {
                let b64 = self.b.ins().uextend(types::I64, v);
                let last = self.b.ins().iadd_imm_u(b64, checked as i64);
                let fits = self
                    .b
                    .ins()
                    .icmp(IntCC::UnsignedLessThanOrEqual, last, self.caplen);
                (fits, self.b.ins().iadd(self.data, b64))
            }
        };
        (fits, start, self.b.ins().select(fits, start, self.zeros))
    }

    fn alu(
        &mut self,
        i: usize,
        reach: Pred,
        op: AluOp,
        a: Value,
        state: &State,
        rhs: Operand,
    ) -> Option<(Pred, Value)> {
        match rhs {
            Operand::Imm(k) => {
                let k = match self.plan.native_operand(i) {
                    Some(w) if op == AluOp::And && self.plan.flow.native_order[i].is_some() => {
                        native_constant(k & width_mask(w), w)
                    }
                    _ => k,
                };
                // `None`: division by the constant 0 rejects on this path.
                arith::binary_const(self.b, op, a, k).map(|v| (reach, v))
            }
            Operand::Reg(r) => {
                let y = self.reg(state, r);
                if !matches!(op, AluOp::Div | AluOp::Mod) {
                    let v = arith::binary(self.b, op, a, y, |_, _| {});
                    return Some((reach, v));
                }
                let nonzero = self.b.ins().icmp_imm_u(IntCC::NotEqual, y, 0);
                let one = self.b.ins().iconst(types::I32, 1);
                let divisor = self.b.ins().select(nonzero, y, one);
                let v = arith::binary(self.b, op, a, divisor, |_, _| {});
                self.guards.push(nonzero);
                Some((self.and(reach, nonzero), v))
            }
        }
    }

    /// Whether the branch at `i` holds: an `i8` value, or `Err(constant)` when it is decided
    /// at compile time.
    fn condition(
        &mut self,
        i: usize,
        state: &State,
        cond: Cond,
        lhs: Reg,
        rhs: Operand,
    ) -> Result<Value, bool> {
        let a = self.reg(state, lhs);
        let rhs = match rhs {
            Operand::Imm(k) => Rhs::Imm(k),
            Operand::Reg(r) => Rhs::Value(self.reg(state, r)),
        };
        compare(self.b, cond, a, rhs, self.plan.native_operand(i))
    }
}

#[cfg(test)]
mod tests {
    use crate::{JitFilter, Options};

    fn filter_ir(text: &str, options: &Options) -> String {
        let program = sift_bytecode::verify(sift_bytecode::assemble(text).unwrap()).unwrap();
        let listing = JitFilter::listing(&program, options).unwrap();
        let end = listing.find("; batch").unwrap_or(listing.len());
        listing[..end].to_string()
    }

    const AND_CHAIN: &str = "ld.h r0, [12]\n jeq r0, 2048, L2, L6\nL2:\n ld.b r0, [23]\n jeq r0, 6, L4, L6\nL4:\n ld.b r1, [14]\n and r1, r1, 15\n shl r1, r1, 2\n ld.h r0, [r1+16]\n jeq r0, 30, L7, L6\nL6:\n ret 0\nL7:\n ret 96\n";

    #[test]
    fn a_small_program_has_no_conditional_branch() {
        if !crate::supported() {
            return;
        }
        let ir = filter_ir(AND_CHAIN, &Options::default());
        assert_eq!(branches(&ir), 0, "{ir}");
        assert!(ir.contains("select"), "{ir}");
        let branching = Options {
            branchless: false,
            ..Options::default()
        };
        assert!(filter_ir(AND_CHAIN, &branching).contains("brif"));
    }

    #[test]
    fn a_small_switch_becomes_equalities() {
        if !crate::supported() {
            return;
        }
        let text = "ld.b r0, [0]\n switch r0, T0, L3\nL1:\n ret 1\nL2:\n ret 2\nL3:\n ret 0\n.table T0\n 1 -> L1\n 7 -> L2\n 9 -> L1\n";
        let ir = filter_ir(text, &Options::default());
        assert_eq!(branches(&ir), 0, "{ir}");
    }

    /// `ip src 10.1.1.1 or ip dst 10.2.2.2`: the destination has a bound of its own (34 bytes,
    /// beyond the entry's 30), so long packets get a path without bounds logic.
    const OR_PAIR: &str = "ld.h r0, [12]\n jeq r0, 2048, L2, L6\nL2:\n ld.w r0, [26]\n jeq r0, 167837953, L7, L4\nL4:\n ld.w r0, [30]\n jeq r0, 167903746, L7, L6\nL6:\n ret 0\nL7:\n ret 96\n";

    #[test]
    fn long_packets_skip_the_bounds_logic() {
        if !crate::supported() {
            return;
        }
        let ir = filter_ir(OR_PAIR, &Options::default());
        assert_eq!(branches(&ir), 1, "{ir}");
        let mut packets = Vec::new();
        for (src, dst) in [
            ([10, 1, 1, 1], [0; 4]),
            ([0; 4], [10, 2, 2, 2]),
            ([0; 4], [0; 4]),
        ] {
            let mut p = ipv4_like(src, 6, 5);
            p[30..34].copy_from_slice(&dst);
            packets.push(p);
        }
        agrees(OR_PAIR, &Options::default(), &packets);
    }

    /// Conditional branches in a listing.
    fn branches(ir: &str) -> usize {
        ir.matches("brif").count() + ir.matches("br_table").count()
    }

    /// The JIT with `options` against the interpreter on `packets` and all their truncations.
    fn agrees(text: &str, options: &Options, packets: &[Vec<u8>]) {
        let program = sift_bytecode::verify(sift_bytecode::assemble(text).unwrap()).unwrap();
        let jit = JitFilter::compile_with(&program, options).unwrap();
        let mut cache = sift_bytecode::Cache::new();
        for p in packets {
            for n in 0..=p.len() {
                let want = program.run(&mut cache, &p[..n], 100);
                assert_eq!(jit.run(&p[..n], 100), want, "{:02x?}", &p[..n]);
            }
        }
    }

    /// `ld.h [12] = 0x800, ld.w [26] = 10.1.1.1, ld.b [23] = 6, ld.h [20] & 0x1fff = 0`, then
    /// a byte at a header-length offset: the address test is rare, so the rest is skipped by
    /// one branch.
    const ADDRESS_THEN_MORE: &str = "ld.h r0, [12]\n jeq r0, 2048, L2, L12\nL2:\n ld.w r0, [26]\n jeq r0, 167837953, L4, L12\nL4:\n ld.b r0, [23]\n jeq r0, 6, L6, L12\nL6:\n ld.h r0, [20]\n jset r0, 8191, L12, L8\nL8:\n ld.b r1, [14]\n and r1, r1, 15\n shl r1, r1, 2\n ld.b r0, [r1+14]\n jgt r0, 3, L13, L12\nL12:\n ret 0\nL13:\n ret 96\n";

    fn ipv4_like(src: [u8; 4], proto: u8, ihl: u8) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[12] = 8;
        p[14] = 0x40 | ihl;
        p[23] = proto;
        p[26..30].copy_from_slice(&src);
        for (k, b) in p.iter_mut().enumerate().skip(34) {
            *b = k as u8;
        }
        p
    }

    #[test]
    fn a_rare_test_opens_an_early_exit() {
        if !crate::supported() {
            return;
        }
        let ir = filter_ir(ADDRESS_THEN_MORE, &Options::default());
        assert_eq!(branches(&ir), 1, "{ir}");
        let no_exits = Options {
            early_exits: false,
            ..Options::default()
        };
        assert_eq!(branches(&filter_ir(ADDRESS_THEN_MORE, &no_exits)), 0);
        // Tests that are not rare (an EtherType, a protocol) open none.
        assert_eq!(branches(&filter_ir(AND_CHAIN, &Options::default())), 0);
        let mut packets = Vec::new();
        for src in [[10, 1, 1, 1], [10, 1, 1, 2]] {
            for proto in [6, 17] {
                for ihl in [0, 2, 5, 6] {
                    packets.push(ipv4_like(src, proto, ihl));
                }
            }
        }
        for options in [Options::default(), no_exits] {
            agrees(ADDRESS_THEN_MORE, &options, &packets);
        }
    }

    #[test]
    fn a_large_switch_is_hashed_without_branches() {
        if !crate::supported() {
            return;
        }
        // Ten keys, three targets and a default.
        let text = "ld.b r0, [0]\n switch r0, T0, L4\nL1:\n ret 1\nL2:\n ret 2\nL3:\n ld.w r1, [1]\n ret r1\nL4:\n ret 0\n.table T0\n 1 -> L1\n 7 -> L2\n 9 -> L1\n 20 -> L3\n 33 -> L2\n 60 -> L1\n 61 -> L1\n 99 -> L3\n 200 -> L2\n 255 -> L1\n";
        // Only the long-packet test (the word at 1 has a bound of its own).
        let ir = filter_ir(text, &Options::default());
        assert_eq!(branches(&ir), 1, "{ir}");
        let packets: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b, 1, 2, 3, 4]).collect();
        agrees(text, &Options::default(), &packets);
    }
}
