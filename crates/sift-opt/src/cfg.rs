//! Control-flow facts the passes share: reverse postorder, immediate dominators, the dominator
//! tree and a stack-free walk over it (filters with 10^4 terms make the tree 10^4 deep).
//!
//! Reverse postorder and dominators come from `sift_ir` (linear and `O(E log N)` whatever the
//! shape: a 10^4-case `switch` and a reject block with 10^4 predecessors at depth 10^4 are
//! normal in optimized filters).

use sift_ir::{Block, Function};

use crate::rewrite::incoming_edges;

/// Reachable blocks in reverse postorder, in time linear in blocks plus edges.
pub fn rpo(f: &Function) -> Vec<Block> {
    f.reverse_postorder()
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
        let (idom, rpo) = sift_ir::verify::dominators(f);
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
}
