//! Edge moving (libpcap's `opt_j`): an edge whose target repeats a test already decided on
//! every path to the edge is pointed past that test.
//!
//! The decision uses value numbers only: the same branch opcode, the same A number on exit
//! and the same operand number (or, on a true `jeq #k` edge, any other constant). The move is
//! refused only if the new target's successors read an atom whose number differs between the
//! edge's source and the new target - the source and target *exit* values, by use summaries
//! from the start of the pass. Nothing checks the blocks skipped in between, which is how a
//! skipped `ldxb` leaves a later `ld [x + k]` reading an X that nothing on the new path set.

use foldhash::{HashMap, HashMapExt};
use sift_bpf::code;

use crate::atoms::{A, N_ATOMS};
use crate::edge_dominators::EdgeDominators;
use crate::flow::edge_id;
use crate::graph::{BlockId, Graph};
use crate::state::Optimizer;

/// `jeq #k`: on its true edge A is `k`, which decides other constants' tests too.
const JEQ_K: u16 = code::JMP | code::JEQ | code::K;

/// What edge moving matches a test by: its opcode and the value number of A on exit. An edge
/// can let an edge into a block skip that block's test only when the two keys are equal.
fn branch_key(code: u16, a: u32) -> u64 {
    (u64::from(code) << 32) | u64::from(a)
}

/// The edges that can fold an edge into a given test, found by what `fold_edge` matches
/// instead of by trying every dominator: in a long chain of tests on one field, every edge
/// above has the same key, and an edge into the chain's end has hundreds of dominators.
/// Statements, value numbers and branch opcodes stay put while edges move, so one index
/// serves the whole edge-moving step of a pass.
#[derive(Clone, Debug, Default)]
pub struct FoldIndex {
    /// Each block's [`branch_key`].
    keys: Vec<u64>,
    /// Per key and operand number, the edges out of such blocks, ascending.
    same_operand: HashMap<(u64, u32), Vec<usize>>,
    /// Per key of a `jeq #k`, the true edges out of such blocks, ascending.
    true_jeq: HashMap<u64, Vec<usize>>,
}

impl FoldIndex {
    /// The index of `g`'s edges that can dominate an edge out of a branch (`edom`).
    pub fn new(g: &Graph, edom: &EdgeDominators) -> FoldIndex {
        let n = g.blocks.len();
        let keys: Vec<u64> = g
            .blocks
            .iter()
            .map(|b| branch_key(b.edge_code, b.val[A]))
            .collect();
        let mut same_operand: HashMap<(u64, u32), Vec<usize>> = HashMap::new();
        let mut true_jeq: HashMap<u64, Vec<usize>> = HashMap::new();
        for d in (0..2 * n).filter(|&d| edom.may_dominate_branches(d)) {
            let b = d % n;
            let block = &g.blocks[b];
            same_operand
                .entry((keys[b], block.oval))
                .or_default()
                .push(d);
            if d < n && block.edge_code == JEQ_K {
                true_jeq.entry(keys[b]).or_default().push(d);
            }
        }
        FoldIndex {
            keys,
            same_operand,
            true_jeq,
        }
    }
}

/// Whether to find an edge's folds through the index, which lists `listed` edges, rather than
/// through its dominators (`dominators` of them): whichever is shorter. Tests can choose.
fn through_index(listed: usize, dominators: impl FnOnce() -> usize) -> bool {
    #[cfg(test)]
    if let Some(forced) = tests::THROUGH_INDEX.with(std::cell::Cell::get) {
        return forced;
    }
    listed < dominators()
}

impl Optimizer {
    /// Whether an atom read below `succ` has different numbers on exit from `b` and `succ`.
    pub fn use_conflict(&self, b: BlockId, succ: BlockId) -> bool {
        let used = self.g.blocks[succ].out_use;
        let (bv, sv) = (&self.g.blocks[b].val, &self.g.blocks[succ].val);
        (0..N_ATOMS).any(|atom| used & (1 << atom) != 0 && bv[atom] != sv[atom])
    }

    /// Where edge `dominator` (a decided test) lets an edge into `child` go instead, if
    /// `child` repeats that test.
    fn fold_edge(&self, child: BlockId, dominator: usize) -> Option<BlockId> {
        let n = self.g.blocks.len();
        let (pred, taken) = (dominator % n, dominator < n);
        let p = &self.g.blocks[pred];
        let c = &self.g.blocks[child];
        if c.code != p.edge_code || c.val[A] != p.val[A] {
            return None;
        }
        if c.oval == p.oval {
            return if taken { c.jt } else { c.jf };
        }
        // On the true edge of `jeq #k`, A is k; a different constant cannot be equal.
        if taken && p.edge_code == JEQ_K {
            return c.jf;
        }
        None
    }

    /// Where edge `me` into `cur` can go instead: the first of its dominators, in ascending
    /// order as libpcap tries them, that folds without a use conflict. Through the index when
    /// it lists fewer edges than `me` has dominators, else through the dominators (`row`,
    /// filled on first use).
    fn first_fold(
        &self,
        me: usize,
        cur: BlockId,
        row: &mut Vec<usize>,
        filled: &mut bool,
    ) -> Option<BlockId> {
        let n = self.g.blocks.len();
        let pred = me % n;
        let c = &self.g.blocks[cur];
        let key = branch_key(c.code, c.val[A]);
        let same = self
            .folds
            .same_operand
            .get(&(key, c.oval))
            .map_or(&[][..], Vec::as_slice);
        let jeq = match c.code {
            JEQ_K => self.folds.true_jeq.get(&key).map_or(&[][..], Vec::as_slice),
            _ => &[],
        };
        let folds = |d: usize| {
            let target = self.fold_edge(cur, d)?;
            (!self.use_conflict(pred, target)).then_some(target)
        };
        if through_index(same.len() + jeq.len(), || self.edom.count(me)) {
            // The first in each list, then the lower of the two.
            let first_in = |list: &[usize]| {
                list.iter()
                    .filter(|&&d| self.edom.dominates(d, me))
                    .find_map(|&d| Some((d, folds(d)?)))
            };
            return [first_in(same), first_in(jeq)]
                .into_iter()
                .flatten()
                .min_by_key(|&(d, _)| d)
                .map(|(_, target)| target);
        }
        if !*filled {
            self.edom.dominators_of(me, row);
            *filled = true;
        }
        row.iter()
            .filter(|&&d| self.folds.keys[d % n] == key)
            .find_map(|&d| folds(d))
    }

    /// Moves edge `(pred, taken)` as far down as decided tests allow.
    pub fn opt_j(&mut self, pred: BlockId, taken: bool) {
        let Some(succ) = self.edge_succ(pred, taken) else {
            return;
        };
        let Some(succ_t) = self.g.blocks[succ].jt else {
            return;
        };
        // A test whose outcomes lead to the same place can be skipped.
        if Some(succ_t) == self.g.blocks[succ].jf && !self.use_conflict(pred, succ_t) {
            self.progress.changed();
            self.set_edge_succ(pred, taken, Some(succ_t));
        }
        // Then past decided tests, trying the dominators afresh after each move (moving
        // edges leaves the dominator sets as they are).
        let me = edge_id(self.g.blocks.len(), pred, taken);
        let mut row = std::mem::take(&mut self.dominators);
        let mut filled = false;
        while let Some(cur) = self.edge_succ(pred, taken) {
            let Some(target) = self.first_fold(me, cur, &mut row, &mut filled) else {
                break;
            };
            self.progress.moved_edge();
            self.set_edge_succ(pred, taken, Some(target));
            if self.g.blocks[target].jt.is_none() {
                break;
            }
        }
        self.dominators = row;
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::cell::Cell;

    use sift_bpf::Insn;
    use sift_oracle::Oracle;

    thread_local! {
        pub(crate) static THROUGH_INDEX: Cell<Option<bool>> = const { Cell::new(None) };
    }

    fn optimized(unoptimized: &[Insn], through_index: bool) -> String {
        THROUGH_INDEX.with(|f| f.set(Some(through_index)));
        let out = crate::optimize(unoptimized);
        THROUGH_INDEX.with(|f| f.set(None));
        format!("{out:?}")
    }

    /// The index finds the folds the dominators give, in the same order: libpcap's optimized
    /// program comes out the same either way, on long chains of tests of one field (where
    /// the index is used) and the generators' random filters.
    #[test]
    fn the_index_finds_what_the_dominators_give() {
        let oracle = Oracle::new(1, 262_144).expect("libpcap");
        let chain = |n: usize, term: &dyn Fn(usize) -> String| {
            (0..n).map(term).collect::<Vec<_>>().join(" or ")
        };
        let mut exprs = vec![
            format!(
                "len > 0 and ({})",
                chain(60, &|i| format!("host 10.0.{i}.1"))
            ),
            format!(
                "len > 0 and ({})",
                chain(30, &|i| format!("port {}", 1000 + i))
            ),
            chain(40, &|i| format!("ip[{}] = {} and ip[0] = 69", i % 4, i)),
            (0..30)
                .map(|i| format!("ip[{}] != {i}", i % 3))
                .collect::<Vec<_>>()
                .join(" and "),
        ];
        exprs.extend(sift_testgen::random_focused_expressions(7, 300));
        exprs.extend(sift_testgen::random_expressions(7, 1, 300));
        let mut compared = 0;
        for expr in &exprs {
            let Ok(program) = oracle.compile(expr, false, 0) else {
                continue;
            };
            if program.has_backward_jumps() {
                continue;
            }
            let unoptimized: Vec<Insn> = program
                .instructions()
                .iter()
                .map(|i| Insn::jump(i.code, i.k, i.jt, i.jf))
                .collect();
            assert_eq!(
                optimized(&unoptimized, true),
                optimized(&unoptimized, false),
                "{expr}"
            );
            compared += 1;
        }
        assert!(compared > 400, "{compared}");
    }
}
