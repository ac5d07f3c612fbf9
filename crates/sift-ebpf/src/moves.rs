//! Parallel moves in eBPF: the order comes from [`sift_ir::moves`]; this module turns each
//! single move into register, constant and stack-slot instructions.

use sift_ir::moves::{self, MoveSource};

use crate::insn::{AluOp, Insn, Reg, Size, Src};
use crate::regalloc::Loc;

/// The source of a move: a location or a constant.
pub(crate) type Source = MoveSource<Loc>;

/// The frame-pointer offset of a stack slot.
pub(crate) fn slot_offset(slot: u16) -> i16 {
    -4 * (i16::try_from(slot).unwrap_or(i16::MAX / 4) + 1)
}

/// Emits `moves` (destination, source) as if performed at once. Destinations are distinct;
/// `cycle_temp` and `slot_temp` are neither destinations nor sources.
pub(crate) fn sequentialize(
    moves: &[(Loc, Source)],
    cycle_temp: Reg,
    slot_temp: Reg,
    out: &mut Vec<Insn>,
) {
    moves::sequentialize(moves, Loc::Reg(cycle_temp), |d, s| {
        emit_move(d, s, slot_temp, out)
    });
}

/// One move. Values are 32-bit and kept zero-extended in registers, so a 64-bit register copy
/// (which keeps the verifier's knowledge of the value) is as good as a 32-bit one.
pub(crate) fn emit_move(d: Loc, s: Source, slot_temp: Reg, out: &mut Vec<Insn>) {
    match (d, s) {
        (Loc::Reg(dst), Source::Imm(k)) => out.push(mov32_imm(dst, k)),
        (Loc::Reg(dst), Source::Loc(Loc::Reg(r))) => out.push(Insn::Alu {
            wide: true,
            op: AluOp::Mov,
            dst,
            src: Src::Reg(r),
        }),
        (Loc::Reg(dst), Source::Loc(Loc::Slot(slot))) => out.push(Insn::Load {
            size: Size::W,
            dst,
            base: Reg::FP,
            off: slot_offset(slot),
        }),
        (Loc::Slot(slot), Source::Loc(Loc::Reg(src))) => out.push(Insn::Store {
            size: Size::W,
            base: Reg::FP,
            off: slot_offset(slot),
            src,
        }),
        (Loc::Slot(_), Source::Imm(_) | Source::Loc(Loc::Slot(_))) => {
            emit_move(Loc::Reg(slot_temp), s, slot_temp, out);
            emit_move(d, Source::Loc(Loc::Reg(slot_temp)), slot_temp, out);
        }
    }
}

/// `wdst = k`: a 32-bit move, so any `u32` constant arrives zero-extended.
pub(crate) fn mov32_imm(dst: Reg, k: u32) -> Insn {
    Insn::Alu {
        wide: false,
        op: AluOp::Mov,
        dst,
        src: Src::Imm(k as i32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the emitted moves on a toy machine and checks the parallel semantics.
    fn check(moves: &[(Loc, Source)]) {
        let mut regs = [0u64; 11];
        let mut slots = [0u32; 8];
        for (i, r) in regs.iter_mut().enumerate() {
            *r = 100 + i as u64;
        }
        for (i, s) in slots.iter_mut().enumerate() {
            *s = 200 + i as u32;
        }
        let read = |regs: &[u64; 11], slots: &[u32; 8], s: Source| -> u64 {
            match s {
                Source::Imm(k) => u64::from(k),
                Source::Loc(Loc::Reg(r)) => regs[usize::from(r.0)],
                Source::Loc(Loc::Slot(k)) => u64::from(slots[usize::from(k)]),
            }
        };
        let expected: Vec<u64> = moves.iter().map(|&(_, s)| read(&regs, &slots, s)).collect();
        let mut out = Vec::new();
        sequentialize(moves, Reg(0), Reg(1), &mut out);
        for insn in &out {
            match *insn {
                Insn::Alu {
                    op: AluOp::Mov,
                    dst,
                    src,
                    ..
                } => {
                    regs[usize::from(dst.0)] = match src {
                        Src::Reg(r) => regs[usize::from(r.0)],
                        Src::Imm(k) => u64::from(k as u32),
                    }
                }
                Insn::Load { dst, off, .. } => {
                    regs[usize::from(dst.0)] = u64::from(slots[(-off / 4 - 1) as usize])
                }
                Insn::Store { src, off, .. } => {
                    slots[(-off / 4 - 1) as usize] = regs[usize::from(src.0)] as u32
                }
                _ => unreachable!(),
            }
        }
        for (&(d, _), want) in moves.iter().zip(expected) {
            assert_eq!(read(&regs, &slots, Source::Loc(d)), want, "{moves:?}");
        }
    }

    fn r(n: u8) -> Loc {
        Loc::Reg(Reg(n))
    }

    fn s(l: Loc) -> Source {
        Source::Loc(l)
    }

    #[test]
    fn swaps_rotations_and_slots() {
        check(&[(r(2), s(r(3))), (r(3), s(r(2)))]);
        check(&[(r(2), s(r(3))), (r(3), s(r(4))), (r(4), s(r(2)))]);
        check(&[(r(2), s(r(3))), (r(3), s(r(4))), (r(5), s(r(2)))]);
        check(&[(r(2), s(r(2))), (r(3), Source::Imm(0xffff_fff0))]);
        check(&[
            (Loc::Slot(0), s(Loc::Slot(1))),
            (Loc::Slot(1), s(Loc::Slot(0))),
        ]);
        check(&[(Loc::Slot(0), s(r(3))), (r(3), s(Loc::Slot(0)))]);
        check(&[(Loc::Slot(2), Source::Imm(5)), (r(3), s(Loc::Slot(2)))]);
    }

    #[test]
    fn slot_offsets_are_below_the_frame_pointer() {
        assert_eq!(slot_offset(0), -4);
        assert_eq!(slot_offset(127), -512);
    }
}
