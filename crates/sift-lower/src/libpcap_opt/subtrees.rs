//! Facts in force over dominator subtrees, found without hashing on threading's hot path.
//!
//! Threading asks, several times per block per round, whether a fact about a comparison is
//! in force at a block. Comparisons get dense numbers ([`FactIds`]) once, when a block's
//! terminator is first read, so each question indexes arrays instead of hashing a key.

use std::cell::Cell;

use super::branches::Code;
use super::fast_hash::WordMap;
use super::numbering::Vn;

/// No number: the comparison is not an equality with a constant.
pub(super) const NO_ID: u32 = u32::MAX;

/// Dense numbers for comparisons, valid for one numbering: `exact` per `(comparison, lhs,
/// rhs)`, `equality` per `(comparison, lhs)` of equalities with a constant (an equality with
/// one constant that held decides equalities with the others).
#[derive(Default)]
pub(super) struct FactIds {
    exact: WordMap<(Code, Vn, Vn), u32>,
    equality: WordMap<(Code, Vn), u32>,
}

impl FactIds {
    pub(super) fn exact(&mut self, code: Code, lhs: Vn, rhs: Vn) -> u32 {
        let next = self.exact.len() as u32;
        *self.exact.entry((code, lhs, rhs)).or_insert(next)
    }

    pub(super) fn equality(&mut self, code: Code, lhs: Vn) -> u32 {
        let next = self.equality.len() as u32;
        *self.equality.entry((code, lhs)).or_insert(next)
    }

    /// The number of `(code, lhs, rhs)`, if it has one.
    pub(super) fn find_exact(&self, code: Code, lhs: Vn, rhs: Vn) -> Option<u32> {
        self.exact.get(&(code, lhs, rhs)).copied()
    }

    /// The number of `(code, lhs)`, if it has one.
    pub(super) fn find_equality(&self, code: Code, lhs: Vn) -> Option<u32> {
        self.equality.get(&(code, lhs)).copied()
    }

    pub(super) fn exact_count(&self) -> usize {
        self.exact.len()
    }

    pub(super) fn equality_count(&self) -> usize {
        self.equality.len()
    }
}

/// Something known in a dominator subtree (entry times `enter..exit`), under a number.
pub(super) struct Subtree<P> {
    pub(super) id: u32,
    pub(super) enter: u32,
    pub(super) exit: u32,
    pub(super) payload: P,
}

/// Subtrees sorted by number and entry time, without those nested in an earlier one of the
/// same number: the ones left per number are disjoint, and a search over their entry times
/// finds the one holding a block.
///
/// A long chain leaves tens of thousands of disjoint subtrees under one number, and the walks
/// ask about blocks in an order that follows the dominator tree closely (threading visits the
/// blocks bottom-up), so each number remembers where its last answer was and the search
/// gallops from there: a few probes instead of a binary search over all of them.
pub(super) struct OutermostSubtrees<P> {
    enter: Vec<u32>,
    exit: Vec<u32>,
    payload: Vec<P>,
    /// Where each number's subtrees lie in the arrays, and where its last search ended.
    of_id: Vec<(u32, u32, Cell<u32>)>,
}

impl<P: Copy> OutermostSubtrees<P> {
    /// `ids` bounds the numbers of `all`.
    pub(super) fn new(mut all: Vec<Subtree<P>>, ids: usize) -> Self {
        all.sort_unstable_by_key(|s| u64::from(s.id) << 32 | u64::from(s.enter));
        let mut this = OutermostSubtrees {
            enter: Vec::with_capacity(all.len()),
            exit: Vec::with_capacity(all.len()),
            payload: Vec::with_capacity(all.len()),
            of_id: (0..ids).map(|_| (0, 0, Cell::new(0))).collect(),
        };
        let mut last_id = NO_ID;
        for s in all {
            let same_id = last_id == s.id;
            if same_id && s.enter < *this.exit.last().expect("same number") {
                continue; // nested
            }
            let at = this.enter.len() as u32;
            let range = &mut this.of_id[s.id as usize];
            if same_id {
                range.1 = at + 1;
            } else {
                *range = (at, at + 1, Cell::new(at));
            }
            last_id = s.id;
            this.enter.push(s.enter);
            this.exit.push(s.exit);
            this.payload.push(s.payload);
        }
        this
    }

    /// The entry time and payload of the subtree numbered `id` that holds entry time `at`.
    // Inlined into `FactsInForce::decide`, threading's hot path, whatever the other callers.
    #[inline(always)]
    pub(super) fn holding(&self, id: u32, at: u32) -> Option<(u32, P)> {
        let (lo, hi, last) = self.of_id.get(id as usize)?;
        let (lo, hi) = (*lo as usize, *hi as usize);
        if lo == hi {
            return None;
        }
        // The first subtree entered after `at`, found from the last answer.
        let after = gallop(&self.enter[lo..hi], last.get() as usize - lo, at) + lo;
        last.set(after.min(hi - 1) as u32);
        let i = after.checked_sub(1).filter(|&i| i >= lo)?;
        (at < self.exit[i]).then(|| (self.enter[i], self.payload[i]))
    }
}

/// The number of entries of `sorted` that are at most `at` (its partition point), searched
/// outwards from index `from`.
fn gallop(sorted: &[u32], from: usize, at: u32) -> usize {
    let n = sorted.len();
    let from = from.min(n - 1);
    let (lo, hi) = if sorted[from] <= at {
        // The answer is above `from`: double the step until past it.
        let (mut lo, mut step) = (from + 1, 1);
        while lo + step <= n && sorted[lo + step - 1] <= at {
            lo += step;
            step *= 2;
        }
        (lo, (lo + step).min(n))
    } else {
        // At or below `from`.
        let (mut hi, mut step) = (from, 1);
        while hi >= step && sorted[hi - step] > at {
            hi -= step;
            step *= 2;
        }
        (hi.saturating_sub(step), hi)
    };
    lo + sorted[lo..hi].partition_point(|&e| e <= at)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Galloping from any start finds the partition point a binary search finds.
    #[test]
    fn gallop_finds_the_partition_point() {
        let sorted: Vec<u32> = (0..200).map(|i| i * 7 + i % 5).collect();
        for from in 0..sorted.len() {
            for at in 0..1500 {
                let expected = sorted.partition_point(|&e| e <= at);
                assert_eq!(gallop(&sorted, from, at), expected, "from {from}, at {at}");
            }
        }
        assert_eq!(gallop(&[5], 0, 4), 0);
        assert_eq!(gallop(&[5], 0, 5), 1);
    }

    /// Nested subtrees of one number give way to the outermost; numbers without subtrees,
    /// and numbers given out after the table was built, hold nowhere.
    #[test]
    fn the_outermost_subtree_holding_a_block_answers() {
        let s = |id, enter, exit, payload| Subtree {
            id,
            enter,
            exit,
            payload,
        };
        let table = OutermostSubtrees::new(
            vec![
                s(0, 5, 9, 'b'),
                s(0, 0, 4, 'a'),
                s(0, 1, 3, 'x'),
                s(2, 3, 6, 'c'),
            ],
            3,
        );
        assert_eq!(table.holding(0, 2), Some((0, 'a')));
        assert_eq!(table.holding(0, 4), None);
        assert_eq!(table.holding(0, 8), Some((5, 'b')));
        assert_eq!(table.holding(2, 3), Some((3, 'c')));
        assert_eq!(table.holding(1, 3), None);
        assert_eq!(table.holding(7, 3), None);
    }
}
