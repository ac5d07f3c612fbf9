//! libpcap's `or_pullup` and `and_pullup`: in a chain of tests joined by `or` (or `and`), a
//! later test of the value the chain started with is moved up, next to the first one.
//!
//! `ip host A or host B` on raw IP tests `src == A`, `dst == A`, `src == B`, `dst == B`; libpcap
//! reorders it to `src == A`, `src == B`, `dst == A`, `dst == B`. The order decides which
//! loads run, so it decides whether a truncated packet matches.
//!
//! As in libpcap, one sweep visits the blocks by level (distance from the returns, nearest
//! first) with predecessor lists and dominators computed before the sweep; the tests look at
//! the value each branch compares (its left operand's value number).
//!
//! The walks skip whole runs of tests of one value at once ([`Runs`]), which makes a sweep
//! near-linear in the chain; the block-by-block walk is kept as the reference tests compare
//! with (`super::reference_mode`).

use sift_ir::{Block, Function, Terminator};

use super::edges::{edge, edge_count, successors};
use super::grouping::is_marked;
use super::numbering::{Numbering, Vn};
use super::runs::{BranchEdges, Chain, Runs};

/// One sweep of pullups over the whole function; returns whether anything moved.
///
/// `dom` and `levels` are the dominator tree and [`levels`] of `f` at the start of the round:
/// libpcap computes them once per round, before it decides branches and moves edges, and its
/// predecessor lists come from the blocks those levels hold, even those no longer reached.
/// Blocks marked in `regrouped` (closed chains sorted since, which no pullup changes any more)
/// are skipped: what those structures say about them is out of date. `params_anywhere`: some
/// block of `f` has parameters (then libpcap would not have optimized it; nothing moves).
pub(super) fn pullups(
    f: &mut Function,
    numbers: &Numbering,
    dom: &DomIntervals,
    levels: &Levels,
    regrouped: &[bool],
    params_anywhere: bool,
) -> bool {
    if params_anywhere {
        return false;
    }
    // Edges of the blocks reachable at the round's start lead only to such blocks, whatever
    // moved since, so the walks read no other block. Each is read once, here.
    let mut edges = BranchEdges::new(f.blocks.len());
    let mut compared: Vec<Option<Vn>> = vec![None; f.blocks.len()];
    for &b in &levels.order {
        if let Terminator::Branch {
            lhs, then_, else_, ..
        } = &f.block(b).term
        {
            compared[b.index()] = Some(numbers.vn(*lhs));
            edges.insert(b, then_.block, else_.block);
        }
    }
    let preds = Predecessors::new(f, &edges, levels, regrouped);
    let mut sweep = Sweep {
        edges,
        compared: &compared,
        tested: None,
        dom,
        preds: &preds,
        or_runs: Runs::new(Chain::Or, &compared, &dom.enter),
        and_runs: Runs::new(Chain::And, &compared, &dom.enter),
        skip_runs: !super::reference_mode(),
    };
    let mut changed = false;
    for &b in levels.above_returns() {
        if !is_marked(regrouped, b) {
            changed |= sweep.pullup(b, Chain::Or);
            changed |= sweep.pullup(b, Chain::And);
        }
    }
    sweep.edges.write_back(f);
    changed
}

/// Blocks by level: returns are level 0, a branch is one more than its higher successor. Within
/// a level, blocks come in the order libpcap lists them (last finished first in a depth-first
/// walk that visits the true successor before the false one), all in one array.
pub(super) struct Levels {
    /// The blocks, level 0 first, each level in reverse postorder.
    order: Vec<Block>,
    /// Where each level starts in `order`, and its end.
    start: Vec<u32>,
}

impl Levels {
    /// The levels of `f`'s blocks; `rpo` is [`Function::reverse_postorder`], whose reverse is
    /// the order in which libpcap's walk finishes the blocks (the same depth-first walk).
    pub(super) fn new(f: &Function, rpo: &[Block]) -> Levels {
        let mut level = vec![0u32; f.blocks.len()];
        let mut top = 0;
        for &b in rpo.iter().rev() {
            let l = successors(&f.block(b).term)
                .map(|s| level[s.index()] + 1)
                .max()
                .unwrap_or(0);
            level[b.index()] = l;
            top = top.max(l);
        }
        // A counting sort by level, stable: each level keeps reverse postorder.
        let mut start = vec![0u32; top as usize + 2];
        for &b in rpo {
            start[level[b.index()] as usize + 1] += 1;
        }
        for i in 1..start.len() {
            start[i] += start[i - 1];
        }
        let mut fill = start.clone();
        let mut order = vec![Function::ENTRY; rpo.len()];
        for &b in rpo {
            let slot = &mut fill[level[b.index()] as usize];
            order[*slot as usize] = b;
            *slot += 1;
        }
        Levels { order, start }
    }

    /// The blocks of levels 1 and up (the branches), lowest level first.
    fn above_returns(&self) -> &[Block] {
        let first = self.start.get(1).map_or(0, |&s| s as usize);
        &self.order[first..]
    }
}

/// Predecessors of each block, as libpcap's `find_inedges` lists them, in one array.
///
/// Edges leaving blocks marked in `regrouped` are left out: they enter only each other and
/// returns, whose predecessors no pullup asks for.
struct Predecessors {
    start: Vec<u32>,
    list: Vec<Block>,
}

impl Predecessors {
    /// `branch_edges` holds the edges of the branches among `levels`' blocks.
    fn new(
        f: &Function,
        branch_edges: &BranchEdges,
        levels: &Levels,
        regrouped: &[bool],
    ) -> Predecessors {
        // Edges from the branches, highest level first (plain loops: this runs every round).
        let sources = || {
            let branches = levels.above_returns();
            let ends = &levels.start[1..];
            // Level by level from the top, each level in its own order.
            ends.windows(2)
                .rev()
                .flat_map(move |w| {
                    let first = ends[0] as usize;
                    &branches[w[0] as usize - first..w[1] as usize - first]
                })
                .filter(|&&b| !is_marked(regrouped, b))
        };
        // The edges as (target, source), read from the blocks in one pass, then sorted by
        // target, stably: the blocks are large and scattered, the edges small.
        let mut edges: Vec<(Block, Block)> = Vec::new();
        for &b in sources() {
            if let Some((then_, else_)) = branch_edges.of(b) {
                edges.extend([(then_, b), (else_, b)]);
                continue;
            }
            let term = &f.block(b).term;
            for i in 0..edge_count(term) {
                if let Some(t) = edge(term, i) {
                    edges.push((t.block, b));
                }
            }
        }
        let mut start = vec![0u32; f.blocks.len() + 1];
        for &(t, _) in &edges {
            start[t.index() + 1] += 1;
        }
        for i in 1..start.len() {
            start[i] += start[i - 1];
        }
        let mut fill = start.clone();
        let mut list = vec![Function::ENTRY; edges.len()];
        for &(t, b) in &edges {
            list[fill[t.index()] as usize] = b;
            fill[t.index()] += 1;
        }
        let mut preds = Predecessors { start, list };
        // libpcap prepends each edge to its successor's list.
        for i in 0..f.blocks.len() {
            let (lo, hi) = (preds.start[i] as usize, preds.start[i + 1] as usize);
            preds.list[lo..hi].reverse();
        }
        preds
    }

    fn of(&self, b: Block) -> &[Block] {
        &self.list[self.start[b.index()] as usize..self.start[b.index() + 1] as usize]
    }
}

/// Where libpcap's pullup at `b` starts its walk, given `first`, the first of `b`'s listed
/// predecessors: `JT(first)` if it is `b`, else `JF(first)` (`b` itself unless a pullup earlier
/// in the sweep moved that edge).
fn entered_from(edges: &BranchEdges, first: Block, b: Block) -> Block {
    match edges.of(first) {
        Some((then_, else_)) if then_ != b => else_,
        _ => b,
    }
}

/// The dominator tree numbered in depth-first order, so that "a dominates b" is an interval
/// test (`a`'s subtree spans `b`'s entry time) instead of a walk up the tree: long `or`
/// chains have dominator trees as deep as the chain.
pub(super) use sift_ir::verify::DominatorTree as DomIntervals;

/// Which values are compared where in the dominator tree, to answer "does a block under `b`
/// compare `v`" without walking: a pullup moves a test only from under `b`, and a chain of
/// tests of distinct values (`ether[0] = 1 or ether[1] = 1 or ...`) would otherwise walk to
/// the chain's end from every block, quadratic in the chain.
struct TestedUnder {
    /// (value compared, dominator-tree entry time of the block), sorted.
    tests: Vec<(Vn, u32)>,
}

impl TestedUnder {
    fn new(compared: &[Option<Vn>], dom: &DomIntervals) -> TestedUnder {
        let mut tests: Vec<(Vn, u32)> = compared
            .iter()
            .zip(&dom.enter)
            .filter_map(|(&v, &e)| Some((v?, e)).filter(|_| e != u32::MAX))
            .collect();
        tests.sort_unstable();
        TestedUnder { tests }
    }

    /// Whether a block in `b`'s dominator subtree (`b` included) compares `value`.
    fn anywhere_under(&self, dom: &DomIntervals, b: Block, value: Vn) -> bool {
        let Some(&enter) = dom.enter.get(b.index()).filter(|&&e| e != u32::MAX) else {
            return true; // not in the tree: no shortcut
        };
        let first = self.tests.partition_point(|&t| t < (value, enter));
        self.tests
            .get(first)
            .is_some_and(|&(v, e)| v == value && e < dom.exit[b.index()])
    }
}

/// Steps after which a pullup's walk skips whole runs ([`Runs`]).
const SHORT_WALK: usize = 4;

struct Sweep<'a> {
    /// The edges, moved here during the sweep and written back after it.
    edges: BranchEdges,
    /// The value each block's branch compares (what libpcap's A register holds on exit);
    /// pullups move edges only, so this holds for the whole sweep.
    compared: &'a [Option<Vn>],
    /// Built when a walk first needs it (most sweeps never do).
    tested: Option<TestedUnder>,
    dom: &'a DomIntervals,
    preds: &'a Predecessors,
    or_runs: Runs<'a>,
    and_runs: Runs<'a>,
    skip_runs: bool,
}

impl<'a> Sweep<'a> {
    fn compared(&self, b: Block) -> Option<Vn> {
        self.compared[b.index()]
    }

    fn dominates(&self, a: Block, b: Block) -> bool {
        self.dom.dominates(a, b)
    }

    fn set_next(&mut self, b: Block, chain: Chain, next: Block) {
        self.edges.set(b, chain == Chain::And, next);
    }

    /// The run records of `chain`, and the edges they read.
    fn runs(&mut self, chain: Chain) -> (&mut Runs<'a>, &BranchEdges) {
        let runs = match chain {
            Chain::Or => &mut self.or_runs,
            Chain::And => &mut self.and_runs,
        };
        (runs, &self.edges)
    }

    /// The last block of the run from `x` (a block of `b`'s chain), when every block of that
    /// run belongs to the chain, so that a block-by-block walk would pass them all.
    /// `steps`: how far the walk has come; most walks end within a step or two, which the run
    /// records would only slow, so short walks go block by block.
    fn skip_run(&mut self, chain: Chain, b: Block, x: Block, steps: usize) -> Option<Block> {
        if !self.skip_runs || steps < SHORT_WALK {
            return None;
        }
        let (runs, edges) = self.runs(chain);
        let run = runs.suffix(edges, x);
        let (enter, exit) = (&self.dom.enter, &self.dom.exit);
        let (eb, ex, el) = (enter[b.index()], enter[x.index()], enter[run.last.index()]);
        let inside = eb != u32::MAX && ex != u32::MAX && el != u32::MAX;
        (run.increasing && inside && eb <= ex && el < exit[b.index()]).then_some(run.last)
    }

    /// One `or_pullup` / `and_pullup` at `b`.
    fn pullup(&mut self, b: Block, chain: Chain) -> bool {
        let preds: &'a [Block] = self.preds.of(b);
        let Some(&first) = preds.first() else {
            return false;
        };
        let value = self.compared(first);
        if value.is_none() || preds.iter().any(|&p| self.compared(p) != value) {
            return false;
        }
        let Some((shared, _)) = chain.edges(&self.edges, b) else {
            return false;
        };
        // A block of the chain that belongs to it: shares the successor and is dominated by b.
        let in_chain = |this: &Self, x: Block| -> Option<Block> {
            let (s, next) = chain.edges(&this.edges, x)?;
            (s == shared && this.dominates(b, x)).then_some(next)
        };
        // Walk down while the tests compare the chain's value; `diff` is the first that does
        // not, `diff_owner` the block whose chain edge leads to it (None: b's predecessors).
        // The walk starts where the first predecessor's edge to `b` leads now: libpcap takes
        // its true edge if that still enters `b`, else its false edge, wherever an earlier
        // pullup of this sweep sent it (the lists are not updated within a sweep).
        let (mut diff, mut diff_owner) = (entered_from(&self.edges, first, b), None);
        let mut steps = 0;
        loop {
            let Some(mut next) = in_chain(self, diff) else {
                return false;
            };
            if self.compared(diff) != value {
                break;
            }
            let mut owner = diff;
            steps += 1;
            if let Some(last) = self.skip_run(chain, b, diff, steps) {
                owner = last;
                next = chain
                    .edges(&self.edges, last)
                    .expect("a run's blocks branch")
                    .1;
            }
            diff_owner = Some(owner);
            diff = next;
        }
        // Further down, the first test of the chain's value again: that one is pulled up.
        let mut same_owner = diff;
        // The test pulled up is a block of the chain, so dominated by `b`: past a few steps,
        // if no block there compares the value, the walk would find nothing (and change
        // nothing), so it stops.
        steps = 0;
        let pull = loop {
            steps += 1;
            if steps == 8 && self.skip_runs {
                let (compared, dom) = (self.compared, self.dom);
                let tested = self
                    .tested
                    .get_or_insert_with(|| TestedUnder::new(compared, dom));
                if !tested.anywhere_under(dom, b, value.expect("checked")) {
                    return false;
                }
            }
            if let Some(last) = self.skip_run(chain, b, same_owner, steps) {
                same_owner = last;
            }
            let Some((_, same)) = chain.edges(&self.edges, same_owner) else {
                return false;
            };
            if in_chain(self, same).is_none() {
                return false;
            }
            if self.compared(same) == value {
                break same;
            }
            same_owner = same;
        };
        let (_, after_pull) = chain.edges(&self.edges, pull).expect("pull is a branch");
        self.set_next(same_owner, chain, after_pull);
        self.set_next(pull, chain, diff);
        match diff_owner {
            Some(owner) => self.set_next(owner, chain, pull),
            None => {
                for &p in preds {
                    if let Some((then_, _)) = self.edges.of(p) {
                        self.edges.set(p, then_ == b, pull);
                    }
                }
            }
        }
        self.note_moves(chain, same_owner, pull, after_pull, diff_owner, b);
        true
    }

    /// Tells the run records what one pullup changed: on the chain pulled along, `pull` left
    /// the head of its run and joined the end of `diff_owner`'s (or of b's predecessors'),
    /// and `same_owner` now leads past it; on the other chain kind those blocks' shared
    /// successors changed.
    #[allow(clippy::too_many_arguments)]
    fn note_moves(
        &mut self,
        chain: Chain,
        same_owner: Block,
        pull: Block,
        after_pull: Block,
        diff_owner: Option<Block>,
        b: Block,
    ) {
        if !self.skip_runs {
            return;
        }
        let other = match chain {
            Chain::Or => Chain::And,
            Chain::And => Chain::Or,
        };
        let (runs, edges) = self.runs(chain);
        runs.take_head(pull, after_pull);
        runs.redirect_last(edges, same_owner, after_pull);
        match diff_owner {
            Some(owner) => runs.append(edges, owner, pull),
            None => {
                // b's predecessors now lead to `pull`: along the chain edge, it joins the end
                // of their run; along the shared edge, their shared successor changed.
                for &p in self.preds.of(b) {
                    let (runs, edges) = self.runs(chain);
                    if chain.edges(edges, p).map(|(_, next)| next) == Some(pull) {
                        runs.append(edges, p, pull);
                    } else {
                        runs.changed(p);
                    }
                    self.runs(other).0.changed(p);
                }
            }
        }
        let (runs, _) = self.runs(other);
        for x in [Some(same_owner), Some(pull), diff_owner]
            .into_iter()
            .flatten()
        {
            runs.changed(x);
        }
    }
}
