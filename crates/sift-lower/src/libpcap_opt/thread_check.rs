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

use super::branches::Code;
use super::edges::successors;
use super::fast_hash::WordMap;
use super::numbering::{Numbering, Vn};
use super::pullup::DomIntervals;
use super::threading::{edge_fact, is_const_equality, single_incoming, FactKey, Incoming};

/// The blocks that may be skipped with one kind of test, and where their entering edges come
/// from (dominator-tree entry times of the sources, sorted).
#[derive(Default)]
struct Tests {
    sources: Vec<u32>,
}

/// Whether threading `f` would certainly move nothing; `false` means it may.
pub(super) fn nothing_to_thread(
    f: &Function,
    numbers: &Numbering,
    used_elsewhere: &[bool],
    rpo: &[Block],
    dom: &DomIntervals,
) -> bool {
    const NONE: u32 = u32::MAX;
    let n = f.blocks.len();
    // Per skippable branch: its group of exact tests and of equalities with a constant.
    let mut exact_of = vec![NONE; n];
    let mut equality_of = vec![NONE; n];
    let mut exact_ids: WordMap<(FactKey, Vn), u32> = WordMap::default();
    let mut equality_ids: WordMap<FactKey, u32> = WordMap::default();
    let mut groups: Vec<Tests> = Vec::new();
    let group = |groups: &mut Vec<Tests>, id: Option<u32>| -> u32 {
        id.unwrap_or_else(|| {
            groups.push(Tests::default());
            (groups.len() - 1) as u32
        })
    };
    for &b in rpo {
        let data = f.block(b);
        if used_elsewhere[b.index()] || !data.params.is_empty() {
            continue;
        }
        match &data.term {
            Terminator::Jump(_) => return false,
            Terminator::Branch { then_, else_, .. } if then_ == else_ => return false,
            Terminator::Branch { .. } => {
                let Some((key, fact)) = edge_fact(f, numbers, b, true) else {
                    continue;
                };
                let id = group(&mut groups, exact_ids.get(&(key, fact.rhs)).copied());
                exact_ids.insert((key, fact.rhs), id);
                exact_of[b.index()] = id;
                if key.0 == Code::Eq && fact.rhs_is_const {
                    let id = group(&mut groups, equality_ids.get(&key).copied());
                    equality_ids.insert(key, id);
                    equality_of[b.index()] = id;
                }
            }
            _ => {}
        }
    }
    for &b in rpo {
        for s in successors(&f.block(b).term) {
            for id in [exact_of[s.index()], equality_of[s.index()]] {
                if id != NONE {
                    groups[id as usize].sources.push(dom.enter[b.index()]);
                }
            }
        }
    }
    for g in &mut groups {
        g.sources.sort_unstable();
    }
    let incoming = single_incoming(f, rpo);
    // Whether a block of group `id` is `target`, or is entered from under `target`.
    let reaches = |id: u32, target: Block, only_entry: bool, member: &[u32]| -> bool {
        if id == NONE {
            return false;
        }
        if member[target.index()] == id {
            return true;
        }
        let (lo, hi) = (dom.enter[target.index()], dom.exit[target.index()]);
        let sources = &groups[id as usize].sources;
        let first = sources.partition_point(|&e| e < lo);
        only_entry && sources.get(first).is_some_and(|&e| e < hi)
    };
    for &x in rpo {
        let Terminator::Branch { then_, else_, .. } = &f.block(x).term else {
            continue;
        };
        for (target, then_edge) in [(then_.block, true), (else_.block, false)] {
            let Some((key, fact)) = edge_fact(f, numbers, x, then_edge) else {
                continue;
            };
            let only_entry = matches!(incoming[target.index()], Incoming::One(..));
            let exact = exact_ids.get(&(key, fact.rhs)).copied().unwrap_or(NONE);
            if reaches(exact, target, only_entry, &exact_of) {
                return false;
            }
            if is_const_equality(key, fact) {
                let equality = equality_ids.get(&key).copied().unwrap_or(NONE);
                if reaches(equality, target, only_entry, &equality_of) {
                    return false;
                }
            }
        }
    }
    true
}
