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

use sift_ir::verify::dominators;
use sift_ir::{Block, Function, Target, Terminator};

use super::numbering::{Numbering, Vn};

/// Which chain a pullup walks.
#[derive(Clone, Copy)]
enum Chain {
    /// Down the false edges; every test shares the true successor.
    Or,
    /// Down the true edges; every test shares the false successor.
    And,
}

/// One sweep of pullups over the whole function; returns whether anything moved.
pub(super) fn pullups(f: &mut Function, numbers: &Numbering) -> bool {
    if f.blocks.iter().any(|b| !b.params.is_empty()) {
        return false;
    }
    let (idom, _) = dominators(f);
    let levels = levels(f);
    let preds = predecessors(f, &levels);
    let sweep = Sweep {
        numbers,
        dom: DomIntervals::new(&idom),
        preds: &preds,
    };
    let mut changed = false;
    for level in levels.iter().skip(1) {
        for &b in level {
            changed |= sweep.pullup(f, b, Chain::Or);
            changed |= sweep.pullup(f, b, Chain::And);
        }
    }
    changed
}

/// Blocks by level: returns are level 0, a branch is one more than its higher successor. Within
/// a level, blocks come in the order libpcap lists them (last finished first in a depth-first
/// walk that visits the true successor before the false one).
fn levels(f: &Function) -> Vec<Vec<Block>> {
    let n = f.blocks.len();
    let mut level = vec![usize::MAX; n];
    let mut finished: Vec<Block> = Vec::with_capacity(n);
    let mut stack = vec![(Function::ENTRY, 0usize)];
    let mut seen = vec![false; n];
    seen[0] = true;
    while let Some((b, i)) = stack.pop() {
        let succs: Vec<Block> = f.block(b).term.targets().iter().map(|t| t.block).collect();
        if let Some(&s) = succs.get(i) {
            stack.push((b, i + 1));
            if !seen[s.index()] {
                seen[s.index()] = true;
                stack.push((s, 0));
            }
            continue;
        }
        level[b.index()] = succs
            .iter()
            .map(|s| level[s.index()] + 1)
            .max()
            .unwrap_or(0);
        finished.push(b);
    }
    let top = finished.iter().map(|b| level[b.index()]).max().unwrap_or(0);
    let mut out = vec![Vec::new(); top + 1];
    for &b in finished.iter().rev() {
        out[level[b.index()]].push(b);
    }
    out
}

/// Predecessors of each block, as libpcap's `find_inedges` lists them.
fn predecessors(f: &Function, levels: &[Vec<Block>]) -> Vec<Vec<Block>> {
    let mut preds = vec![Vec::new(); f.blocks.len()];
    for level in levels.iter().skip(1).rev() {
        for &b in level {
            for t in f.block(b).term.targets() {
                preds[t.block.index()].push(b);
            }
        }
    }
    // libpcap prepends each edge to its successor's list.
    for list in &mut preds {
        list.reverse();
    }
    preds
}

/// The dominator tree numbered in depth-first order, so that "a dominates b" is an interval
/// test (`a`'s subtree spans `b`'s entry time) instead of a walk up the tree: long `or`
/// chains have dominator trees as deep as the chain.
struct DomIntervals {
    enter: Vec<u32>,
    exit: Vec<u32>,
}

impl DomIntervals {
    fn new(idom: &[Option<Block>]) -> DomIntervals {
        let n = idom.len();
        let mut children = vec![Vec::new(); n];
        let mut roots = Vec::new();
        for (b, d) in idom.iter().enumerate() {
            match d {
                Some(d) if d.index() != b => children[d.index()].push(b),
                _ => roots.push(b),
            }
        }
        let (mut enter, mut exit) = (vec![u32::MAX; n], vec![0; n]);
        let mut clock = 0u32;
        let mut stack: Vec<(usize, usize)> = roots.into_iter().rev().map(|r| (r, 0)).collect();
        while let Some((b, i)) = stack.pop() {
            if i == 0 {
                enter[b] = clock;
                clock += 1;
            }
            if let Some(&c) = children[b].get(i) {
                stack.push((b, i + 1));
                stack.push((c, 0));
            } else {
                exit[b] = clock;
            }
        }
        DomIntervals { enter, exit }
    }

    fn dominates(&self, a: Block, b: Block) -> bool {
        let (a, b) = (a.index(), b.index());
        match (self.enter.get(a), self.enter.get(b)) {
            (Some(&ea), Some(&eb)) if ea != u32::MAX && eb != u32::MAX => {
                ea <= eb && eb < self.exit[a]
            }
            _ => a == b,
        }
    }
}

struct Sweep<'a> {
    numbers: &'a Numbering,
    dom: DomIntervals,
    preds: &'a [Vec<Block>],
}

impl Sweep<'_> {
    /// The value a block's branch compares (what libpcap's A register holds on exit).
    fn compared(&self, f: &Function, b: Block) -> Option<Vn> {
        match f.block(b).term {
            Terminator::Branch { lhs, .. } => Some(self.numbers.vn(lhs)),
            _ => None,
        }
    }

    fn dominates(&self, a: Block, b: Block) -> bool {
        self.dom.dominates(a, b)
    }

    /// The successor a chain shares (`Or`: the true one) and the one it continues along.
    fn edges(f: &Function, b: Block, chain: Chain) -> Option<(Block, Block)> {
        match &f.block(b).term {
            Terminator::Branch { then_, else_, .. } => Some(match chain {
                Chain::Or => (then_.block, else_.block),
                Chain::And => (else_.block, then_.block),
            }),
            _ => None,
        }
    }

    fn set_next(f: &mut Function, b: Block, chain: Chain, next: Block) {
        if let Terminator::Branch { then_, else_, .. } = &mut f.block_mut(b).term {
            *match chain {
                Chain::Or => else_,
                Chain::And => then_,
            } = Target::from(next);
        }
    }

    /// One `or_pullup` / `and_pullup` at `b`.
    fn pullup(&self, f: &mut Function, b: Block, chain: Chain) -> bool {
        let preds = &self.preds[b.index()];
        let Some(&first) = preds.first() else {
            return false;
        };
        let value = self.compared(f, first);
        if value.is_none() || preds.iter().any(|&p| self.compared(f, p) != value) {
            return false;
        }
        let Some((shared, _)) = Self::edges(f, b, chain) else {
            return false;
        };
        // A block of the chain that belongs to it: shares the successor and is dominated by b.
        let in_chain = |f: &Function, x: Block| -> Option<Block> {
            let (s, next) = Self::edges(f, x, chain)?;
            (s == shared && self.dominates(b, x)).then_some(next)
        };
        // Walk down while the tests compare the chain's value; `diff` is the first that does
        // not, `diff_owner` the block whose chain edge leads to it (None: b's predecessors).
        let (mut diff, mut diff_owner) = (b, None);
        loop {
            let Some(next) = in_chain(f, diff) else {
                return false;
            };
            if self.compared(f, diff) != value {
                break;
            }
            diff_owner = Some(diff);
            diff = next;
        }
        // Further down, the first test of the chain's value again: that one is pulled up.
        let mut same_owner = diff;
        let pull = loop {
            let Some((_, same)) = Self::edges(f, same_owner, chain) else {
                return false;
            };
            if in_chain(f, same).is_none() {
                return false;
            }
            if self.compared(f, same) == value {
                break same;
            }
            same_owner = same;
        };
        let (_, after_pull) = Self::edges(f, pull, chain).expect("pull is a branch");
        Self::set_next(f, same_owner, chain, after_pull);
        Self::set_next(f, pull, chain, diff);
        match diff_owner {
            Some(owner) => Self::set_next(f, owner, chain, pull),
            None => {
                for &p in preds {
                    if let Terminator::Branch { then_, else_, .. } = &mut f.block_mut(p).term {
                        if then_.block == b {
                            *then_ = Target::from(pull);
                        } else {
                            *else_ = Target::from(pull);
                        }
                    }
                }
            }
        }
        true
    }
}
