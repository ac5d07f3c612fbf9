//! Canonical field expressions and atoms: the vocabulary filters are compared in.
//!
//! Two filters written differently (different SSA numbering, operands in another order, constants
//! folded or not) must produce the same atoms, or they cannot share a dispatch table. An [`Expr`]
//! is a tree (not SSA), with constants folded, commutative operands ordered and identities
//! removed. An [`Atom`] is one condition of a conjunction: a comparison of two expressions
//! (the right one usually a constant), or a requirement that an expression evaluates at all
//! (a load in bounds, a division by a non-zero value), which the IR's semantics make part of
//! every path's condition.

use std::sync::Arc;

use sift_ir::{BinOp, LoadSize};

/// A value computed from the packet, as a tree.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Expr {
    Const(u32),
    WireLen,
    /// `bytes` (1, 2 or 4) big-endian at `index + offset` (no wrapping); no index means 0.
    Load {
        index: Option<Arc<Expr>>,
        offset: u32,
        bytes: u8,
    },
    /// The last field is the size of the tree (see [`Expr::size`]).
    Bin(BinOp, Arc<Expr>, Arc<Expr>, u32),
    Neg(Arc<Expr>),
}

/// Expressions larger than this (as trees) are not canonicalised: the filter runs whole.
/// Trees share subtrees, so without a bound a graph of n instructions can denote a tree of
/// 2^n nodes and comparing two of them would take exponential time.
pub(crate) const MAX_EXPR_SIZE: u32 = 64;

/// Why an expression cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unusable {
    /// Some operation always fails (a division by zero, a load beyond 4 GiB): the path never
    /// accepts.
    AlwaysFails,
    /// Larger than [`MAX_EXPR_SIZE`].
    TooLarge,
}

pub(crate) use Unusable::AlwaysFails;

impl Expr {
    pub(crate) fn constant(&self) -> Option<u32> {
        match self {
            Expr::Const(k) => Some(*k),
            _ => None,
        }
    }

    /// A load; a constant index is folded into the offset.
    pub(crate) fn load(
        index: Option<Arc<Expr>>,
        offset: u32,
        size: LoadSize,
    ) -> Result<Arc<Expr>, Unusable> {
        let bytes = size.bytes() as u8;
        let (index, offset) = match index.as_deref().and_then(Expr::constant) {
            Some(k) => {
                // The interpreter adds without wrapping: past 4 GiB nothing is ever in bounds.
                let sum = u64::from(k) + u64::from(offset);
                (None, u32::try_from(sum).map_err(|_| AlwaysFails)?)
            }
            None => (index, offset),
        };
        if index.is_none() && u64::from(offset) + u64::from(bytes) > u64::from(u32::MAX) {
            return Err(AlwaysFails);
        }
        if index.as_ref().is_some_and(|i| i.size() >= MAX_EXPR_SIZE) {
            return Err(Unusable::TooLarge);
        }
        Ok(Arc::new(Expr::Load {
            index,
            offset,
            bytes,
        }))
    }

    /// `a op b`, folded and ordered.
    pub(crate) fn binary(op: BinOp, a: Arc<Expr>, b: Arc<Expr>) -> Result<Arc<Expr>, Unusable> {
        if let (Some(x), Some(y)) = (a.constant(), b.constant()) {
            return op
                .apply(x, y)
                .map(|v| Arc::new(Expr::Const(v)))
                .ok_or(AlwaysFails);
        }
        let (a, b) = if op.is_commutative()
            && (a.constant().is_some() || (b.constant().is_none() && b < a))
        {
            (b, a)
        } else {
            (a, b)
        };
        // Identities. Dropping an operand is safe: any load or division inside it was executed
        // and is recorded separately as a requirement of the path.
        match (op, b.constant()) {
            (BinOp::Div | BinOp::Mod, Some(0)) => return Err(AlwaysFails),
            (
                BinOp::Add | BinOp::Sub | BinOp::Or | BinOp::Xor | BinOp::Shl | BinOp::Shr,
                Some(0),
            ) => return Ok(a),
            (BinOp::Mul | BinOp::Div, Some(1)) => return Ok(a),
            (BinOp::And, Some(u32::MAX)) => return Ok(a),
            (BinOp::Mul | BinOp::And, Some(0)) => return Ok(Arc::new(Expr::Const(0))),
            (BinOp::Mod, Some(1)) => return Ok(Arc::new(Expr::Const(0))),
            (BinOp::Shl | BinOp::Shr, Some(s)) if s >= 32 => return Ok(Arc::new(Expr::Const(0))),
            _ => {}
        }
        let size = 1 + a.size() + b.size();
        if size > MAX_EXPR_SIZE {
            return Err(Unusable::TooLarge);
        }
        Ok(Arc::new(Expr::Bin(op, a, b, size)))
    }

    pub(crate) fn neg(a: Arc<Expr>) -> Result<Arc<Expr>, Unusable> {
        match a.constant() {
            Some(k) => Ok(Arc::new(Expr::Const(k.wrapping_neg()))),
            None if a.size() >= MAX_EXPR_SIZE => Err(Unusable::TooLarge),
            None => Ok(Arc::new(Expr::Neg(a))),
        }
    }

    /// Nodes in the expression as a tree (shared subtrees counted each time). Constant time for
    /// the bounded expressions the constructors build.
    pub(crate) fn size(&self) -> u32 {
        match self {
            Expr::Const(_) | Expr::WireLen => 1,
            Expr::Load { index, .. } => 1 + index.as_ref().map_or(0, |i| i.size()),
            Expr::Bin(.., size) => *size,
            Expr::Neg(a) => 1 + a.size(),
        }
    }

    /// The bits the value can have set: `value & !possible_bits() == 0` always.
    pub(crate) fn possible_bits(&self) -> u32 {
        match self {
            Expr::Const(k) => *k,
            Expr::WireLen | Expr::Neg(_) => u32::MAX,
            Expr::Load { bytes: 1, .. } => 0xff,
            Expr::Load { bytes: 2, .. } => 0xffff,
            Expr::Load { .. } => u32::MAX,
            Expr::Bin(op, a, b, _) => match (op, b.constant()) {
                (BinOp::And, _) => a.possible_bits() & b.possible_bits(),
                (BinOp::Or | BinOp::Xor, _) => a.possible_bits() | b.possible_bits(),
                (BinOp::Shr, Some(s)) => a.possible_bits().checked_shr(s).unwrap_or(0),
                (BinOp::Shl, Some(s)) => a.possible_bits().checked_shl(s).unwrap_or(0),
                // The quotient is at most the dividend, so it fits in the dividend's width.
                (BinOp::Div, Some(_)) => u32::MAX
                    .checked_shr(a.possible_bits().leading_zeros())
                    .unwrap_or(0),
                // The remainder is below the divisor.
                (BinOp::Mod, Some(m)) => u32::MAX
                    .checked_shr(m.saturating_sub(1).leading_zeros())
                    .unwrap_or(0),
                _ => u32::MAX,
            },
        }
    }

    /// Calls `f` on this expression and every subexpression.
    pub(crate) fn for_each(self: &Arc<Expr>, f: &mut impl FnMut(&Arc<Expr>)) {
        f(self);
        match &**self {
            Expr::Const(_) | Expr::WireLen => {}
            Expr::Load { index, .. } => {
                if let Some(i) = index {
                    i.for_each(f);
                }
            }
            Expr::Bin(_, a, b, _) => {
                a.for_each(f);
                b.for_each(f);
            }
            Expr::Neg(a) => a.for_each(f),
        }
    }
}

/// A comparison an atom makes: the key extractor's relation (sift-ir's `CmpOp` closed under
/// negation), shared so that native and interpreted checks cannot disagree.
pub(crate) use sift_jit::key_extractor::KeyRel as Rel;

/// The outcome of `x R k` for every `x` whose set bits lie within `bits`, if it is the same.
pub(crate) fn decided_by_bits(rel: Rel, bits: u32, k: u32) -> Option<bool> {
    match rel {
        Rel::Eq if k & !bits != 0 => Some(false),
        Rel::Ne if k & !bits != 0 => Some(true),
        Rel::Set if k & bits == 0 => Some(false),
        Rel::Clear if k & bits == 0 => Some(true),
        Rel::Gt if k >= bits => Some(false),
        Rel::Ge if k > bits => Some(false),
        Rel::Lt if k > bits => Some(true),
        Rel::Le if k >= bits => Some(true),
        _ => None,
    }
}

/// One condition of a conjunction.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Atom {
    /// `lhs rel rhs`; `lhs` is never a constant, and `rhs` is a constant whenever one side is.
    Cmp {
        rel: Rel,
        lhs: Arc<Expr>,
        rhs: Arc<Expr>,
    },
    /// The expression evaluates (its loads are in bounds, its divisors non-zero) although no
    /// comparison reads it.
    Defined(Arc<Expr>),
    /// At least this many bytes were captured (the merged bounds checks of fixed-offset loads).
    MinCapLen(u32),
}

/// What a comparison turns into once canonicalised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Cond {
    /// Known outcome for every packet on which its operands evaluate.
    Decided(bool),
    Atom(Atom),
}

impl Atom {
    /// `lhs rel rhs` in canonical form.
    pub(crate) fn compare(rel: Rel, lhs: Arc<Expr>, rhs: Arc<Expr>) -> Cond {
        match (lhs.constant(), rhs.constant()) {
            (Some(a), Some(b)) => Cond::Decided(rel.eval(a, b)),
            (Some(_), None) => Atom::compare(rel.mirror(), rhs, lhs),
            (None, Some(k)) => match decided_by_bits(rel, lhs.possible_bits(), k) {
                Some(outcome) => Cond::Decided(outcome),
                None => Cond::Atom(Atom::Cmp { rel, lhs, rhs }),
            },
            (None, None) => {
                if lhs == rhs
                    && matches!(
                        rel,
                        Rel::Eq | Rel::Ge | Rel::Le | Rel::Ne | Rel::Gt | Rel::Lt
                    )
                {
                    return Cond::Decided(matches!(rel, Rel::Eq | Rel::Ge | Rel::Le));
                }
                if rhs < lhs {
                    Cond::Atom(Atom::Cmp {
                        rel: rel.mirror(),
                        lhs: rhs,
                        rhs: lhs,
                    })
                } else {
                    Cond::Atom(Atom::Cmp { rel, lhs, rhs })
                }
            }
        }
    }

    /// `(field, k)` when the atom is `field == k`: a key of the dispatch tables.
    pub(crate) fn as_key(&self) -> Option<(&Arc<Expr>, u32)> {
        match self {
            Atom::Cmp {
                rel: Rel::Eq,
                lhs,
                rhs,
            } => rhs.constant().map(|k| (lhs, k)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(offset: u32, size: LoadSize) -> Arc<Expr> {
        Expr::load(None, offset, size).unwrap()
    }

    fn k(v: u32) -> Arc<Expr> {
        Arc::new(Expr::Const(v))
    }

    #[test]
    fn commutative_operands_are_ordered() {
        let a = load(14, LoadSize::Byte);
        let x = Expr::binary(BinOp::And, a.clone(), k(15)).unwrap();
        let y = Expr::binary(BinOp::And, k(15), a.clone()).unwrap();
        assert_eq!(x, y);
        assert_eq!(Expr::binary(BinOp::Add, a.clone(), k(0)).unwrap(), a);
        assert_eq!(Expr::binary(BinOp::Div, a, k(0)), Err(AlwaysFails));
    }

    #[test]
    fn constant_index_folds_into_offset() {
        let i = Expr::load(Some(k(10)), 4, LoadSize::Half).unwrap();
        assert_eq!(i, load(14, LoadSize::Half));
        assert_eq!(
            Expr::load(Some(k(u32::MAX)), 4, LoadSize::Half),
            Err(AlwaysFails)
        );
    }

    #[test]
    fn comparisons_are_canonical_and_decided_by_width() {
        let b = load(23, LoadSize::Byte);
        assert_eq!(
            Atom::compare(Rel::Eq, k(6), b.clone()),
            Atom::compare(Rel::Eq, b.clone(), k(6))
        );
        assert_eq!(
            Atom::compare(Rel::Eq, b.clone(), k(300)),
            Cond::Decided(false)
        );
        assert_eq!(
            Atom::compare(Rel::Le, b.clone(), k(255)),
            Cond::Decided(true)
        );
        assert_eq!(
            Atom::compare(Rel::Gt, k(5), b.clone()),
            Cond::Atom(Atom::Cmp {
                rel: Rel::Lt,
                lhs: b,
                rhs: k(5)
            })
        );
    }

    #[test]
    fn possible_bits_bound_values() {
        let h = load(12, LoadSize::Half);
        let m = Expr::binary(BinOp::Mod, h.clone(), k(10)).unwrap();
        for v in [0u32, 9, 65535, 12345] {
            assert_eq!((v % 10) & !m.possible_bits(), 0);
        }
        let s = Expr::binary(BinOp::Shr, h, k(4)).unwrap();
        assert_eq!(s.possible_bits(), 0x0fff);
    }
}
