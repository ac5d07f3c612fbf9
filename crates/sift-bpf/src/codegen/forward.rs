//! Store-to-load forwarding through `X`: `st M[k]` followed in the same piece by `ldx M[k]`,
//! with nothing in between touching `X`, becomes one `tax` at the store when no other read can
//! see the word's new value.
//!
//! The selector stores every value computed in `A` and reloads it where a later instruction
//! wants it in `X`. When that instruction comes soon after, as in the `(y | -y) >> 31` of the
//! branch-free tests after `protochain` (`xor #k; st M[3]; neg; ldx M[3]; or x`), copying the
//! value into `X` right away (`xor #k; tax; neg; or x`) saves the store and the reload for one
//! `tax`. It is exact: `st` leaves `A` alone, so the `tax` in its place puts into `X` the number
//! the store wrote; nothing up to the reload reads or writes `X`, so `X` then holds what the
//! reload would have loaded; and the store is dropped only when no read of the word could
//! observe it (none between the two, and the word is dead after the reload, by a liveness of
//! the 16 words over the pieces, whose graph is acyclic). Neither instruction can reject a
//! packet. In a piece holding a `protochain` loop (jumps inside, relative offsets that must not
//! move) only the straight code after the loop and every jump target is rewritten, and the
//! piece counts as reading every word it reads anywhere (an over-approximation of its live-in
//! words, so still sound).

use super::deadregs::{effect, X};
use super::machine::Piece;
use crate::insn::{Insn, Op};

/// Every scratch word (bit `k` is `M[k]`).
const ALL_WORDS: u32 = u32::MAX;

fn bit(k: u32) -> u32 {
    1u32.checked_shl(k).unwrap_or(0)
}

/// The words an instruction reads and writes.
fn word_effect(insn: Insn) -> (u32, u32) {
    match insn.decode() {
        Some(Op::LdMem | Op::LdxMem) => (bit(insn.k), 0),
        Some(Op::St | Op::Stx) => (0, bit(insn.k)),
        _ => (0, 0),
    }
}

/// The words live before `insns[from..]`, given those live after the last instruction.
fn live_before(insns: &[Insn], from: usize, live_out: u32) -> u32 {
    insns[from..].iter().rev().fold(live_out, |live, &i| {
        let (reads, writes) = word_effect(i);
        (live & !writes) | reads
    })
}

/// Where the straight code at the end of a piece begins: after its last inner jump (a
/// `protochain` loop's) and after every target of one. Instructions from there on can be
/// removed or replaced without moving any jump's target.
fn straight_from(insns: &[Insn]) -> usize {
    let mut from = 0;
    for (idx, insn) in insns.iter().enumerate() {
        let next = idx + 1;
        let reach = match insn.decode() {
            // The loop's backward `ja` has a negative offset, as libpcap emits it.
            Some(Op::Ja) => next.saturating_add_signed(insn.k as i32 as isize),
            Some(Op::Jmp(..)) => next + usize::from(insn.jt.max(insn.jf)),
            // Anything undecodable may jump anywhere: leave the piece alone.
            None => insns.len(),
            _ => continue,
        };
        from = from.max(next).max(reach);
    }
    from.min(insns.len())
}

/// The words live at the entry of a piece with inner jumps (a loop), by the usual backward
/// fixed point over its instructions; an undecodable instruction reads every word.
fn loop_live_in(insns: &[Insn], live_out: u32) -> u32 {
    let n = insns.len();
    // live[i]: words live before instruction i; live[n] is the piece's exit.
    let mut live = vec![0u32; n + 1];
    live[n] = live_out;
    let at = |live: &[u32], t: isize| {
        usize::try_from(t)
            .ok()
            .map_or(ALL_WORDS, |t| live[t.min(n)])
    };
    let mut changed = true;
    while changed {
        changed = false;
        for (idx, &insn) in insns.iter().enumerate().rev() {
            let next = idx as isize + 1;
            let after = match insn.decode() {
                Some(Op::RetK | Op::RetA) => 0,
                Some(Op::Ja) => at(&live, next + insn.k as i32 as isize),
                Some(Op::Jmp(..)) => {
                    at(&live, next + isize::from(insn.jt)) | at(&live, next + isize::from(insn.jf))
                }
                Some(_) => live[idx + 1],
                None => ALL_WORDS,
            };
            let (reads, writes) = word_effect(insn);
            let before = (after & !writes) | reads;
            if before != live[idx] {
                live[idx] = before;
                changed = true;
            }
        }
    }
    live[0]
}

/// The first `st M[k]` at `i >= from` and `ldx M[k]` at `j` that can be forwarded (see the
/// module comment).
fn candidate(insns: &[Insn], from: usize, live_out: u32) -> Option<(usize, usize)> {
    for (i, st) in insns.iter().enumerate().skip(from) {
        if st.decode() != Some(Op::St) {
            continue;
        }
        let word = bit(st.k);
        for (j, &insn) in insns.iter().enumerate().skip(i + 1) {
            if insn.decode() == Some(Op::LdxMem) && insn.k == st.k {
                if live_before(insns, j + 1, live_out) & word == 0 {
                    return Some((i, j));
                }
                break;
            }
            let (reads, writes, _) = effect(insn);
            let (word_reads, word_writes) = word_effect(insn);
            if (reads | writes) & X != 0 || (word_reads | word_writes) & word != 0 {
                break;
            }
        }
    }
    None
}

/// Forwards stores to reloads into `X` in the pieces of `postorder` (every piece after its
/// successors).
pub(super) fn forward(pieces: &mut [Piece], postorder: &[usize]) {
    // Words live at each piece's entry; pieces not computed yet count as reading every word.
    let mut live_in = vec![ALL_WORDS; pieces.len()];
    for &p in postorder {
        let live_out = pieces[p]
            .exit
            .successors()
            .map(|s| live_in.get(s).copied().unwrap_or(ALL_WORDS))
            .fold(0, |acc, w| acc | w);
        let from = straight_from(&pieces[p].insns);
        while let Some((i, j)) = candidate(&pieces[p].insns, from, live_out) {
            let insns = &mut pieces[p].insns;
            insns.remove(j);
            insns[i] = Op::Tax.with_k(0);
        }
        live_in[p] = if from == 0 {
            live_before(&pieces[p].insns, 0, live_out)
        } else {
            loop_live_in(&pieces[p].insns, live_out)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::machine::Exit;
    use crate::insn::{AluOp, JmpOp, Size, Src};

    fn piece(insns: Vec<Insn>, exit: Exit) -> Piece {
        Piece { insns, exit }
    }

    fn xor(k: u32) -> Insn {
        Op::Alu(AluOp::Xor, Src::K).with_k(k)
    }

    fn or_x() -> Insn {
        Op::Alu(AluOp::Or, Src::X).with_k(0)
    }

    #[test]
    fn stores_reloaded_into_x_become_tax_when_nothing_else_reads_them() {
        let jeq = Op::Jmp(JmpOp::Jeq, Src::K).code();
        let ldb = Op::LdAbs(Size::Byte).with_k(20);
        let neg = Op::Neg.with_k(0);
        let mut pieces = vec![
            // 0: M[3] is dead after the reload: `tax` replaces both. M[1] is read by piece 1,
            // so its store stays; `ldb [x + 14]` reads X between `st M[2]` and its reload.
            piece(
                vec![
                    ldb,
                    xor(0x3c),
                    Op::St.with_k(3),
                    neg,
                    Op::LdxMem.with_k(3),
                    or_x(),
                    Op::St.with_k(1),
                    neg,
                    Op::LdxMem.with_k(1),
                    or_x(),
                    Op::St.with_k(2),
                    Op::LdInd(Size::Byte).with_k(14),
                    Op::LdxMem.with_k(2),
                    or_x(),
                ],
                Exit::Cond {
                    code: jeq,
                    k: 0,
                    t: 1,
                    f: 2,
                },
            ),
            piece(vec![Op::LdMem.with_k(1), Op::RetA.with_k(0)], Exit::Return),
            piece(vec![Op::RetK.with_k(0)], Exit::Return),
        ];
        forward(&mut pieces, &[1, 2, 0]);
        assert_eq!(
            pieces[0].insns,
            vec![
                ldb,
                xor(0x3c),
                Op::Tax.with_k(0),
                neg,
                or_x(),
                Op::St.with_k(1),
                neg,
                Op::LdxMem.with_k(1),
                or_x(),
                Op::St.with_k(2),
                Op::LdInd(Size::Byte).with_k(14),
                Op::LdxMem.with_k(2),
                or_x(),
            ]
        );
    }
}
