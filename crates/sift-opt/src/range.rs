//! Unsigned value ranges: for each SSA value, an interval every execution's value lies in.
//!
//! One forward pass in reverse postorder (every definition is seen before its uses; a block
//! parameter's range is the union of its incoming arguments'). The ranges justify rewrites whose
//! legality depends on magnitudes: folding `add x, c` into a load's offset (the IR adds index and
//! offset without wrapping, `add` wraps), dropping masks that keep every bit a value can have,
//! deciding comparisons, and proving loads in bounds.

use sift_ir::{BinOp, Function, Inst, LoadSize, Terminator, Value};

/// An inclusive interval `lo..=hi` of `u32` (empty when `lo > hi`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    pub lo: u32,
    pub hi: u32,
}

impl Range {
    pub const FULL: Range = Range {
        lo: 0,
        hi: u32::MAX,
    };
    pub const EMPTY: Range = Range { lo: 1, hi: 0 };

    pub fn exact(k: u32) -> Range {
        Range { lo: k, hi: k }
    }

    pub fn upto(hi: u32) -> Range {
        Range { lo: 0, hi }
    }

    pub fn is_empty(self) -> bool {
        self.lo > self.hi
    }

    pub fn union(self, other: Range) -> Range {
        if self.is_empty() {
            return other;
        }
        if other.is_empty() {
            return self;
        }
        Range {
            lo: self.lo.min(other.lo),
            hi: self.hi.max(other.hi),
        }
    }

    /// The constant, if the range holds one value.
    pub fn as_const(self) -> Option<u32> {
        (self.lo == self.hi).then_some(self.lo)
    }
}

/// All ones from bit 0 up to the highest bit set in `x` (the largest value with no higher bit).
pub fn low_mask(x: u32) -> u32 {
    if x == 0 {
        0
    } else {
        u32::MAX >> x.leading_zeros()
    }
}

/// The range of a load of `size` bytes.
pub fn load_range(size: LoadSize) -> Range {
    match size {
        LoadSize::Byte => Range::upto(0xff),
        LoadSize::Half => Range::upto(0xffff),
        LoadSize::Word => Range::FULL,
    }
}

/// The range of `a op b` over all non-rejecting executions.
pub fn binary(op: BinOp, a: Range, b: Range) -> Range {
    if a.is_empty() || b.is_empty() {
        return Range::EMPTY;
    }
    match op {
        BinOp::Add => match a.hi.checked_add(b.hi) {
            Some(hi) => Range {
                lo: a.lo + b.lo,
                hi,
            },
            None => Range::FULL,
        },
        BinOp::Sub => {
            if a.lo >= b.hi {
                Range {
                    lo: a.lo - b.hi,
                    hi: a.hi - b.lo,
                }
            } else {
                Range::FULL
            }
        }
        BinOp::Mul => match a.hi.checked_mul(b.hi) {
            Some(hi) => Range {
                lo: a.lo * b.lo,
                hi,
            },
            None => Range::FULL,
        },
        // A quotient never exceeds the dividend (division by zero rejects).
        BinOp::Div => Range {
            lo: if b.lo > 0 { a.lo / b.hi } else { 0 },
            hi: a.hi,
        },
        BinOp::Mod => Range::upto(a.hi.min(b.hi.saturating_sub(1))),
        BinOp::And => Range::upto(a.hi.min(b.hi)),
        BinOp::Or => Range {
            lo: a.lo.max(b.lo),
            hi: low_mask(a.hi | b.hi),
        },
        BinOp::Xor => Range::upto(low_mask(a.hi | b.hi)),
        BinOp::Shl => match b.as_const() {
            Some(k) if k >= 32 => Range::exact(0),
            Some(k) if a.hi.leading_zeros() >= k => Range {
                lo: a.lo << k,
                hi: a.hi << k,
            },
            _ => Range::FULL,
        },
        BinOp::Shr => Range {
            lo: if b.hi >= 32 { 0 } else { a.lo >> b.hi },
            hi: if b.lo >= 32 { 0 } else { a.hi >> b.lo },
        },
    }
}

/// The range of the value `inst` defines, given the ranges of its operands.
pub fn of_inst(inst: &Inst, range_of: impl Fn(Value) -> Range) -> Range {
    match *inst {
        Inst::Const(k) => Range::exact(k),
        Inst::WireLen => Range::FULL,
        Inst::Load { size, .. } => load_range(size),
        Inst::Binary(op, a, b) => binary(op, range_of(a), range_of(b)),
        Inst::Neg(a) => match range_of(a).as_const() {
            Some(k) => Range::exact(k.wrapping_neg()),
            None => Range::FULL,
        },
        Inst::Contains { .. } | Inst::Member { .. } => Range { lo: 0, hi: 1 },
        // The first protocol, or a header byte read on the way.
        Inst::Protochain { proto, .. } => Range {
            lo: 0,
            hi: range_of(proto).hi.max(0xff),
        },
        // Filled in from the incoming edges.
        Inst::Param(_) => Range::EMPTY,
    }
}

/// Ranges of every value of `f` (values of unreachable blocks get `FULL`).
pub fn compute(f: &Function) -> Vec<Range> {
    compute_over(f, &crate::cfg::rpo(f))
}

/// [`compute`], given the reverse postorder of `f`.
pub fn compute_over(f: &Function, rpo: &[sift_ir::Block]) -> Vec<Range> {
    let mut r = vec![Range::FULL; f.values.len()];
    let mut any_params = false;
    for &b in rpo {
        for &p in &f.block(b).params {
            r[p.index()] = Range::EMPTY;
            any_params = true;
        }
    }
    for &b in rpo {
        let data = f.block(b);
        for &v in &data.insts {
            let x = of_inst(f.inst(v), |o| r[o.index()]);
            r[v.index()] = x;
        }
        // Edges carry ranges only to parameters. Without any (a chain after value numbering
        // has none), visiting every edge's target block, most of the work here, is skipped.
        if !any_params || matches!(data.term, Terminator::Unset) {
            continue;
        }
        for t in crate::cfg::targets(&data.term) {
            for (p, a) in f.block(t.block).params.iter().zip(&t.args) {
                r[p.index()] = r[p.index()].union(r[a.index()]);
            }
        }
    }
    // A parameter no reachable edge feeds is never read; keep it FULL rather than EMPTY.
    if any_params {
        for &b in rpo {
            for &p in &f.block(b).params {
                if r[p.index()].is_empty() {
                    r[p.index()] = Range::FULL;
                }
            }
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_ir::parse_function;

    #[test]
    fn header_length_is_bounded() {
        let f = parse_function(
            "block0:\n v0 = load.b [14]\n v1 = const 15\n v2 = and v0, v1\n v3 = const 2\n v4 = shl v2, v3\n v5 = add v4, v1\n ret v5\n",
        )
        .unwrap();
        let r = compute(&f);
        assert_eq!(r[2], Range::upto(15));
        assert_eq!(r[4], Range::upto(60));
        assert_eq!(r[5], Range { lo: 15, hi: 75 });
    }

    #[test]
    fn wrapping_operations_widen() {
        let a = Range::FULL;
        assert_eq!(binary(BinOp::Add, a, Range::exact(1)), Range::FULL);
        assert_eq!(
            binary(BinOp::Sub, Range::upto(3), Range::exact(1)),
            Range::FULL
        );
        assert_eq!(
            binary(BinOp::Shl, Range::upto(0xff), Range::exact(40)).hi,
            0
        );
        assert_eq!(
            binary(BinOp::Or, Range::exact(4), Range::upto(1)),
            Range { lo: 4, hi: 7 }
        );
    }

    #[test]
    fn parameters_join_their_arguments() {
        let f = parse_function(
            "block0:\n v0 = load.b [0]\n br eq v0, v0, block1, block2\nblock1:\n v1 = const 7\n jump block3(v1)\nblock2:\n v2 = const 9\n jump block3(v2)\nblock3(v3):\n ret v3\n",
        )
        .unwrap();
        let r = compute(&f);
        assert_eq!(r[3], Range { lo: 7, hi: 9 });
    }
}
