//! Merging of equivalent subgraphs (tail merging over the DAG).
//!
//! Lowering copies code per path: `port 22 or port 80` tests the ports once after `ip proto tcp`,
//! once after `udp`, once after `sctp`, each copy with its own (identical) loads. Value numbering
//! cannot share those loads (no copy dominates another) and redundant predicate elimination
//! cannot remove the tests (each copy is needed on its path). But the copies are the same
//! computation: block `b` may be replaced by block `a` when, pairing `a` with `b` and then
//! successors with successors, every paired block has the same instructions on corresponding
//! operands and the same terminator, ending in the same blocks with corresponding arguments.
//! Loads that correspond read the same bytes, so they reject the same packets; tests that
//! correspond decide the same way; so each path through `b` is matched step for step by one
//! through `a` that returns the same value. Every edge into `b` then goes to `a`.
//!
//! Operands are "corresponding" when they are the values defined at paired positions, or the
//! very same value defined outside both subgraphs in a block dominating both `a` and `b` (so it
//! is still available on the redirected edges). Values defined inside `a`'s subgraph keep their
//! dominance: the new edges enter the subgraph at its root.
//!
//! Candidates are blocks with the same shallow shape; each is compared with the first block of
//! its shape. The comparison is bounded by a work budget linear in the function, and the
//! control-flow analysis is recomputed after each merge (at most [`MAX_MERGES`] per run; the
//! pipeline repeats the pass).

use sift_ir::{Block, Function, Inst, Target, Terminator, Value};

use crate::cfg::{Analysis, Cfg};
use crate::hash::FastMap;

/// Merges per run (each recomputes the dominator tree).
pub const MAX_MERGES: usize = 32;

/// Runs the pass; returns the number of blocks merged away.
pub fn run(f: &mut Function) -> usize {
    run_with(f, &mut Analysis::new())
}

/// [`run`], with the control-flow facts kept between passes.
pub fn run_with(f: &mut Function, analysis: &mut Analysis) -> usize {
    let mut merged = 0;
    let mut budget = 8 * f.blocks.len() + 4096;
    analysis.remove_unreachable(f);
    // One scratch for every comparison: a long chain compares tens of thousands of pairs,
    // most failing at once, and fresh tables (each seeded, then allocated on first insert)
    // cost more than the comparisons.
    let mut scratch = Scratch::default();
    'merging: while merged < MAX_MERGES {
        // Blocks a merge cut off stay in `f` (unreachable, outside the analysis) until the end.
        let cfg = analysis.cfg(f);
        let mut def_block = vec![Function::ENTRY; f.values.len()];
        for &b in &cfg.rpo {
            let data = f.block(b);
            for &v in data.params.iter().chain(&data.insts) {
                def_block[v.index()] = b;
            }
        }
        let mut shapes = Shapes::default();
        let mut found = None;
        for &b in &cfg.rpo {
            match shapes.first_of(f, b) {
                None => {}
                Some(a) => {
                    let mut cmp = Comparison {
                        f,
                        cfg,
                        def_block: &def_block,
                        roots: (a, b),
                        scratch: &mut scratch,
                        budget: &mut budget,
                    };
                    if cmp.equivalent() {
                        found = Some((a, b));
                        break;
                    }
                    if budget == 0 {
                        // The blocks merged away so far still go below.
                        break 'merging;
                    }
                }
            }
        }
        let Some((a, b)) = found else { break };
        let rpo = analysis.take(f).rpo;
        for &p in &rpo {
            for t in crate::cfg::targets_mut(&mut f.block_mut(p).term) {
                if t.block == b {
                    t.block = a;
                }
            }
        }
        merged += 1;
    }
    analysis.remove_unreachable(f);
    merged
}

/// The first block of each shape seen so far, found by the shape's hash (then compared word
/// for word; shapes whose hash an earlier, different shape took are kept whole).
#[derive(Default)]
struct Shapes {
    by_hash: FastMap<u64, Block>,
    collided: FastMap<Vec<u64>, Block>,
    hasher: crate::hash::FastState,
    /// Scratch: the shape of the block looked up, and of the candidate found by hash (kept
    /// while the same candidate comes back: on a chain, every block finds the same one).
    current: Vec<u64>,
    candidate: Vec<u64>,
    candidate_block: Option<Block>,
}

impl Shapes {
    /// The first block seen with `b`'s shape; `None` (and `b` becomes the first) if there is
    /// none.
    fn first_of(&mut self, f: &Function, b: Block) -> Option<Block> {
        use std::collections::hash_map::Entry;
        use std::hash::BuildHasher;
        shape(f, b, &mut self.current);
        let hash = self.hasher.hash_one(&self.current[..]);
        let a = match self.by_hash.entry(hash) {
            Entry::Vacant(e) => {
                e.insert(b);
                return None;
            }
            Entry::Occupied(e) => *e.get(),
        };
        if self.candidate_block != Some(a) {
            shape(f, a, &mut self.candidate);
            self.candidate_block = Some(a);
        }
        if self.candidate == self.current {
            return Some(a);
        }
        match self.collided.entry(self.current.clone()) {
            Entry::Occupied(e) => Some(*e.get()),
            Entry::Vacant(e) => {
                e.insert(b);
                None
            }
        }
    }
}

/// A summary of a block's shape, written into `out`: instruction kinds and immediates,
/// terminator kind, comparison and constants, number of targets.
fn shape(f: &Function, b: Block, out: &mut Vec<u64>) {
    let data = f.block(b);
    out.clear();
    out.extend([data.params.len() as u64, data.insts.len() as u64]);
    for &v in &data.insts {
        out.push(match *f.inst(v) {
            Inst::Const(k) => 1 << 40 | u64::from(k),
            Inst::WireLen => 2 << 40,
            Inst::Load {
                offset,
                size,
                index,
            } => {
                3 << 40
                    | u64::from(size.bytes()) << 36
                    | u64::from(index.is_some()) << 35
                    | u64::from(offset)
            }
            Inst::Binary(op, _, _) => 4 << 40 | op as u64,
            Inst::Neg(_) => 5 << 40,
            Inst::Param(_) => 6 << 40,
            Inst::Contains { set, pattern, .. } => {
                12 << 40 | u64::from(set) << 20 | u64::from(pattern)
            }
            Inst::Member { set, .. } => 13 << 40 | u64::from(set),
            Inst::Protochain {
                chain,
                base,
                target,
                ..
            } => 14 << 40 | (chain as u64) << 36 | u64::from(base) << 8 | u64::from(target & 0xff),
        });
    }
    match &data.term {
        Terminator::Branch { op, .. } => out.push(7 << 40 | *op as u64),
        Terminator::Switch { cases, .. } => {
            out.push(8 << 40 | cases.len() as u64);
            out.extend(cases.iter().map(|(k, _)| u64::from(*k)));
        }
        Terminator::Jump(_) => out.push(9 << 40),
        Terminator::Return(k) => out.push(10 << 40 | u64::from(*k)),
        Terminator::ReturnValue(_) => out.push(11 << 40),
        Terminator::Unset => out.push(12 << 40),
    }
}

struct Comparison<'a> {
    f: &'a Function,
    cfg: &'a Cfg,
    def_block: &'a [Block],
    roots: (Block, Block),
    /// The tables and work list, shared by all comparisons of a pass.
    scratch: &'a mut Scratch,
    budget: &'a mut usize,
}

/// What a comparison builds, emptied at its start.
#[derive(Default)]
struct Scratch {
    /// Values of `b`'s subgraph and the values of `a`'s they correspond to.
    rho: FastMap<Value, Value>,
    /// Pairs of blocks whose comparison has begun: a set, kept as a map to `()` so that one
    /// [`empty`] serves both tables.
    paired: FastMap<(Block, Block), ()>,
    /// Pairs of blocks still to compare.
    work: Vec<(Block, Block)>,
}

impl Scratch {
    /// Empties the tables.
    fn reset(&mut self) {
        empty(&mut self.rho);
        empty(&mut self.paired);
    }
}

/// Empties `table`. Clearing costs time in a table's capacity, not its entries: one long
/// comparison must not make every later one pay for its size, so a table much larger than
/// what it holds is replaced (keeping its hasher: no new seed).
fn empty<K, V>(table: &mut FastMap<K, V>) {
    const SMALL: usize = 64;
    if table.capacity() > SMALL.max(4 * table.len()) {
        *table = FastMap::with_hasher(table.hasher().clone());
    } else {
        table.clear();
    }
}

impl Comparison<'_> {
    fn equivalent(&mut self) -> bool {
        if self.roots_differ_at_once() {
            // What the full comparison would spend on the roots' pair before failing.
            *self.budget = self.budget.saturating_sub(1);
            return false;
        }
        self.scratch.reset();
        let mut work = std::mem::take(&mut self.scratch.work);
        work.clear();
        work.push(self.roots);
        let same = self.compare_pairs(&mut work);
        self.scratch.work = work;
        same
    }

    /// Whether the roots compute nothing and test different operands: then no operand of
    /// theirs can correspond but by being the same value, and the comparison fails at its
    /// first step (most comparisons on a chain, whose tests differ in their constant).
    fn roots_differ_at_once(&self) -> bool {
        let (da, db) = (self.f.block(self.roots.0), self.f.block(self.roots.1));
        if !(da.params.is_empty()
            && db.params.is_empty()
            && da.insts.is_empty()
            && db.insts.is_empty())
        {
            return false;
        }
        match (&da.term, &db.term) {
            (
                Terminator::Branch { op, lhs, rhs, .. },
                Terminator::Branch {
                    op: op2,
                    lhs: l2,
                    rhs: r2,
                    ..
                },
            ) => (op, lhs, rhs) != (op2, l2, r2),
            (Terminator::Switch { value, .. }, Terminator::Switch { value: v2, .. }) => value != v2,
            _ => false,
        }
    }

    /// Compares the pairs on `work` and those they lead to.
    fn compare_pairs(&mut self, work: &mut Vec<(Block, Block)>) -> bool {
        while let Some((a, b)) = work.pop() {
            if a == b || self.scratch.paired.insert((a, b), ()).is_some() {
                continue;
            }
            if *self.budget == 0 {
                return false;
            }
            *self.budget -= 1;
            if !self.blocks(a, b, work) {
                return false;
            }
        }
        true
    }

    /// Whether operand `y` of `b`'s subgraph corresponds to operand `x` of `a`'s.
    fn same(&self, x: Value, y: Value) -> bool {
        match self.scratch.rho.get(&y) {
            Some(&m) => m == x,
            None => {
                x == y && {
                    let d = self.def_block[x.index()];
                    self.cfg.dominates(d, self.roots.0)
                        && self.cfg.dominates(d, self.roots.1)
                        && d != self.roots.0
                        && d != self.roots.1
                }
            }
        }
    }

    fn targets(&self, x: &Target, y: &Target, work: &mut Vec<(Block, Block)>) -> bool {
        if x.args.len() != y.args.len()
            || !x.args.iter().zip(&y.args).all(|(&p, &q)| self.same(p, q))
        {
            return false;
        }
        work.push((x.block, y.block));
        true
    }

    fn blocks(&mut self, a: Block, b: Block, work: &mut Vec<(Block, Block)>) -> bool {
        let (da, db) = (self.f.block(a), self.f.block(b));
        if da.params.len() != db.params.len() || da.insts.len() != db.insts.len() {
            return false;
        }
        if (a, b) != self.roots && (a == self.roots.0 || b == self.roots.1) {
            return false;
        }
        for (&p, &q) in da.params.iter().zip(&db.params) {
            if self.scratch.rho.insert(q, p).is_some() {
                return false;
            }
        }
        for (&x, &y) in da.insts.iter().zip(&db.insts) {
            let ok = self
                .f
                .inst(x)
                .same_up_to(self.f.inst(y), |p, q| self.same(p, q));
            if !ok || self.scratch.rho.insert(y, x).is_some() {
                return false;
            }
        }
        match (&da.term, &db.term) {
            (Terminator::Return(k), Terminator::Return(l)) => k == l,
            (Terminator::ReturnValue(x), Terminator::ReturnValue(y)) => self.same(*x, *y),
            (Terminator::Jump(x), Terminator::Jump(y)) => self.targets(x, y, work),
            (
                Terminator::Branch {
                    op,
                    lhs,
                    rhs,
                    then_,
                    else_,
                },
                Terminator::Branch {
                    op: op2,
                    lhs: l2,
                    rhs: r2,
                    then_: t2,
                    else_: e2,
                },
            ) => {
                op == op2
                    && self.same(*lhs, *l2)
                    && self.same(*rhs, *r2)
                    && self.targets(then_, t2, work)
                    && self.targets(else_, e2, work)
            }
            (
                Terminator::Switch {
                    value,
                    cases,
                    default,
                },
                Terminator::Switch {
                    value: v2,
                    cases: c2,
                    default: d2,
                },
            ) => {
                self.same(*value, *v2)
                    && cases.len() == c2.len()
                    && self.targets(default, d2, work)
                    && cases
                        .iter()
                        .zip(c2)
                        .all(|((k, x), (l, y))| k == l && self.targets(x, y, work))
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::assert_same_semantics;
    use sift_ir::parse_function;

    fn merged(text: &str) -> Function {
        let mut f = parse_function(text).unwrap();
        let orig = f.clone();
        run(&mut f);
        sift_ir::verify(&f).unwrap_or_else(|e| panic!("{e}\n{f}"));
        assert_same_semantics(&orig, &f);
        f
    }

    /// Per-protocol copies of a port test collapse into one.
    #[test]
    fn copies_of_a_subgraph_merge() {
        let f = merged(
            "block0:
    v0 = const 6
    v1 = const 17
    v2 = const 80
    v3 = const 15
    v4 = load.b [23]
    br eq v4, v0, block1, block3
block1:
    v5 = load.b [14]
    v6 = and v5, v3
    v7 = load.h [v6+14]
    br eq v7, v2, block6, block2
block2:
    v8 = load.h [v6+16]
    br eq v8, v2, block6, block5
block3:
    br eq v4, v1, block4, block5
block4:
    v9 = load.b [14]
    v10 = and v9, v3
    v11 = load.h [v10+14]
    br eq v11, v2, block6, block7
block7:
    v12 = load.h [v10+16]
    br eq v12, v2, block6, block5
block5:
    ret 0
block6:
    ret 1
",
        );
        assert_eq!(f.to_string().matches("load.h").count(), 2, "{f}");
    }

    /// Copies that read different outside values stay apart.
    #[test]
    fn different_operands_do_not_merge() {
        let f = merged(
            "block0:
    v0 = const 1
    v1 = load.b [0]
    v2 = load.b [1]
    br eq v1, v0, block1, block2
block1:
    br eq v1, v0, block3, block4
block2:
    br eq v2, v0, block3, block4
block3:
    ret 1
block4:
    ret 0
",
        );
        assert_eq!(f.blocks.len(), 5, "{f}");
    }
}
