//! Packet loads that cannot fail: bytes an earlier load on every path already proved captured.
//!
//! A packet load outside the captured bytes rejects the packet, so [`super::deadregs`] keeps
//! a load even when nobody reads its result, unless this analysis proves it in bounds. Lowering
//! keeps such loads on purpose (libpcap performs them: after `geneve`, the loads of the inner
//! header's fields at the offset the test computed), and often an earlier load on every path
//! read bytes at least as far: `ld [x + 26]` (4 bytes) proves `ldh [x + 24]` while `X` is
//! unchanged.
//!
//! The facts, per point of the pieces (their graph is acyclic; forward, in reverse postorder,
//! meeting at merges by taking the weaker fact):
//! * `abs`: the captured length is at least `abs` (a load of `[k]`, `s` bytes, that completed
//!   gives `k + s`; so does one of `[x + k]`, since `X >= 0`, and `ldxb 4*([k]&0xf)` gives
//!   `k + 1`);
//! * `rel`: the captured length is at least `X + rel` (a completed `[x + k]` load gives
//!   `k + s`; `ldx #c` turns `abs` into `abs - c`); forgotten when `X` changes otherwise;
//! * `xmax`: `X` is at most `xmax` (`ldx #c`, `ldxb` (60)).
//!
//! `bpf_filter` (and sift's interpreter) fails a load of `s` bytes at `X + k` exactly when
//! `X + k + s`, computed without wrapping, exceeds the captured length, so a load whose end is
//! within a proved bound completes. The Linux kernel reads negative 32-bit offsets as special
//! areas (link-layer and network headers, ancillary data), so facts and proofs are restricted to
//! offsets below 2^31 (`X` at most `xmax`), where its loads are plain bounds-checked reads too.
//! A piece holding a `protochain` loop proves nothing and forgets `X`.

use super::deadregs::has_inner_jumps;
use super::machine::Piece;
use crate::insn::{Insn, Op, Size};

/// Offsets from here on are not plain packet offsets for the Linux kernel.
const KERNEL_SPECIAL: u64 = 1 << 31;

/// What is known at one point (see the module comment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Facts {
    abs: u64,
    rel: Option<u64>,
    xmax: Option<u64>,
}

const NOTHING: Facts = Facts {
    abs: 0,
    rel: None,
    xmax: None,
};

fn bytes(s: Size) -> u64 {
    u64::from(s.bytes())
}

impl Facts {
    fn meet(self, other: Facts) -> Facts {
        Facts {
            abs: self.abs.min(other.abs),
            rel: self.rel.zip(other.rel).map(|(a, b)| a.min(b)),
            xmax: self.xmax.zip(other.xmax).map(|(a, b)| a.max(b)),
        }
    }

    /// Whether `insn`, a packet load, completes on every packet reaching this point.
    fn proves(self, insn: Insn) -> bool {
        let k = u64::from(insn.k);
        match insn.decode() {
            Some(Op::LdAbs(s)) => k + bytes(s) <= self.abs && k + bytes(s) < KERNEL_SPECIAL,
            Some(Op::LdInd(s)) => match (self.rel, self.xmax) {
                (Some(rel), Some(xmax)) => {
                    k + bytes(s) <= rel && xmax + k + bytes(s) < KERNEL_SPECIAL
                }
                _ => false,
            },
            Some(Op::LdxMsh) => k < self.abs && k < KERNEL_SPECIAL,
            _ => false,
        }
    }

    /// The facts after `insn` completed.
    fn after(mut self, insn: Insn) -> Facts {
        let k = u64::from(insn.k);
        match insn.decode() {
            Some(Op::LdAbs(s)) if k + bytes(s) < KERNEL_SPECIAL => {
                self.abs = self.abs.max(k + bytes(s));
            }
            // Only where the kernel's load is a plain one too (`X + k` below 2^31).
            Some(Op::LdInd(s)) if self.xmax.is_some_and(|m| m + k + bytes(s) < KERNEL_SPECIAL) => {
                self.abs = self.abs.max(k + bytes(s));
                self.rel = Some(self.rel.unwrap_or(0).max(k + bytes(s)));
            }
            Some(Op::LdxMsh) => {
                if k < KERNEL_SPECIAL {
                    self.abs = self.abs.max(k + 1);
                }
                self.rel = None;
                self.xmax = Some(60);
            }
            Some(Op::LdxImm) => {
                self.rel = self.abs.checked_sub(k);
                self.xmax = Some(k);
            }
            Some(Op::LdxMem | Op::LdxLen | Op::Tax) | None => {
                self.rel = None;
                self.xmax = None;
            }
            _ => {}
        }
        self
    }
}

/// Per piece and instruction: whether it is a packet load proved to complete; `proved[p][i]`
/// for instruction `i` of piece `p`. One array for every piece (a list each was an allocation
/// per piece).
pub(super) struct Proved {
    /// Where each piece's instructions start in `bits`, and the end.
    start: Vec<usize>,
    bits: Vec<bool>,
}

impl std::ops::Index<usize> for Proved {
    type Output = [bool];

    fn index(&self, piece: usize) -> &[bool] {
        &self.bits[self.start[piece]..self.start[piece + 1]]
    }
}

/// Which loads are proved to complete. `postorder` lists the reachable pieces, every piece
/// after its successors.
pub(super) fn proved_loads(pieces: &[Piece], postorder: &[usize]) -> Proved {
    let mut entry: Vec<Option<Facts>> = vec![None; pieces.len()];
    let mut start = Vec::with_capacity(pieces.len() + 1);
    start.push(0);
    for p in pieces {
        start.push(start[start.len() - 1] + p.insns.len());
    }
    let mut proved = Proved {
        bits: vec![false; start[pieces.len()]],
        start,
    };
    if let Some(&first) = postorder.last() {
        entry[first] = Some(NOTHING);
    }
    for &p in postorder.iter().rev() {
        let Some(mut facts) = entry[p] else {
            continue;
        };
        if has_inner_jumps(&pieces[p]) {
            facts.rel = None;
            facts.xmax = None;
        } else {
            for (i, &insn) in pieces[p].insns.iter().enumerate() {
                proved.bits[proved.start[p] + i] = facts.proves(insn);
                facts = facts.after(insn);
            }
        }
        for s in pieces[p].exit.successors() {
            if let Some(e) = entry.get_mut(s) {
                *e = Some(e.map_or(facts, |known| known.meet(facts)));
            }
        }
    }
    proved
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codegen::machine::Exit;
    use crate::insn::{JmpOp, Src};

    fn piece(insns: Vec<Insn>, exit: Exit) -> Piece {
        Piece { insns, exit }
    }

    #[test]
    fn loads_within_bytes_read_on_every_path_are_proved() {
        let cond = |t, f| Exit::Cond {
            code: Op::Jmp(JmpOp::Jeq, Src::K).code(),
            k: 0,
            t,
            f,
        };
        let ldb_x = |k| Op::LdInd(Size::Byte).with_k(k);
        let pieces = vec![
            // 0: `ld [66]` proves 70 bytes.
            piece(vec![Op::LdAbs(Size::Word).with_k(66)], cond(1, 2)),
            // 1: X = 40, so 30 bytes past X are captured.
            piece(vec![Op::LdxImm.with_k(40)], Exit::Jump(3)),
            // 2: X = 4*([14]&0xf) (at most 60), then 30 bytes past X.
            piece(
                vec![Op::LdxMsh.with_k(14), Op::LdInd(Size::Word).with_k(26)],
                Exit::Jump(3),
            ),
            // 3: both paths proved `[x + 0..30)`: the first two loads complete, the third may
            // not; `ldb [69]` is proved, `ldb [70]` not; after `tax` nothing about X is known.
            piece(
                vec![
                    ldb_x(22),
                    Op::LdInd(Size::Half).with_k(28),
                    ldb_x(30),
                    Op::LdAbs(Size::Byte).with_k(69),
                    Op::LdAbs(Size::Byte).with_k(70),
                    Op::Tax.with_k(0),
                    ldb_x(0),
                    Op::RetK.with_k(0),
                ],
                Exit::Return,
            ),
        ];
        let proved = proved_loads(&pieces, &[3, 1, 2, 0]);
        assert_eq!(proved[0], vec![false]);
        // Byte 14 is within the 70; 30 bytes past X (up to 60) are not.
        assert_eq!(proved[2], vec![true, false]);
        assert_eq!(
            proved[3],
            vec![true, true, false, true, false, false, false, false]
        );
    }

    #[test]
    fn offsets_the_kernel_reads_specially_prove_nothing() {
        // X is unknown: a completed `[x + 0]` says nothing in the kernel, where X may be a
        // negative offset into its special areas.
        let pieces = vec![piece(
            vec![
                Op::LdxMem.with_k(0),
                Op::LdInd(Size::Word).with_k(0),
                Op::LdInd(Size::Byte).with_k(0),
                Op::LdAbs(Size::Byte).with_k(0),
                Op::RetK.with_k(0),
            ],
            Exit::Return,
        )];
        assert_eq!(
            proved_loads(&pieces, &[0])[0],
            vec![false, false, false, false, false]
        );
    }
}
