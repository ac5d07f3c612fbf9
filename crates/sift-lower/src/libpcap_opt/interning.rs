//! libpcap's `intern_blocks`: after both loops, blocks that are the same code with the same
//! successors become one block.
//!
//! It matters to the meaning through `opt_root`, which runs next: a block whose two edges now
//! reach one (merged) block is skipped when it follows the entry, and its loads with it. In
//! `ip[19:4] > 6 or ip[6:2] & 0x1fff = 0 and ip[6:2] & 0x1fff = 0` both edges of the first test
//! reach a copy of the fragment test; merged, the first test decides nothing and a packet too
//! short for `ip[19:4]` is judged by the fragment test alone.
//!
//! libpcap compares statement texts. Here two blocks are the same code when their instructions
//! are equal one for one, an operand computed in the block matching the operand at the same
//! place in the other, an operand from outside the block being the same value.

use std::collections::HashMap;

use sift_ir::{Block, Function, Inst, Terminator, Value};

use super::threading::used_outside_own_block;

/// Operands computed in the block are renamed by their position, above every real value.
const LOCAL: u32 = 1 << 31;

/// Sends every edge into a block to one representative of the blocks equal to it. Returns
/// whether an edge moved.
///
/// libpcap repeats its pass until no edge moves, since a merge can make the blocks above it
/// equal; visiting the blocks successors first (the graph is acyclic) reaches that fixed
/// point in one pass: each block is compared with its edges already moved.
pub(super) fn merge_equal_blocks(f: &mut Function) -> bool {
    // A block whose values are used elsewhere stays itself (its uses need it).
    let used_elsewhere = used_outside_own_block(f);
    let mut first_of: HashMap<(Vec<Inst>, Terminator), Block> = HashMap::new();
    let mut representative: Vec<Option<Block>> = vec![None; f.blocks.len()];
    let mut moved = false;
    for b in f.reverse_postorder().into_iter().rev() {
        for t in f.block_mut(b).term.targets_mut() {
            if let Some(r) = representative[t.block.index()] {
                t.block = r;
                moved = true;
            }
        }
        if used_elsewhere[b.index()] {
            continue;
        }
        let Some(code) = code_of(f, b) else { continue };
        let first = *first_of.entry(code).or_insert(b);
        if first != b {
            representative[b.index()] = Some(first);
        }
    }
    moved
}

/// `b`'s instructions and terminator with the operands computed in `b` renamed by position;
/// `None` for blocks libpcap's code has no equal of (parameters, switches).
fn code_of(f: &Function, b: Block) -> Option<(Vec<Inst>, Terminator)> {
    let data = f.block(b);
    if !data.params.is_empty() || matches!(data.term, Terminator::Switch { .. }) {
        return None;
    }
    let position: HashMap<Value, u32> = data
        .insts
        .iter()
        .enumerate()
        .map(|(i, &v)| (v, i as u32))
        .collect();
    let rename = |v: Value| position.get(&v).map_or(v, |&i| Value(LOCAL | i));
    let insts = data
        .insts
        .iter()
        .map(|&v| {
            let mut inst = f.inst(v).clone();
            inst.map_operands(rename);
            inst
        })
        .collect();
    let mut term = data.term.clone();
    term.map_operands(rename);
    Some((insts, term))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_ir::parse_function;

    #[test]
    fn equal_blocks_merge_and_then_the_blocks_above_them() {
        let mut f = parse_function(
            "\
block0:
    v0 = load.w [19]
    v1 = const 6
    br gt v0, v1, block1, block2
block1:
    v2 = load.h [6]
    v3 = const 0x1fff
    br set v2, v3, block3, block4
block2:
    v4 = load.h [6]
    v5 = const 0x1fff
    br set v4, v5, block3, block4
block3:
    ret 0
block4:
    ret 1
",
        )
        .unwrap();
        assert!(merge_equal_blocks(&mut f));
        let Terminator::Branch { then_, else_, .. } = &f.block(Block(0)).term else {
            panic!("{f}")
        };
        assert_eq!(then_, else_, "{f}");
    }

    #[test]
    fn different_constants_or_successors_stay_apart() {
        let text = |k: u32, succ: u32| {
            format!(
                "\
block0:
    v0 = load.w [19]
    v1 = const 6
    br gt v0, v1, block1, block2
block1:
    v2 = load.h [6]
    v3 = const 0x1fff
    br set v2, v3, block3, block4
block2:
    v4 = load.h [6]
    v5 = const {k}
    br set v4, v5, block3, block{succ}
block3:
    ret 0
block4:
    ret 1
block5:
    ret 2
"
            )
        };
        for (k, succ) in [(0x1ffe, 4), (0x1fff, 5)] {
            let mut f = parse_function(&text(k, succ)).unwrap();
            assert!(!merge_equal_blocks(&mut f), "{f}");
        }
    }
}
