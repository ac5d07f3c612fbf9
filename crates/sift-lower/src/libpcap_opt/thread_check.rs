//! A cheap proof that threading would move no edge, for the rounds that follow a round which
//! only pulled tests up (all but two or three rounds on long chains).
//!
//! Threading moves an edge only past a block that may be skipped (it computes nothing used
//! elsewhere) and that leads to one place whatever the test, or whose test the facts in force
//! decide. The first block a walk skips is decided by facts in force at the edge walked: that
//! edge's own fact, and the facts of the single entering edges of the blocks dominating its
//! source. So when no such block can be decided by a fact in force at an edge entering it, no
//! walk starts and nothing moves. A fact can decide a test of the same comparison and value
//! against the same operand, or, an equality with a constant that held, any equality of that
//! value with a constant; it is in force at its own edge, and, when that edge is its target's
//! only entry, at every edge leaving a block the target dominates.

use sift_ir::{Block, Function, Terminator};

use super::edges::successors;
use super::fact_ids::FactIds;
use super::numbering::Numbering;
use super::pullup::DomIntervals;
use super::renumber::moved;
use super::threading::{edge_fact, is_const_equality, single_incoming, Incoming};
use sift_bpf::JmpOp;

const NONE: u32 = u32::MAX;

/// Which tests may decide which: the part of the check that depends only on the numbering,
/// the instructions and the comparisons (not on where edges lead), so it holds for as long
/// as a run of rounds only pulls tests up.
pub(super) struct TestGroups {
    /// Per skippable branch: its group of exact tests and of equalities with a constant.
    exact_of: Vec<u32>,
    equality_of: Vec<u32>,
    /// Per branch, per edge (true, false): the groups its fact may decide (exact, then
    /// equality with a constant), `NONE` where there is none.
    decides: Vec<[(u32, u32); 2]>,
    groups: usize,
}

impl TestGroups {
    pub(super) fn new(
        f: &Function,
        numbers: &Numbering,
        used_elsewhere: &[bool],
        rpo: &[Block],
    ) -> TestGroups {
        let n = f.blocks.len();
        let mut this = TestGroups {
            exact_of: vec![NONE; n],
            equality_of: vec![NONE; n],
            decides: vec![[(NONE, NONE); 2]; n],
            groups: 0,
        };
        // Exact tests are groups `0..E`, equalities with a constant `E..` after them.
        let mut ids = FactIds::default();
        for &b in rpo {
            let data = f.block(b);
            if used_elsewhere[b.index()] || !data.params.is_empty() {
                continue;
            }
            let Some(((code, lhs), fact)) = edge_fact(f, numbers, b, true) else {
                continue;
            };
            this.exact_of[b.index()] = ids.exact(code, lhs, fact.rhs);
            if code == JmpOp::Jeq && fact.rhs_is_const {
                this.equality_of[b.index()] = ids.equality(code, lhs);
            }
        }
        let exact_groups = ids.exact_count() as u32;
        for id in this.equality_of.iter_mut().filter(|id| **id != NONE) {
            *id += exact_groups;
        }
        this.groups = ids.exact_count() + ids.equality_count();
        for &x in rpo {
            for (i, then_edge) in [true, false].into_iter().enumerate() {
                let Some((key, fact)) = edge_fact(f, numbers, x, then_edge) else {
                    break;
                };
                let (code, lhs) = key;
                let exact = ids.find_exact(code, lhs, fact.rhs).unwrap_or(NONE);
                let equality = if is_const_equality(key, fact) {
                    ids.find_equality(code, lhs)
                        .map_or(NONE, |id| id + exact_groups)
                } else {
                    NONE
                };
                this.decides[x.index()][i] = (exact, equality);
            }
        }
        this
    }

    /// The same groups after block `b` became block `new_of[b]`.
    pub(super) fn renumber(&mut self, new_of: &[u32]) {
        self.exact_of = moved(&self.exact_of, new_of);
        self.equality_of = moved(&self.equality_of, new_of);
        self.decides = moved(&self.decides, new_of);
    }
}

/// Whether threading `f` would certainly move nothing; `false` means it may. `groups` were
/// computed for `f` with the same numbering, cross-block uses and reachable blocks.
pub(super) fn nothing_to_thread(
    f: &Function,
    tests: &TestGroups,
    used_elsewhere: &[bool],
    rpo: &[Block],
    dom: &DomIntervals,
) -> bool {
    // Where the edges entering each group's blocks come from (dominator-tree entry times of
    // the sources, sorted), in one array.
    let mut start = vec![0u32; tests.groups + 1];
    for &b in rpo {
        let data = f.block(b);
        if !used_elsewhere[b.index()] && data.params.is_empty() {
            match &data.term {
                Terminator::Jump(_) => return false,
                Terminator::Branch { then_, else_, .. } if then_ == else_ => return false,
                _ => {}
            }
        }
        for s in successors(&data.term) {
            for id in [tests.exact_of[s.index()], tests.equality_of[s.index()]] {
                if id != NONE {
                    start[id as usize + 1] += 1;
                }
            }
        }
    }
    for i in 1..start.len() {
        start[i] += start[i - 1];
    }
    let mut fill = start.clone();
    let mut sources = vec![0u32; start[tests.groups] as usize];
    for &b in rpo {
        for s in successors(&f.block(b).term) {
            for id in [tests.exact_of[s.index()], tests.equality_of[s.index()]] {
                if id != NONE {
                    sources[fill[id as usize] as usize] = dom.enter[b.index()];
                    fill[id as usize] += 1;
                }
            }
        }
    }
    for g in 0..tests.groups {
        sources[start[g] as usize..start[g + 1] as usize].sort_unstable();
    }
    let incoming = single_incoming(f, rpo.iter());
    // Whether a block of group `id` is `target`, or is entered from under `target`.
    let reaches = |id: u32, target: Block, only_entry: bool, member: &[u32]| -> bool {
        if id == NONE {
            return false;
        }
        if member[target.index()] == id {
            return true;
        }
        let (lo, hi) = (dom.enter[target.index()], dom.exit[target.index()]);
        let sources = &sources[start[id as usize] as usize..start[id as usize + 1] as usize];
        let first = sources.partition_point(|&e| e < lo);
        only_entry && sources.get(first).is_some_and(|&e| e < hi)
    };
    for &x in rpo {
        let Terminator::Branch { then_, else_, .. } = &f.block(x).term else {
            continue;
        };
        for (i, target) in [then_.block, else_.block].into_iter().enumerate() {
            let only_entry = matches!(incoming[target.index()], Incoming::One(..));
            let (exact, equality) = tests.decides[x.index()][i];
            if reaches(exact, target, only_entry, &tests.exact_of)
                || reaches(equality, target, only_entry, &tests.equality_of)
            {
                return false;
            }
        }
    }
    true
}
