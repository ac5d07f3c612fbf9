//! Un-threading before tail merging: a conditional jump straight to `S` may instead go to a
//! piece `Q` that tests the wire length, when on every path through the jump `Q`'s test is
//! decided and sends it to `S`, if that makes the piece identical to another one.
//!
//! sift-opt threads jumps through decided tests: in `greater 64 or ip6 and udp portrange ...
//! or ether host ...`, the IPv4 port test under `len >= 64` accepts at once, while the IPv6 one,
//! also reached with shorter packets, goes through `len > 0` (`ld #pktlen; jgt #0x0`) first.
//! The two `jgt #0x531` pieces differ only in that target, so tail merging cannot share them;
//! libpcap's code, not threaded there, can. Sending the IPv4 piece through the length test too
//! changes no result: the test is decided on its paths (a length of at least 64 is greater
//! than 0), and the `A` it loads is not read at `S`.
//!
//! What is known of the wire length (an interval) at each piece's entry comes from the tests of
//! `ld #pktlen` against constants on every path (forward over the acyclic graph of pieces,
//! meeting by the hull), computed on the pieces before merging. Why that stays true while tail
//! merging changes the graph: every piece's representative behaves, on every packet whose
//! length is in the piece's own interval, as the piece did originally (merged pieces have
//! identical code, whose targets are representatives behaving as the original targets on their
//! intervals, which contain the edges' ones). Un-threading `p` changes only what happens on one
//! of its edges, whose lengths `J` lie in `p`'s interval: `Q`'s code as it now is (`ld #pktlen`
//! and its test, whatever paths reach it) sends every length of `J` to `S`, the representative
//! of `p`'s original target, whose interval contains `J`.

use super::deadregs::{effect, A};
use super::machine::{Exit, Piece};
use crate::insn::{Insn, JmpOp, Op, Src};

/// The wire lengths possible at a point: `lo..=hi`.
type Interval = (u32, u32);

const ANY: Interval = (0, u32::MAX);

/// Whether `A` holds the wire length at the end of `insns`.
fn a_is_len(insns: &[Insn]) -> bool {
    for &insn in insns.iter().rev() {
        if insn.decode() == Some(Op::LdLen) {
            return true;
        }
        if effect(insn).1 & A != 0 {
            return false;
        }
    }
    false
}

/// The comparison of `A` with `#k` that `exit` ends with, if it ends with one.
fn compares(exit: Exit) -> Option<JmpOp> {
    match exit.test() {
        Some(Op::Jmp(op, Src::K)) => Some(op),
        _ => None,
    }
}

/// The wire lengths on each edge of `p` given `entry` at its entry: (taken, not taken).
fn edge_intervals(p: &Piece, entry: Interval) -> (Interval, Interval) {
    let Exit::Cond { k, .. } = p.exit else {
        return (entry, entry);
    };
    let (lo, hi) = entry;
    let (t, f) = match (compares(p.exit), a_is_len(&p.insns)) {
        (Some(JmpOp::Jgt), true) => ((lo.max(k.saturating_add(1)), hi), (lo, hi.min(k))),
        (Some(JmpOp::Jge), true) => ((lo.max(k), hi), (lo, hi.min(k.saturating_sub(1)))),
        (Some(JmpOp::Jeq), true) => ((lo.max(k), hi.min(k)), entry),
        _ => (entry, entry),
    };
    // `jgt #0xffffffff` is never taken, `jge #0` always: an empty edge keeps no facts.
    let valid = |i: Interval| if i.0 <= i.1 { i } else { ANY };
    (valid(t), valid(f))
}

/// The wire length at each piece's entry (`None`: unreachable), from the entry piece 0;
/// `postorder` lists the reachable pieces, every piece after its successors.
pub(super) fn intervals(pieces: &[Piece], postorder: &[usize]) -> Vec<Option<Interval>> {
    let mut entry: Vec<Option<Interval>> = vec![None; pieces.len()];
    if let Some(&root) = postorder.last() {
        entry[root] = Some(ANY);
    }
    for &p in postorder.iter().rev() {
        let Some(here) = entry[p] else {
            continue;
        };
        let (t, f) = edge_intervals(&pieces[p], here);
        let out = match pieces[p].exit {
            Exit::Return => [None, None],
            Exit::Jump(s) => [Some((s, here)), None],
            Exit::Cond { t: st, f: sf, .. } => [Some((st, t)), Some((sf, f))],
        };
        for (s, i) in out.into_iter().flatten() {
            if let Some(e) = entry.get_mut(s) {
                *e = Some(e.map_or(i, |(lo, hi)| (lo.min(i.0), hi.max(i.1))));
            }
        }
    }
    entry
}

/// Whether `q` only loads the wire length (`ld #pktlen`) and tests it.
fn tests_len(q: &Piece) -> bool {
    matches!(q.exit, Exit::Cond { .. }) && q.insns == [Op::LdLen.with_k(0)]
}

/// Whether an edge of `exit` goes to a piece that only tests the wire length: without one,
/// `exit` can be neither side of [`may_take`]'s `twin`.
pub(super) fn reaches_len_test(pieces: &[Piece], exit: Exit) -> bool {
    let Exit::Cond { t, f, .. } = exit else {
        return false;
    };
    [t, f]
        .into_iter()
        .any(|s| pieces.get(s).is_some_and(tests_len))
}

/// Where `q` goes when the wire length is in `within`, if `q` only loads it (`ld #pktlen`) and
/// tests it against a constant, and the test is decided.
fn decided(q: &Piece, within: Interval) -> Option<usize> {
    let Exit::Cond { k, t, f, .. } = q.exit else {
        return None;
    };
    if !tests_len(q) {
        return None;
    }
    let (lo, hi) = within;
    let taken = match compares(q.exit)? {
        JmpOp::Jgt if lo > k => true,
        JmpOp::Jgt if hi <= k => false,
        JmpOp::Jge if lo >= k => true,
        JmpOp::Jge if hi < k => false,
        JmpOp::Jeq if lo == k && hi == k => true,
        JmpOp::Jeq if k < lo || k > hi => false,
        _ => return None,
    };
    Some(if taken { t } else { f })
}

/// Whether `A` may be read at the entry of `s` before it is written (a piece that jumps on
/// without touching it counts as reading it).
fn reads_a(s: &Piece) -> bool {
    for &insn in &s.insns {
        let (reads, writes, _) = effect(insn);
        if reads & A != 0 {
            return true;
        }
        if writes & A != 0 {
            return false;
        }
    }
    s.exit != Exit::Return
}

/// Whether piece `p` (wire length `entry` at its entry), with its exit `exit` (targets already
/// merged), may take `twin` (the exit of a piece with the same instructions) instead: equal but
/// for one target `S` of `exit`, where `twin` has a piece `Q` that on `p`'s paths through that
/// edge goes to `S` and only sets `A`, which `S` does not read.
pub(super) fn may_take(
    pieces: &[Piece],
    entry: Option<Interval>,
    p: usize,
    exit: Exit,
    twin: Exit,
) -> bool {
    let (
        Some(entry),
        Exit::Cond { code, k, t, f },
        Exit::Cond {
            code: code2,
            k: k2,
            t: t2,
            f: f2,
        },
    ) = (entry, exit, twin)
    else {
        return false;
    };
    if (code, k) != (code2, k2) {
        return false;
    }
    // The one edge that differs: its target `S` here, `Q` in the twin. What does not depend on
    // the lengths is checked first: the merging tries this for many pairs of pieces.
    let (s, q, taken) = match (t == t2, f == f2) {
        (false, true) => (t, t2, true),
        (true, false) => (f, f2, false),
        _ => return false,
    };
    if q >= pieces.len() || s >= pieces.len() || !tests_len(&pieces[q]) || reads_a(&pieces[s]) {
        return false;
    }
    let (on_t, on_f) = edge_intervals(&pieces[p], entry);
    decided(&pieces[q], if taken { on_t } else { on_f }) == Some(s)
}

#[cfg(test)]
mod tests {
    use super::super::tests::check;
    use crate::disasm::disassemble;

    #[test]
    fn a_jump_threaded_past_a_decided_length_test_takes_it_to_share_code() {
        // block6 (reached with len >= 64) accepts at once where block7 (len < 64) first tests
        // `len > 0`: with block6 sent through that test (decided on its paths), the two `jgt
        // #10` pieces are one.
        let text = "\
block0:
    v0 = len
    v1 = const 64
    v3 = const 5
    v7 = const 10
    v9 = const 0
    br ge v0, v1, block1, block2
block1:
    v2 = load.h [14]
    br ge v2, v3, block6, block5
block6:
    br gt v2, v7, block5, block4
block2:
    v4 = load.h [16]
    br ge v4, v3, block7, block5
block7:
    br gt v4, v7, block5, block3
block3:
    br gt v0, v9, block4, block5
block4:
    ret 1
block5:
    ret 0
";
        let mut pkts = Vec::new();
        for len in [0usize, 15, 17, 18, 63, 64, 80] {
            for value in [0u16, 5, 7, 10, 11] {
                let mut p = vec![0u8; len];
                for at in [14, 16] {
                    if len >= at + 2 {
                        p[at..at + 2].copy_from_slice(&value.to_be_bytes());
                    }
                }
                pkts.push(p);
            }
        }
        let p = check(text, &pkts);
        let listing = disassemble(&p.to_program());
        assert_eq!(listing.matches("jgt      #0xa").count(), 1, "{listing}");
        assert_eq!(p.len(), 11, "{listing}");
    }
}
