//! Immediate dominators and the dominator tree as intervals.
//!
//! Every pass that reasons about "always executed before" needs the dominator tree, and on long
//! `or` chains (10^5 blocks, a tree as deep as the chain, a reject block with as many
//! predecessors, joins of blocks at very different depths while lowering reorders tests) it is
//! computed many times, so it must be near-linear on every shape, never quadratic.
//!
//! The graph is acyclic, so in reverse postorder every block comes after its predecessors, and
//! its immediate dominator is the nearest common ancestor, in the tree built so far, of its
//! predecessors. One sweep in that order builds the tree: each edge updates its target's
//! candidate with one common-ancestor query. Walking up the tree a parent at a time would be
//! quadratic on a chain whose exits all join one block (each query climbs the whole chain), so
//! every block also keeps a jump pointer (Myers' skew-binary scheme: the pointer's length
//! depends only on the block's depth, and a query takes `O(log depth)` steps).
//!
//! Every step is iterative (trees 10^5 deep would overflow a recursive walk's stack).

use crate::function::{Block, Function};

const NONE: u32 = u32::MAX;

/// Immediate dominators of the reachable blocks (`None` for the entry and unreachable blocks),
/// and the reverse postorder, exactly as [`Function::reverse_postorder`] gives it. Edges to a
/// block earlier in that order (back edges of a malformed, cyclic graph) are ignored.
pub fn dominators(f: &Function) -> (Vec<Option<Block>>, Vec<Block>) {
    dominators_in_order(f, f.reverse_postorder())
}

/// [`dominators`] when the caller already has `rpo`, [`Function::reverse_postorder`] of `f`
/// (say, having numbered the blocks in it: then it is `0..n`), which saves the walk.
pub fn dominators_in_order(f: &Function, rpo: Vec<Block>) -> (Vec<Option<Block>>, Vec<Block>) {
    let n = f.blocks.len();
    let mut position = vec![NONE; n];
    for (i, b) in rpo.iter().enumerate() {
        position[b.index()] = i as u32;
    }
    // The tree over positions in `rpo`: each block's parent (its immediate dominator, or while
    // its predecessors are being visited the candidate so far) and depth, and jump pointers.
    let mut tree = Tree {
        parent: vec![NONE; rpo.len()],
        depth: vec![0; rpo.len()],
        jump: vec![0; rpo.len()],
    };
    for (i, &b) in rpo.iter().enumerate() {
        let i = i as u32;
        // Every predecessor came before: the parent is final.
        tree.attach(i);
        f.blocks[b.index()].term.for_each_target(|t| {
            let Some(&j) = position.get(t.block.index()) else {
                return;
            };
            if j == NONE || j <= i {
                return; // a back edge
            }
            let candidate = tree.parent[j as usize];
            tree.parent[j as usize] = if candidate == NONE {
                i
            } else {
                tree.common_ancestor(candidate, i)
            };
        });
    }
    let mut idom = vec![None; n];
    for (i, &b) in rpo.iter().enumerate().skip(1) {
        idom[b.index()] = Some(rpo[tree.parent[i] as usize]);
    }
    (idom, rpo)
}

/// The dominator tree under construction, over positions in reverse postorder.
struct Tree {
    parent: Vec<u32>,
    depth: Vec<u32>,
    /// An ancestor of each vertex: its parent, or a longer jump when the parent's own jump and
    /// the one after it are as long as each other (Myers' skew-binary jump pointers).
    jump: Vec<u32>,
}

impl Tree {
    /// Sets `v`'s depth and jump pointer from its parent (the root, without one, is its own).
    fn attach(&mut self, v: u32) {
        let vi = v as usize;
        let p = self.parent[vi];
        if p == NONE {
            self.jump[vi] = v;
            return;
        }
        let (pi, jp) = (p as usize, self.jump[p as usize]);
        let jjp = self.jump[jp as usize];
        self.depth[vi] = self.depth[pi] + 1;
        let (dp, djp, djjp) = (
            self.depth[pi],
            self.depth[jp as usize],
            self.depth[jjp as usize],
        );
        self.jump[vi] = if dp - djp == djp - djjp { jjp } else { p };
    }

    /// The nearest common ancestor of `a` and `b`.
    fn common_ancestor(&self, mut a: u32, mut b: u32) -> u32 {
        let depth = |v: u32| self.depth[v as usize];
        if depth(a) < depth(b) {
            std::mem::swap(&mut a, &mut b);
        }
        // The root is everyone's ancestor: a block joined by a whole chain's exits gets it as
        // candidate early, and every later edge would climb the chain to learn it again.
        if depth(b) == 0 {
            return b;
        }
        while depth(a) > depth(b) {
            let j = self.jump[a as usize];
            a = if depth(j) >= depth(b) {
                j
            } else {
                self.parent[a as usize]
            };
        }
        // At equal depths the jump pointers have equal lengths.
        while a != b {
            let (ja, jb) = (self.jump[a as usize], self.jump[b as usize]);
            if ja != jb {
                (a, b) = (ja, jb);
            } else {
                (a, b) = (self.parent[a as usize], self.parent[b as usize]);
            }
        }
        a
    }
}

/// The dominator tree numbered depth first, so that "a dominates b" is an interval test
/// instead of a walk up a tree as deep as the chain.
#[derive(Clone, Debug)]
pub struct DominatorTree {
    /// Depth-first entry time of each block in the tree (`u32::MAX`: not in the tree).
    pub enter: Vec<u32>,
    /// One past the last entry time in each block's subtree.
    pub exit: Vec<u32>,
    /// The blocks in the order the walk enters them (`preorder[enter[b]] == b`).
    pub preorder: Vec<Block>,
}

impl DominatorTree {
    /// The tree of `idom` (as [`dominators`] gives it); the entry and every block without a
    /// dominator are roots. Children are walked in block order.
    pub fn new(idom: &[Option<Block>]) -> DominatorTree {
        Self::walked(idom, (0..idom.len()).map(|b| Block(b as u32)))
    }

    /// [`DominatorTree::new`] with each block's children walked in decreasing position of
    /// `rpo` (the reverse postorder [`dominators`] gives with `idom`): leaving the blocks in
    /// that walk visits every block after its successors.
    pub fn children_latest_first(idom: &[Option<Block>], rpo: &[Block]) -> DominatorTree {
        Self::walked(idom, rpo.iter().rev().copied())
    }

    /// The tree, each block's children in the order `order` lists them (it lists every block
    /// that has a dominator).
    fn walked(idom: &[Option<Block>], order: impl Iterator<Item = Block>) -> DominatorTree {
        let n = idom.len();
        // Children lists in one array, in `order`.
        let mut start = vec![0u32; n + 1];
        for d in idom.iter().flatten() {
            start[d.index() + 1] += 1;
        }
        for i in 1..=n {
            start[i] += start[i - 1];
        }
        let mut fill = start.clone();
        let mut children = vec![0u32; start[n] as usize];
        for b in order {
            if let Some(d) = idom[b.index()] {
                children[fill[d.index()] as usize] = b.0;
                fill[d.index()] += 1;
            }
        }
        let (mut enter, mut exit) = (vec![NONE; n], vec![0; n]);
        let mut preorder = Vec::with_capacity(n);
        let mut stack: Vec<(u32, u32)> = Vec::new();
        for root in (0..n).filter(|&b| idom[b].is_none()) {
            stack.push((root as u32, start[root]));
            enter[root] = preorder.len() as u32;
            preorder.push(Block(root as u32));
            while let Some((b, next)) = stack.last_mut() {
                if *next < start[*b as usize + 1] {
                    let c = children[*next as usize];
                    *next += 1;
                    enter[c as usize] = preorder.len() as u32;
                    preorder.push(Block(c));
                    stack.push((c, start[c as usize]));
                } else {
                    exit[*b as usize] = preorder.len() as u32;
                    stack.pop();
                }
            }
        }
        DominatorTree {
            enter,
            exit,
            preorder,
        }
    }

    /// Whether `a` dominates `b` (every block dominates itself; blocks of other roots' trees,
    /// unreachable ones, dominate only themselves and their own subtrees).
    pub fn dominates(&self, a: Block, b: Block) -> bool {
        match (self.enter.get(a.index()), self.enter.get(b.index())) {
            (Some(&ea), Some(&eb)) if ea != NONE && eb != NONE => {
                ea <= eb && eb < self.exit[a.index()]
            }
            _ => a == b,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::function::{CmpOp, Inst, Target, Terminator};

    /// A random graph: each block branches or jumps to blocks at most `reach` later, or, with
    /// `cycles`, anywhere (edges back close cycles, which the analysis ignores); blocks no
    /// edge reaches are unreachable.
    fn random_graph(seed: u64, n: usize, reach: usize, cycles: bool) -> Function {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = move |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound.max(1) as u64) as usize
        };
        let mut f = Function::new();
        for _ in 0..n {
            f.create_block();
        }
        let v = f.push(Block(0), Inst::Const(0));
        for i in 0..n {
            let pick = |next: &mut dyn FnMut(usize) -> usize| {
                let to = if cycles && next(8) == 0 {
                    next(n)
                } else {
                    i + 1 + next((n - i - 1).min(reach))
                };
                Target::from(Block(to.min(n - 1) as u32))
            };
            f.blocks[i].term = if i + 1 == n {
                Terminator::Return(0)
            } else if next(4) == 0 {
                Terminator::Jump(pick(&mut next))
            } else {
                Terminator::Branch {
                    op: CmpOp::Eq,
                    lhs: v,
                    rhs: v,
                    then_: pick(&mut next),
                    else_: pick(&mut next),
                }
            };
        }
        f
    }

    /// Immediate dominators by definition, over the edges that go forward in reverse
    /// postorder: the dominators of a block are the intersection of its predecessors', plus
    /// itself, and the immediate one is the latest of them in reverse postorder.
    fn reference(f: &Function) -> Vec<Option<Block>> {
        let rpo = f.reverse_postorder();
        let n = f.blocks.len();
        let mut position = vec![usize::MAX; n];
        for (i, b) in rpo.iter().enumerate() {
            position[b.index()] = i;
        }
        let mut doms: Vec<Option<Vec<bool>>> = vec![None; n];
        for (i, &b) in rpo.iter().enumerate() {
            let mut set: Option<Vec<bool>> = None;
            if i == 0 {
                set = Some(vec![false; n]);
            }
            for &p in &rpo[..i] {
                let forward = f.block(p).term.successors().any(|s| s == b);
                if !forward {
                    continue;
                }
                let pd = doms[p.index()].as_ref().unwrap();
                set = Some(match set {
                    None => pd.clone(),
                    Some(s) => s.iter().zip(pd).map(|(&x, &y)| x && y).collect(),
                });
            }
            let mut set = set.unwrap();
            set[b.index()] = true;
            doms[b.index()] = Some(set);
        }
        let mut idom = vec![None; n];
        for &b in rpo.iter().skip(1) {
            let set = doms[b.index()].as_ref().unwrap();
            idom[b.index()] = (0..n)
                .filter(|&d| set[d] && d != b.index())
                .max_by_key(|&d| position[d])
                .map(|d| Block(d as u32));
        }
        idom
    }

    #[test]
    fn agrees_with_the_definition_on_random_graphs() {
        for seed in 0..600 {
            let n = 2 + seed as usize % 90;
            for (reach, cycles) in [(6, false), (n, false), (3, true), (n, true)] {
                let f = random_graph(seed, n, reach, cycles);
                let (idom, rpo) = dominators(&f);
                assert_eq!(rpo, f.reverse_postorder(), "seed {seed}");
                assert_eq!(
                    idom,
                    reference(&f),
                    "seed {seed}, reach {reach}, cycles {cycles}"
                );
            }
        }
    }

    /// A 10^4-block `or` chain: every block's true edge goes to one accept block, the false
    /// edge to the next test; the reject block ends the chain.
    #[test]
    fn long_chain() {
        let n = 10_000;
        let mut f = Function::new();
        for _ in 0..n + 2 {
            f.create_block();
        }
        let v = f.push(Block(0), Inst::Const(0));
        let (accept, reject) = (Block(n as u32), Block(n as u32 + 1));
        for i in 0..n {
            let next = if i + 1 == n {
                reject
            } else {
                Block(i as u32 + 1)
            };
            f.blocks[i].term = Terminator::Branch {
                op: CmpOp::Eq,
                lhs: v,
                rhs: v,
                then_: Target::from(accept),
                else_: Target::from(next),
            };
        }
        f.blocks[n].term = Terminator::Return(1);
        f.blocks[n + 1].term = Terminator::Return(0);
        let (idom, _) = dominators(&f);
        assert_eq!(idom[accept.index()], Some(Block(0)));
        assert_eq!(idom[reject.index()], Some(Block(n as u32 - 1)));
        for (i, d) in idom.iter().enumerate().take(n).skip(1) {
            assert_eq!(*d, Some(Block(i as u32 - 1)));
        }
    }

    /// Two chains of 10^4 tests whose blocks join pairwise, the second chain's blocks each
    /// joining one of the first's far below it: the shape on which walking up the tree per
    /// join was quadratic. Every join block is dominated by the entry only.
    #[test]
    fn joins_far_apart() {
        let n = 10_000u32;
        let mut f = Function::new();
        // Blocks 1..=n: chain A; n+1..=2n: chain B; 2n+1..=3n: joins; 3n+1: end.
        for _ in 0..3 * n + 2 {
            f.create_block();
        }
        let v = f.push(Block(0), Inst::Const(0));
        let end = Block(3 * n + 1);
        let br = |then_: Block, else_: Block| Terminator::Branch {
            op: CmpOp::Eq,
            lhs: v,
            rhs: v,
            then_: Target::from(then_),
            else_: Target::from(else_),
        };
        f.blocks[0].term = br(Block(1), Block(n + 1));
        for i in 1..=n {
            let a_next = if i == n { end } else { Block(i + 1) };
            let b_next = if i == n { end } else { Block(n + i + 1) };
            f.blocks[i as usize].term = br(Block(2 * n + i), a_next);
            f.blocks[(n + i) as usize].term = br(Block(3 * n + 1 - i), b_next);
            f.blocks[(2 * n + i) as usize].term = Terminator::Return(i);
        }
        f.blocks[end.index()].term = Terminator::Return(0);
        let (idom, rpo) = dominators(&f);
        assert_eq!(rpo.len(), f.blocks.len());
        for i in 1..=n {
            assert_eq!(idom[(2 * n + i) as usize], Some(Block(0)), "join {i}");
        }
        assert_eq!(idom[end.index()], Some(Block(0)));
    }

    #[test]
    fn tree_intervals_answer_dominance() {
        for seed in 0..200 {
            let f = random_graph(seed, 2 + seed as usize % 60, 5, seed % 2 == 0);
            let (idom, rpo) = dominators(&f);
            let tree = DominatorTree::new(&idom);
            // Another order of the children numbers the blocks otherwise, with the same answers.
            let latest_first = DominatorTree::children_latest_first(&idom, &rpo);
            for t in [&tree, &latest_first] {
                for (i, b) in t.preorder.iter().enumerate() {
                    assert_eq!(
                        t.enter[b.index()] as usize,
                        i,
                        "seed {seed}: preorder of {b}"
                    );
                }
                assert_eq!(t.preorder.len(), f.blocks.len(), "seed {seed}");
            }
            for a in 0..f.blocks.len() {
                for b in 0..f.blocks.len() {
                    let mut walk = Some(Block(b as u32));
                    let mut by_walk = false;
                    while let Some(x) = walk {
                        if x.index() == a {
                            by_walk = true;
                            break;
                        }
                        walk = idom[x.index()];
                    }
                    let (a, b) = (Block(a as u32), Block(b as u32));
                    assert_eq!(tree.dominates(a, b), by_walk, "seed {seed}: {a} {b}");
                    assert_eq!(
                        latest_first.dominates(a, b),
                        by_walk,
                        "seed {seed}: {a} {b}"
                    );
                }
            }
        }
    }
}
