//! Block renumbering between rounds: the layout of the blocks in memory, not the graph.

use sift_ir::{Block, Function, Inst};

use super::edges::{edge_count, edge_mut};

/// Renumbers the blocks of `f` so that the reachable ones come first, in reverse postorder,
/// and the others after them in their old order; nothing is dropped. Every rule here reads
/// the graph through its edges, never through block numbers, so only the memory layout
/// changes: the walks of later rounds, which follow the reverse postorder closely, read the
/// blocks in order instead of all over a function of 10^5 blocks. Returns the new number of
/// each old block, and how many blocks are reachable (they are numbered from 0 on).
///
/// `scattered`: the walk will read the blocks far from their order in memory (after the first
/// round moved edges all over the graph as lowering laid it out).
pub(super) fn in_reverse_postorder(f: &mut Function, scattered: bool) -> (Vec<u32>, usize) {
    let n = f.blocks.len();
    let mut new_of = vec![u32::MAX; n];
    let order = if scattered {
        f.reverse_postorder_from_scattered(Function::ENTRY)
    } else {
        f.reverse_postorder()
    };
    for (i, b) in order.iter().enumerate() {
        new_of[b.index()] = i as u32;
    }
    let unreachable = new_of.iter_mut().filter(|new| **new == u32::MAX);
    for (next, new) in (order.len() as u32..).zip(unreachable) {
        *new = next;
    }
    // Permute in place, following cycles (a second array of 10^5 blocks would raise the
    // peak memory by a fifth on long chains).
    let mut place = new_of.clone();
    for i in 0..n {
        while place[i] as usize != i {
            let j = place[i] as usize;
            f.blocks.swap(i, j);
            place.swap(i, j);
        }
    }
    for data in &mut f.blocks {
        for i in 0..edge_count(&data.term) {
            let t = edge_mut(&mut data.term, i).expect("edge exists");
            t.block = Block(new_of[t.block.index()]);
        }
    }
    for inst in &mut f.values {
        if let Inst::Param(b) = inst {
            *b = Block(new_of[b.index()]);
        }
    }
    (new_of, order.len())
}

/// `items`, indexed by block, after block `b` became block `new_of[b]`.
pub(super) fn moved<T: Copy>(items: &[T], new_of: &[u32]) -> Vec<T> {
    let mut out = items.to_vec();
    for (old, &new) in new_of.iter().enumerate() {
        out[new as usize] = items[old];
    }
    out
}
