//! Edge facts and libpcap's `opt_j`: edges sent past the branches they already decide.

use sift_ir::{Block, Function, Terminator, Value};

use super::edges::{edge as edge_at, edge_count, edge_mut, successors};
use super::equality_runs::EqualityRuns;
use super::fact_ids::{FactIds, NO_ID};
use super::grouping::is_marked;
use super::numbering::{Numbering, Vn};
use super::pullup::DomIntervals;
use super::terms::{EdgeFact, Terms, TestIds};
use sift_bpf::JmpOp;

/// What an edge knows: the comparison it passed through and its outcome.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Fact {
    pub(super) rhs: Vn,
    pub(super) rhs_is_const: bool,
    pub(super) holds: bool,
}

pub(super) type FactKey = (JmpOp, Vn);

pub(super) fn is_const_equality(key: FactKey, fact: Fact) -> bool {
    fact.holds && key.0 == JmpOp::Jeq && fact.rhs_is_const
}

/// A branch's test as threading reads it: libpcap's comparison (`swapped` when the branch's
/// edges are the other way round) and its operands' value numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Test {
    pub(super) code: JmpOp,
    pub(super) swapped: bool,
    pub(super) lhs: Vn,
    pub(super) rhs: Vn,
    pub(super) rhs_is_const: bool,
}

impl Test {
    pub(super) fn new(numbers: &Numbering, op: sift_ir::CmpOp, lhs: Value, rhs: Value) -> Test {
        let (code, swapped) = JmpOp::from_cmp(op);
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

/// The entry time given to an edge's own fact: it comes into force after every other.
const OWN: u32 = u32::MAX;

/// Steps after which a walk looks for runs to pass whole ([`EqualityRuns`]).
const LONG_WALK: usize = 64;

/// [`thread_edges_with`] over a fresh snapshot of the terminators (tests).
#[cfg(test)]
pub(super) fn thread_edges(
    f: &mut Function,
    numbers: &Numbering,
    ids: &mut FactIds,
    used_elsewhere: &[bool],
    facts: &FactsInForce,
    regrouped: &[bool],
) -> bool {
    let mut terms = Terms::new(f, numbers, ids);
    thread_edges_with(f, &mut terms, used_elsewhere, facts, regrouped)
}

/// Sends edges past branches their facts decide (libpcap's `opt_j`); returns whether an edge
/// moved. `facts` (the facts and the blocks to visit) describes the graph as it was at the
/// start of the round, as libpcap's edge dominators do; `used_elsewhere` is
/// [`used_outside_own_block`] for `f`.
///
/// The order matters: libpcap threads the blocks of the lowest levels (nearest the returns)
/// first, so a walk through a block follows that block's edges as already moved. A walk only
/// reads blocks below its start, so any order that visits every block after its successors
/// gives libpcap's result: here, the order of [`FactsInForce`]'s walk (edges only ever move
/// further down, so that order stays valid while they move).
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
    regrouped: &[bool],
) -> bool {
    let mut changed = false;
    // Made when a walk first gets long.
    let mut runs: Option<EqualityRuns> = None;
    let shortcuts = !super::reference_mode();
    let mut in_force = InForce::new(terms.ids());
    for &step in &facts.walk {
        if step & LEAVE == 0 {
            in_force.enter(facts.incoming[step as usize]);
            continue;
        }
        let b = Block(step & !LEAVE);
        if !is_marked(regrouped, b) {
            changed |= thread_block(f, terms, used_elsewhere, &in_force, &mut runs, b, shortcuts);
        }
        in_force.leave();
    }
    changed
}

/// Threads the edges of `b`, with the facts in force there; returns whether an edge moved.
fn thread_block(
    f: &mut Function,
    terms: &mut Terms,
    used_elsewhere: &[bool],
    in_force: &InForce,
    runs: &mut Option<EqualityRuns>,
    b: Block,
    shortcuts: bool,
) -> bool {
    let mut changed = false;
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
        for step in 0..f.blocks.len() {
            // A run of tests that an equality in force decides false, in one step, once
            // the walk is long (most are a few steps, which the records would only slow).
            if shortcuts && step >= LONG_WALK {
                let runs = runs.get_or_insert_with(|| EqualityRuns::new(f));
                let equality = |id| in_force.equality_in_force(own, id);
                if let Some((from, (next, by))) = runs.pass(f, terms, used_elsewhere, at, equality)
                {
                    came_by = Some((from, by));
                    at = next;
                    continue;
                }
            }
            let decide = |test| in_force.decide(own, test);
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

/// The facts edges carry at the start of a round, and the order threading visits the blocks
/// in, answering libpcap's `fold_edge` at each block as the visit reaches it.
///
/// `fold_edge` takes the earliest fact (nearest the root) that decides a comparison: a fact
/// about the same operands gives its outcome, and an equality with a constant that held
/// decides an equality with another constant as false. The fact of a block's single incoming
/// edge is in force in the block's dominator subtree. Threading visits the blocks in a
/// depth-first walk of the dominator tree, each block when the walk leaves it, so the facts in
/// force are those of the blocks the walk is inside: a stack of scopes. Per comparison the
/// outermost fact answers, so a table indexed by the comparison's number holds it while the
/// walk is inside its block. A long `or` chain piles up thousands of facts about one value
/// (`ethertype != 0x800` on every false edge); this finds the deciding one in one lookup.
///
/// Leaving blocks in that order visits every block after its successors, as threading needs:
/// the children of a block are walked in decreasing reverse-postorder position, and an edge
/// from `b` to a block `s` that `b` does not dominate lands in the subtree of an earlier
/// sibling of `b`'s ancestor (the one below `s`'s immediate dominator), since `s` comes
/// after that ancestor in reverse postorder.
pub(super) struct FactsInForce {
    /// The fact of each block's single incoming edge (`exact == NO_ID`: none).
    incoming: Vec<EdgeFact>,
    /// The walk: a block as the walk enters it, `LEAVE | block` as it leaves.
    walk: Vec<u32>,
}

/// Marks a block the walk leaves in [`FactsInForce::walk`].
const LEAVE: u32 = 1 << 31;

/// No fact: the entry of a block without a single incoming edge that carries one.
const NO_FACT: EdgeFact = EdgeFact {
    exact: NO_ID,
    equality: NO_ID,
    rhs: 0,
    holds: false,
};

impl FactsInForce {
    /// The facts of `f` as it is: `dom` is its dominator tree with children latest first
    /// ([`DomIntervals::children_latest_first`]), `rpo` its reachable blocks.
    ///
    /// Blocks marked in `left_out` (closed chains regrouped this round, see `grouping.rs`)
    /// are left out as sources of edges, and their own incoming edges carry nothing. The facts
    /// left answer as all of them would for every block outside those chains that has edges:
    /// a chain's tests enter only each other and returns, so they dominate nothing else, and
    /// the edges entering other blocks are unchanged by the regrouping. `ids` numbers the
    /// comparisons, as for the [`Terms`] the facts will answer.
    pub(super) fn new(
        f: &Function,
        numbers: &Numbering,
        ids: &mut FactIds,
        dom: &DomIntervals,
        rpo: &[Block],
        left_out: &[bool],
    ) -> FactsInForce {
        Self::with_terms(f, &mut Terms::new(f, numbers, ids), dom, rpo, left_out)
    }

    /// [`FactsInForce::new`] reading the terminators through `terms`, a snapshot of `f` as it
    /// is, which threading reads next.
    pub(super) fn with_terms(
        f: &Function,
        terms: &mut Terms,
        dom: &DomIntervals,
        rpo: &[Block],
        left_out: &[bool],
    ) -> FactsInForce {
        let kept = || rpo.iter().filter(|&&b| !is_marked(left_out, b));
        let incoming = single_incoming_with(f, terms, kept());
        let mut facts = vec![NO_FACT; f.blocks.len()];
        for &d in kept() {
            if let Incoming::One(pred, then_edge) = incoming[d.index()] {
                if let Some(fact) = terms.edge_fact(f, pred, then_edge) {
                    facts[d.index()] = fact;
                }
            }
        }
        FactsInForce {
            incoming: facts,
            walk: dominator_walk(dom, Function::ENTRY),
        }
    }
}

/// The depth-first walk of the subtree of `root` in `dom`, entering and leaving each block,
/// children in the tree's order (for threading, [`DomIntervals::children_latest_first`]).
fn dominator_walk(dom: &DomIntervals, root: Block) -> Vec<u32> {
    let Some(&first) = dom.enter.get(root.index()).filter(|&&e| e != u32::MAX) else {
        return Vec::new();
    };
    let blocks = &dom.preorder[first as usize..dom.exit[root.index()] as usize];
    let mut walk = Vec::with_capacity(2 * blocks.len());
    // The blocks the walk is inside, innermost last.
    let mut inside: Vec<Block> = Vec::new();
    for &b in blocks {
        while let Some(&open) = inside.last() {
            if dom.exit[open.index()] > dom.enter[b.index()] {
                break;
            }
            walk.push(LEAVE | open.0);
            inside.pop();
        }
        walk.push(b.0);
        inside.push(b);
    }
    walk.extend(inside.iter().rev().map(|b| LEAVE | b.0));
    walk
}

/// The facts in force where the walk of a [`FactsInForce`] stands.
struct InForce {
    /// Per exact number: when its outermost fact in force came into force, and whether it
    /// holds (`NOT_IN_FORCE`: none).
    exact: Vec<(u32, bool)>,
    /// Per equality number: when its outermost equality in force came into force, and the
    /// constant.
    equality: Vec<(u32, Vn)>,
    /// Per block the walk is inside: the numbers its fact put in force (`NO_ID`: none).
    scopes: Vec<(u32, u32)>,
    clock: u32,
}

const NOT_IN_FORCE: u32 = u32::MAX;

impl InForce {
    fn new(ids: &FactIds) -> InForce {
        InForce {
            exact: vec![(NOT_IN_FORCE, false); ids.exact_count()],
            equality: vec![(NOT_IN_FORCE, 0); ids.equality_count()],
            scopes: Vec::new(),
            clock: 0,
        }
    }

    /// The walk enters a block whose incoming edge carries `fact`.
    fn enter(&mut self, fact: EdgeFact) {
        self.clock += 1;
        let mut scope = (NO_ID, NO_ID);
        if let Some(slot) = self.exact.get_mut(fact.exact as usize) {
            if slot.0 == NOT_IN_FORCE {
                *slot = (self.clock, fact.holds);
                scope.0 = fact.exact;
            }
        }
        if let Some(slot) = self.equality.get_mut(fact.equality as usize) {
            if slot.0 == NOT_IN_FORCE {
                *slot = (self.clock, fact.rhs);
                scope.1 = fact.equality;
            }
        }
        self.scopes.push(scope);
    }

    /// The walk leaves the block it entered last.
    fn leave(&mut self) {
        let (exact, equality) = self.scopes.pop().expect("entered");
        if let Some(slot) = self.exact.get_mut(exact as usize) {
            slot.0 = NOT_IN_FORCE;
        }
        if let Some(slot) = self.equality.get_mut(equality as usize) {
            slot.0 = NOT_IN_FORCE;
        }
    }

    /// The constant of the equality `equality` (an equality number) that `decide` would use
    /// on an edge leaving the current block: the earliest in force there, else the edge's own.
    fn equality_in_force(&self, own: Option<EdgeFact>, equality: u32) -> Option<Vn> {
        self.earliest_equality(own, equality)
            .map(|(_, constant)| constant)
    }

    /// The equality numbered `equality` in force, with when it came into force and its
    /// constant: the earliest, else the edge's own fact (in force at [`OWN`], after every
    /// other). `None` for `NO_ID`, which no fact's equality matches.
    fn earliest_equality(&self, own: Option<EdgeFact>, equality: u32) -> Option<(u32, Vn)> {
        match self.equality.get(equality as usize) {
            Some(&(since, constant)) if since != NOT_IN_FORCE => Some((since, constant)),
            _ => own
                .filter(|fact| fact.equality == equality && equality != NO_ID)
                .map(|fact| (OWN, fact.rhs)),
        }
    }

    /// The outcome of `test` on an edge leaving the current block, if a fact in force there
    /// decides it; `own` is the edge's own fact, the last in force.
    fn decide(&self, own: Option<EdgeFact>, test: TestIds) -> Option<bool> {
        let exact = match self.exact.get(test.exact as usize) {
            Some(&(since, holds)) if since != NOT_IN_FORCE => Some((since, holds)),
            _ => own
                .filter(|fact| fact.exact == test.exact)
                .map(|fact| (OWN, fact.holds)),
        };
        let equality = self
            .earliest_equality(own, test.equality)
            .map(|(since, constant)| (since, constant == test.rhs));
        match (exact, equality) {
            (Some((a, holds)), Some((b, _))) if a <= b => Some(holds),
            (_, Some((_, holds))) => Some(holds),
            (Some((_, holds)), None) => Some(holds),
            (None, None) => None,
        }
    }
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
        let mut ids = FactIds::default();
        let dom = DomIntervals::children_latest_first(&idom, &rpo);
        let facts = FactsInForce::new(&f, &numbers, &mut ids, &dom, &rpo, &[]);
        thread_edges(&mut f, &numbers, &mut ids, &used, &facts, &[]);
        f
    }

    /// On random acyclic graphs the walk leaves every reachable block once, after all its
    /// successors, and while it is inside exactly the block's dominators.
    #[test]
    fn the_dominator_walk_leaves_successors_first_inside_the_dominators() {
        let mut rng = sift_testgen::Rng::new(0x2545_f491_4f6c_dd1d);
        let mut next = move |bound: usize| rng.index(bound);
        for _ in 0..300 {
            let n = 2 + next(40);
            let mut text = String::new();
            for b in 0..n {
                let later = |k: usize| b + 1 + k % (n - b - 1).max(1);
                if b + 1 == n || next(8) == 0 {
                    text += &format!("block{b}:\n    ret 0\n");
                } else if next(5) == 0 {
                    text += &format!("block{b}:\n    jump block{}\n", later(next(n)));
                } else {
                    let (t, e) = (later(next(3)), later(next(n)));
                    text += &format!(
                        "block{b}:\n    v{b} = load.b [{b}]\n    br eq v{b}, v{b}, block{t}, block{e}\n"
                    );
                }
            }
            let f = parse_function(&text).unwrap();
            let (idom, rpo) = dominators(&f);
            let tree = DomIntervals::children_latest_first(&idom, &rpo);
            let walk = dominator_walk(&tree, Function::ENTRY);
            let mut left = vec![false; n];
            let mut inside: Vec<u32> = Vec::new();
            for &step in &walk {
                if step & LEAVE == 0 {
                    inside.push(step);
                    continue;
                }
                let b = Block(step & !LEAVE);
                assert_eq!(inside.pop(), Some(b.0), "{text}");
                assert!(!left[b.index()], "{text}");
                left[b.index()] = true;
                for s in successors(&f.block(b).term) {
                    assert!(
                        left[s.index()],
                        "block{} left before block{}\n{text}",
                        b.0,
                        s.0
                    );
                }
                let dominators = inside.iter().chain([&b.0]).map(|&d| Block(d));
                let expected = rpo.iter().filter(|&&d| tree.dominates(d, b)).count();
                assert_eq!(dominators.clone().count(), expected, "{text}");
                assert!(
                    dominators.into_iter().all(|d| tree.dominates(d, b)),
                    "{text}"
                );
            }
            assert!(rpo.iter().all(|b| left[b.index()]), "{text}");
        }
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
