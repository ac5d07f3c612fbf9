//! Dense numbers for comparisons, so that threading's hot path indexes arrays.
//!
//! Threading asks, several times per block per round, whether a fact about a comparison is
//! in force at a block. Comparisons get dense numbers ([`FactIds`]) once, when a block's
//! terminator is first read, so each question indexes a table instead of hashing a key.

use super::fast_hash::WordMap;
use super::numbering::Vn;
use sift_bpf::JmpOp;

/// No number: the comparison is not an equality with a constant.
pub(super) const NO_ID: u32 = u32::MAX;

/// Dense numbers for comparisons, valid for one numbering: `exact` per `(comparison, lhs,
/// rhs)`, `equality` per `(comparison, lhs)` of equalities with a constant (an equality with
/// one constant that held decides equalities with the others).
#[derive(Default)]
pub(super) struct FactIds {
    exact: WordMap<(JmpOp, Vn, Vn), u32>,
    equality: WordMap<(JmpOp, Vn), u32>,
}

impl FactIds {
    pub(super) fn exact(&mut self, code: JmpOp, lhs: Vn, rhs: Vn) -> u32 {
        let next = self.exact.len() as u32;
        *self.exact.entry((code, lhs, rhs)).or_insert(next)
    }

    pub(super) fn equality(&mut self, code: JmpOp, lhs: Vn) -> u32 {
        let next = self.equality.len() as u32;
        *self.equality.entry((code, lhs)).or_insert(next)
    }

    /// The number of `(code, lhs, rhs)`, if it has one.
    pub(super) fn find_exact(&self, code: JmpOp, lhs: Vn, rhs: Vn) -> Option<u32> {
        self.exact.get(&(code, lhs, rhs)).copied()
    }

    /// The number of `(code, lhs)`, if it has one.
    pub(super) fn find_equality(&self, code: JmpOp, lhs: Vn) -> Option<u32> {
        self.equality.get(&(code, lhs)).copied()
    }

    pub(super) fn exact_count(&self) -> usize {
        self.exact.len()
    }

    pub(super) fn equality_count(&self) -> usize {
        self.equality.len()
    }
}
