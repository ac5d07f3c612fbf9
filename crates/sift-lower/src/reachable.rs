//! Cutting a function down to the blocks reachable from one of them, renumbered in reverse
//! postorder: after lowering (from the expression's entry) and after libpcap's optimizer.

use sift_ir::{Block, Function, Inst, Terminator};

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
        // Mostly reachable (as after lowering): permute in place, following cycles, with the
        // unreachable blocks sent to the end and cut off. A second array of 10^5 blocks
        // would be fresh memory to fault in and fill.
        let mut place: Vec<u32> = Vec::with_capacity(n);
        let mut next_unreachable = order.len() as u32;
        for r in &renumber {
            place.push(r.map_or_else(
                || {
                    next_unreachable += 1;
                    next_unreachable - 1
                },
                |b| b.0,
            ));
        }
        for i in 0..n {
            while place[i] as usize != i {
                let j = place[i] as usize;
                f.blocks.swap(i, j);
                place.swap(i, j);
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

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
