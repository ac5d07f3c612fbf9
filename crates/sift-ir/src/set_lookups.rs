//! Set lookups as comparisons, for back ends without the coprocessor (classic BPF, eBPF).
//!
//! An [`Inst::Member`] call becomes a binary search over its set's ranges, written as
//! branches: each level compares the key with the middle range's bounds, so a set of `m`
//! ranges costs at most about `2 log2(m)` comparisons per packet (four times that for a
//! 128-bit key, compared word by word, most significant first). The single values of a
//! one-word set are left to a `switch`, which the back ends lay out as any lookup table. The
//! call never rejects and neither do comparisons, so the function means what it meant; only
//! its size grows, by a few instructions per range.

use std::borrow::Cow;

use crate::function::{Block, CmpOp, Function, Inst, Target, Terminator, Value};
use crate::thin_vec;

/// `f` with every set lookup written as comparisons, or `f` itself when it has none.
pub fn without_set_lookups(f: &Function) -> Cow<'_, Function> {
    if !has_lookup(f) {
        return Cow::Borrowed(f);
    }
    let mut f = f.clone();
    expand(&mut f);
    Cow::Owned(f)
}

/// Whether a block of `f` holds a set lookup.
fn has_lookup(f: &Function) -> bool {
    f.blocks
        .iter()
        .flat_map(|b| &b.insts)
        .any(|&v| matches!(f.inst(v), Inst::Member { .. }))
}

/// Replaces every [`Inst::Member`] in `f` by comparisons (see the module doc).
pub fn expand(f: &mut Function) {
    // Expanding one lookup moves the uses of the others but neither adds nor removes any, so
    // the counts taken now hold throughout.
    let uses = f.use_counts();
    // Blocks split off below are appended, and scanned in their turn.
    let mut b = 0;
    while b < f.blocks.len() {
        let block = Block(b as u32);
        let found = f
            .block(block)
            .insts
            .iter()
            .position(|&v| matches!(f.inst(v), Inst::Member { .. }));
        match found {
            // Again: a lookup the block's branch tested leaves the instructions after it in
            // the block, and they may hold another.
            Some(at) => expand_one(f, block, at, &uses),
            None => b += 1,
        }
    }
}

/// Expands the lookup at position `at` of `block`: the block ends in the search, whose leaves
/// go where the block's branch on the lookup went, or else pass 1 or 0 to the rest of the
/// block, split off. `uses` counts each value's uses.
fn expand_one(f: &mut Function, block: Block, at: usize, uses: &[u32]) {
    let v = f.block(block).insts[at];
    let Inst::Member { set, ref key } = *f.inst(v) else {
        unreachable!("expand_one is given lookups")
    };
    let key: Vec<Value> = key.to_vec();
    let set = f.sets[set as usize].clone();
    let (found, missing) = match tested_alone(f, block, v, uses) {
        // The usual shape, `br ne v, 0` on the lookup alone: the search ends at its targets.
        Some(targets) => {
            f.block_mut(block).insts.remove(at);
            targets
        }
        None => split(f, block, at),
    };
    // One-word keys outside the longer ranges are looked up in a `switch` of the single
    // values, which the back ends lay out as they do any table (ranges of consecutive keys,
    // binary search).
    let (singles, spans): (Vec<_>, Vec<_>) = set
        .ranges()
        .iter()
        .partition(|&&(lo, hi)| key.len() == 1 && lo == hi);
    let missing = if singles.is_empty() {
        missing
    } else {
        let table = f.create_block();
        let cases = singles
            .iter()
            .map(|&(k, _)| (k as u32, Target::from(found)))
            .collect();
        f.set_term(
            table,
            Terminator::Switch {
                value: key[0],
                cases,
                default: missing.into(),
            },
        );
        table
    };
    let search = Search {
        key: &key,
        found,
        missing,
        max: set.width().max(),
    };
    search.ranges(f, block, &spans);
}

/// Where `block`'s branch goes when the lookup `v` finds its key and when not, if the branch
/// tests `v` against 0 (`ne` or `eq`), passes no arguments, and nothing else reads `v` (`uses`
/// counts each value's uses, as [`Function::use_counts`] gives them).
pub fn tested_alone(f: &Function, block: Block, v: Value, uses: &[u32]) -> Option<(Block, Block)> {
    let Terminator::Branch {
        op,
        lhs,
        rhs,
        then_,
        else_,
    } = &f.block(block).term
    else {
        return None;
    };
    if *lhs != v
        || f.const_value(*rhs) != Some(0)
        || !then_.args.is_empty()
        || !else_.args.is_empty()
    {
        return None;
    }
    let targets = match op {
        CmpOp::Ne => (then_.block, else_.block),
        CmpOp::Eq => (else_.block, then_.block),
        _ => return None,
    };
    (uses[v.index()] == 1).then_some(targets)
}

/// Splits `block` after the lookup at `at` ([`Function::split_at_value`]); returns the blocks
/// that pass the rest of the block 1 and 0.
fn split(f: &mut Function, block: Block, at: usize) -> (Block, Block) {
    let rest = f.split_at_value(block, at);
    (outcome(f, rest, 1), outcome(f, rest, 0))
}

/// A block that jumps to `rest` with the constant `k` as its argument.
fn outcome(f: &mut Function, rest: Block, k: u32) -> Block {
    let b = f.create_block();
    let c = f.iconst(b, k);
    f.set_term(
        b,
        Terminator::Jump(Target {
            block: rest,
            args: thin_vec![c],
        }),
    );
    b
}

/// The search for one lookup's key: where it ends when the key is in the set or not.
struct Search<'a> {
    /// The key's words, most significant first.
    key: &'a [Value],
    found: Block,
    missing: Block,
    /// The largest key of the set's width.
    max: u128,
}

impl Search<'_> {
    /// Ends `from` in the search of `ranges` (sorted, disjoint): below the middle range's
    /// lower bound the search goes on in the ranges before it, above its upper bound in those
    /// after it.
    fn ranges(&self, f: &mut Function, from: Block, ranges: &[(u128, u128)]) {
        if ranges.is_empty() {
            f.set_term(from, Terminator::Jump(self.missing.into()));
            return;
        }
        let mid = ranges.len() / 2;
        let (lo, hi) = ranges[mid];
        let (below, above) = (&ranges[..mid], &ranges[mid + 1..]);
        // Within the bounds' tests: `key >= lo` always holds for lo = 0 (then nothing lies
        // below), `key <= hi` for the largest key (then nothing lies above).
        let upper = if lo == 0 {
            from
        } else {
            let lower = f.create_block();
            let upper = f.create_block();
            self.compare(f, from, lo, CmpOp::Lt, lower, upper);
            self.ranges(f, lower, below);
            upper
        };
        if hi == self.max {
            f.set_term(upper, Terminator::Jump(self.found.into()));
        } else {
            let higher = f.create_block();
            self.compare(f, upper, hi, CmpOp::Le, self.found, higher);
            self.ranges(f, higher, above);
        }
    }

    /// Ends `from` in `key op k` (`op` is `Lt` or `Le`), the key read as one number, going to
    /// `then_` when it holds and to `else_` when not: word by word, a word below `k`'s decides
    /// for `then_`, one above it for `else_`, an equal one passes to the next word, and the
    /// last word is compared with `op`.
    fn compare(
        &self,
        f: &mut Function,
        from: Block,
        k: u128,
        op: CmpOp,
        then_: Block,
        else_: Block,
    ) {
        let words = self.key.len();
        let mut at = from;
        for (i, &word) in self.key.iter().enumerate() {
            let part = (k >> (32 * (words - 1 - i))) as u32;
            let c = f.iconst(at, part);
            if i + 1 == words {
                f.set_term(at, branch(op, word, c, then_, else_));
                return;
            }
            let not_below = f.create_block();
            let next = f.create_block();
            f.set_term(at, branch(CmpOp::Lt, word, c, then_, not_below));
            let c = f.iconst(not_below, part);
            f.set_term(not_below, branch(CmpOp::Eq, word, c, next, else_));
            at = next;
        }
    }
}

fn branch(op: CmpOp, lhs: Value, rhs: Value, then_: Block, else_: Block) -> Terminator {
    Terminator::Branch {
        op,
        lhs,
        rhs,
        then_: then_.into(),
        else_: else_.into(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::coproc::{KeyWidth, ValueSet};
    use crate::function::{BinOp, LoadSize};
    use crate::interp::{Cache, Interpreter};
    use crate::ThinVec;

    /// xorshift, so that the sets and keys are the same on every run.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A key of `width` clustered so that ranges of random sets meet and touch the ends of the
    /// key space: a few high bits, a few low bits, or one of the extremes.
    fn key(rng: &mut Rng, width: KeyWidth) -> u128 {
        let max = width.max();
        let bits = if width == KeyWidth::W32 { 32 } else { 128 };
        match rng.below(6) {
            0 => 0,
            1 => max,
            2 => max - u128::from(rng.below(8)),
            3 => u128::from(rng.below(64)),
            _ => (u128::from(rng.below(16)) << (bits - 4)) | u128::from(rng.below(4)),
        }
    }

    /// A function that looks the packet's first key up in `sets[0]` and `sets[1]` and returns
    /// `1 + 2 * in_first + 4 * in_second` bytes: the lookups' results are used by an
    /// instruction after them, in their block and in another block.
    fn lookups(width: KeyWidth, sets: [ValueSet; 2]) -> Function {
        let mut f = Function::new();
        let entry = f.create_block();
        let ret = f.create_block();
        let key: ThinVec<Value> = (0..width.words() as u32)
            .map(|i| {
                f.push(
                    entry,
                    Inst::Load {
                        index: None,
                        offset: 4 * i,
                        size: LoadSize::Word,
                    },
                )
            })
            .collect();
        f.sets = sets.into_iter().map(Arc::new).collect();
        let first = f.push(
            entry,
            Inst::Member {
                set: 0,
                key: key.clone(),
            },
        );
        let second = f.push(entry, Inst::Member { set: 1, key });
        let two = f.iconst(entry, 2);
        let doubled = f.push(entry, Inst::Binary(BinOp::Mul, first, two));
        f.set_term(entry, Terminator::Jump(ret.into()));
        let four = f.iconst(ret, 4);
        let one = f.iconst(ret, 1);
        let quadrupled = f.push(ret, Inst::Binary(BinOp::Mul, second, four));
        let sum = f.push(ret, Inst::Binary(BinOp::Add, doubled, quadrupled));
        let total = f.push(ret, Inst::Binary(BinOp::Add, sum, one));
        f.set_term(ret, Terminator::ReturnValue(total));
        f
    }

    /// The expanded function answers as the lookups do, for random sets of both widths
    /// (empty, one range, ranges touching 0 and the largest key, hundreds of ranges), on keys
    /// at and around every bound, and on packets too short for the key.
    #[test]
    fn expanded_lookups_answer_as_the_sets_do() {
        let mut rng = Rng(0x5e7_100c);
        for round in 0..400 {
            let width = if round % 2 == 0 {
                KeyWidth::W32
            } else {
                KeyWidth::W128
            };
            let set = |rng: &mut Rng| {
                let count = match rng.below(4) {
                    0 => rng.below(2),
                    1 => rng.below(8),
                    _ => rng.below(300),
                };
                let ranges: Vec<(u128, u128)> = (0..count)
                    .map(|_| {
                        let lo = key(rng, width);
                        let len = if rng.below(2) == 0 {
                            0
                        } else {
                            u128::from(rng.below(40))
                        };
                        (lo, lo.saturating_add(len))
                    })
                    .collect();
                ValueSet::new(width, ranges)
            };
            let sets = [set(&mut rng), set(&mut rng)];
            let mut probes: Vec<u128> = sets
                .iter()
                .flat_map(|s| s.ranges().iter())
                .flat_map(|&(lo, hi)| [lo.wrapping_sub(1), lo, hi, hi.wrapping_add(1)])
                .map(|k| k.min(width.max()))
                .collect();
            probes.extend((0..50).map(|_| key(&mut rng, width)));
            let original = lookups(width, sets);
            let expanded = without_set_lookups(&original).into_owned();
            assert!(!has_lookup(&expanded));
            let want = Interpreter::new(original).expect("valid");
            let got = Interpreter::new(expanded).expect("expansion keeps the function valid");
            let mut cache = Cache::new();
            let bytes = width.words() * 4;
            for k in probes {
                let packet = k.to_be_bytes();
                let packet = &packet[16 - bytes..];
                for len in [bytes, bytes - 1] {
                    let p = &packet[..len];
                    assert_eq!(
                        got.run(&mut cache, p, len as u32),
                        want.run(&mut cache, p, len as u32),
                        "round {round}, key {k:#x}, {len} bytes"
                    );
                }
            }
        }
    }

    /// A lookup the block's branch tests, followed in its block by another whose result a
    /// later block uses: both are written out, and the answers stay.
    #[test]
    fn a_tested_lookup_leaves_the_next_in_its_block_to_be_expanded() {
        let sets = [
            ValueSet::new(KeyWidth::W32, [(5, 5), (9, 20)]),
            ValueSet::new(KeyWidth::W32, [(7, 7), (15, 30)]),
        ];
        let mut f = Function::new();
        let (entry, found, missing) = (f.create_block(), f.create_block(), f.create_block());
        let key = f.push(
            entry,
            Inst::Load {
                index: None,
                offset: 0,
                size: LoadSize::Word,
            },
        );
        f.sets = sets.into_iter().map(Arc::new).collect();
        let tested = f.push(
            entry,
            Inst::Member {
                set: 0,
                key: crate::thin_vec![key],
            },
        );
        let used_later = f.push(
            entry,
            Inst::Member {
                set: 1,
                key: crate::thin_vec![key],
            },
        );
        let zero = f.iconst(entry, 0);
        f.set_term(entry, branch(CmpOp::Ne, tested, zero, found, missing));
        let one = f.iconst(found, 1);
        let bytes = f.push(found, Inst::Binary(BinOp::Add, used_later, one));
        f.set_term(found, Terminator::ReturnValue(bytes));
        f.set_term(missing, Terminator::Return(0));
        let expanded = without_set_lookups(&f).into_owned();
        assert!(!has_lookup(&expanded));
        let want = Interpreter::new(f).expect("valid");
        let got = Interpreter::new(expanded).expect("expansion keeps the function valid");
        let mut cache = Cache::new();
        for k in 0u32..40 {
            let p = k.to_be_bytes();
            assert_eq!(
                got.run(&mut cache, &p, 4),
                want.run(&mut cache, &p, 4),
                "key {k}"
            );
        }
    }

    #[test]
    fn functions_without_lookups_are_not_copied() {
        let mut f = Function::new();
        let b = f.create_block();
        f.set_term(b, Terminator::Return(1));
        assert!(matches!(without_set_lookups(&f), Cow::Borrowed(_)));
    }
}
