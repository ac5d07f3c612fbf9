//! Dead register writes: an instruction whose only effect is to set `A` or `X` to a value
//! nobody reads before the register is set again is dropped.
//!
//! The selector loads an edge argument into a register for its copy; when the allocator gives
//! the parameter the argument's word ([`super::coalesce`]) the store goes and the load
//! (`ld M[k]; ja`) is left with no reader. Liveness of the two registers is computed over the
//! pieces (their graph is acyclic, so one pass successors first suffices). Only instructions
//! that cannot reject the packet go: packet loads and `ldxb 4*([k]&0xf)` stay even when their
//! result is dead, unless [`super::bounds`] proves that an earlier load on every path read
//! those bytes already; division by `X` always stays. A piece holding a `protochain` loop
//! (jumps inside its instructions, with offsets that must not move) is left as it is and reads
//! both registers.

use super::machine::{Exit, Piece};
use crate::insn::{AluOp, Insn, Op, Src};

pub(super) const A: u8 = 1;
pub(super) const X: u8 = 2;

/// The registers an instruction reads and writes, and whether it can be dropped when what it
/// writes is dead (no other effect, never rejects the packet).
pub(super) fn effect(insn: Insn) -> (u8, u8, bool) {
    match insn.decode() {
        Some(Op::LdAbs(_)) => (0, A, false),
        Some(Op::LdInd(_)) => (X, A, false),
        Some(Op::LdLen | Op::LdImm | Op::LdMem) => (0, A, true),
        Some(Op::LdxImm | Op::LdxMem | Op::LdxLen) => (0, X, true),
        Some(Op::LdxMsh) => (0, X, false),
        Some(Op::St) => (A, 0, false),
        Some(Op::Stx) => (X, 0, false),
        Some(Op::Alu(op, Src::X)) => (A | X, A, !matches!(op, AluOp::Div | AluOp::Mod)),
        Some(Op::Alu(_, Src::K) | Op::Neg) => (A, A, true),
        Some(Op::Tax) => (A, X, true),
        Some(Op::Txa) => (X, A, true),
        Some(Op::RetA) => (A, 0, false),
        Some(Op::RetK) => (0, 0, false),
        // Jumps inside a piece (a loop) and anything undecodable: keep, read everything.
        _ => (A | X, 0, false),
    }
}

/// Whether a piece's instructions contain jumps (a `protochain` loop).
pub(super) fn has_inner_jumps(p: &Piece) -> bool {
    p.insns
        .iter()
        .any(|i| matches!(i.decode(), Some(Op::Ja | Op::Jmp(..))))
}

/// Removes dead register writes from the pieces reachable in `postorder` (every piece after
/// its successors). Packet loads go too when [`super::bounds`] proves they complete.
pub(super) fn remove(pieces: &mut [Piece], postorder: &[usize]) {
    let proved = super::bounds::proved_loads(pieces, postorder);
    // Registers live at each piece's entry; pieces not computed yet count as reading both.
    let mut live_in = vec![A | X; pieces.len()];
    // Scratch: which instructions of the piece stay.
    let mut keep: Vec<bool> = Vec::new();
    for &p in postorder {
        let live_at = |s: usize| live_in.get(s).copied().unwrap_or(A | X);
        let mut live = match pieces[p].exit {
            Exit::Return => 0,
            Exit::Jump(t) => live_at(t),
            exit @ Exit::Cond { t, f, .. } => {
                let reads_x = matches!(exit.test(), Some(Op::Jmp(_, Src::X)));
                live_at(t) | live_at(f) | A | if reads_x { X } else { 0 }
            }
        };
        if has_inner_jumps(&pieces[p]) {
            live_in[p] = A | X;
            continue;
        }
        keep.clear();
        keep.resize(pieces[p].insns.len(), true);
        for (i, &insn) in pieces[p].insns.iter().enumerate().rev() {
            let (reads, writes, droppable) = effect(insn);
            let droppable = droppable || proved[p][i];
            if droppable && writes & live == 0 {
                keep[i] = false;
                continue;
            }
            live = (live & !writes) | reads;
        }
        // In place: most pieces lose nothing.
        let mut i = 0;
        pieces[p].insns.retain(|_| {
            i += 1;
            keep[i - 1]
        });
        live_in[p] = live;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::insn::{JmpOp, Size};

    fn piece(insns: Vec<Insn>, exit: Exit) -> Piece {
        Piece { insns, exit }
    }

    #[test]
    fn loads_nobody_reads_go_packet_loads_stay() {
        let jeq = Op::Jmp(JmpOp::Jeq, Src::K).code();
        let mut pieces = vec![
            // 0: `ld M[0]` is overwritten by the packet load of piece 1 and read by nobody;
            // `ldx M[1]` is read by piece 2's `ldb [x + 2]`.
            piece(
                vec![Op::LdMem.with_k(0), Op::LdxMem.with_k(1)],
                Exit::Jump(1),
            ),
            piece(
                vec![Op::LdAbs(Size::Half).with_k(12)],
                Exit::Cond {
                    code: jeq,
                    k: 7,
                    t: 2,
                    f: 3,
                },
            ),
            piece(
                vec![Op::LdInd(Size::Byte).with_k(2), Op::RetA.with_k(0)],
                Exit::Return,
            ),
            // The load into A of a `ret #0` piece is dead, the packet load of byte 20 is not
            // (it may fail); that of byte 12 is (piece 1 read it already).
            piece(
                vec![
                    Op::LdAbs(Size::Byte).with_k(20),
                    Op::LdAbs(Size::Byte).with_k(12),
                    Op::LdImm.with_k(3),
                    Op::RetK.with_k(0),
                ],
                Exit::Return,
            ),
        ];
        remove(&mut pieces, &[2, 3, 1, 0]);
        assert_eq!(pieces[0].insns, vec![Op::LdxMem.with_k(1)]);
        assert_eq!(pieces[1].insns.len(), 1);
        assert_eq!(
            pieces[3].insns,
            vec![Op::LdAbs(Size::Byte).with_k(20), Op::RetK.with_k(0)]
        );
    }
}
