//! If-conversion: small programs as straight-line code, without a conditional branch.
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
//! So a small program without calls (and with `switch` tables of few keys) is evaluated on
//! every path at once, as predicated code: each block gets a *reach* predicate (the OR over its incoming edges of the
//! predecessor's reach AND the edge's condition), each register at a join becomes a `select`
//! over the incoming edges, and each `ret` folds `select(reach, value, result)` into the
//! result. Exactly one `ret` is reached, so the result is the interpreter's.
//!
//! Loads now run on paths that would not have made them, so every load reads a safe address:
//!
//! * `caplen < need(entry)` (the bound of [`crate::bounds`] anticipated at the first
//!   instruction) means the program returns 0 whatever the bytes; so one `select` points the
//!   loads below that bound at the packet or, when it is shorter, at a block of zeros, and the
//!   result is forced to 0 then;
//! * any other load points at the packet only when its own bytes fit below `caplen`, else at the
//!   zeros; a bounds check the aggregation placed there (return 0 unless `caplen` covers `n`
//!   bytes) becomes part of the path's predicate;
//! * a division by a register divides by 1 instead of 0, and the zero divisor ends the path
//!   (returns 0), as in the interpreter.
//!
//! The values computed on paths not taken are never observed: they only feed `select`s whose
//! condition is false.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;
use sift_bytecode::{AluOp, Cond, Insn, Operand, Program, Reg, Width};

use crate::arith;
use crate::bounds::Guard;
use crate::translate::{
    compare, load_packet_value, native_constant, packet_flags, width_mask, Plan, Rhs,
};

/// Largest program (in reachable instructions) evaluated without branches: every instruction
/// runs for every packet, so beyond this the work outweighs the mispredictions saved.
const MAX_INSNS: usize = 48;
/// Most conditional branches, counting each case of a `switch` (each costs a few instructions
/// of predicate logic).
const MAX_BRANCHES: usize = 12;

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
                branches += p
                    .tables
                    .get(*table as usize)
                    .map_or(usize::MAX, |t| t.entries.len())
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
    /// Incoming edges of each instruction that starts a block: predicate and state.
    incoming: Vec<Vec<(Pred, State)>>,
    result: Value,
}

/// Emits the whole program as straight-line code into the current block of `b` and returns
/// its result (`i32`). The caller checked [`eligible`].
pub(crate) fn emit(
    b: &mut FunctionBuilder<'_>,
    plan: &Plan<'_>,
    data: Value,
    caplen: Value,
    wire_len: Value,
) -> Value {
    let p = plan.program;
    let zeros = b.ins().iconst(types::I64, ZEROS.as_ptr() as usize as i64);
    let result = b.ins().iconst(types::I32, 0);
    let Some(need) = plan.bounds.entry_need else {
        return result; // every path returns 0
    };
    let entry = (need > 0 && need <= ZEROS_LEN as u64).then(|| {
        let fits = b
            .ins()
            .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, caplen, need as i64);
        (b.ins().select(fits, data, zeros), fits, need)
    });
    let mut e = Emitter {
        b,
        plan,
        data,
        caplen,
        wire_len,
        zeros,
        entry,
        incoming: vec![Vec::new(); p.code.len() + 1],
        result,
    };
    e.incoming[0].push((
        Pred::True,
        State {
            regs: [None; 16],
            scratch: vec![None; usize::from(p.scratch_words)],
        },
    ));
    e.run();
    let mut result = e.result;
    if let Some((_, fits, _)) = e.entry {
        let zero = e.b.ins().iconst(types::I32, 0);
        result = e.b.ins().select(fits, result, zero);
    }
    result
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

    /// The join of the incoming edges of block `i`: its reach and state (`None`: unreached).
    fn join(&mut self, i: usize) -> Option<(Pred, State)> {
        let edges = std::mem::take(&mut self.incoming[i]);
        let (mut reach, mut state) = edges.first().cloned()?;
        for (pred, _) in &edges[1..] {
            reach = self.or(reach, *pred);
        }
        let merge = |e: &mut Self, pick: &dyn Fn(&State) -> Option<Value>| {
            let first = pick(&edges[0].1);
            if edges.iter().all(|(_, s)| pick(s) == first) {
                return first;
            }
            // The last edge's value is the default; each earlier edge overrides where it holds.
            let zero = e.b.ins().iconst(types::I32, 0);
            let (_, last) = edges.last()?;
            let mut v = pick(last).unwrap_or(zero);
            for (pred, s) in edges[..edges.len() - 1].iter().rev() {
                let x = pick(s).unwrap_or(zero);
                v = e.pick(*pred, x, v);
            }
            Some(v)
        };
        for r in 0..16 {
            state.regs[r] = merge(self, &|s: &State| s.regs[r]);
        }
        for w in 0..state.scratch.len() {
            state.scratch[w] = merge(self, &|s: &State| s.scratch[w]);
        }
        Some((reach, state))
    }

    fn run(&mut self) {
        let plan = self.plan;
        let p = plan.program;
        // The block being evaluated: its reach and state; `None` after a terminator or on a
        // path that has returned.
        let mut current: Option<(Pred, State)> = None;
        for i in 0..p.code.len() {
            if plan.flow.block_start[i] {
                if let Some(edge) = current.take() {
                    self.incoming[i].push(edge); // fall through
                }
                current = self.join(i);
            }
            if !plan.flow.reachable[i] {
                continue;
            }
            let Some((reach, mut state)) = current.take() else {
                continue;
            };
            if let Some(pair) = plan.pairs[i] {
                // The wide compare replaces this load and the two branches (the second
                // test's block is reached only from here: it gets no edge, so it is skipped).
                if plan.bounds.guard[i] == Guard::Reject {
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
                self.incoming[pair.equal as usize].push((t, state.clone()));
                self.incoming[pair.unequal as usize].push((f, state));
                continue;
            }
            current = self.insn(i, reach, &mut state).map(|r| (r, state));
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

    /// Evaluates instruction `i` on the path `reach`; returns the path's predicate after it
    /// (`None`: the path has left, by a terminator or a certain reject).
    fn insn(&mut self, i: usize, reach: Pred, state: &mut State) -> Option<Pred> {
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
                    return None; // every path from here returns 0
                }
                let (reach, address) = self.load_address(i, reach, state, offset, base, 1);
                let native = self.plan.flow.native_order[i].is_some();
                let v = load_packet_value(self.b, address, width, native);
                set(state, dst, v);
                return Some(reach);
            }
            Insn::Alu { op, dst, lhs, rhs } => {
                let a = self.reg(state, lhs);
                let (reach, v) = self.alu(i, reach, op, a, state, rhs)?;
                set(state, dst, v);
                return Some(reach);
            }
            Insn::Jump { target } => {
                self.incoming[target as usize].push((reach, state.clone()));
                return None;
            }
            Insn::Branch {
                cond,
                lhs,
                rhs,
                then_,
                else_,
            } => {
                match self.condition(i, state, cond, lhs, rhs) {
                    _ if then_ == else_ => {
                        self.incoming[then_ as usize].push((reach, state.clone()))
                    }
                    Ok(holds) => {
                        let t = self.and(reach, holds);
                        let f = self.and_not(reach, holds);
                        self.incoming[then_ as usize].push((t, state.clone()));
                        self.incoming[else_ as usize].push((f, state.clone()));
                    }
                    Err(true) => self.incoming[then_ as usize].push((reach, state.clone())),
                    Err(false) => self.incoming[else_ as usize].push((reach, state.clone())),
                }
                return None;
            }
            // The result starts at 0: nothing to fold.
            Insn::Return {
                value: Operand::Imm(0),
            } => return None,
            Insn::Return { value } => {
                let v = self.operand(state, value);
                self.result = self.pick(reach, v, self.result);
                return None;
            }
            Insn::Switch {
                key,
                table,
                default,
            } => {
                // One equality per case; the default where none holds (keys are distinct).
                let key = self.reg(state, key);
                let mut matched: Option<Value> = None;
                for &(k, target) in &self.plan.program.tables[table as usize].entries {
                    let equal = self.b.ins().icmp_imm_u(IntCC::Equal, key, i64::from(k));
                    let edge = self.and(reach, equal);
                    self.incoming[target as usize].push((edge, state.clone()));
                    matched = Some(match matched {
                        None => equal,
                        Some(m) => self.b.ins().bor(m, equal),
                    });
                }
                let edge = match matched {
                    None => reach,
                    Some(m) => self.and_not(reach, m),
                };
                self.incoming[default as usize].push((edge, state.clone()));
                return None;
            }
            Insn::Contains { .. } | Insn::Member { .. } | Insn::Protochain { .. } => {
                unreachable!("not eligible for if-conversion")
            }
        }
        Some(reach)
    }

    /// The path predicate after the load's guard and a safe address for the load at `i`
    /// (`units` loads of the instruction's width wide, for a coalesced pair).
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
        if base.is_none() {
            if let Some((at, _, need)) = self.entry {
                if checked <= need {
                    // Covered by the entry bound; below it the program rejects anyway.
                    let address = self.b.ins().iadd_imm_u(at, i64::from(offset));
                    return (reach, address);
                }
            }
        }
        // `fits`: the checked bytes (at least the load's) lie below `caplen`.
        let (fits, address) = match base {
            None => {
                let fits = self.b.ins().icmp_imm_u(
                    IntCC::UnsignedGreaterThanOrEqual,
                    self.caplen,
                    checked as i64,
                );
                (fits, self.data)
            }
            Some(r) => {
                let v = self.reg(state, r);
                let b64 = self.b.ins().uextend(types::I64, v);
                let last = self.b.ins().iadd_imm_u(b64, checked as i64);
                let fits = self
                    .b
                    .ins()
                    .icmp(IntCC::UnsignedLessThanOrEqual, last, self.caplen);
                (fits, self.b.ins().iadd(self.data, b64))
            }
        };
        let address = self.b.ins().iadd_imm_u(address, i64::from(offset));
        let address = self.b.ins().select(fits, address, self.zeros);
        let reach = match self.plan.bounds.guard[i] {
            // The interpreter rejects here when the checked bytes do not fit.
            Guard::Check(_) => self.and(reach, fits),
            _ => reach,
        };
        (reach, address)
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
                Some((self.and(reach, nonzero), v))
            }
        }
    }

    /// The native byte order width of the definition instruction `i` reads in slot 0, if any.
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
        assert!(!ir.contains("brif"), "{ir}");
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
        assert!(!ir.contains("brif") && !ir.contains("br_table"), "{ir}");
    }
}
