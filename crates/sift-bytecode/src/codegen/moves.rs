//! Parallel moves in the bytecode: the order comes from [`sift_ir::moves`]; this module turns
//! each single move into register, constant and scratch-slot instructions.

use sift_ir::moves::{self, MoveSource};

use crate::insn::{Insn, Operand, Reg};

/// Where a value lives: a register or a scratch slot (a spilled value).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Loc {
    Reg(Reg),
    Slot(u16),
}

/// The source of a move: a location or a constant.
pub(crate) type Source = MoveSource<Loc>;

/// Emits `moves` (destination, source) as a sequence of instructions, as if performed at once.
/// Destinations must be distinct. `cycle_temp` breaks cycles; `slot_temp` carries a value into
/// a scratch slot; neither may be a destination or source.
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

fn emit_move(d: Loc, s: Source, slot_temp: Reg, out: &mut Vec<Insn>) {
    match (d, s) {
        (Loc::Reg(dst), Source::Imm(k)) => out.push(Insn::Mov {
            dst,
            src: Operand::Imm(k),
        }),
        (Loc::Reg(dst), Source::Loc(Loc::Reg(r))) => out.push(Insn::Mov {
            dst,
            src: Operand::Reg(r),
        }),
        (Loc::Reg(dst), Source::Loc(Loc::Slot(slot))) => {
            out.push(Insn::LoadScratch { dst, slot });
        }
        (Loc::Slot(slot), Source::Loc(Loc::Reg(src))) => {
            out.push(Insn::StoreScratch { slot, src });
        }
        (Loc::Slot(slot), Source::Imm(_) | Source::Loc(Loc::Slot(_))) => {
            emit_move(Loc::Reg(slot_temp), s, slot_temp, out);
            out.push(Insn::StoreScratch {
                slot,
                src: slot_temp,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the emitted moves on a toy machine and checks the parallel semantics.
    fn check(moves: &[(Loc, Source)]) {
        let mut regs = [0u32; 16];
        let mut slots = [0u32; 8];
        for (i, r) in regs.iter_mut().enumerate() {
            *r = 100 + i as u32;
        }
        for (i, s) in slots.iter_mut().enumerate() {
            *s = 200 + i as u32;
        }
        let read = |regs: &[u32; 16], slots: &[u32; 8], s: Source| match s {
            Source::Imm(k) => k,
            Source::Loc(Loc::Reg(r)) => regs[r.index()],
            Source::Loc(Loc::Slot(k)) => slots[usize::from(k)],
        };
        let expected: Vec<u32> = moves.iter().map(|&(_, s)| read(&regs, &slots, s)).collect();
        let mut out = Vec::new();
        sequentialize(moves, Reg(15), Reg(14), &mut out);
        for insn in &out {
            match *insn {
                Insn::Mov { dst, src } => {
                    regs[dst.index()] = match src {
                        Operand::Reg(r) => regs[r.index()],
                        Operand::Imm(k) => k,
                    }
                }
                Insn::LoadScratch { dst, slot } => regs[dst.index()] = slots[usize::from(slot)],
                Insn::StoreScratch { slot, src } => slots[usize::from(slot)] = regs[src.index()],
                _ => unreachable!(),
            }
        }
        for (&(d, _), want) in moves.iter().zip(expected) {
            assert_eq!(
                read(&regs, &slots, Source::Loc(d)),
                want,
                "{moves:?} -> {out:?}"
            );
        }
    }

    fn r(n: u8) -> Loc {
        Loc::Reg(Reg(n))
    }

    fn s(l: Loc) -> Source {
        Source::Loc(l)
    }

    #[test]
    fn swaps_rotations_and_chains() {
        check(&[(r(0), s(r(1))), (r(1), s(r(0)))]);
        check(&[(r(0), s(r(1))), (r(1), s(r(2))), (r(2), s(r(0)))]);
        check(&[(r(0), s(r(1))), (r(1), s(r(2))), (r(3), s(r(0)))]);
        check(&[(r(0), s(r(0))), (r(1), Source::Imm(7))]);
        // Two independent cycles and a tree hanging off one of them.
        check(&[
            (r(0), s(r(1))),
            (r(1), s(r(0))),
            (r(2), s(r(3))),
            (r(3), s(r(2))),
            (r(4), s(r(2))),
        ]);
    }

    #[test]
    fn cycles_through_slots() {
        check(&[
            (Loc::Slot(0), s(Loc::Slot(1))),
            (Loc::Slot(1), s(Loc::Slot(0))),
        ]);
        check(&[(Loc::Slot(0), s(r(1))), (r(1), s(Loc::Slot(0)))]);
        check(&[(Loc::Slot(2), Source::Imm(5)), (r(3), s(Loc::Slot(2)))]);
    }
}
