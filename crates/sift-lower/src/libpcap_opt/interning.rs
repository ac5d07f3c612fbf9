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

use std::collections::hash_map::Entry;
use std::hash::Hasher;

use sift_ir::{Block, Function, Inst, Target, Terminator, Value};

use super::fast_hash::{WordHasher, WordMap};

/// Operands computed in the block are renamed by their position, above every real value.
const LOCAL: u32 = 1 << 31;

/// Sends every edge into a block to one representative of the blocks equal to it. Returns
/// whether an edge moved.
///
/// libpcap repeats its pass until no edge moves, since a merge can make the blocks above it
/// equal; visiting the blocks successors first (the graph is acyclic) reaches that fixed
/// point in one pass: each block is compared with its edges already moved.
///
/// Long chains have 10^5 blocks, whose instructions lie all over the function's values, so
/// blocks are first told apart by how they end (terminator and number of instructions, read
/// without the instructions): a block that ends unlike any before it is not read further, and
/// one that ends like an earlier block is compared with that block in place. Only where two
/// different codes end alike are the instructions hashed into a table (`CodeTable`), which
/// keeps a long run of such blocks from being compared with each other one by one. In long
/// chains equal blocks come in twos and threes (the copies of a test for each protocol), and
/// nearly every block is either alone or equal to the first that ends like it.
///
/// `rpo` is `f`'s reverse postorder; `used_elsewhere` is [`used_outside_own_block`] for
/// `f`: a block whose values are used elsewhere stays itself (its uses need it).
///
/// [`used_outside_own_block`]: super::threading::used_outside_own_block
pub(super) fn merge_equal_blocks(f: &mut Function, rpo: &[Block], used_elsewhere: &[bool]) -> bool {
    // The first block of each ending, until one that ends alike has other code (`None`: the
    // blocks of that ending are in `code`).
    let mut first_ending_alike: WordMap<u64, Option<Block>> = WordMap::default();
    let mut code = CodeTable::new(f.blocks.len());
    let mut representative: Vec<Option<Block>> = vec![None; f.blocks.len()];
    let mut moved = false;
    for &b in rpo.iter().rev() {
        let mut redirect = |t: &mut Block| {
            if let Some(r) = representative[t.index()] {
                *t = r;
                moved = true;
            }
        };
        match &mut f.block_mut(b).term {
            Terminator::Branch { then_, else_, .. } => {
                redirect(&mut then_.block);
                redirect(&mut else_.block);
            }
            Terminator::Jump(t) => redirect(&mut t.block),
            term => term
                .targets_mut()
                .into_iter()
                .for_each(|t| redirect(&mut t.block)),
        }
        if used_elsewhere[b.index()] || !comparable(f, b) {
            continue;
        }
        let ending = hash_ending(f, b);
        match first_ending_alike.entry(ending) {
            Entry::Vacant(alone) => {
                alone.insert(Some(b));
            }
            Entry::Occupied(mut alike) => match *alike.get() {
                // Every block before `b` that ends alike is `first` or merged into it.
                Some(first) if same_code(f, first, b) => representative[b.index()] = Some(first),
                Some(first) => {
                    // Two codes end alike: from now on they are told apart by their hashes.
                    // `first` is kept under this same hash of its ending.
                    alike.insert(None);
                    let equal = code.find_or_insert(f, first, ending);
                    debug_assert_eq!(equal, None, "no block in the table ends alike");
                    representative[b.index()] = code.find_or_insert(f, b, ending);
                }
                None => representative[b.index()] = code.find_or_insert(f, b, ending),
            },
        }
    }
    moved
}

/// Blocks by a hash of their code: the table maps the hash to the first block with it, and
/// blocks whose different code shares a hash are linked from there (`next_same_hash`),
/// compared in place (no block's code is copied into a key).
struct CodeTable {
    first_of: WordMap<u64, Block>,
    next_same_hash: Vec<Option<Block>>,
}

impl CodeTable {
    fn new(blocks: usize) -> CodeTable {
        CodeTable {
            first_of: WordMap::default(),
            next_same_hash: vec![None; blocks],
        }
    }

    /// The block in the table with `b`'s code, or `None` after putting `b` in. `ending` is
    /// [`hash_ending`] of `b`.
    fn find_or_insert(&mut self, f: &Function, b: Block, ending: u64) -> Option<Block> {
        let hash = hash_code(f, b, ending);
        let Some(&head) = self.first_of.get(&hash) else {
            self.first_of.insert(hash, b);
            return None;
        };
        let mut candidate = head;
        loop {
            if same_code(f, candidate, b) {
                return Some(candidate);
            }
            match self.next_same_hash[candidate.index()] {
                Some(next) => candidate = next,
                None => {
                    self.next_same_hash[candidate.index()] = Some(b);
                    return None;
                }
            }
        }
    }
}

/// Whether libpcap's code could have an equal of `b` (not parameters, not switches).
fn comparable(f: &Function, b: Block) -> bool {
    let data = f.block(b);
    data.params.is_empty() && !matches!(data.term, Terminator::Switch { .. })
}

/// `v` as `b`'s code names it: by position when `b` computes it. Blocks hold a few
/// instructions, so a scan of them beats a table over every value of the function (10^6
/// on long chains, read at random).
fn rename(f: &Function, b: Block, v: Value) -> Value {
    match f.block(b).insts.iter().position(|&x| x == v) {
        Some(i) => Value(LOCAL | i as u32),
        None => v,
    }
}

fn renamed_term(f: &Function, b: Block) -> Terminator {
    let mut term = f.block(b).term.clone();
    term.map_operands(|x| rename(f, b, x));
    term
}

/// A hash of how `b` ends, equal for blocks of equal code: its number of instructions and
/// its terminator, read without the instructions themselves.
fn hash_ending(f: &Function, b: Block) -> u64 {
    let mut h = WordHasher::default();
    let data = f.block(b);
    let mut word = |w: u32| h.write_u32(w);
    word(data.insts.len() as u32);
    match &data.term {
        Terminator::Branch {
            lhs,
            rhs,
            then_,
            else_,
            ..
        } => {
            word(rename(f, b, *lhs).0);
            word(rename(f, b, *rhs).0);
            word(then_.block.0);
            word(else_.block.0);
        }
        Terminator::Jump(t) => word(t.block.0),
        Terminator::Return(n) => word(*n),
        _ => {}
    }
    h.finish()
}

/// A hash of `b`'s code, equal for blocks of equal code, from its `ending` ([`hash_ending`])
/// and its instructions, read in place rather than hashing renamed copies.
fn hash_code(f: &Function, b: Block, ending: u64) -> u64 {
    let mut h = WordHasher::default();
    h.write_u64(ending);
    let mut word = |w: u32| h.write_u32(w);
    for &v in &f.block(b).insts {
        match f.inst(v) {
            Inst::Const(k) => word(*k),
            Inst::Load { index, offset, .. } => {
                word(index.map_or(u32::MAX, |x| rename(f, b, x).0));
                word(*offset);
            }
            inst => inst.for_each_operand(|x| word(rename(f, b, x).0)),
        }
    }
    h.finish()
}

/// Whether `a` and `b` are the same code: instructions equal one for one with the
/// operands each computes renamed by position, and the same terminator.
fn same_code(f: &Function, a: Block, b: Block) -> bool {
    let (x, y) = (&f.block(a).insts, &f.block(b).insts);
    x.len() == y.len()
        && x.iter().zip(y).all(|(&u, &v)| {
            let same = |p: Value, q: Value| rename(f, a, p) == rename(f, b, q);
            f.inst(u).same_up_to(f.inst(v), same)
        })
        && same_term(f, a, b)
}

/// Whether `a` and `b` end alike, their own values renamed: branches and jumps compared in
/// place (a renamed copy lists its targets, an allocation per block).
fn same_term(f: &Function, a: Block, b: Block) -> bool {
    let same = |x: Value, y: Value| rename(f, a, x) == rename(f, b, y);
    let same_target = |s: &Target, t: &Target| {
        s.block == t.block
            && s.args.len() == t.args.len()
            && s.args.iter().zip(&t.args).all(|(&x, &y)| same(x, y))
    };
    match (&f.block(a).term, &f.block(b).term) {
        (
            Terminator::Branch {
                op,
                lhs,
                rhs,
                then_,
                else_,
            },
            Terminator::Branch {
                op: op2,
                lhs: lhs2,
                rhs: rhs2,
                then_: then2,
                else_: else2,
            },
        ) => {
            op == op2
                && same(*lhs, *lhs2)
                && same(*rhs, *rhs2)
                && same_target(then_, then2)
                && same_target(else_, else2)
        }
        (Terminator::Jump(s), Terminator::Jump(t)) => same_target(s, t),
        _ => renamed_term(f, a) == renamed_term(f, b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::libpcap_opt::threading::used_outside_own_block;
    use sift_ir::parse_function;

    /// The function `text` after the merge, and whether an edge moved.
    fn merged(text: &str) -> (Function, bool) {
        let mut f = parse_function(text).unwrap();
        let rpo = f.reverse_postorder();
        let used = used_outside_own_block(&f);
        let moved = merge_equal_blocks(&mut f, &rpo, &used);
        (f, moved)
    }

    /// Block `b`'s two successors.
    fn successors(f: &Function, b: u32) -> (Block, Block) {
        match &f.block(Block(b)).term {
            Terminator::Branch { then_, else_, .. } => (then_.block, else_.block),
            _ => panic!("{f}"),
        }
    }

    #[test]
    fn equal_blocks_merge_and_then_the_blocks_above_them() {
        let (f, moved) = merged(
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
        );
        assert!(moved);
        let (then_, else_) = successors(&f, 0);
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
            let (f, moved) = merged(&text(k, succ));
            assert!(!moved, "{f}");
        }
    }

    /// Three blocks end alike; the first differs in a constant, the other two are equal.
    #[test]
    fn blocks_ending_alike_merge_only_when_their_code_is_equal() {
        let (f, moved) = merged(
            "\
block0:
    v0 = load.w [19]
    v1 = const 6
    br gt v0, v1, block1, block2
block1:
    v2 = load.h [6]
    v3 = const 0x1ffe
    br set v2, v3, block5, block6
block2:
    v4 = load.w [23]
    v5 = const 7
    br gt v4, v5, block3, block4
block3:
    v6 = load.h [6]
    v7 = const 0x1fff
    br set v6, v7, block5, block6
block4:
    v8 = load.h [6]
    v9 = const 0x1fff
    br set v8, v9, block5, block6
block5:
    ret 0
block6:
    ret 1
",
        );
        assert!(moved);
        let (then_, else_) = successors(&f, 2);
        assert_eq!(then_, else_, "{f}");
        let (then_, else_) = successors(&f, 0);
        assert_ne!(then_, else_, "{f}");
    }
}
