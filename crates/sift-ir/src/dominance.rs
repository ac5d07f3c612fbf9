//! Immediate dominators (Lengauer and Tarjan's algorithm) and the dominator tree as intervals.
//!
//! Every pass that reasons about "always executed before" needs the dominator tree, and on long
//! `or` chains (10^5 blocks, a tree as deep as the chain, a reject block with as many
//! predecessors, joins of blocks at very different depths while lowering reorders tests) it is
//! computed many times, so it must be near-linear on every shape, never quadratic.
//!
//! Lengauer and Tarjan's algorithm with path compression ("simple" linking) takes
//! `O(E log N)` on any graph: one depth-first search, semidominators from the predecessors in
//! reverse preorder through a compressed forest, and immediate dominators from the
//! semidominators in one more sweep. Meeting predecessors by walking up a tree under
//! construction (Cooper, Harvey and Kennedy), the method used before, is faster on chains but
//! walks a deep tree once per join on graphs where joins meet far apart.
//!
//! Every step is iterative (trees 10^5 deep would overflow a recursive walk's stack).

use crate::function::{Block, Function};

const NONE: u32 = u32::MAX;

/// Immediate dominators of the reachable blocks (`None` for the entry and unreachable blocks),
/// and the reverse postorder, exactly as [`Function::reverse_postorder`] gives it. Edges to a
/// block earlier in that order (back edges of a malformed, cyclic graph) are ignored.
pub fn dominators(f: &Function) -> (Vec<Option<Block>>, Vec<Block>) {
    let search = Search::new(f);
    let idom = search.immediate_dominators();
    let mut out = vec![None; f.blocks.len()];
    for (i, &d) in idom.iter().enumerate().skip(1) {
        out[search.vertex[i] as usize] = Some(Block(search.vertex[d as usize]));
    }
    let rpo = search
        .post
        .iter()
        .rev()
        .map(|&i| Block(search.vertex[i as usize]))
        .collect();
    (out, rpo)
}

/// The dominator tree numbered depth first, so that "a dominates b" is an interval test
/// instead of a walk up a tree as deep as the chain.
#[derive(Clone, Debug)]
pub struct DominatorTree {
    /// Depth-first entry time of each block in the tree (`u32::MAX`: not in the tree).
    pub enter: Vec<u32>,
    /// One past the last entry time in each block's subtree.
    pub exit: Vec<u32>,
}

impl DominatorTree {
    /// The tree of `idom` (as [`dominators`] gives it); the entry and every block without a
    /// dominator are roots.
    pub fn new(idom: &[Option<Block>]) -> DominatorTree {
        let n = idom.len();
        // Children lists in one array, in block order.
        let mut start = vec![0u32; n + 1];
        for d in idom.iter().flatten() {
            start[d.index() + 1] += 1;
        }
        for i in 1..=n {
            start[i] += start[i - 1];
        }
        let mut fill = start.clone();
        let mut children = vec![0u32; start[n] as usize];
        for (b, d) in idom.iter().enumerate() {
            if let Some(d) = d {
                children[fill[d.index()] as usize] = b as u32;
                fill[d.index()] += 1;
            }
        }
        let (mut enter, mut exit) = (vec![NONE; n], vec![0; n]);
        let mut clock = 0u32;
        let mut stack: Vec<(u32, u32)> = Vec::new();
        for root in (0..n).filter(|&b| idom[b].is_none()) {
            stack.push((root as u32, start[root]));
            enter[root] = clock;
            clock += 1;
            while let Some((b, next)) = stack.last_mut() {
                if *next < start[*b as usize + 1] {
                    let c = children[*next as usize];
                    *next += 1;
                    enter[c as usize] = clock;
                    clock += 1;
                    stack.push((c, start[c as usize]));
                } else {
                    exit[*b as usize] = clock;
                    stack.pop();
                }
            }
        }
        DominatorTree { enter, exit }
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

/// A depth-first search from the entry, taking successors in order (the search
/// [`Function::reverse_postorder`] makes), with the reachable blocks numbered in preorder.
struct Search {
    /// The block of each preorder number.
    vertex: Vec<u32>,
    /// The search-tree parent of each vertex (`NONE` for the entry).
    parent: Vec<u32>,
    /// Vertices in postorder.
    post: Vec<u32>,
    /// Predecessors of each vertex over forward edges, in one array: those of `w` are
    /// `preds[pred_start[w]..pred_start[w + 1]]`.
    pred_start: Vec<u32>,
    preds: Vec<u32>,
}

impl Search {
    fn new(f: &Function) -> Search {
        let n = f.blocks.len();
        let mut search = Search {
            vertex: Vec::with_capacity(n),
            parent: Vec::with_capacity(n),
            post: Vec::with_capacity(n),
            pred_start: Vec::new(),
            preds: Vec::new(),
        };
        if n == 0 {
            return search;
        }
        // Successors of every block in one array, read in block order (the search then jumps
        // around this small array instead of the blocks).
        let mut succ_start = Vec::with_capacity(n + 1);
        let mut succ: Vec<u32> = Vec::with_capacity(2 * n);
        succ_start.push(0u32);
        for data in &f.blocks {
            data.term.for_each_target(|t| {
                if t.block.index() < n {
                    succ.push(t.block.0);
                }
            });
            succ_start.push(succ.len() as u32);
        }
        let mut number = vec![NONE; n];
        // Whether each vertex's search has finished: an edge to a vertex still open goes back
        // to an ancestor and closes a cycle, and is ignored; every other edge goes forward.
        let mut finished: Vec<bool> = Vec::with_capacity(n);
        // The forward edges, as (from, to) vertices.
        let mut edges: Vec<(u32, u32)> = Vec::with_capacity(succ.len());
        // Each open vertex and the position of its next successor in `succ`.
        let mut stack: Vec<(u32, u32)> = vec![(0, succ_start[0])];
        number[0] = 0;
        search.vertex.push(0);
        search.parent.push(NONE);
        finished.push(false);
        while let Some(top) = stack.last_mut() {
            let (v, at) = (top.0, top.1);
            let end = succ_start[search.vertex[v as usize] as usize + 1];
            if at < end {
                top.1 += 1;
                let s = succ[at as usize] as usize;
                let w = number[s];
                if w == NONE {
                    let w = search.vertex.len() as u32;
                    number[s] = w;
                    search.vertex.push(s as u32);
                    search.parent.push(v);
                    finished.push(false);
                    stack.push((w, succ_start[s]));
                    edges.push((v, w));
                } else if finished[w as usize] {
                    edges.push((v, w));
                }
            } else {
                search.post.push(v);
                finished[v as usize] = true;
                stack.pop();
            }
        }
        let m = search.vertex.len();
        let mut start = vec![0u32; m + 1];
        for &(_, to) in &edges {
            start[to as usize + 1] += 1;
        }
        for i in 1..=m {
            start[i] += start[i - 1];
        }
        let mut fill = start.clone();
        let mut preds = vec![0u32; edges.len()];
        for &(from, to) in &edges {
            preds[fill[to as usize] as usize] = from;
            fill[to as usize] += 1;
        }
        search.pred_start = start;
        search.preds = preds;
        search
    }

    fn preds_of(&self, w: usize) -> &[u32] {
        &self.preds[self.pred_start[w] as usize..self.pred_start[w + 1] as usize]
    }

    /// The immediate dominator of each vertex, as a vertex (`NONE` for the entry).
    ///
    /// Lengauer and Tarjan: vertices in reverse preorder get their semidominator, the
    /// smallest vertex from which a path reaches them through larger vertices only, as the
    /// smallest semidominator on the forest paths above their predecessors (`eval`); each
    /// vertex is then linked under its parent, and the vertices whose semidominator is that
    /// parent learn their immediate dominator or the vertex it equals, resolved in preorder.
    fn immediate_dominators(&self) -> Vec<u32> {
        let m = self.vertex.len();
        let mut forest = Forest {
            semi: (0..m as u32).collect(),
            label: (0..m as u32).collect(),
            ancestor: vec![NONE; m],
            path: Vec::new(),
        };
        let mut idom = vec![NONE; m];
        // Vertices waiting for their semidominator to be linked, as linked lists.
        let mut bucket = vec![NONE; m];
        let mut next_in_bucket = vec![NONE; m];
        for w in (1..m).rev() {
            for &v in self.preds_of(w) {
                let u = forest.eval(v);
                if forest.semi[u as usize] < forest.semi[w] {
                    forest.semi[w] = forest.semi[u as usize];
                }
            }
            let s = forest.semi[w] as usize;
            next_in_bucket[w] = bucket[s];
            bucket[s] = w as u32;
            let p = self.parent[w];
            forest.ancestor[w] = p;
            let mut v = std::mem::replace(&mut bucket[p as usize], NONE);
            while v != NONE {
                let u = forest.eval(v);
                idom[v as usize] = if forest.semi[u as usize] < forest.semi[v as usize] {
                    u
                } else {
                    p
                };
                v = next_in_bucket[v as usize];
            }
        }
        for w in 1..m {
            if idom[w] != forest.semi[w] {
                idom[w] = idom[idom[w] as usize];
            }
        }
        idom
    }
}

/// The forest of vertices already processed, with path compression.
struct Forest {
    semi: Vec<u32>,
    /// The vertex of smallest semidominator on the compressed path above each vertex.
    label: Vec<u32>,
    ancestor: Vec<u32>,
    /// Scratch for `eval`'s compression (kept to avoid allocating per call).
    path: Vec<u32>,
}

impl Forest {
    /// The vertex of smallest semidominator on the forest path from `v` up to (not including)
    /// its tree's root; `v` itself when it is a root.
    fn eval(&mut self, v: u32) -> u32 {
        if self.ancestor[v as usize] == NONE {
            return v;
        }
        let mut x = v;
        while self.ancestor[self.ancestor[x as usize] as usize] != NONE {
            self.path.push(x);
            x = self.ancestor[x as usize];
        }
        // Compress from the top down, as the recursive formulation does.
        while let Some(y) = self.path.pop() {
            let a = self.ancestor[y as usize] as usize;
            let y = y as usize;
            if self.semi[self.label[a] as usize] < self.semi[self.label[y] as usize] {
                self.label[y] = self.label[a];
            }
            self.ancestor[y] = self.ancestor[a];
        }
        self.label[v as usize]
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
            let idom = dominators(&f).0;
            let tree = DominatorTree::new(&idom);
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
                }
            }
        }
    }
}
