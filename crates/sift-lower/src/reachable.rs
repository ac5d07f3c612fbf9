//! Cutting a function down to the blocks reachable from one of them, renumbered in reverse
//! postorder: after lowering (from the expression's entry) and after libpcap's optimizer.

use sift_ir::{Block, BlockData, Function, Inst, Terminator};

/// `f` holding only the blocks reachable from `entry`, in reverse postorder (so the entry
/// becomes block 0 and every edge goes forward), and where each block of `f` went. The blocks
/// move rather than being copied: long chains have 10^5 of them.
pub(crate) fn reachable_from(f: Function, entry: Block) -> (Function, Vec<Option<Block>>) {
    let order = f.reverse_postorder_from(entry);
    cut_to(f, order)
}

/// [`reachable_from`] for a function as the code generator left it: its blocks lie in the
/// order they were created, far from the walk's in long chains of `port` (inner tests are
/// created before the tests that lead to them), and nearly all are reachable.
pub(crate) fn generated_reachable_from(
    f: Function,
    entry: Block,
) -> (Function, Vec<Option<Block>>) {
    let order = f.reverse_postorder_from_scattered(entry);
    cut_to(f, order)
}

/// `f` holding only the blocks of `order`, its reverse postorder from some block, in that order.
fn cut_to(mut f: Function, order: Vec<Block>) -> (Function, Vec<Option<Block>>) {
    let n = f.blocks.len();
    let mut renumber = vec![None; n];
    for (new, old) in order.iter().enumerate() {
        renumber[old.index()] = Some(Block(new as u32));
    }
    if 2 * order.len() >= n {
        // Mostly reachable (as after lowering): permute in place, with the unreachable blocks
        // sent to the end and cut off. A second array of 10^5 blocks would be fresh memory to
        // fault in and fill.
        move_to_front(&mut f.blocks, &order);
        f.blocks.truncate(order.len());
        f.blocks.shrink_to_fit();
    } else {
        // Mostly unreachable (as after the optimizer): moving the few into a new array
        // writes less than shuffling them all.
        let mut kept = Vec::with_capacity(order.len());
        for old in &order {
            kept.push(std::mem::take(&mut f.blocks[old.index()]));
        }
        f.blocks = kept;
    }
    for data in &mut f.blocks {
        match &mut data.term {
            Terminator::Branch { then_, else_, .. } => {
                for t in [then_, else_] {
                    t.block = renumber[t.block.index()]
                        .expect("successors of reachable blocks are reachable");
                }
            }
            term => {
                for t in term.targets_mut() {
                    t.block = renumber[t.block.index()]
                        .expect("successors of reachable blocks are reachable");
                }
            }
        }
    }
    for inst in &mut f.values {
        if let Inst::Param(b) = inst {
            if let Some(n) = renumber.get(b.index()).copied().flatten() {
                *b = n;
            }
        }
    }
    (f, renumber)
}

/// Moves the blocks of `order` (distinct) to the front of `blocks`, in that order, in place;
/// the others end up after them in no particular order. Returns where each block went.
///
/// Each block of `order` is swapped into its place in turn and the block it displaces goes
/// where that one was: the places come from `order` and a table of who is where, so the
/// swaps do not wait on each other's cache misses, as following the permutation's cycles
/// does, and a block already in place (most, in a round after the first) is not touched.
pub(crate) fn move_to_front(blocks: &mut [BlockData], order: &[Block]) -> Vec<u32> {
    let n = blocks.len() as u32;
    let mut new_of: Vec<u32> = (0..n).collect();
    let mut at = new_of.clone();
    for (k, b) in order.iter().enumerate() {
        let j = new_of[b.index()] as usize;
        if j != k {
            blocks.swap(k, j);
            let displaced = at[k];
            at.swap(k, j);
            new_of[displaced as usize] = j as u32;
            new_of[b.index()] = k as u32;
        }
    }
    new_of
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The blocks listed come first, in their order, and every block is where the returned
    /// table says, for orders that cover all blocks, some of them, or none.
    #[test]
    fn move_to_front_puts_the_order_first_and_says_where_each_block_went() {
        let mut rng = sift_testgen::Rng::new(0x9e37_79b9_7f4a_7c15);
        let mut next = move |bound: usize| rng.index(bound);
        for n in [0, 1, 2, 7, 50] {
            for _ in 0..20 {
                let mut pool: Vec<u32> = (0..n).collect();
                for i in (1..pool.len()).rev() {
                    pool.swap(i, next(i + 1));
                }
                pool.truncate(next(n as usize + 1));
                let order: Vec<Block> = pool.iter().map(|&b| Block(b)).collect();
                let mut blocks: Vec<BlockData> = (0..n)
                    .map(|i| BlockData {
                        term: Terminator::Return(i),
                        ..BlockData::default()
                    })
                    .collect();
                let new_of = move_to_front(&mut blocks, &order);
                for (k, b) in order.iter().enumerate() {
                    assert_eq!(blocks[k].term, Terminator::Return(b.0));
                }
                for old in 0..n {
                    assert_eq!(
                        blocks[new_of[old as usize] as usize].term,
                        Terminator::Return(old)
                    );
                }
            }
        }
    }

    /// Walking from a block gives the order walking from block 0 gives once that block is
    /// swapped there.
    #[test]
    fn order_from_any_entry_is_the_order_after_swapping_it_first() {
        let expr = sift_syntax::parse("port 1 or host 10.0.0.1 and not tcp[13] & 2 = 0").unwrap();
        let opts = crate::Options {
            optimize: false,
            ..crate::Options::new(1, 262_144)
        };
        let f = crate::lower(expr.as_ref(), &opts).unwrap();
        for entry in (0..f.blocks.len()).map(|i| Block(i as u32)) {
            let mut swapped = f.clone();
            swapped.blocks.swap(0, entry.index());
            let swap = |b: Block| match b {
                b if b == entry => Block(0),
                Block(0) => entry,
                b => b,
            };
            for data in &mut swapped.blocks {
                for t in data.term.targets_mut() {
                    t.block = swap(t.block);
                }
            }
            let expected: Vec<Block> = swapped.reverse_postorder().into_iter().map(swap).collect();
            assert_eq!(f.reverse_postorder_from(entry), expected, "from {entry}");
        }
    }
}
