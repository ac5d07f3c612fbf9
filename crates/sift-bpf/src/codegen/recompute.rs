//! Values placed by their uses rather than by their definitions, decided before selection:
//!
//! * **sums** `add(b, #k)` with one reader are not computed where they are defined but where
//!   they are read: `add #k` after `b` is loaded there, or folded into the reader when that is
//!   itself an addition (`l + (b + k)` is `add x; add #k` with `b` in `X`; wrapping arithmetic
//!   is associative, so the result is the same number). Computed at the definition they cost an
//!   `add`, a store and a reload; at the reader the `add` alone. After `geneve`, lowering
//!   defines the offsets `offset + 22` and `offset + 24` at the top of a block and reads them
//!   much later (as an operand, or as an edge argument).
//! * **index parameters**: a block parameter whose first reader is a packet load indexed by it
//!   is copied into `X` on every incoming edge (`ldx #40` on one, nothing where the argument is
//!   already in `X`), so the register state agrees at the merge and the block starts with it in
//!   place. Where the edges disagree (`A` on one, `X` on the other) the parameter lives only in
//!   scratch memory and every read reloads it.

use sift_ir::{BinOp, Block, Function, Inst, Terminator, Value};

/// What the analysis decided, per value.
pub(super) struct Placement {
    /// `add(b, #k)` computed at its one reader: `(b, k)`.
    pub(super) sum: Vec<Option<(Value, u32)>>,
    /// Block parameters copied into `X` on every incoming edge.
    pub(super) index_param: Vec<bool>,
}

/// `v = add(b, #k)` (either operand order) with `b` not a constant: `(b, k)`.
fn sum_shape(f: &Function, v: Value) -> Option<(Value, u32)> {
    let Inst::Binary(BinOp::Add, l, r) = *f.inst(v) else {
        return None;
    };
    match (f.const_value(l), f.const_value(r)) {
        (None, Some(k)) => Some((l, k)),
        (Some(k), None) => Some((r, k)),
        _ => None,
    }
}

/// Decides the placements of a function's values; `uses` counts operand occurrences
/// (instructions, terminators, edge arguments), `order` is the selector's block order.
pub(super) fn placement(f: &Function, order: &[Block], uses: &[u32]) -> Placement {
    let n = f.values.len();
    let mut sum = vec![None; n];
    for &b in order {
        let insts = &f.block(b).insts;
        for &v in insts {
            let Some((base, k)) = sum_shape(f, v) else {
                continue;
            };
            // One reader: recomputing never costs more than storing and reloading. The base is
            // no sum itself, so each use costs at most one load and one `add`; and it comes
            // from outside the block (a parameter, an earlier block's value), where the sum
            // would have to load it too: a base computed just before sits in `A` for free.
            let local = insts.contains(&base);
            if uses[v.index()] == 1 && sum[base.index()].is_none() && !local {
                sum[v.index()] = Some((base, k));
            }
        }
    }
    let mut index_param = vec![false; n];
    for &b in order {
        let data = f.block(b);
        for &p in &data.params {
            index_param[p.index()] = first_reader_indexes(f, b, p, &sum);
        }
        // One parameter per edge can arrive in `X`.
        let mut seen = false;
        for &p in &data.params {
            if index_param[p.index()] {
                index_param[p.index()] &= !seen;
                seen = true;
            }
        }
    }
    Placement { sum, index_param }
}

/// Whether the first instruction of `b` that reads `p` where it is defined (sums are read at
/// their reader) is a packet load indexed by `p`.
fn first_reader_indexes(f: &Function, b: Block, p: Value, sum: &[Option<(Value, u32)>]) -> bool {
    let data = f.block(b);
    for &v in &data.insts {
        if sum[v.index()].is_some() {
            continue;
        }
        let inst = f.inst(v);
        if let Inst::Load { index: Some(i), .. } = *inst {
            if i == p {
                return true;
            }
        }
        let mut reads = false;
        inst.for_each_operand(|o| reads |= o == p);
        if reads {
            return false;
        }
    }
    // A comparison with another value takes its right operand in `X`.
    matches!(&data.term, Terminator::Branch { lhs, rhs, .. }
        if *rhs == p && *lhs != p && f.const_value(*lhs).is_none())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_ir::parse_function;

    #[test]
    fn single_reader_sums_and_index_parameters() {
        let f = parse_function(
            "block0:
    v0 = load.b [0]
    v1 = const 40
    v2 = const 22
    br eq v0, v1, block1(v1), block1(v0)
block1(v3):
    v4 = add v3, v2
    v6 = load.b [v3+22]
    v5 = add v2, v3
    v7 = add v6, v4
    v8 = add v7, v2
    br eq v5, v8, block2, block3
block2:
    v9 = add v7, v2
    v10 = add v9, v2
    ret v10
block3:
    ret v5
",
        )
        .unwrap();
        let order = f.reverse_postorder();
        let mut uses = vec![0u32; f.values.len()];
        for &b in &order {
            let data = f.block(b);
            for &v in &data.insts {
                f.inst(v).for_each_operand(|o| uses[o.index()] += 1);
            }
            data.term.for_each_operand(|o| uses[o.index()] += 1);
        }
        let p = placement(&f, &order, &uses);
        let sum = |i: u32| p.sum[i as usize];
        // A parameter's sums; the base of v8 is computed just before it, in `A`.
        assert_eq!(sum(4), Some((Value(3), 22)));
        assert_eq!(sum(8), None);
        // Two readers; a sum of an earlier block's value, and a sum of that sum.
        assert_eq!(sum(5), None);
        assert_eq!(sum(9), Some((Value(7), 22)));
        assert_eq!(sum(10), None);
        // v3's first reader (v4 is read later, at v7) is the load; v0's is the comparison.
        assert!(p.index_param[3]);
        assert!(!p.index_param[0]);
    }
}
