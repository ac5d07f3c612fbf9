//! Edge facts and libpcap's `opt_j`: edges sent past the branches they already decide.

use std::cell::Cell;
use std::hash::Hash;

use sift_ir::{Block, Function, Terminator, Value};

use super::branches::{libpcap_form, Code};
use super::edges::{edge as edge_at, edge_count, edge_mut, successors};
use super::fast_hash::WordMap;
use super::grouping::is_marked;
use super::numbering::{Numbering, Vn};
use super::pullup::DomIntervals;
use super::terms::Terms;

/// What an edge knows: the comparison it passed through and its outcome.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Fact {
    pub(super) rhs: Vn,
    pub(super) rhs_is_const: bool,
    pub(super) holds: bool,
}

pub(super) type FactKey = (Code, Vn);

pub(super) fn is_const_equality(key: FactKey, fact: Fact) -> bool {
    fact.holds && key.0 == Code::Eq && fact.rhs_is_const
}

/// A branch's test as threading reads it: libpcap's comparison (`swapped` when the branch's
/// edges are the other way round) and its operands' value numbers.
#[derive(Clone, Copy)]
pub(super) struct Test {
    pub(super) code: Code,
    pub(super) swapped: bool,
    pub(super) lhs: Vn,
    pub(super) rhs: Vn,
    pub(super) rhs_is_const: bool,
}

impl Test {
    pub(super) fn new(numbers: &Numbering, op: sift_ir::CmpOp, lhs: Value, rhs: Value) -> Test {
        let (code, swapped) = libpcap_form(op);
        Test {
            code,
            swapped,
            lhs: numbers.vn(lhs),
            rhs: numbers.vn(rhs),
            rhs_is_const: numbers.konst(rhs).is_some(),
        }
    }

    /// The fact the branch's `then` edge (or else edge) establishes.
    pub(super) fn edge_fact(self, then_edge: bool) -> (FactKey, Fact) {
        let fact = Fact {
            rhs: self.rhs,
            rhs_is_const: self.rhs_is_const,
            holds: then_edge != self.swapped,
        };
        ((self.code, self.lhs), fact)
    }
}

/// The fact an edge of `block`'s branch establishes (`then_edge` selects the edge).
pub(super) fn edge_fact(
    f: &Function,
    numbers: &Numbering,
    block: Block,
    then_edge: bool,
) -> Option<(FactKey, Fact)> {
    let Terminator::Branch { op, lhs, rhs, .. } = f.block(block).term else {
        return None;
    };
    Some(Test::new(numbers, op, lhs, rhs).edge_fact(then_edge))
}

/// [`thread_edges_with`] over a fresh snapshot of the terminators (tests).
#[cfg(test)]
pub(super) fn thread_edges(
    f: &mut Function,
    numbers: &Numbering,
    used_elsewhere: &[bool],
    facts: &FactsInForce,
    rpo: &[Block],
    regrouped: &[bool],
) -> bool {
    let mut terms = Terms::new(f, numbers);
    thread_edges_with(f, &mut terms, used_elsewhere, facts, rpo, regrouped)
}

/// Sends edges past branches their facts decide (libpcap's `opt_j`); returns whether an edge
/// moved. `facts` and `rpo` (the blocks to visit, in reverse postorder) describe the graph as
/// it was at the start of the round, as libpcap's edge dominators do; `used_elsewhere` is
/// [`used_outside_own_block`] for `f`.
///
/// The order matters: libpcap threads the blocks of the lowest levels (nearest the returns)
/// first, so a walk through a block follows that block's edges as already moved. A walk only
/// reads blocks below its start, so any order that visits every block after its successors
/// gives libpcap's result: here, reverse postorder backwards (edges only ever move further
/// down, so that order stays valid while they move).
///
/// Blocks marked in `regrouped` (closed chains sorted since `facts` was computed, see
/// `grouping.rs`) keep their edges: no fact decides a test of such a chain, and what `facts`
/// says about their blocks is out of date.
///
/// `terms` is a snapshot of `f`'s terminators as they are (the one
/// [`FactsInForce::with_terms`] just read, when the facts are computed now); it follows the
/// edges threading moves.
pub(super) fn thread_edges_with(
    f: &mut Function,
    terms: &mut Terms,
    used_elsewhere: &[bool],
    facts: &FactsInForce,
    rpo: &[Block],
    regrouped: &[bool],
) -> bool {
    let mut changed = false;
    for &b in rpo.iter().rev() {
        if is_marked(regrouped, b) {
            continue;
        }
        // Branches and jumps from the snapshot, switches from the terminator.
        let (succ, is_branch) = terms.edges(f, b);
        let count = succ.map_or_else(|| edge_count(&f.block(b).term), |s| s.len());
        for edge in 0..count {
            let own = if is_branch {
                terms.edge_fact(f, b, edge == 0)
            } else {
                None
            };
            let mut at = match succ {
                Some(s) => Block(s[edge]),
                None => edge_at(&f.block(b).term, edge).expect("edge exists").block,
            };
            // The block and edge whose target the walk stands at, once it has moved.
            let mut came_by = None;
            // Each step moves strictly forward in an acyclic graph, so this terminates; the
            // bound only guards against a malformed graph.
            for _ in 0..f.blocks.len() {
                let decide =
                    |code, lhs, rhs, is_const| facts.decide(b, own, code, lhs, rhs, is_const);
                match terms.step(f, used_elsewhere, at, decide) {
                    Some((next, by)) => {
                        came_by = Some((at, by));
                        at = next;
                    }
                    None => break,
                }
            }
            // A walk that moved ends at another block (edges go forward), so the edge moves.
            if let Some((from, by)) = came_by {
                let target = edge_at(&f.block(from).term, by)
                    .expect("edge exists")
                    .clone();
                *edge_mut(&mut f.block_mut(b).term, edge).expect("edge exists") = target;
                terms.moved(f, b);
                changed = true;
            }
        }
    }
    changed
}

/// The single edge entering each reachable block, if there is exactly one (with whether it is
/// the true edge of a two-way branch): the edges whose facts hold in the block's subtree.
/// Edges count when they leave a block of `sources`.
pub(super) fn single_incoming<'b>(
    f: &Function,
    sources: impl Iterator<Item = &'b Block>,
) -> Vec<Incoming> {
    let mut incoming: Vec<Incoming> = vec![Incoming::None; f.blocks.len()];
    for &b in sources {
        let term = &f.block(b).term;
        let is_branch = edge_count(term) == 2;
        for (i, s) in successors(term).enumerate() {
            let slot = &mut incoming[s.index()];
            *slot = match slot {
                Incoming::None => Incoming::One(b, is_branch && i == 0),
                _ => Incoming::Many,
            };
        }
    }
    incoming
}

/// [`single_incoming`] reading branches and jumps through `terms`.
fn single_incoming_with<'b>(
    f: &Function,
    terms: &mut Terms,
    sources: impl Iterator<Item = &'b Block>,
) -> Vec<Incoming> {
    let mut incoming: Vec<Incoming> = vec![Incoming::None; f.blocks.len()];
    for &b in sources {
        let mut note = |s: Block, then_edge: bool| {
            let slot = &mut incoming[s.index()];
            *slot = match slot {
                Incoming::None => Incoming::One(b, then_edge),
                _ => Incoming::Many,
            };
        };
        match terms.edges(f, b) {
            (Some(succ), is_branch) => {
                for i in 0..succ.len() {
                    note(Block(succ[i]), is_branch && i == 0);
                }
            }
            // A switch: its edges establish no fact.
            (None, _) => {
                for s in successors(&f.block(b).term) {
                    note(s, false);
                }
            }
        }
    }
    incoming
}

#[derive(Clone, Copy)]
pub(super) enum Incoming {
    None,
    One(Block, bool),
    Many,
}

/// The facts in force at each block, answering libpcap's `fold_edge` for any block in any
/// order.
///
/// `fold_edge` takes the earliest fact (nearest the root) that decides a comparison: a fact
/// about the same operands gives its outcome, and an equality with a constant that held
/// decides an equality with another constant as false. The fact of a block's single incoming
/// edge is in force in the block's dominator subtree, an interval of entry times, and along
/// one path from the root entry times grow, so "earliest" is the smallest entry time. For
/// each kind of fact only the outermost intervals matter (an inner one is never the earliest);
/// they are disjoint, so a binary search finds the one holding a block. A long `or` chain piles
/// up thousands of facts about one value (`ethertype != 0x800` on every false edge); this
/// finds the deciding one without scanning them.
pub(super) struct FactsInForce<'a> {
    dom: &'a DomIntervals,
    /// Facts per `(comparison, lhs, rhs)`, with whether they hold.
    exact: OutermostSubtrees<(FactKey, Vn), bool>,
    /// Equalities with a constant that held, per `(comparison, lhs)`, with the constant.
    const_equalities: OutermostSubtrees<FactKey, Vn>,
}

impl<'a> FactsInForce<'a> {
    /// The facts of `f` as it is: `dom` is its dominator tree, `rpo` its reachable blocks.
    ///
    /// Blocks marked in `left_out` (closed chains regrouped this round, see `grouping.rs`)
    /// are left out, as sources of edges and as blocks entered. The facts left answer as all
    /// of them would for every block outside those chains that has edges: a chain's tests
    /// enter only each other and returns, so they dominate nothing else, and the edges
    /// entering other blocks are unchanged by the regrouping.
    pub(super) fn new(
        f: &Function,
        numbers: &Numbering,
        dom: &'a DomIntervals,
        rpo: &[Block],
        left_out: &[bool],
    ) -> FactsInForce<'a> {
        Self::with_terms(f, &mut Terms::new(f, numbers), dom, rpo, left_out)
    }

    /// [`FactsInForce::new`] reading the terminators through `terms`, a snapshot of `f` as it
    /// is, which threading reads next.
    pub(super) fn with_terms(
        f: &Function,
        terms: &mut Terms,
        dom: &'a DomIntervals,
        rpo: &[Block],
        left_out: &[bool],
    ) -> FactsInForce<'a> {
        let kept = || rpo.iter().filter(|&&b| !is_marked(left_out, b));
        let incoming = single_incoming_with(f, terms, kept());
        let mut exact = Vec::new();
        let mut const_equalities = Vec::new();
        for &d in kept() {
            let Incoming::One(pred, then_edge) = incoming[d.index()] else {
                continue;
            };
            let Some((key, fact)) = terms.edge_fact(f, pred, then_edge) else {
                continue;
            };
            let (enter, exit) = (dom.enter[d.index()], dom.exit[d.index()]);
            exact.push(Subtree {
                key: (key, fact.rhs),
                enter,
                exit,
                payload: fact.holds,
            });
            if is_const_equality(key, fact) {
                const_equalities.push(Subtree {
                    key,
                    enter,
                    exit,
                    payload: fact.rhs,
                });
            }
        }
        FactsInForce {
            dom,
            exact: OutermostSubtrees::new(exact),
            const_equalities: OutermostSubtrees::new(const_equalities),
        }
    }

    /// The outcome of `code(lhs, rhs)` on an edge leaving `b`, if a fact in force there
    /// decides it; `own` is the edge's own fact, the last in force.
    fn decide(
        &self,
        b: Block,
        own: Option<(FactKey, Fact)>,
        code: Code,
        lhs: Vn,
        rhs: Vn,
        rhs_is_const: bool,
    ) -> Option<bool> {
        const OWN: u32 = u32::MAX;
        let key = (code, lhs);
        let at = self.dom.enter[b.index()];
        let own_exact = own
            .filter(|&(k, fact)| k == key && fact.rhs == rhs)
            .map(|(_, fact)| (OWN, fact.holds));
        let exact = self.exact.holding((key, rhs), at).or(own_exact);
        let equality = if code == Code::Eq && rhs_is_const {
            let own_equality = own
                .filter(|&(k, fact)| k == key && is_const_equality(k, fact))
                .map(|(_, fact)| (OWN, fact.rhs == rhs));
            self.const_equalities
                .holding(key, at)
                .map(|(enter, constant)| (enter, constant == rhs))
                .or(own_equality)
        } else {
            None
        };
        match (exact, equality) {
            (Some((a, holds)), Some((b, _))) if a <= b => Some(holds),
            (_, Some((_, holds))) => Some(holds),
            (Some((_, holds)), None) => Some(holds),
            (None, None) => None,
        }
    }
}

/// Something known in a dominator subtree (entry times `enter..exit`), under a key.
struct Subtree<K, P> {
    key: K,
    enter: u32,
    exit: u32,
    payload: P,
}

/// Subtrees sorted by key and entry time, without those nested in an earlier one of the same
/// key: the ones left per key are disjoint. Each key's subtrees are found by hashing, then the
/// one holding a block by a search over their entry times alone.
///
/// A long chain leaves tens of thousands of disjoint subtrees under one key, and the walks ask
/// about blocks in an order that follows the dominator tree closely (threading visits the
/// blocks bottom-up), so each key remembers where its last answer was and the search gallops
/// from there: a few probes instead of a binary search over all of them.
struct OutermostSubtrees<K, P> {
    enter: Vec<u32>,
    exit: Vec<u32>,
    payload: Vec<P>,
    /// Where each key's subtrees lie in the arrays, and where its last search ended.
    of_key: WordMap<K, (u32, u32, Cell<u32>)>,
}

/// A key as one integer ordered as the key: sorting the subtrees (10^5 of them on a long
/// chain, each round) then compares one wide integer instead of a tuple field by field.
trait PackedKey: Copy {
    /// At most 72 bits wide.
    fn packed(self) -> u128;
}

impl PackedKey for FactKey {
    fn packed(self) -> u128 {
        (self.0 as u128) << 32 | u128::from(self.1)
    }
}

impl PackedKey for (FactKey, Vn) {
    fn packed(self) -> u128 {
        self.0.packed() << 32 | u128::from(self.1)
    }
}

impl<K: PackedKey + Eq + Hash, P: Copy> OutermostSubtrees<K, P> {
    fn new(mut all: Vec<Subtree<K, P>>) -> Self {
        all.sort_unstable_by_key(|s| s.key.packed() << 32 | u128::from(s.enter));
        let mut this = OutermostSubtrees {
            enter: Vec::with_capacity(all.len()),
            exit: Vec::with_capacity(all.len()),
            payload: Vec::with_capacity(all.len()),
            of_key: WordMap::default(),
        };
        let mut last_key = None;
        for s in all {
            let same_key = last_key == Some(s.key);
            if same_key && s.enter < *this.exit.last().expect("same key") {
                continue; // nested
            }
            let at = this.enter.len() as u32;
            if same_key {
                this.of_key.get_mut(&s.key).expect("key seen").1 = at + 1;
            } else {
                this.of_key.insert(s.key, (at, at + 1, Cell::new(at)));
            }
            last_key = Some(s.key);
            this.enter.push(s.enter);
            this.exit.push(s.exit);
            this.payload.push(s.payload);
        }
        this
    }

    /// The entry time and payload of the subtree of `key` that holds entry time `at`.
    fn holding(&self, key: K, at: u32) -> Option<(u32, P)> {
        let (lo, hi, last) = self.of_key.get(&key)?;
        let (lo, hi) = (*lo as usize, *hi as usize);
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

/// For each block, whether a value it defines is used by another block (reachable or not, as
/// libpcap's `use_conflict` sees every block). Only instructions and branch operands count, so
/// this changes only when dead code goes.
pub(super) fn used_outside_own_block(f: &Function) -> Vec<bool> {
    const NOWHERE: u32 = u32::MAX;
    let mut home = vec![NOWHERE; f.values.len()];
    for (i, data) in f.blocks.iter().enumerate() {
        for &v in data.params.iter().chain(&data.insts) {
            home[v.index()] = i as u32;
        }
    }
    let mut out = vec![false; f.blocks.len()];
    for (i, data) in f.blocks.iter().enumerate() {
        let mut note = |v: Value| {
            let h = home[v.index()];
            if h != NOWHERE && h as usize != i {
                out[h as usize] = true;
            }
        };
        for &v in &data.insts {
            f.inst(v).for_each_operand(&mut note);
        }
        data.term.for_each_operand(note);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::libpcap_opt::{numbering::Numbering, Phase};
    use sift_ir::verify::dominators;
    use sift_ir::{parse_function, Target};

    fn thread(text: &str) -> Function {
        let mut f = parse_function(text).unwrap();
        let (idom, rpo) = dominators(&f);
        let numbers = Numbering::compute(&mut f, Phase::MoveBranches, &rpo)
            .unwrap()
            .0;
        let used = used_outside_own_block(&f);
        let dom = DomIntervals::new(&idom);
        let facts = FactsInForce::new(&f, &numbers, &dom, &rpo, &[]);
        thread_edges(&mut f, &numbers, &used, &facts, &rpo, &[]);
        f
    }

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

    /// A walk follows the edges of the blocks below it as already threaded: block 1's edges
    /// both reach block 3 once block 2 is skipped, so the entry's edge skips block 1 too,
    /// as libpcap's level order does (a walk through block 1 before its edges moved stops
    /// there).
    #[test]
    fn walks_follow_edges_already_threaded_below() {
        let f = thread(
            "\
block0:
    jump block1
block1:
    v0 = load.w [16]
    v1 = const 7
    br eq v0, v1, block2, block3
block2:
    jump block3
block3:
    v2 = load.b [9]
    v3 = const 17
    br eq v2, v3, block4, block5
block4:
    ret 0
block5:
    ret 1
",
        );
        assert_eq!(
            f.block(Function::ENTRY).term,
            Terminator::Jump(Target::from(Block(3)))
        );
    }

    /// An equality with a constant that held decides equalities with other constants: both
    /// edges into block 3's test of `v0 == 17` know `v0 == 6`, so they skip it.
    #[test]
    fn an_equality_that_held_decides_other_constants() {
        let f = thread(
            "\
block0:
    v0 = load.b [9]
    v1 = const 6
    br eq v0, v1, block1, block2
block1:
    v2 = const 17
    br eq v0, v2, block2, block3
block2:
    ret 0
block3:
    v3 = const 17
    br eq v0, v3, block4, block5
block4:
    ret 1
block5:
    ret 2
",
        );
        let targets = |b: u32| match &f.block(Block(b)).term {
            Terminator::Branch { then_, else_, .. } => (then_.block, else_.block),
            _ => panic!("block {b} branches"),
        };
        assert_eq!(targets(0), (Block(5), Block(2)));
        assert_eq!(targets(1), (Block(2), Block(5)));
    }
}
