//! Atom coalescing (DPF): two adjacent equality tests become one wider compare.
//!
//! `ip src 10.1.1.1 and ip dst 10.2.2.2` compiles to
//!
//! ```text
//!     ld.w r0, [26]
//!     jeq r0, 167837953, L4, L9      ; X: continue at Y when equal, else Z
//! L4:
//!     ld.w r0, [30]
//!     jeq r0, 167903746, L6, L9      ; Y: continue at T when equal, else the same Z
//! ```
//!
//! which is "the 8 bytes at 26 equal these 8 bytes": one 64-bit load and one compare. The
//! rewrite is exact when
//!
//! * both loads have the same width (2 or 4 bytes), constant offsets `w` apart, and each value is
//!   read only by its branch (so skipping the registers' writes is unobservable);
//! * both branches leave for the same `Z` when unequal, and `Y` is reached only from `X`, so the
//!   wide compare may send everything that is not "both equal" to `Z` and jump over `Y`;
//! * the bounds check in force at `X` already covers both loads (see [`crate::bounds`]), so the
//!   wide load is in bounds exactly when the interpreter's two loads are, and no packet that the
//!   interpreter rejects at `Y`'s load can reach the wide load;
//! * `Y` contains nothing but its load and branch, and `X`'s branch is not a jump target.

use sift_bytecode::{Cond, Insn, Operand, Program, Width};

use crate::bounds::Bounds;
use crate::flow::Flow;

/// The wide compare that replaces the load at `X` and the branches of `X` and `Y`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pair {
    /// Offset of the first byte of the wide load.
    pub offset: u32,
    /// Width of each original load (the wide load has twice as many bytes).
    pub width: Width,
    /// The bytes both constants spell in the packet, as a native-order integer.
    pub constant: u64,
    /// Where to go when both are equal.
    pub equal: u32,
    /// Where to go otherwise.
    pub unequal: u32,
}

/// An equality test `ld rD, [k]; jeq/jne rD, c`: offset, width, constant, equal and unequal target.
fn test_at(p: &Program, flow: &Flow, i: usize) -> Option<(u32, Width, u32, u32, u32)> {
    let Insn::Load {
        width: width @ (Width::Half | Width::Word),
        dst,
        base: None,
        offset,
    } = p.code[i]
    else {
        return None;
    };
    let Some(&Insn::Branch {
        cond,
        lhs,
        rhs: Operand::Imm(c),
        then_,
        else_,
    }) = p.code.get(i + 1)
    else {
        return None;
    };
    let (equal, unequal) = match cond {
        Cond::Eq => (then_, else_),
        Cond::Ne => (else_, then_),
        _ => return None,
    };
    let fits = width == Width::Word || c <= 0xffff;
    let only_read_by_the_branch = flow.use_count[i] == 1
        && !flow.escaped[i]
        && flow.native_order[i].is_some()
        && lhs == dst
        && !flow.block_start[i + 1];
    (fits && only_read_by_the_branch).then_some((offset, width, c, equal, unequal))
}

fn be_bytes(c: u32, width: Width) -> Vec<u8> {
    match width {
        Width::Word => c.to_be_bytes().to_vec(),
        _ => (c as u16).to_be_bytes().to_vec(),
    }
}

/// The pair starting at instruction `i`, if the rewrite is exact there.
pub(crate) fn pair_at(p: &Program, flow: &Flow, bounds: &Bounds, i: usize) -> Option<Pair> {
    if !bounds.live[i] {
        return None;
    }
    let (k1, width, c1, y, z) = test_at(p, flow, i)?;
    let y = y as usize;
    if flow.preds[y] != 1 || !flow.block_start[y] {
        return None;
    }
    let (k2, width2, c2, equal, z2) = test_at(p, flow, y)?;
    let w = width.bytes();
    if width2 != width
        || z2 != z
        || (k2.checked_sub(k1) != Some(w) && k1.checked_sub(k2) != Some(w))
    {
        return None;
    }
    let offset = k1.min(k2);
    if bounds.covered[i] < u64::from(offset) + 2 * u64::from(w) {
        return None;
    }
    let (first, second) = if k1 < k2 { (c1, c2) } else { (c2, c1) };
    let mut bytes = be_bytes(first, width);
    bytes.extend(be_bytes(second, width));
    let constant = match width {
        Width::Word => u64::from_ne_bytes(bytes.try_into().ok()?),
        _ => u64::from(u32::from_ne_bytes(bytes.try_into().ok()?)),
    };
    Some(Pair {
        offset,
        width,
        constant,
        equal,
        unequal: z,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(usize, Pair)> {
        let p = sift_bytecode::verify(sift_bytecode::assemble(text).unwrap())
            .unwrap()
            .into_program();
        let f = Flow::new(&p);
        let b = Bounds::new(&p, &f, true);
        (0..p.code.len())
            .filter_map(|i| pair_at(&p, &f, &b, i).map(|x| (i, x)))
            .collect()
    }

    #[test]
    fn adjacent_words_with_a_common_exit() {
        let got = pairs(
            "ld.w r0, [26]\n jeq r0, 167837953, L2, L4\nL2:\n ld.w r0, [30]\n jne r0, 167903746, L4, L5\nL4:\n ret 0\nL5:\n ret 1\n",
        );
        assert_eq!(got.len(), 1);
        let (i, pair) = got[0];
        assert_eq!(i, 0);
        assert_eq!((pair.offset, pair.equal, pair.unequal), (26, 5, 4));
        let packet = [10u8, 1, 1, 1, 10, 2, 2, 2];
        assert_eq!(pair.constant, u64::from_ne_bytes(packet));
    }

    #[test]
    fn not_when_the_exits_differ_or_the_check_does_not_cover_both() {
        // Unequal exits differ.
        assert!(pairs(
            "ld.w r0, [26]\n jeq r0, 1, L2, L4\nL2:\n ld.w r0, [30]\n jeq r0, 2, L5, L6\nL4:\n ret 0\nL5:\n ret 1\nL6:\n ret 2\n"
        )
        .is_empty());
        // The unequal exit accepts, so the check at X covers only the first word.
        assert!(pairs(
            "ld.w r0, [26]\n jeq r0, 1, L2, L4\nL2:\n ld.w r0, [30]\n jeq r0, 2, L5, L4\nL4:\n ret 7\nL5:\n ret 1\n"
        )
        .is_empty());
    }
}
