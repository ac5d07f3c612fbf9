//! The header length in libpcap's index register: which index values are its `ldxb 4*([k]&0xf)`,
//! and what each block computed with it before the optimizer ran (the unset-X model's input,
//! `unset_index.rs`).

use sift_ir::{BinOp, Block, Function, Inst, LoadSize, Value};

use super::numbering::{binary_fold, BinaryFold};

/// The byte offset `k` when `index` is `4*([k]&0xf)` computed as libpcap's `ldxb` does, or
/// that plus a constant (which libpcap's peephole folds into the load's offset, leaving X the
/// `ldxb`'s value).
pub(super) fn header_length_offset(f: &Function, index: Value) -> Option<u32> {
    header_length(f, index).map(|(k, _)| k)
}

/// [`header_length_offset`], with the constant `index` adds to the header length (0 for
/// none).
pub(super) fn header_length(f: &Function, index: Value) -> Option<(u32, u32)> {
    let konst = |v: Value| f.const_value(v);
    let (index, added) = match *f.inst(index) {
        Inst::Binary(BinOp::Add, a, b) if konst(b).is_some() => (a, konst(b)),
        Inst::Binary(BinOp::Add, a, b) if konst(a).is_some() => (b, konst(a)),
        _ => (index, Some(0)),
    };
    let Inst::Binary(BinOp::Shl, masked, two) = *f.inst(index) else {
        return None;
    };
    let Inst::Binary(BinOp::And, byte, fifteen) = *f.inst(masked) else {
        return None;
    };
    let Inst::Load {
        index: None,
        offset,
        size: LoadSize::Byte,
    } = *f.inst(byte)
    else {
        return None;
    };
    (konst(two) == Some(2) && konst(fifteen) == Some(15)).then_some((offset, added?))
}

/// The index values of `b`'s packet loads, in order, each once.
pub(super) fn indices(f: &Function, b: Block) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    indices_into(f, b, &mut out);
    out
}

/// [`indices`] into `out` (cleared first).
fn indices_into(f: &Function, b: Block, out: &mut Vec<Value>) {
    out.clear();
    for &v in &f.block(b).insts {
        if let Inst::Load { index: Some(x), .. } = *f.inst(v) {
            if !out.contains(&x) {
                out.push(x);
            }
        }
    }
}

/// A block's last header-length index computation before the optimizer deletes any.
#[derive(Clone, Copy)]
pub(super) struct HeaderLength {
    /// The `ldxb`'s byte offset.
    pub(super) offset: u32,
    /// Whether a load at a computed offset (its `tax`) comes after the last such `ldxb`
    /// (`ip6[udp[10:1]]`): then only a block that `opt_root` skips is modelled, where libpcap
    /// is left believing X holds that `ldxb` (the soak's seeds 0x247f5ef1 and 0x26585ef1).
    pub(super) computed_last: bool,
    /// Whether the block combines an indexed load with a zero on its left (`0 & tcp[k]`,
    /// `icmptype * tcp[k]`, `0 / udp[k]`) by an operation whose result is then 0.
    pub(super) zero_on_left: bool,
    /// Whether the block has one packet load through a header length (not two, as in
    /// `tcp[17:2] & (0 % tcp[16])`).
    pub(super) one_load: bool,
    /// Whether that load adds a byte offset to it (`tcp[17:2]`, not `tcp[0:1]`).
    pub(super) at_offset: bool,
    /// Whether that load's index is computed as libpcap's arithmetic does (`tcp[0:2]`: `ld #0;
    /// add x; tax`, which reads X again after the `ldxb`), not a primitive's `ldh [x + 14]`.
    pub(super) arithmetic: bool,
    /// Whether a zero on the right of an operation that then gives 0 takes that load itself
    /// (`tcp[23:4] * 0`, `tcp[23:4] & icmptype`; not `-tcp[23:4] * 0` or `(tcp[23:4] + 1) & 0`).
    pub(super) zero_on_right: bool,
}

/// Per block, its [`HeaderLength`] (`None`: no index computation is a header length).
pub(super) fn header_length_loads(f: &Function) -> Vec<Option<HeaderLength>> {
    let mut indices = Vec::new();
    (0..f.blocks.len())
        .map(|b| {
            let b = Block(b as u32);
            indices_into(f, b, &mut indices);
            let offset = indices
                .iter()
                .rev()
                .find_map(|&x| header_length_offset(f, x))?;
            // A constant index (`ip[5]` on a raw IPv4 link is `ld #5; tax; ldb [x + 0]`, also
            // one a zero on the left folds, `ip[icmptype & udp[8]:1]`) does not count: libpcap
            // makes its load absolute in the first pass of its second loop and its `tax` dead
            // with it, before the folds that take an `ldxb`'s loads.
            let computed_last = indices
                .iter()
                .rev()
                .find(|&&x| constant(f, x, 8).is_none())
                .is_some_and(|&x| header_length_offset(f, x).is_none());
            let mut loads = header_length_loads_of(f, b);
            let first = loads.next();
            let one_load = first.is_some() && loads.next().is_none();
            let at_offset = first.is_some_and(|(k, _)| k != 0);
            let arithmetic = first.is_some_and(|(_, added)| added);
            let (zero_on_left, zero_on_right) = zeros_fold_load(f, b);
            Some(HeaderLength {
                offset,
                computed_last,
                zero_on_left,
                one_load,
                at_offset,
                arithmetic,
                zero_on_right,
            })
        })
        .collect()
}

/// The byte offsets `b`'s packet loads through a header length add to it (`tcp[17:2]`: 17,
/// `tcp[0:1]`: 0), in order, each with whether the index is an addition (see
/// [`HeaderLength::arithmetic`]).
fn header_length_loads_of(f: &Function, b: Block) -> impl Iterator<Item = (u32, bool)> + '_ {
    f.block(b).insts.iter().filter_map(|&v| match *f.inst(v) {
        Inst::Load { index: Some(x), .. } => header_length(f, x)
            .map(|(_, added)| (added, matches!(f.inst(x), Inst::Binary(BinOp::Add, ..)))),
        _ => None,
    })
}

/// Whether some instruction of `b` is an operation that libpcap folds to 0 by a zero on one
/// side of a load through the header length on the other: on the left, and on the right.
///
/// `0 op load` (`* / % & << >>`) libpcap turns into `ld #0` as soon as it sees the zero in the
/// accumulator, for any zero its folding finds: `8 >> 23`, `-0`, `icmptype`, `len * 0`.
/// `load op 0` (`*`, `&`) counts only with a literal zero, `0` or `icmptype`: one libpcap
/// computes (`0 * 7`, `8 >> 23`, `1 - 1`) it folds a pass later and keeps the `ldxb` (checked
/// on 9 forms).
///
/// The side matters: `load op 0` becomes `op #0` first and `ld #0` a pass later, and then an
/// undecided block's successors keep their own `ldxb` (the soak's seed 0xdb65eed). On the
/// right only the load itself counts: when another operation comes between (`-tcp[23:4] *
/// 0`, `(tcp[23:4] | 1) & 0`), the load dies a pass later still, by when the blocks below rely
/// on the block's `ldxb` and libpcap keeps it (the soak's seed 0x1a715ef1; checked against
/// libpcap on `neg`, `add`, `or` and two `neg`s between). These rules come from the soaks (the
/// lines of `sift/tests/data/soak_findings.txt` they fixed), not from following libpcap's
/// passes one by one.
fn zeros_fold_load(f: &Function, b: Block) -> (bool, bool) {
    let folds_to_zero = |op, known_left, known_right| {
        matches!(
            binary_fold(op, known_left, known_right),
            Ok(BinaryFold::Const(0))
        )
    };
    let (mut left, mut right) = (false, false);
    for &v in &f.block(b).insts {
        if let Inst::Binary(op, lhs, rhs) = *f.inst(v) {
            left = left
                || constant(f, lhs, 8) == Some(0)
                    && folds_to_zero(op, Some(0), None)
                    && is_header_length_load(f, rhs);
            right = right
                || constant(f, rhs, 0) == Some(0)
                    && folds_to_zero(op, None, Some(0))
                    && is_header_length_load(f, lhs);
        }
    }
    (left, right)
}

/// Whether `v` is a packet load through a header length (`tcp[k]`; not `ether[1:1]` on a
/// link where libpcap indexes that by a constant).
fn is_header_length_load(f: &Function, v: Value) -> bool {
    matches!(*f.inst(v), Inst::Load { index: Some(x), .. } if header_length(f, x).is_some())
}

/// The value of `v` when libpcap's folding makes it a constant (at most `depth` operations
/// deep), following no identity (`x + 0` is not folded to `x`'s value).
fn constant(f: &Function, v: Value, depth: u32) -> Option<u32> {
    match *f.inst(v) {
        Inst::Const(k) => Some(k),
        Inst::Neg(a) if depth > 0 => Some(constant(f, a, depth - 1)?.wrapping_neg()),
        Inst::Binary(op, a, b) if depth > 0 => {
            let (a, b) = (constant(f, a, depth - 1), constant(f, b, depth - 1));
            match binary_fold(op, a, b) {
                Ok(BinaryFold::Const(k)) => Some(k),
                _ => None,
            }
        }
        _ => None,
    }
}
