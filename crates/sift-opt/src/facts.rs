//! The predicate algebra (BPF+ Table 1, generalized): what a set of branch outcomes proves about
//! later comparisons.
//!
//! A fact base holds, for each SSA value, a summary of every assertion made about it on the
//! current path:
//!
//! * an interval `lo..=hi` (from `eq`, `lt`, `le`, `gt`, `ge` against constants, seeded with the
//!   value's [`Range`]);
//! * bits known to be zero (a false `set` test: `x & m == 0`) and known to be one (a true `set`
//!   test with a one-bit mask), plus up to [`MAX_ANY_MASKS`] masks of which at least one bit is
//!   set (a true `set` test with a wider mask);
//! * constants it is known to differ from (false `eq` tests, `switch` defaults), in a hash map so
//!   that a chain of 10^4 tests stays linear;
//!
//! and, for pairs of values compared with each other, the set of orderings (`<`, `=`, `>`) still
//! possible. Table 1's rows are the special cases where both sides are the same registers or
//! constants; every one of them follows from these summaries.
//!
//! The base is scoped: [`Facts::mark`] and [`Facts::undo_to`] let a dominator-tree walk add an
//! edge's assertion on the way down and drop it on the way up.

use crate::hash::FastMap;

use sift_ir::{CmpOp, Value};

use crate::range::{low_mask, Range};

/// How many "some bit of this mask is set" assertions a value keeps.
pub const MAX_ANY_MASKS: usize = 4;

/// What is known about one value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Summary {
    range: Range,
    zeros: u32,
    ones: u32,
    any: [u32; MAX_ANY_MASKS],
}

impl Summary {
    fn new(range: Range) -> Summary {
        Summary {
            range,
            zeros: !low_mask(range.hi),
            ones: 0,
            any: [0; MAX_ANY_MASKS],
        }
    }

    /// Whether no value satisfies the summary (the path is infeasible).
    fn contradictory(&self) -> bool {
        self.range.is_empty() || self.zeros & self.ones != 0
    }

    /// Whether `k` is a value the summary allows (ignoring the `ne` set).
    fn admits(&self, k: u32) -> bool {
        k >= self.range.lo
            && k <= self.range.hi
            && k & self.zeros == 0
            && k & self.ones == self.ones
            && self.any.iter().all(|&m| m == 0 || k & m != 0)
    }
}

/// Orderings of a pair of values still possible.
const LESS: u8 = 1;
const EQUAL: u8 = 2;
const GREATER: u8 = 4;

/// The orderings under which `a op b` holds (`Set` is not an ordering).
fn orderings(op: CmpOp) -> Option<u8> {
    Some(match op {
        CmpOp::Eq => EQUAL,
        CmpOp::Ne => LESS | GREATER,
        CmpOp::Lt => LESS,
        CmpOp::Le => LESS | EQUAL,
        CmpOp::Gt => GREATER,
        CmpOp::Ge => GREATER | EQUAL,
        CmpOp::Set => return None,
    })
}

/// Swaps `<` and `>` (the relation seen from the other operand).
fn mirror(set: u8) -> u8 {
    (set & EQUAL)
        | if set & LESS != 0 { GREATER } else { 0 }
        | if set & GREATER != 0 { LESS } else { 0 }
}

/// The outcome of `op` that is the logical negation of `op` (for the false edge).
pub fn negate(op: CmpOp) -> Option<CmpOp> {
    Some(match op {
        CmpOp::Eq => CmpOp::Ne,
        CmpOp::Ne => CmpOp::Eq,
        CmpOp::Lt => CmpOp::Ge,
        CmpOp::Ge => CmpOp::Lt,
        CmpOp::Gt => CmpOp::Le,
        CmpOp::Le => CmpOp::Gt,
        CmpOp::Set => return None,
    })
}

/// The comparison with its operands swapped: `a op b` iff `b mirror(op) a`.
pub fn mirror_op(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::Le => CmpOp::Ge,
        CmpOp::Ge => CmpOp::Le,
        other => other,
    }
}

/// Decides `x op k` for every `x` in `range`, if the range alone does.
pub fn decide_range(range: Range, op: CmpOp, k: u32) -> Option<bool> {
    Facts::decide_summary(&Summary::new(range), None, op, k)
}

enum Undo {
    Summary(Value, Option<Summary>),
    Ne(Value, u32),
    Pair((Value, Value), Option<u8>),
}

/// A scoped base of assertions about values.
pub struct Facts<'r> {
    ranges: &'r [Range],
    /// What the assertions on the path say about each value (indexed by value; `None`: only
    /// its range is known). An array, not a map: a chain asserts something about a value in
    /// almost every block.
    summaries: Vec<Option<Summary>>,
    /// Constants values differ from, each with the position in `undo` of the assertion that
    /// made it. An entry holds only while that position still holds that assertion: undoing
    /// leaves the entry behind instead of removing it (a removal per edge was a large share of
    /// the pass on long chains).
    ne: FastMap<(Value, u32), usize>,
    pairs: FastMap<(Value, Value), u8>,
    undo: Vec<Undo>,
}

impl<'r> Facts<'r> {
    /// An empty base; `ranges` (indexed by value) seed what is known about every value.
    pub fn new(ranges: &'r [Range]) -> Facts<'r> {
        Facts {
            ranges,
            summaries: vec![None; ranges.len()],
            ne: FastMap::default(),
            pairs: FastMap::default(),
            undo: Vec::new(),
        }
    }

    /// Makes room for `n` inequalities `x != k`. Undoing leaves them in their table (see the
    /// `ne` field), so on a long chain it grows to one entry per test, and growing it step by
    /// step rehashed every entry several times.
    pub fn reserve_ne(&mut self, n: usize) {
        self.ne.reserve(n);
    }

    pub fn mark(&self) -> usize {
        self.undo.len()
    }

    /// Forgets every assertion made since `mark`.
    pub fn undo_to(&mut self, mark: usize) {
        while self.undo.len() > mark {
            match self.undo.pop() {
                Some(Undo::Summary(v, old)) => self.summaries[v.index()] = old,
                Some(Undo::Ne(..)) => {}
                Some(Undo::Pair(p, old)) => match old {
                    Some(s) => {
                        self.pairs.insert(p, s);
                    }
                    None => {
                        self.pairs.remove(&p);
                    }
                },
                None => break,
            }
        }
    }

    fn summary(&self, v: Value) -> Summary {
        match self.summaries.get(v.index()).copied().flatten() {
            Some(s) => s,
            None => Summary::new(self.ranges.get(v.index()).copied().unwrap_or(Range::FULL)),
        }
    }

    fn set_summary(&mut self, v: Value, s: Summary) {
        if self.summaries.len() <= v.index() {
            self.summaries.resize(v.index() + 1, None);
        }
        let old = self.summaries[v.index()].replace(s);
        self.undo.push(Undo::Summary(v, old));
    }

    /// Whether `v != k` was asserted on the current path.
    fn is_ne(&self, v: Value, k: u32) -> bool {
        self.ne
            .get(&(v, k))
            .is_some_and(|&at| asserts_ne(&self.undo, at, v, k))
    }

    fn add_ne(&mut self, v: Value, k: u32) {
        let at = self.undo.len();
        let made = self.ne.entry((v, k)).or_insert(at);
        if *made == at || !asserts_ne(&self.undo, *made, v, k) {
            *made = at;
            self.undo.push(Undo::Ne(v, k));
        }
        // Excluding an end of the interval shrinks it (so `x != 0` proves `x > 0`).
        let mut s = self.summary(v);
        let before = s;
        if s.range.lo == k && s.range.lo < u32::MAX {
            s.range.lo += 1;
        } else if s.range.hi == k && s.range.hi > 0 {
            s.range.hi -= 1;
        }
        if s != before {
            self.set_summary(v, s);
        }
    }

    /// Records that `x op k` has outcome `outcome` on the current path.
    pub fn assume_const(&mut self, x: Value, op: CmpOp, k: u32, outcome: bool) {
        let mut s = self.summary(x);
        let before = s;
        let op = if outcome { Some(op) } else { negate(op) };
        match op {
            Some(CmpOp::Eq) => {
                s.range.lo = s.range.lo.max(k);
                s.range.hi = s.range.hi.min(k);
            }
            Some(CmpOp::Ne) => return self.add_ne(x, k),
            Some(CmpOp::Lt) => match k.checked_sub(1) {
                Some(h) => s.range.hi = s.range.hi.min(h),
                None => s.range = Range::EMPTY,
            },
            Some(CmpOp::Le) => s.range.hi = s.range.hi.min(k),
            Some(CmpOp::Gt) => match k.checked_add(1) {
                Some(l) => s.range.lo = s.range.lo.max(l),
                None => s.range = Range::EMPTY,
            },
            Some(CmpOp::Ge) => s.range.lo = s.range.lo.max(k),
            // `set` true: some bit of k is one.
            Some(CmpOp::Set) if k.is_power_of_two() => s.ones |= k,
            Some(CmpOp::Set) => {
                if let Some(slot) = s.any.iter_mut().find(|m| **m == 0 || **m == k) {
                    *slot = k;
                }
            }
            // `set` false: every bit of k is zero.
            None => s.zeros |= k,
        }
        // Known-zero high bits bound the interval, and a small interval fixes the high bits.
        s.range.hi = s.range.hi.min(!s.zeros);
        if !s.range.is_empty() {
            s.zeros |= !low_mask(s.range.hi);
        }
        if s != before {
            self.set_summary(x, s);
        }
    }

    /// Records that `a op b` (two values, neither known constant) has outcome `outcome`.
    pub fn assume_pair(&mut self, a: Value, op: CmpOp, b: Value, outcome: bool) {
        let op = if outcome { Some(op) } else { negate(op) };
        let Some(set) = op.and_then(orderings) else {
            return;
        };
        let (key, set) = if a <= b {
            ((a, b), set)
        } else {
            ((b, a), mirror(set))
        };
        let old = self.pairs.get(&key).copied();
        let new = old.unwrap_or(LESS | EQUAL | GREATER) & set;
        if Some(new) != old {
            self.pairs.insert(key, new);
            self.undo.push(Undo::Pair(key, old));
        }
    }

    /// Decides `x op k` from the assertions, if they imply an outcome.
    pub fn decide_const(&self, x: Value, op: CmpOp, k: u32) -> Option<bool> {
        Facts::decide_summary(&self.summary(x), Some((self, x)), op, k)
    }

    fn decide_summary(s: &Summary, ne: Option<(&Facts, Value)>, op: CmpOp, k: u32) -> Option<bool> {
        if s.contradictory() {
            // An infeasible path: any answer would do, but none is needed.
            return None;
        }
        let r = s.range;
        let excluded = |c: u32| !s.admits(c) || ne.is_some_and(|(f, x)| f.is_ne(x, c));
        match op {
            CmpOp::Eq | CmpOp::Ne => {
                let eq = if r.lo == r.hi && r.lo == k && s.admits(k) {
                    Some(true)
                } else if excluded(k) {
                    Some(false)
                } else {
                    None
                };
                eq.map(|e| e == (op == CmpOp::Eq))
            }
            CmpOp::Lt => decide_order(r.hi < k, r.lo >= k),
            CmpOp::Le => decide_order(r.hi <= k, r.lo > k),
            CmpOp::Gt => decide_order(r.lo > k, r.hi <= k),
            CmpOp::Ge => decide_order(r.lo >= k, r.hi < k),
            CmpOp::Set => {
                if k & s.ones != 0 || s.any.iter().any(|&m| m != 0 && m & !k == 0) {
                    Some(true)
                } else if k & !s.zeros == 0 {
                    Some(false)
                } else if r.lo == r.hi {
                    Some(r.lo & k != 0)
                } else {
                    None
                }
            }
        }
    }

    /// Decides `a op b` for two values from the pair assertions and the values' intervals.
    pub fn decide_pair(&self, a: Value, op: CmpOp, b: Value) -> Option<bool> {
        let set = orderings(op)?;
        if a == b {
            return Some(set & EQUAL != 0);
        }
        let (key, set) = if a <= b {
            ((a, b), set)
        } else {
            ((b, a), mirror(set))
        };
        let mut possible = self
            .pairs
            .get(&key)
            .copied()
            .unwrap_or(LESS | EQUAL | GREATER);
        let (x, y) = (self.summary(key.0).range, self.summary(key.1).range);
        if x.is_empty() || y.is_empty() {
            return None;
        }
        if x.hi < y.lo {
            possible &= LESS;
        } else if x.lo > y.hi {
            possible &= GREATER;
        } else {
            if x.hi <= y.lo {
                possible &= LESS | EQUAL;
            }
            if x.lo >= y.hi {
                possible &= GREATER | EQUAL;
            }
        }
        if possible == 0 {
            None
        } else if possible & !set == 0 {
            Some(true)
        } else if possible & set == 0 {
            Some(false)
        } else {
            None
        }
    }
}

/// Whether the assertion at position `at` of `undo` is `v != k`.
fn asserts_ne(undo: &[Undo], at: usize, v: Value, k: u32) -> bool {
    matches!(undo.get(at), Some(&Undo::Ne(w, c)) if (w, c) == (v, k))
}

fn decide_order(always: bool, never: bool) -> Option<bool> {
    if always {
        Some(true)
    } else if never {
        Some(false)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [CmpOp; 7] = [
        CmpOp::Eq,
        CmpOp::Ne,
        CmpOp::Lt,
        CmpOp::Le,
        CmpOp::Gt,
        CmpOp::Ge,
        CmpOp::Set,
    ];

    /// Every row of BPF+ Table 1, with the same constant on both sides: an assertion about
    /// `x op1 k` with a sense decides `x op2 k` as the table says.
    #[test]
    fn table_one_rows() {
        use CmpOp::*;
        let rows: &[(CmpOp, bool, CmpOp, bool)] = &[
            (Eq, true, Eq, true),
            (Eq, true, Ne, false),
            (Eq, true, Lt, false),
            (Eq, true, Gt, false),
            (Eq, false, Eq, false),
            (Eq, false, Ne, true),
            (Ne, true, Ne, true),
            (Ne, true, Eq, false),
            (Ne, false, Eq, true),
            (Ne, false, Ne, false),
            (Lt, true, Lt, true),
            (Lt, true, Eq, false),
            (Lt, true, Ge, false),
            (Lt, true, Gt, false),
            (Lt, false, Lt, false),
            (Lt, false, Ge, true),
            (Gt, true, Gt, true),
            (Gt, true, Eq, false),
            (Gt, true, Le, false),
            (Gt, true, Lt, false),
            (Gt, false, Gt, false),
            (Gt, false, Le, true),
            (Le, true, Le, true),
            (Le, true, Gt, false),
            (Le, false, Le, false),
            (Le, false, Gt, true),
            (Ge, true, Ge, true),
            (Ge, true, Lt, false),
            (Ge, false, Ge, false),
            (Ge, false, Lt, true),
        ];
        let ranges = [Range::FULL; 2];
        for &(a, sense, p, out) in rows {
            let mut f = Facts::new(&ranges);
            f.assume_const(Value(0), a, 80, sense);
            assert_eq!(
                f.decide_const(Value(0), p, 80),
                Some(out),
                "{a:?} {sense} {p:?}"
            );
            // The same rows hold between two registers.
            let mut g = Facts::new(&ranges);
            g.assume_pair(Value(0), a, Value(1), sense);
            assert_eq!(
                g.decide_pair(Value(0), p, Value(1)),
                Some(out),
                "pair {a:?} {sense} {p:?}"
            );
        }
        // jeq #lval #rval1 TRUE -> jeq #lval #rval2 FALSE; jne ... FALSE -> jne #rval2 TRUE.
        let mut f = Facts::new(&ranges);
        f.assume_const(Value(0), Eq, 1, true);
        assert_eq!(f.decide_const(Value(0), Eq, 2), Some(false));
        assert_eq!(f.decide_const(Value(0), Ne, 2), Some(true));
    }

    #[test]
    fn masks_and_scopes() {
        let ranges = [Range::upto(0xffff)];
        let mut f = Facts::new(&ranges);
        let m = f.mark();
        f.assume_const(Value(0), CmpOp::Set, 0x1fff, false);
        assert_eq!(f.decide_const(Value(0), CmpOp::Set, 0x0100), Some(false));
        assert_eq!(f.decide_const(Value(0), CmpOp::Eq, 0x0001), Some(false));
        assert_eq!(f.decide_const(Value(0), CmpOp::Set, 0x2000), None);
        f.undo_to(m);
        assert_eq!(f.decide_const(Value(0), CmpOp::Set, 0x0100), None);
        // A load.h never exceeds 0xffff.
        assert_eq!(f.decide_const(Value(0), CmpOp::Gt, 0xffff), Some(false));
        assert_eq!(f.decide_const(Value(0), CmpOp::Set, 0x10000), Some(false));
        f.assume_const(Value(0), CmpOp::Set, 0x4, true);
        assert_eq!(f.decide_const(Value(0), CmpOp::Eq, 0), Some(false));
        assert_eq!(f.decide_const(Value(0), CmpOp::Set, 0x6), Some(true));
    }

    #[test]
    fn ne_chains_and_interval_ends() {
        let ranges = [Range::upto(1)];
        let mut f = Facts::new(&ranges);
        f.assume_const(Value(0), CmpOp::Eq, 0, false);
        assert_eq!(f.decide_const(Value(0), CmpOp::Eq, 1), Some(true));
        for op in ALL {
            // Never a panic, never a claim on an infeasible path.
            f.assume_const(Value(0), CmpOp::Eq, 1, false);
            assert_eq!(f.decide_const(Value(0), op, 1), None);
        }
    }

    #[test]
    fn undone_inequalities_no_longer_hold() {
        let ranges = [Range::FULL; 2];
        let mut f = Facts::new(&ranges);
        let outer = f.mark();
        f.assume_const(Value(0), CmpOp::Eq, 7, false);
        assert_eq!(f.decide_const(Value(0), CmpOp::Eq, 7), Some(false));
        f.undo_to(outer);
        assert_eq!(f.decide_const(Value(0), CmpOp::Eq, 7), None);
        // Another assertion now sits where the undone one was.
        f.assume_const(Value(1), CmpOp::Eq, 7, false);
        assert_eq!(f.decide_const(Value(0), CmpOp::Eq, 7), None);
        assert_eq!(f.decide_const(Value(1), CmpOp::Eq, 7), Some(false));
        // Asserted again, deeper: holds until that scope is undone.
        f.assume_const(Value(0), CmpOp::Eq, 7, false);
        let inner = f.mark();
        f.assume_const(Value(0), CmpOp::Eq, 7, false);
        assert_eq!(f.decide_const(Value(0), CmpOp::Eq, 7), Some(false));
        f.undo_to(inner);
        assert_eq!(f.decide_const(Value(0), CmpOp::Eq, 7), Some(false));
        f.undo_to(outer);
        assert_eq!(f.decide_const(Value(0), CmpOp::Eq, 7), None);
        assert_eq!(f.decide_const(Value(1), CmpOp::Eq, 7), None);
    }

    #[test]
    fn ranges_decide_alone() {
        assert_eq!(decide_range(Range::upto(60), CmpOp::Gt, 60), Some(false));
        assert_eq!(decide_range(Range::upto(60), CmpOp::Le, 60), Some(true));
        assert_eq!(decide_range(Range::exact(6), CmpOp::Eq, 6), Some(true));
        assert_eq!(decide_range(Range::FULL, CmpOp::Eq, 6), None);
    }
}
