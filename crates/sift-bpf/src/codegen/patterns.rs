//! Shapes the selector ([`super::select`]) emits specially, found before it runs: the IPv4
//! header length `shl(and(load.b [k], 15), 2)`, which is one `ldxb 4*([k]&0xf)`, with the mask
//! and the byte load that instruction makes unnecessary, and the loads that only feed an
//! unconditional jump's arguments.

use sift_ir::{BinOp, Block, Function, Inst, LoadSize, Terminator, Value};

/// What the header-length patterns of a function make of its values.
pub(super) struct HeaderLengths {
    /// For values of the form `shl(and(load.b [k], 15), 2)` with a use: `k`.
    pub(super) msh: Vec<Option<u32>>,
    /// Values whose only readers are `ldxb 4*([k]&0xf)` instructions that do their work.
    pub(super) covered: Vec<bool>,
    /// Masks `and(load.b [k], 15)` (value: `k`) read by one instruction besides the `ldxb`s of
    /// their block: not computed where they are defined, but as `ldb [k]; and #0xf` at that
    /// reader, which reads them in `A` or as a packet load's index (`ldb [k]; and #0xf; tax`
    /// before the load, which overwrites `A` anyway). Computing them at the definition costs
    /// those instructions too (less the `tax`), plus a store and a reload when the reader is
    /// further away: `tcp[(tcp[12] & 0xf0) >> 2] = ... and ip[0] & 0xf > 5` and `udp ... and
    /// ip[ip[0] & 0xf] = 0`, where value numbering shares the mask between the header length
    /// and `ip[0] & 0xf`. Where the mask would still be in `A` at the reader, both ways cost
    /// the same. The byte load they skip is covered: the block's `ldxb` reads the same byte, so
    /// the packet is rejected on the same paths, and the later `ldb [k]` cannot fail (the
    /// definition dominates its reader).
    pub(super) lazy: Vec<Option<u32>>,
}

/// Finds the values `shl(and(load.b [k], 15), 2)` (the IPv4 header length, one `ldxb
/// 4*([k]&0xf)`), and the masks and loads they make unnecessary or cheaper to recompute.
pub(super) fn header_lengths(
    f: &Function,
    order: &[Block],
    uses: &[u32],
    def_block: &[Option<Block>],
) -> HeaderLengths {
    let n = f.values.len();
    let mut msh = vec![None; n];
    // Per value: uses by the pattern roots found.
    let mut pattern_uses = vec![0u32; n];
    let mut roots = Vec::new();
    for &b in order {
        for &v in &f.block(b).insts {
            let Some((mask, byte, k)) = header_length(f, v) else {
                continue;
            };
            if uses[v.index()] == 0 {
                continue;
            }
            msh[v.index()] = Some(k);
            pattern_uses[mask.index()] += 1;
            roots.push((v, mask, byte, k));
        }
    }
    let mut covered = vec![false; n];
    for &(_, mask, _, _) in &roots {
        covered[mask.index()] = pattern_uses[mask.index()] == uses[mask.index()];
    }
    let mut lazy = vec![None; n];
    let read_in_a = masks_read_in_a(f, order, &msh);
    for &(root, mask, byte, k) in &roots {
        let same_block = def_block[root.index()] == def_block[byte.index()]
            && def_block[mask.index()] == def_block[byte.index()]
            && def_block[byte.index()].is_some();
        if !same_block || uses[byte.index()] != 1 {
            continue;
        }
        // The byte load may only go when its one reader, the mask, is not computed here.
        if covered[mask.index()] {
            covered[byte.index()] = true;
        } else if uses[mask.index()] - pattern_uses[mask.index()] == 1 && read_in_a[mask.index()] {
            lazy[mask.index()] = Some(k);
            covered[byte.index()] = true;
        }
    }
    HeaderLengths { msh, covered, lazy }
}

/// Per value: whether every reader other than a header-length root (`msh`) takes it in `A`,
/// as the selector emits them (the left operand of an operation with a constant that fits
/// `#k`, either operand of a commutative one, a comparison with a constant, a `switch`, a
/// returned value, an edge argument: copied through `A`, or through `A` into `X`), or is a
/// packet load indexed by it, which overwrites `A` (so loading `X` through `A` costs
/// nothing). Computed for every value; only the masks of header-length patterns are asked
/// about.
fn masks_read_in_a(f: &Function, order: &[Block], msh: &[Option<u32>]) -> Vec<bool> {
    let mut ok = vec![true; f.values.len()];
    let konst = |v: Value| f.const_value(v).is_some();
    for &b in order {
        let data = f.block(b);
        for &v in &data.insts {
            if msh[v.index()].is_some() {
                continue;
            }
            match *f.inst(v) {
                Inst::Binary(op, l, r) => {
                    let k_form_ok = |k: u32| match op {
                        BinOp::Div | BinOp::Mod => k != 0,
                        BinOp::Shl | BinOp::Shr => k < 32,
                        _ => true,
                    };
                    let in_a = match (f.const_value(l), f.const_value(r)) {
                        (_, Some(k)) if k_form_ok(k) => Some(l),
                        (Some(_), None) if op.is_commutative() => Some(r),
                        _ => None,
                    };
                    for o in [l, r] {
                        if Some(o) != in_a {
                            ok[o.index()] = false;
                        }
                    }
                }
                Inst::Neg(_) | Inst::Load { index: Some(_), .. } => {}
                ref other => other.for_each_operand(|o| ok[o.index()] = false),
            }
        }
        if let Terminator::Branch { lhs, rhs, .. } = &data.term {
            if !konst(*lhs) && !konst(*rhs) {
                ok[lhs.index()] = false;
                ok[rhs.index()] = false;
            }
        }
    }
    ok
}

/// Loads whose every use is an argument of their own block's `jump`.
pub(super) fn jump_argument_loads(f: &Function, order: &[Block], uses: &[u32]) -> Vec<bool> {
    let mut out = vec![false; f.values.len()];
    for &b in order {
        let data = f.block(b);
        let Terminator::Jump(t) = &data.term else {
            continue;
        };
        for &v in &data.insts {
            if matches!(f.inst(v), Inst::Load { .. }) {
                // Only arguments of used parameters are copied (and so emitted).
                let params = &f.block(t.block).params;
                let copied = params
                    .iter()
                    .zip(&t.args)
                    .filter(|&(p, &a)| a == v && uses[p.index()] > 0)
                    .count() as u32;
                out[v.index()] = copied > 0 && copied == uses[v.index()];
            }
        }
    }
    out
}

/// `v = shl(and(load.b [k], 15), 2)`: the mask value, the load value and `k`.
fn header_length(f: &Function, v: Value) -> Option<(Value, Value, u32)> {
    let Inst::Binary(BinOp::Shl, mask, two) = *f.inst(v) else {
        return None;
    };
    if f.const_value(two) != Some(2) {
        return None;
    }
    let Inst::Binary(BinOp::And, l, r) = *f.inst(mask) else {
        return None;
    };
    let byte = match (f.const_value(l), f.const_value(r)) {
        (_, Some(15)) => l,
        (Some(15), _) => r,
        _ => return None,
    };
    match *f.inst(byte) {
        Inst::Load {
            index: None,
            offset,
            size: LoadSize::Byte,
        } => Some((mask, byte, offset)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::check;
    use crate::disasm::disassemble;

    #[test]
    fn header_length_mask_read_as_an_index_is_recomputed_there() {
        // `(udp dst portrange 988-2166) and not (ip[ip[0] & 0xf] = 0)` after value numbering:
        // v3 is both the header length's mask and the index of `ip[ip[0] & 0xf]`. Computed in
        // block0 it costs `ldb; and; st` and `ldx M[0]` in block2; recomputed in block2 it is
        // `ldb [14]; and #0xf; tax` (libpcap's code), one instruction fewer.
        let text = "\
block0:
    v0 = const 15
    v1 = const 2
    v2 = load.b [14]
    v3 = and v2, v0
    v4 = shl v3, v1
    v5 = load.h [v4+16]
    v6 = const 0x3dc
    br ge v5, v6, block1, block4
block1:
    v7 = const 0x876
    br gt v5, v7, block4, block2
block2:
    v8 = const 0
    v9 = load.b [v3+14]
    br eq v9, v8, block4, block3
block3:
    ret 1
block4:
    ret 0
";
        let mut pkts = vec![vec![0u8; 14], vec![0u8; 15]];
        for (ihl, port, at) in [
            (5u8, 1000u16, 0u8),
            (5, 1000, 1),
            (6, 1000, 1),
            (5, 3000, 1),
        ] {
            let mut p = vec![0u8; 14 + 4 * ihl as usize + 8];
            p[14] = 0x40 | ihl;
            p[14 + ihl as usize] = at;
            let l4 = 14 + 4 * ihl as usize;
            p[l4 + 2..l4 + 4].copy_from_slice(&port.to_be_bytes());
            pkts.push(p.clone());
            pkts.push(p[..l4 + 3].to_vec());
        }
        let p = check(text, &pkts);
        let listing = disassemble(&p.to_program());
        assert!(!listing.contains("M["), "{listing}");
        assert!(listing.contains("tax"), "{listing}");
        assert_eq!(p.len(), 11, "{listing}");
    }
}
