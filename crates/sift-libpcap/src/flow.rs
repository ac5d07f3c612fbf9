//! The per-pass analyses libpcap recomputes before optimizing: levels, predecessor lists and
//! use/def summaries (the dominators are in `dominators` and `edge_dominators`).
//!
//! They are computed once at the start of a pass and deliberately *not* kept up to date while
//! the pass rewrites statements and moves edges: libpcap's later steps in the same pass read
//! the stale results, and that staleness is part of what the optimizer does to a program.

use crate::atoms::{bit, defines, uses, AtomSet, Use, A, X};
use crate::graph::{BlockId, Graph};

/// Levels: `levels[0]` the leaves, the root on the last level. Each level lists its blocks in
/// libpcap's order (its linked lists are built by prepending in depth-first postorder).
pub fn find_levels(g: &mut Graph) -> Vec<Vec<BlockId>> {
    let mut levels: Vec<Vec<BlockId>> = Vec::new();
    for b in g.postorder(true) {
        let block = &g.blocks[b];
        let level = match (block.jt, block.jf) {
            (Some(t), Some(f)) => g.blocks[t].level.max(g.blocks[f].level) + 1,
            _ => 0,
        };
        g.blocks[b].level = level;
        if levels.len() <= level {
            levels.resize_with(level + 1, Vec::new);
        }
        levels[level].push(b);
    }
    for level in &mut levels {
        level.reverse();
    }
    levels
}

/// Predecessor lists from the current edges (libpcap's `find_inedges`): walking the levels
/// from the root down, each edge is prepended to its target's list.
pub fn find_preds(g: &mut Graph, levels: &[Vec<BlockId>]) {
    for b in &mut g.blocks {
        b.preds.clear();
    }
    for level in levels.iter().skip(1).rev() {
        for &b in level {
            if let (Some(t), Some(f)) = (g.blocks[b].jt, g.blocks[b].jf) {
                g.blocks[t].preds.push(b);
                g.blocks[f].preds.push(b);
            }
        }
    }
    // Built by appending; libpcap's lists are built by prepending.
    for b in &mut g.blocks {
        b.preds.reverse();
    }
}

/// The id libpcap gives an edge: the true edge of block `b` is `b`, its false edge `n + b`.
pub fn edge_id(n_blocks: usize, pred: BlockId, taken: bool) -> usize {
    if taken {
        pred
    } else {
        n_blocks + pred
    }
}

/// Use/def summaries of every reachable block (libpcap's `find_ud`).
pub fn find_ud(g: &mut Graph, levels: &[Vec<BlockId>]) {
    for level in levels.iter().rev() {
        for &b in level {
            local_ud(g, b);
            g.blocks[b].out_use = 0;
        }
    }
    for level in levels.iter().skip(1) {
        for &b in level {
            let (Some(t), Some(f)) = (g.blocks[b].jt, g.blocks[b].jf) else {
                continue;
            };
            let below = g.blocks[t].in_use | g.blocks[f].in_use;
            let block = &mut g.blocks[b];
            block.out_use |= below;
            block.in_use |= block.out_use & !block.kill;
        }
    }
}

/// Reads, writes and kills of one block's statements and branch. A `ret` is not looked at
/// (libpcap only counts the branch of a conditional jump).
fn local_ud(g: &mut Graph, b: BlockId) {
    let block = &mut g.blocks[b];
    let (mut def, mut used, mut killed): (AtomSet, AtomSet, AtomSet) = (0, 0, 0);
    let note_use = |u: Use, def: AtomSet, used: &mut AtomSet| match u {
        Use::Nothing => {}
        Use::One(atom) => {
            if def & bit(atom) == 0 {
                *used |= bit(atom);
            }
        }
        Use::Both => {
            for atom in [X, A] {
                if def & bit(atom) == 0 {
                    *used |= bit(atom);
                }
            }
        }
    };
    for s in &block.stmts {
        let Some(c) = s.code else { continue };
        note_use(uses(c, s.k), def, &mut used);
        if let Some(atom) = defines(c, s.k) {
            if used & bit(atom) == 0 {
                killed |= bit(atom);
            }
            def |= bit(atom);
        }
    }
    if !block.is_return() {
        note_use(uses(block.code, block.k), def, &mut used);
    }
    block.def = def;
    block.kill = killed;
    block.in_use = used;
}
