//! Safe loads: every load of the if-converted code reads a safe address, because it now runs
//! on paths that would not have made it. A load points at the packet only when its bytes (or
//! the bytes its bounds check covers) fit below `caplen`, else at a block of zeros; a bounds
//! check becomes a guard of its block. Also here: the bound that splits long packets (every
//! constant-offset load fits, no bounds logic) from short ones, see [`super::emit`].

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, Value};
use sift_bytecode::{Insn, Operand, Reg};

use super::{Emitter, Pred, State};
use crate::bounds::Guard;
use crate::translate::Plan;

/// Bytes of zeros that loads read instead of the packet on paths not taken. Loads below the
/// entry bound use it only when that bound fits.
pub(super) const ZEROS_LEN: usize = 512;
pub(super) static ZEROS: [u64; ZEROS_LEN / 8] = [0; ZEROS_LEN / 8];

/// Longest packet the long-packet path may require: 54 bytes, an Ethernet frame of TCP over
/// IPv4 without options or payload (a bare ACK as its sender captures it), the shortest packet
/// common in real traffic. A path for longer packets only would be missed by such packets, and
/// its branch mispredicted on them: measured on the JIT benchmark's traffic (a fifth of it
/// such 54-byte packets, a quarter of the rest shorter than 55 bytes), `tcp or src host A`
/// with a path for packets of 55 bytes and more (the IPv6 fragment header's protocol byte)
/// took 12.5-13.3 ns per packet, 7.4 ns without one, and 6.7-7.7 with one for 32 bytes and
/// more (the limit here).
pub(super) const MAX_LONG: u64 = 54;

/// The bytes each reachable constant-offset load of the program needs (with the bound its
/// check covers), in program order.
fn fixed_bounds<'p>(plan: &'p Plan<'_>) -> impl Iterator<Item = u64> + 'p {
    let p = plan.program;
    p.code.iter().enumerate().filter_map(move |(i, insn)| {
        let Insn::Load {
            width,
            base: None,
            offset,
            ..
        } = *insn
        else {
            return None;
        };
        if !plan.flow.reachable[i] {
            return None;
        }
        let units = if plan.pairs[i].is_some() { 2 } else { 1 };
        let end = u64::from(offset) + u64::from(width.bytes()) * units;
        Some(match plan.bounds.guard[i] {
            Guard::Check(n) => n.max(end),
            _ => end,
        })
    })
}

/// The distinct bounds above `entry` and at most [`MAX_LONG`] that the constant-offset loads
/// need, in increasing order: on the short-packet path each costs a compare and a select of
/// the loads' base; on a path for packets of the last one's length or more, none does.
pub(super) fn long_bounds(plan: &Plan<'_>, entry: u64) -> Vec<u64> {
    let mut bounds: Vec<u64> = fixed_bounds(plan)
        .filter(|&n| n > entry && n <= MAX_LONG)
        .collect();
    bounds.sort_unstable();
    bounds.dedup();
    bounds
}

/// Per instruction: the bounds checks that need no guard, and the bound whose safe base
/// other loads read from so that they see zeros where such a check fails.
pub(super) struct ZeroReads {
    /// A load with a bounds check whose failure already ends in `ret 0` ([`zero_walk`]).
    pub unguarded: Vec<bool>,
    /// The bound a load's base is selected by (0: its own): the largest failed check it must
    /// read zeros after.
    pub base_bound: Vec<u64>,
}

impl ZeroReads {
    pub(super) fn new(plan: &Plan<'_>) -> ZeroReads {
        let n = plan.program.code.len();
        let mut reads = ZeroReads {
            unguarded: vec![false; n],
            base_bound: vec![0; n],
        };
        for i in 0..n {
            let Guard::Check(checked) = plan.bounds.guard[i] else {
                continue;
            };
            if !plan.flow.reachable[i] || plan.pairs[i].is_some() {
                continue;
            }
            if let Some(loads) = zero_walk(plan, i, checked) {
                reads.unguarded[i] = true;
                for j in loads {
                    reads.base_bound[j] = reads.base_bound[j].max(checked);
                }
            }
        }
        reads
    }
}

/// Whether every way on from the load at `i`, with 0 loaded, returns 0 when the loads after it
/// read 0 too, taking only branches that loaded values decide. Then a failed bounds check at
/// `i` (`checked` bytes), where the load reads zeros, already ends in the interpreter's result
/// and the block needs no guard for it, provided the later loads read zeros whenever that check
/// fails: returns those loads. They lie at constant offsets below `checked`, after a load at a
/// constant offset itself, so reading at the base that check selects stays inside the packet
/// or the zeros. Every instruction on the way has one predecessor, so every path to those loads
/// passed the check, and on every path where it holds they read the packet as before.
pub(super) fn zero_walk(plan: &Plan<'_>, i: usize, checked: u64) -> Option<Vec<usize>> {
    let p = plan.program;
    let Some(&Insn::Load { dst, base, .. }) = p.code.get(i) else {
        return None;
    };
    // An indexed load's check counts bytes from its index: other loads cannot share its base.
    let shares_base = base.is_none();
    let mut zero = [false; 16];
    zero[dst.index() & 15] = true;
    let is_zero = |zero: &[bool; 16], r: Reg| zero[r.index() & 15];
    let mut loads = Vec::new();
    let mut at = i + 1;
    // Targets lie forward: each step moves on.
    while let Some(insn) = p.code.get(at) {
        if let Insn::Return {
            value: Operand::Imm(0),
        } = insn
        {
            return Some(loads);
        }
        if plan.flow.preds[at] != 1 {
            return None;
        }
        at = match *insn {
            Insn::Load {
                dst,
                width,
                base: None,
                offset,
            } if shares_base && plan.pairs[at].is_none() => {
                match plan.bounds.guard[at] {
                    Guard::Covered if u64::from(offset) + u64::from(width.bytes()) <= checked => {
                        loads.push(at)
                    }
                    // Its own base already reads zeros where `checked` fails.
                    Guard::Check(n) if n >= checked => {}
                    Guard::Reject => return Some(loads),
                    _ => return None,
                }
                zero[dst.index() & 15] = true;
                at + 1
            }
            Insn::Branch {
                cond,
                lhs,
                rhs: Operand::Imm(k),
                then_,
                else_,
            } if is_zero(&zero, lhs) => {
                if cond.eval(0, k) {
                    then_ as usize
                } else {
                    else_ as usize
                }
            }
            Insn::Switch {
                key,
                table,
                default,
            } if is_zero(&zero, key) => p.tables[table as usize]
                .entries
                .iter()
                .find(|&&(k, _)| k == 0)
                .map_or(default, |&(_, target)| target)
                as usize,
            Insn::Jump { target } => target as usize,
            _ => return None,
        };
    }
    None
}

impl Emitter<'_, '_, '_> {
    /// The path predicate after the load's guard and a safe address for the load at `i`
    /// (`units` loads of the instruction's width wide, for a coalesced pair), or `None` where
    /// the load can only read the zeros (on the short-packet path, beyond its bound). A bounds
    /// check the aggregation placed here becomes a guard of the block.
    pub(super) fn load_address(
        &mut self,
        i: usize,
        reach: Pred,
        state: &State,
        offset: u32,
        base: Option<Reg>,
        units: u32,
    ) -> (Pred, Option<Value>) {
        let Insn::Load { width, .. } = self.plan.program.code[i] else {
            unreachable!("loads only");
        };
        let end = u64::from(offset) + u64::from(width.bytes()) * u64::from(units);
        // A load that must read zeros where an earlier check fails reads at that check's base.
        let checked = match self.plan.bounds.guard[i] {
            Guard::Check(n) => n,
            _ => end,
        }
        .max(self.zero_reads.base_bound[i]);
        if base.is_none() && checked <= self.long {
            // The long-packet path: every constant-offset bound holds.
            let address = self.b.ins().iadd_imm_u(self.data, i64::from(offset));
            return (reach, Some(address));
        }
        if base.is_none() {
            if let Some((at, _, need)) = self.entry {
                if checked <= need {
                    // Covered by the entry bound; below it the program rejects anyway.
                    let address = self.b.ins().iadd_imm_u(at, i64::from(offset));
                    return (reach, Some(address));
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
        // address itself is selected. Where the bytes never fit, the load would read zeros:
        // its value is known without it.
        let address = if base.is_none() && self.never_fits(checked) {
            None
        } else if end <= ZEROS_LEN as u64 {
            Some(self.b.ins().iadd_imm_u(safe, i64::from(offset)))
        } else {
            let at = self.b.ins().iadd_imm_u(unchecked, i64::from(offset));
            Some(self.b.ins().select(fits, at, self.zeros))
        };
        let reach = match self.plan.bounds.guard[i] {
            // The interpreter rejects here when the checked bytes do not fit; so does the
            // code on the zeros this load and those after it then read.
            Guard::Check(_) if units == 1 && self.zero_reads.unguarded[i] => reach,
            Guard::Check(_) => {
                self.guards.push(fits);
                self.and(reach, fits)
            }
            _ => reach,
        };
        (reach, address)
    }

    /// Whether `checked` bytes from the packet's start cannot fit on this path: on the
    /// short-packet path, those at or beyond its bound. Such loads read the zeros.
    fn never_fits(&self, checked: u64) -> bool {
        checked >= self.short
    }

    /// Whether `checked` bytes from the packet (plus `base`, an `i32` register value) fit below
    /// `caplen`, that start, and the start or the zeros when they do not fit.
    fn safe_base(&mut self, base: Option<Value>, checked: u64) -> (Value, Value, Value) {
        let (fits, start) = match base {
            None if self.never_fits(checked) => (self.b.ins().iconst(types::I8, 0), self.data),
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
}
