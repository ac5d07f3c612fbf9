//! Control-flow facts the passes share: reverse postorder, immediate dominators, the dominator
//! tree and a stack-free walk over it (filters with 10^4 terms make the tree 10^4 deep), and
//! [`Analysis`], which keeps them from one pass to the next while the edges stay the same.
//!
//! Reverse postorder and dominators come from `sift_ir` (`O(E log N)` whatever the shape: a
//! 10^4-case `switch` and a reject block with 10^4 predecessors at depth 10^4 are normal in
//! optimized filters).
//!
//! Most passes change instructions and leave the edges alone, or change nothing at all once
//! the rounds near their fixed point, so recomputing the graph's facts in every pass (as each
//! did on its own) was most of the optimizer's time on long chains. A pass that moves, adds or
//! removes an edge says so ([`Analysis::edges_changed`]); removing unreachable blocks renumbers
//! the facts instead of recomputing them. With [`crate::Options::verify`] the pipeline checks
//! after every pass that the kept facts equal fresh ones.

use sift_ir::{Block, Function, Target, Terminator};

/// Reachable blocks in reverse postorder, in time linear in blocks plus edges.
pub fn rpo(f: &Function) -> Vec<Block> {
    f.reverse_postorder()
}

/// The targets of `term` in [`Terminator::targets`]' order, without collecting them.
pub fn targets(term: &Terminator) -> impl Iterator<Item = &Target> {
    let (cases, rest): (&[(u32, Target)], [Option<&Target>; 2]) = match term {
        Terminator::Branch { then_, else_, .. } => (&[], [Some(then_), Some(else_)]),
        Terminator::Jump(t) => (&[], [Some(t), None]),
        Terminator::Switch { cases, default, .. } => (cases, [Some(default), None]),
        Terminator::Unset | Terminator::Return(_) | Terminator::ReturnValue(_) => {
            (&[], [None, None])
        }
    };
    cases
        .iter()
        .map(|(_, t)| t)
        .chain(rest.into_iter().flatten())
}

/// The targets of `term`, mutable, in [`Terminator::targets_mut`]' order, without collecting
/// them.
pub fn targets_mut(term: &mut Terminator) -> impl Iterator<Item = &mut Target> {
    let (cases, rest): (&mut [(u32, Target)], [Option<&mut Target>; 2]) = match term {
        Terminator::Branch { then_, else_, .. } => (&mut [], [Some(then_), Some(else_)]),
        Terminator::Jump(t) => (&mut [], [Some(t), None]),
        Terminator::Switch { cases, default, .. } => (cases, [Some(default), None]),
        Terminator::Unset | Terminator::Return(_) | Terminator::ReturnValue(_) => {
            (&mut [], [None, None])
        }
    };
    cases
        .iter_mut()
        .map(|(_, t)| t)
        .chain(rest.into_iter().flatten())
}

/// Control-flow analysis of one function, valid until its edges change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cfg {
    /// Reachable blocks in reverse postorder (a topological order: the graph is acyclic).
    pub rpo: Vec<Block>,
    /// Immediate dominator of each reachable block except the entry.
    pub idom: Vec<Option<Block>>,
    pub live: Vec<bool>,
    /// Edges entering each block from reachable blocks (a branch with both arms to one block
    /// counts twice).
    pub incoming: Vec<u32>,
    /// Dominator-tree children of every block, in reverse postorder, in one array: those of
    /// `b` are `child_list[child_start[b]..child_start[b + 1]]`.
    child_start: Vec<u32>,
    child_list: Vec<Block>,
    /// The dominator tree in depth-first order, as enter/exit events.
    walk: Vec<Visit>,
    /// Each block's position in `walk` on entry and on exit (`u32::MAX` for unreachable
    /// blocks): `a` dominates `b` when `b`'s interval lies within `a`'s.
    enter: Vec<u32>,
    exit: Vec<u32>,
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
        let n = f.blocks.len();
        let mut live = vec![false; n];
        for b in &rpo {
            live[b.index()] = true;
        }
        // In block order: one sweep through memory.
        let mut incoming = vec![0u32; n];
        for (data, _) in f.blocks.iter().zip(&live).filter(|(_, &l)| l) {
            for s in data.term.successors() {
                if let Some(c) = incoming.get_mut(s.index()) {
                    *c += 1;
                }
            }
        }
        let mut child_start = vec![0u32; n + 1];
        for d in idom.iter().flatten() {
            child_start[d.index() + 1] += 1;
        }
        for i in 1..=n {
            child_start[i] += child_start[i - 1];
        }
        let mut fill = child_start.clone();
        let mut child_list = vec![Function::ENTRY; child_start[n] as usize];
        for &b in &rpo {
            if let Some(d) = idom[b.index()] {
                child_list[fill[d.index()] as usize] = b;
                fill[d.index()] += 1;
            }
        }
        let mut cfg = Cfg {
            rpo,
            idom,
            live,
            incoming,
            child_start,
            child_list,
            walk: Vec::new(),
            enter: vec![u32::MAX; n],
            exit: vec![u32::MAX; n],
        };
        cfg.walk = cfg.compute_walk();
        for (i, v) in cfg.walk.iter().enumerate() {
            match *v {
                Visit::Enter(b) => cfg.enter[b.index()] = i as u32,
                Visit::Exit(b) => cfg.exit[b.index()] = i as u32,
            }
        }
        cfg
    }

    /// The dominator-tree children of `b`, in reverse postorder.
    pub fn children(&self, b: Block) -> &[Block] {
        let (s, e) = (self.child_start[b.index()], self.child_start[b.index() + 1]);
        &self.child_list[s as usize..e as usize]
    }

    /// Whether every block is reachable.
    pub fn all_live(&self) -> bool {
        self.rpo.len() == self.live.len()
    }

    /// The dominator tree in depth-first order, as enter/exit events.
    pub fn dom_walk(&self) -> &[Visit] {
        &self.walk
    }

    /// The walk, computed without recursion.
    fn compute_walk(&self) -> Vec<Visit> {
        let mut out = Vec::with_capacity(self.rpo.len() * 2);
        if self.rpo.is_empty() {
            return out;
        }
        let mut stack: Vec<(Block, u32)> = vec![(Function::ENTRY, 0)];
        out.push(Visit::Enter(Function::ENTRY));
        while let Some((b, i)) = stack.last_mut() {
            let kids = self.children(*b);
            if let Some(&c) = kids.get(*i as usize) {
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

    /// Whether `a` dominates `b` (both reachable; every block dominates itself), in constant
    /// time.
    pub fn dominates(&self, a: Block, b: Block) -> bool {
        let (ea, eb) = (self.enter[a.index()], self.enter[b.index()]);
        ea != u32::MAX && eb != u32::MAX && ea <= eb && self.exit[b.index()] <= self.exit[a.index()]
    }

    /// The same facts after the unreachable blocks are deleted and the others renumbered by
    /// `new_index` (`u32::MAX` for deleted blocks): nothing reachable changed, so only the
    /// numbers do.
    fn renumber(&mut self, new_index: &[u32]) {
        let map = |b: Block| Block(new_index[b.index()]);
        let kept = self.rpo.len();
        for b in &mut self.rpo {
            *b = map(*b);
        }
        for v in &mut self.walk {
            match v {
                Visit::Enter(b) | Visit::Exit(b) => *b = map(*b),
            }
        }
        let mut idom = vec![None; kept];
        let mut incoming = vec![0u32; kept];
        let mut enter = vec![0u32; kept];
        let mut exit = vec![0u32; kept];
        let mut child_start = vec![0u32; kept + 1];
        let mut child_list = Vec::with_capacity(self.child_list.len());
        // Blocks keep their relative order, so children lists are copied in new block order.
        for (old, &new) in new_index.iter().enumerate() {
            if new == u32::MAX {
                continue;
            }
            let new = new as usize;
            idom[new] = self.idom[old].map(map);
            incoming[new] = self.incoming[old];
            enter[new] = self.enter[old];
            exit[new] = self.exit[old];
            child_list.extend(self.children(Block(old as u32)).iter().map(|&c| map(c)));
            child_start[new + 1] = child_list.len() as u32;
        }
        self.idom = idom;
        self.incoming = incoming;
        self.live = vec![true; kept];
        self.child_start = child_start;
        self.child_list = child_list;
        self.enter = enter;
        self.exit = exit;
    }
}

/// The control-flow facts of the function being optimized, computed when first asked for and
/// kept until a pass changes an edge.
#[derive(Debug, Default)]
pub struct Analysis {
    cfg: Option<Cfg>,
}

impl Analysis {
    pub fn new() -> Analysis {
        Analysis::default()
    }

    /// The facts of `f`, which must be the function the kept facts (if any) describe.
    pub fn cfg(&mut self, f: &Function) -> &Cfg {
        self.cfg.get_or_insert_with(|| Cfg::new(f))
    }

    /// Takes the facts out (for a pass that edits `f` while reading them); give them back with
    /// [`Analysis::restore`] if the edges stay the same.
    pub fn take(&mut self, f: &Function) -> Cfg {
        match self.cfg.take() {
            Some(c) => c,
            None => Cfg::new(f),
        }
    }

    pub fn restore(&mut self, cfg: Cfg) {
        self.cfg = Some(cfg);
    }

    /// A pass moved, added or removed an edge (or changed a block's successors in any way).
    pub fn edges_changed(&mut self) {
        self.cfg = None;
    }

    /// Deletes the blocks the entry cannot reach, renumbering the rest (the entry stays
    /// `block0`) and the kept facts with them. Returns how many blocks were removed.
    pub fn remove_unreachable(&mut self, f: &mut Function) -> usize {
        let live = match &self.cfg {
            Some(cfg) if cfg.all_live() => return 0,
            Some(cfg) => cfg.live.clone(),
            // Without kept facts, reachability alone decides, and the facts are computed when
            // next asked for, on what remains: after lookup tables replace a long chain, a
            // dominator tree of the whole function would be built for a few blocks.
            None => {
                let order = rpo(f);
                if order.len() == f.blocks.len() {
                    return 0;
                }
                let mut live = vec![false; f.blocks.len()];
                for b in order {
                    live[b.index()] = true;
                }
                live
            }
        };
        let (removed, new_index) = crate::rewrite::remove_blocks(f, &live);
        if let Some(cfg) = &mut self.cfg {
            cfg.renumber(&new_index);
        }
        removed
    }

    /// Panics unless the kept facts are those of `f` (a pass changed an edge without saying
    /// so): for tests and debug builds.
    pub fn check(&self, f: &Function, pass: &str) {
        if let Some(cfg) = &self.cfg {
            let fresh = Cfg::new(f);
            assert!(
                *cfg == fresh,
                "pass `{pass}` changed the control flow without invalidating the analysis\n{f}"
            );
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

    #[test]
    fn removing_unreachable_blocks_renumbers_the_kept_facts() {
        let mut f = parse_function(
            "block0:\n v0 = load.b [0]\n br eq v0, v0, block2, block3\nblock1:\n jump block3\nblock2:\n jump block4\nblock3:\n br eq v0, v0, block4, block5\nblock4:\n ret 1\nblock5:\n ret 0\n",
        )
        .unwrap();
        let mut a = Analysis::new();
        a.cfg(&f);
        assert_eq!(a.remove_unreachable(&mut f), 1);
        assert_eq!(f.blocks.len(), 5);
        a.check(&f, "test");
        assert_eq!(a.remove_unreachable(&mut f), 0);
    }
}
