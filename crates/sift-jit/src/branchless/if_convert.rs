//! The core if-conversion: evaluates the program's blocks in order, each on its reach
//! predicate, merging registers and scratch words at joins with `select`s and recording each
//! block's exit ([`crate::outcome`]). Loads, switches and early exits have modules of their own.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use sift_bytecode::{AluOp, Cond, Insn, Operand, Reg, Width};

use super::{Edge, Emitter, Pred, State};
use crate::arith;
use crate::bounds::Guard;
use crate::flow::MULTI;
use crate::outcome::{Outcome, Term};
use crate::translate::{
    compare, load_packet_value, native_constant, packet_flags, width_mask, Rhs,
};

impl Emitter<'_, '_, '_> {
    pub(super) fn and(&mut self, a: Pred, cond: Value) -> Pred {
        match a {
            Pred::True => Pred::Value(cond),
            Pred::Value(a) => Pred::Value(self.b.ins().band(a, cond)),
        }
    }

    pub(super) fn and_not(&mut self, a: Pred, cond: Value) -> Pred {
        match a {
            Pred::True => Pred::Value(self.b.ins().bxor_imm_u(cond, 1)),
            Pred::Value(a) => Pred::Value(self.b.ins().band_not(a, cond)),
        }
    }

    pub(super) fn or(&mut self, a: Pred, b: Pred) -> Pred {
        match (a, b) {
            (Pred::True, _) | (_, Pred::True) => Pred::True,
            (Pred::Value(a), Pred::Value(b)) => Pred::Value(self.b.ins().bor(a, b)),
        }
    }

    /// `value` where `p` holds, else `other`.
    pub(super) fn pick(&mut self, p: Pred, value: Value, other: Value) -> Value {
        match p {
            Pred::True => value,
            Pred::Value(c) => self.b.ins().select(c, value, other),
        }
    }

    pub(super) fn push(&mut self, target: u32, pred: Pred, state: &State, rare: bool) {
        self.incoming[target as usize].push(Edge {
            pred,
            state: state.clone(),
            rare,
        });
    }

    /// Ends the current block with `term`.
    pub(super) fn end(&mut self, term: Term) {
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
            state.taken = state.taken.meet(e.state.taken);
        }
        // Per edge but the last, what tells it from the later ones (see `Taken`).
        let apart: Vec<Option<(Value, bool)>> = (0..edges.len() - 1)
            .map(|k| self.apart(&edges[k..]))
            .collect();
        let merge = |e: &mut Self, pick: &dyn Fn(&State) -> Option<Value>| {
            let first = pick(&edges[0].state);
            if edges.iter().all(|edge| pick(&edge.state) == first) {
                return first;
            }
            // The last edge's value is the default; each earlier edge overrides where it holds.
            let zero = e.b.ins().iconst(types::I32, 0);
            let last = edges.last()?;
            let mut v = pick(&last.state).unwrap_or(zero);
            for (edge, &apart) in edges[..edges.len() - 1].iter().zip(&apart).rev() {
                let x = pick(&edge.state).unwrap_or(zero);
                v = match apart {
                    Some((c, true)) => e.b.ins().select(c, x, v),
                    Some((c, false)) => e.b.ins().select(c, v, x),
                    None => e.pick(edge.pred, x, v),
                };
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

    /// A branch condition that tells every path along `edges[0]` from every path along the
    /// later `edges`: the earliest branch all paths of the first took on one side and all
    /// paths of the others on the other, with the side of the first (`None`: there is none).
    fn apart(&self, edges: &[Edge]) -> Option<(Value, bool)> {
        let (first, rest) = (edges[0].state.taken, &edges[1..]);
        let (mut then_, mut else_) = (first.then_, first.else_);
        for e in rest {
            (then_, else_) = (then_ & e.state.taken.else_, else_ & e.state.taken.then_);
        }
        let (i, holds) = [(then_, true), (else_, false)]
            .into_iter()
            .filter(|&(bits, _)| bits != 0)
            .map(|(bits, holds)| (bits.trailing_zeros() as usize, holds))
            .min()?;
        Some((*self.conditions.get(&i)?, holds))
    }

    pub(super) fn run(&mut self) {
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
                let v = match address {
                    Some(address) => self.b.ins().load(wide, packet_flags(), address, 0),
                    None => self.b.ins().iconst(wide, 0),
                };
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

    pub(super) fn reg(&mut self, state: &State, r: Reg) -> Value {
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
    pub(super) fn reads_word(&self, i: usize) -> bool {
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

    /// The value that the load at `i` reads from a safe address, and the path predicate after
    /// its bounds guard.
    pub(super) fn load(&mut self, i: usize, reach: Pred, state: &State) -> (Pred, Value) {
        let Insn::Load {
            width,
            base,
            offset,
            ..
        } = self.plan.program.code[i]
        else {
            unreachable!("loads only");
        };
        let (reach, address) = self.load_address(i, reach, state, offset, base, 1);
        let native = self.plan.flow.native_order[i].is_some();
        let value = match address {
            Some(address) => load_packet_value(self.b, address, width, native),
            None => self.b.ins().iconst(types::I32, 0),
        };
        (reach, value)
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
            Insn::Load { dst, .. } => {
                if self.plan.bounds.guard[i] == Guard::Reject {
                    // Every path from here returns 0.
                    self.end(Term::Return(Outcome::Const(0)));
                    return None;
                }
                let (reach, v) = self.load(i, reach, state);
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
                        self.conditions.insert(i, holds);
                        let t = self.and(reach, holds);
                        let f = self.and_not(reach, holds);
                        let then_rare = rare || (rare_when_equal && cond == Cond::Eq);
                        let else_rare = rare || (rare_when_equal && cond == Cond::Ne);
                        let taken = state.taken;
                        state.taken = taken.with(i, true);
                        self.push(then_, t, state, then_rare);
                        state.taken = taken.with(i, false);
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
