//! Cross-jumping: pieces of machine code that end with the same instructions and leave the same
//! way share those instructions.
//!
//! Tail merging ([`super::machine`]) only merges pieces that are identical as a whole. Paths
//! that differ at first and then do the same thing end with equal *suffixes*: the two ways a
//! `protochain` round computes the next header's offset both store it and load the next
//! protocol (`st M[1]; ldb [x + 14]`) before the next round, in each of the 32 rounds of the
//! kernel's unrolled walk. Here such pieces are cut: the common suffix becomes one piece with
//! their exit, and each of them jumps to it.
//!
//! The suffixes form a trie over the pieces' instructions read backwards, one per exit; it is
//! walked deepest first, so a longer suffix shared by a few pieces is cut before a shorter one
//! shared by more. A cut never adds instructions: every piece but one of those jumping to the
//! shared suffix needs a `ja`, so sharing `d` instructions among `k` pieces saves `(k-1)·d`
//! when they already left by a `ja` (a jump exit) or a conditional jump (which is shared too),
//! and `(k-1)·(d-1)` when the last of the `d` is a `ret`; only cuts that save something are
//! made. The cut code is the same code from the same point on, whatever the registers hold
//! there, so no path's effect changes.

// Keys are the code generator's own pieces, looked up but never iterated: a fast hash.
use foldhash::HashMap;
use foldhash::HashMapExt;
use std::hash::Hash;

use super::machine::{Exit, Piece};

/// Shares common suffixes among the pieces `live` (the representatives the program reaches).
/// Shared suffixes that no piece already is are appended to `pieces`.
pub(super) fn share(pieces: &mut Vec<Piece>, live: &[usize]) {
    // A piece without instructions has no suffix to share (and in long chains most are
    // such: one conditional jump each).
    let with_code = live.iter().filter(|&&p| !pieces[p].insns.is_empty());
    for (exit, group) in grouped(with_code.map(|&p| (pieces[p].exit, p))) {
        if group.len() >= 2 {
            trie_node(pieces, group, 0, exit);
        }
    }
}

/// Groups values by key, groups and members in first-seen order (so output is deterministic).
fn grouped<K: Hash + Eq + Copy, V>(items: impl Iterator<Item = (K, V)>) -> Vec<(K, Vec<V>)> {
    let mut index: HashMap<K, usize> = HashMap::new();
    let mut out: Vec<(K, Vec<V>)> = Vec::new();
    for (k, v) in items {
        match index.get(&k) {
            Some(&i) => out[i].1.push(v),
            None => {
                index.insert(k, out.len());
                out.push((k, vec![v]));
            }
        }
    }
    out
}

/// `members` all end with the same `depth` instructions and leave by `exit`. Cuts the deeper
/// shared suffixes first, then this one when that saves instructions; returns the pieces that
/// now end with the `depth` instructions (one, if they were cut here).
fn trie_node(pieces: &mut Vec<Piece>, members: Vec<usize>, depth: usize, exit: Exit) -> Vec<usize> {
    // A member that is the suffix itself (at most one: equal pieces were merged before).
    let mut whole = None;
    let mut longer = Vec::new();
    for m in members {
        let insns = &pieces[m].insns;
        if insns.len() == depth && whole.is_none() {
            whole = Some(m);
        } else if insns.len() > depth {
            longer.push((insns[insns.len() - 1 - depth], m));
        }
    }
    let mut candidates: Vec<usize> = whole.into_iter().collect();
    for (_, part) in grouped(longer.into_iter()) {
        if part.len() >= 2 {
            candidates.extend(trie_node(pieces, part, depth + 1, exit));
        } else {
            candidates.extend(part);
        }
    }
    let min_depth = match exit {
        Exit::Jump(_) | Exit::Cond { .. } => 1,
        Exit::Return => 2,
    };
    if depth < min_depth || candidates.len() < 2 {
        return candidates;
    }
    let shared = whole.unwrap_or_else(|| {
        let first = &pieces[candidates[0]].insns;
        let insns = first[first.len() - depth..].to_vec();
        pieces.push(Piece { insns, exit });
        pieces.len() - 1
    });
    for c in candidates {
        if c != shared {
            let keep = pieces[c].insns.len() - depth;
            pieces[c].insns.truncate(keep);
            pieces[c].exit = Exit::Jump(shared);
        }
    }
    vec![shared]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::insn::{AluOp, Insn, Op, Size, Src};

    fn ld(k: u32) -> Insn {
        Op::LdAbs(Size::Byte).with_k(k)
    }

    fn add(k: u32) -> Insn {
        Op::Alu(AluOp::Add, Src::K).with_k(k)
    }

    fn piece(insns: Vec<Insn>, exit: Exit) -> Piece {
        Piece { insns, exit }
    }

    #[test]
    fn common_suffixes_are_cut_deepest_first() {
        let exit = Exit::Jump(9);
        let mut pieces = vec![
            piece(vec![ld(1), add(1), add(2), add(3)], exit),
            piece(vec![ld(2), add(1), add(2), add(3)], exit),
            piece(vec![ld(3), add(2), add(3)], exit),
            piece(vec![ld(4)], exit),
        ];
        share(&mut pieces, &[0, 1, 2, 3]);
        // [add 1, add 2, add 3] is shared by 0 and 1 (piece 4), then [add 2, add 3] by it and
        // 2 (piece 5): 12 instructions and 3 `ja` become 7 and 3.
        assert_eq!(pieces.len(), 6);
        assert_eq!(pieces[4].insns, vec![add(1)]);
        assert_eq!(pieces[4].exit, Exit::Jump(5));
        assert_eq!(pieces[5].insns, vec![add(2), add(3)]);
        assert_eq!(pieces[5].exit, exit);
        assert_eq!(pieces[0].insns, vec![ld(1)]);
        assert_eq!(pieces[0].exit, Exit::Jump(4));
        assert_eq!(pieces[1].insns, vec![ld(2)]);
        assert_eq!(pieces[2].insns, vec![ld(3)]);
        assert_eq!(pieces[2].exit, Exit::Jump(5));
        assert_eq!(pieces[3].insns, vec![ld(4)]);
        assert_eq!(pieces[3].exit, exit);
    }

    #[test]
    fn conditional_exits_share_one_instruction_and_the_jump() {
        let exit = Exit::Cond {
            code: Op::Jmp(crate::insn::JmpOp::Jeq, Src::K).code(),
            k: 6,
            t: 7,
            f: 8,
        };
        let mut pieces = vec![
            piece(vec![ld(1), ld(23)], exit),
            piece(vec![ld(2), ld(23)], exit),
            piece(vec![ld(2), ld(24)], exit),
        ];
        share(&mut pieces, &[0, 1, 2]);
        assert_eq!(pieces.len(), 4);
        assert_eq!(pieces[3].insns, vec![ld(23)]);
        assert_eq!(pieces[3].exit, exit);
        assert_eq!(pieces[0].exit, Exit::Jump(3));
        assert_eq!(pieces[2].exit, exit);
    }

    #[test]
    fn a_piece_that_is_the_suffix_is_reused_and_single_instructions_stay_before_returns() {
        let ret = Op::RetK.with_k(0);
        let mut pieces = vec![
            piece(vec![ld(1), add(1), ret], Exit::Return),
            piece(vec![add(1), ret], Exit::Return),
            piece(vec![ld(2), ret], Exit::Return),
            piece(vec![ld(3), ret], Exit::Return),
        ];
        share(&mut pieces, &[0, 1, 2, 3]);
        assert_eq!(pieces.len(), 4);
        assert_eq!(pieces[0].insns, vec![ld(1)]);
        assert_eq!(pieces[0].exit, Exit::Jump(1));
        assert_eq!(pieces[2].insns, vec![ld(2), ret]);
        assert_eq!(pieces[3].insns, vec![ld(3), ret]);
    }
}
