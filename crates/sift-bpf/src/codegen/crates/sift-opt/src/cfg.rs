//! Control-flow facts the passes share: reverse postorder, immediate dominators, the dominator
//! tree and a stack-free walk over it (filters with 10^4 terms make the tree 10^4 deep).
//!
//! Both computations here are linear or `O(E log N)` whatever the shape: a 10^4-case `switch`
//! and a reject block with 10^4 predecessors at depth 10^4 are normal in optimized filters. (The
//! textbook dominator algorithm walks up the tree once per predecessor, quadratic on such joins;
//! here the meet of two blocks is found by binary lifting.)

use sift_ir::{Block, Function};

use crate::rewrite::incoming_edges;

/// Reachable blocks in reverse postorder, in time linear in blocks plus edges.
pub fn rpo(f: &Function) -> Vec<Block> {
    let n = f.blocks.len();
    let mut visited = vec![false; n];
    let mut post = Vec::with_capacity(n);
    if n == 0 {
        return post;
    }
    let succs = |b: Block| -> Vec<Block> {
        f.block(b)
            .term
            .targets()
            .into_iter()
            .map(|t| t.block)
            .filter(|t| t.index() < n)
            .collect()
    };
    // (block, its successors, next successor to visit)
    let mut stack: Vec<(Block, Vec<Block>, usize)> =
        vec![(Function::ENTRY, succs(Function::ENTRY), 0)];
    visited[0] = true;
    while let Some((b, ss, i)) = stack.last_mut() {
        if let Some(&s) = ss.get(*i) {
            *i += 1;
            if !visited[s.index()] {
                visited[s.index()] = true;
                let next = succs(s);
                stack.push((s, next, 0));
            }
        } else {
            post.push(*b);
            stack.pop();
        }
    }
    post.reverse();
    post
}

/// Immediate dominators (entry and unreachable blocks: `None`) over reverse postorder `rpo`.
pub fn dominators(f: &Function, rpo: &[Block]) -> Vec<Option<Block>> {
    let n = f.blocks.len();
    let mut order = vec![usize::MAX; n];
    for (i, b) in rpo.iter().enumerate() {
        order[b.index()] = i;
    }
    let mut preds: Vec<Vec<Block>> = vec![Vec::new(); n];
    for &b in rpo {
        for t in f.block(b).term.targets() {
            preds[t.block.index()].push(b);
        }
    }
    // up[k][b]: the 2^k-th dominator of b (the entry is its own).
    let levels = (usize::BITS - rpo.len().leading_zeros()).max(1) as usize;
    let mut up: Vec<Vec<u32>> = vec![vec![0; n]; levels];
    let mut depth = vec![0u32; n];
    let mut idom: Vec<Option<Block>> = vec![None; n];
    let lca = |up: &Vec<Vec<u32>>, depth: &Vec<u32>, mut a: usize, mut b: usize| -> usize {
        if depth[a] < depth[b] {
            std::mem::swap(&mut a, &mut b);
        }
        let diff = depth[a] - depth[b];
        for (k, row) in up.iter().enumerate() {
            if diff >> k & 1 == 1 {
                a = row[a] as usize;
            }
        }
        if a == b {
            return a;
        }
        for row in up.iter().rev() {
            if row[a] != row[b] {
                a = row[a] as usize;
                b = row[b] as usize;
            }
        }
        up[0][a] as usize
    };
    for &b in rpo.iter().skip(1) {
        let mut d: Option<usize> = None;
        for &p in &preds[b.index()] {
            if order[p.index()] >= order[b.index()] {
                continue; // not possible in an acyclic graph; ignore defensively
            }
            d = Some(match d {
                None => p.index(),
                Some(x) => lca(&up, &depth, x, p.index()),
            });
        }
        let d = d.unwrap_or(0);
        idom[b.index()] = Some(Block(d as u32));
        depth[b.index()] = depth[d] + 1;
        up[0][b.index()] = d as u32;
        for k in 1..levels {
            let mid = up[k - 1][b.index()] as usize;
            up[k][b.index()] = up[k - 1][mid];
        }
    }
    idom
}

/// Control-flow analysis of one function, valid until its edges change.
#[derive(Debug)]
pub struct Cfg {
    /// Reachable blocks in reverse postorder (a topological order: the graph is acyclic).
    pub rpo: Vec<Block>,
    /// Immediate dominator of each reachable block except the entry.
    pub idom: Vec<Option<Block>>,
    pub live: Vec<bool>,
    /// Edges entering each block from reachable blocks.
    pub incoming: Vec<u32>,
    /// Dominator-tree children, in reverse postorder.
    pub children: Vec<Vec<Block>>,
}

/// One step of a dominator-tree walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visit {
    Enter(Block),
    Exit(Block),
}

impl Cfg {
    pub fn new(f: &Function) -> Cfg {
        let rpo = rpo(f);
        let idom = dominators(f, &rpo);
        let mut live = vec![false; f.blocks.len()];
        for b in &rpo {
            live[b.index()] = true;
        }
        let incoming = incoming_edges(f, &live);
        let mut children = vec![Vec::new(); f.blocks.len()];
        for &b in &rpo {
            if let Some(d) = idom[b.index()] {
                children[d.index()].push(b);
            }
        }
        Cfg {
            rpo,
            idom,
            live,
            incoming,
            children,
        }
    }

    /// The dominator tree in depth-first order, as enter/exit events (no recursion).
    pub fn dom_walk(&self) -> Vec<Visit> {
        let mut out = Vec::with_capacity(self.rpo.len() * 2);
        if self.rpo.is_empty() {
            return out;
        }
        let mut stack: Vec<(Block, usize)> = vec![(Function::ENTRY, 0)];
        out.push(Visit::Enter(Function::ENTRY));
        while let Some((b, i)) = stack.last_mut() {
            let kids = &self.children[b.index()];
            if let Some(&c) = kids.get(*i) {
                *i += 1;
                out.push(Visit::Enter(c));
                stack.push((c, 0));
            } else {
                out.push(Visit::Exit(*b));
                stack.pop();
            }
        }
        out
    }

    /// Whether `a` dominates `b` (walks up from `b`; for assertions and tests).
    pub fn dominates(&self, a: Block, mut b: Block) -> bool {
        loop {
            if a == b {
                return true;
            }
            match self.idom[b.index()] {
                Some(d) => b = d,
                None => return false,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_ir::parse_function;

    #[test]
    fn walk_visits_the_tree_in_order() {
        let f = parse_function(
            "block0:\n v0 = load.b [0]\n br eq v0, v0, block1, block2\nblock1:\n jump block3\nblock2:\n jump block3\nblock3:\n ret 1\n",
        )
        .unwrap();
        let cfg = Cfg::new(&f);
        let walk = cfg.dom_walk();
        assert_eq!(walk.len(), 8);
        assert_eq!(walk[0], Visit::Enter(Block(0)));
        assert_eq!(walk[7], Visit::Exit(Block(0)));
        assert!(cfg.dominates(Block(0), Block(3)));
        assert!(!cfg.dominates(Block(1), Block(3)));
        assert_eq!(cfg.incoming[3], 2);
    }

    /// The binary-lifting dominators agree with the verifier's on a graph with joins.
    #[test]
    fn dominators_agree_with_the_verifier() {
        let f = parse_function(
            "block0:\n v0 = load.b [0]\n br eq v0, v0, block1, block2\nblock1:\n br eq v0, v0, block3, block4\nblock2:\n br eq v0, v0, block4, block5\nblock3:\n jump block5\nblock4:\n jump block5\nblock5:\n br eq v0, v0, block6, block7\nblock6:\n ret 1\nblock7:\n ret 0\n",
        )
        .unwrap();
        let (expected, expected_rpo) = sift_ir::verify::dominators(&f);
        let order = rpo(&f);
        assert_eq!(order, expected_rpo);
        assert_eq!(dominators(&f, &order), expected);
    }
}
