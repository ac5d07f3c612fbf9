//! Rewriting helpers every pass shares: value replacement, removal of unreachable blocks, and the
//! final renumbering of blocks and values.
//!
//! Passes never edit uses one by one. They record "`v` is now `w`" in [`Replacements`] and apply
//! the map to the whole function once, which keeps every pass linear.

use sift_ir::{Block, Function, Inst, Target, Value};

/// A map from values to the values that replace them (identity for values not replaced).
#[derive(Debug)]
pub struct Replacements {
    /// Empty until the first replacement (many runs replace nothing), then the identity on
    /// every value but the replaced ones.
    map: Vec<Value>,
    /// The function's number of values, the size the map takes when first needed.
    values: usize,
    count: usize,
}

impl Replacements {
    pub fn new(f: &Function) -> Replacements {
        Replacements {
            map: Vec::new(),
            values: f.values.len(),
            count: 0,
        }
    }

    /// Records that every use of `v` must read `with` instead.
    pub fn replace(&mut self, v: Value, with: Value) {
        let with = self.resolve(with);
        if with != v {
            self.grow(v.index().max(with.index()).max(self.values));
            self.map[v.index()] = with;
            self.count += 1;
        }
    }

    /// The value that stands for `v` after all replacements recorded so far.
    pub fn resolve(&mut self, v: Value) -> Value {
        let mut r = v;
        while let Some(&next) = self.map.get(r.index()) {
            if next == r {
                break;
            }
            r = next;
        }
        // Path compression keeps later lookups O(1).
        let mut c = v;
        while c != r {
            let next = self.map[c.index()];
            self.map[c.index()] = r;
            c = next;
        }
        r
    }

    /// Number of replacements recorded.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    fn grow(&mut self, index: usize) {
        if self.map.len() <= index {
            let from = self.map.len() as u32;
            self.map.extend((from..=index as u32).map(Value));
        }
    }

    /// Rewrites every operand of every instruction and terminator in `f`.
    pub fn apply(&mut self, f: &mut Function) {
        if self.count == 0 {
            return;
        }
        // In place, without a copy of each instruction and terminator.
        let (blocks, values) = (&mut f.blocks, &mut f.values);
        for data in blocks {
            for &v in &data.insts {
                values[v.index()].map_operands(|x| self.resolve(x));
            }
            data.term.map_operands(|x| self.resolve(x));
        }
    }
}

/// Whether the block of `b` is reachable from the entry, for every block.
pub fn reachable(f: &Function) -> Vec<bool> {
    let mut r = vec![false; f.blocks.len()];
    for b in crate::cfg::rpo(f) {
        r[b.index()] = true;
    }
    r
}

/// Deletes the blocks the entry cannot reach, renumbering the rest (the entry stays `block0`).
/// Returns how many blocks were removed. The verifier requires this after any pass that removes
/// edges: an unreachable block may use values whose definitions no longer dominate it.
pub fn remove_unreachable(f: &mut Function) -> usize {
    let live = reachable(f);
    remove_blocks(f, &live).0
}

/// Deletes the blocks not marked `keep` (never the entry), renumbering the rest in order.
/// Returns how many were removed and the new number of every old block (`u32::MAX` if
/// removed).
pub fn remove_blocks(f: &mut Function, keep: &[bool]) -> (usize, Vec<u32>) {
    let mut new_index = vec![u32::MAX; f.blocks.len()];
    let mut next = 0;
    for (i, &k) in keep.iter().enumerate() {
        if k {
            new_index[i] = next;
            next += 1;
        }
    }
    let removed = f.blocks.len() - next as usize;
    if removed == 0 {
        return (0, new_index);
    }
    let old = std::mem::replace(&mut f.blocks, Vec::with_capacity(next as usize));
    for (i, mut data) in old.into_iter().enumerate() {
        if !keep[i] {
            continue;
        }
        // Without collecting the targets: the blocks left after lookup tables replace a long
        // chain are a few switches with thousands of cases.
        for t in crate::cfg::targets_mut(&mut data.term) {
            t.block = Block(new_index[t.block.index()]);
        }
        let nb = Block(new_index[i]);
        for &p in &data.params {
            f.values[p.index()] = Inst::Param(nb);
        }
        f.blocks.push(data);
    }
    (removed, new_index)
}

/// Renumbers the values in the order they are defined, blocks in `order` first (reverse
/// postorder) and the other blocks after them in block order, and drops the values no block
/// defines any more (left behind by passes that removed their instructions).
///
/// Only the numbers change, and the passes use value numbers as identities only (never as an
/// order that decides anything), so the optimizer's output stays the same; but values are then
/// laid out in the order the passes visit them, and the vectors the passes index by value are
/// no longer sized by every value lowering ever created. On a 10^4-term chain, where value
/// numbering leaves nine values in ten behind, this is most of a pass's memory traffic.
pub fn compact_values(f: &mut Function, order: &[Block]) {
    let mut value_map = vec![u32::MAX; f.values.len()];
    let mut values = Vec::with_capacity(f.values.len().min(4 * f.blocks.len() + 64));
    let mut placed = vec![false; f.blocks.len()];
    let rest: Vec<Block> = {
        for b in order {
            placed[b.index()] = true;
        }
        (0..f.blocks.len() as u32)
            .map(Block)
            .filter(|b| !placed[b.index()])
            .collect()
    };
    for &b in order.iter().chain(&rest) {
        let data = &f.blocks[b.index()];
        for &v in data.params.iter().chain(&data.insts) {
            value_map[v.index()] = values.len() as u32;
            values.push(std::mem::replace(&mut f.values[v.index()], Inst::WireLen));
        }
    }
    let remap = |v: Value| Value(value_map[v.index()]);
    for inst in &mut values {
        inst.map_operands(remap);
    }
    for data in &mut f.blocks {
        for v in data.params.iter_mut().chain(data.insts.iter_mut()) {
            *v = remap(*v);
        }
        data.term.map_operands(remap);
    }
    f.values = values;
}

/// Renumbers blocks in reverse postorder and values in order of definition, dropping unreachable
/// blocks and values no block defines. The result prints the way a reader expects (and the way
/// `parse_function` numbers a text written in that order).
pub fn canonicalize(f: &mut Function) {
    let rpo = crate::cfg::rpo(f);
    canonicalize_over(f, &rpo);
}

/// [`canonicalize`], given the reverse postorder of `f`.
pub fn canonicalize_over(f: &mut Function, rpo: &[Block]) {
    let mut block_map = vec![u32::MAX; f.blocks.len()];
    for (i, b) in rpo.iter().enumerate() {
        block_map[b.index()] = i as u32;
    }
    let mut value_map = vec![u32::MAX; f.values.len()];
    let mut values = Vec::with_capacity(f.values.len());
    for &b in rpo {
        let data = f.block(b);
        for &v in data.params.iter().chain(&data.insts) {
            value_map[v.index()] = values.len() as u32;
            values.push(f.values[v.index()].clone());
        }
    }
    let remap = |v: Value| Value(value_map[v.index()]);
    for inst in &mut values {
        match inst {
            Inst::Param(b) => *b = Block(block_map[b.index()]),
            other => other.map_operands(remap),
        }
    }
    let mut blocks = Vec::with_capacity(rpo.len());
    for &b in rpo {
        let mut data = std::mem::take(&mut f.blocks[b.index()]);
        data.params = data.params.iter().map(|&v| remap(v)).collect();
        data.insts = data.insts.iter().map(|&v| remap(v)).collect();
        data.term.map_operands(remap);
        for t in crate::cfg::targets_mut(&mut data.term) {
            t.block = Block(block_map[t.block.index()]);
        }
        blocks.push(data);
    }
    f.blocks = blocks;
    f.values = values;
}

/// The number of edges entering each block from reachable blocks (a branch with both arms to
/// the same block counts twice).
pub fn incoming_edges(f: &Function, live: &[bool]) -> Vec<u32> {
    let mut n = vec![0u32; f.blocks.len()];
    for (i, data) in f.blocks.iter().enumerate() {
        if live[i] {
            for t in data.term.targets() {
                n[t.block.index()] += 1;
            }
        }
    }
    n
}

/// A jump target without arguments.
pub fn plain(block: Block) -> Target {
    Target::from(block)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_ir::parse_function;

    #[test]
    fn replacements_resolve_chains() {
        let f = parse_function("block0:\n v0 = const 1\n v1 = const 2\n v2 = const 3\n ret 0\n")
            .unwrap();
        let mut r = Replacements::new(&f);
        r.replace(Value(2), Value(1));
        r.replace(Value(1), Value(0));
        assert_eq!(r.resolve(Value(2)), Value(0));
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn compacting_values_renumbers_only() {
        let mut f = parse_function(
            "block0:\n v5 = load.b [0]\n v2 = const 1\n br eq v5, v2, block2(v5), block1\nblock1:\n v9 = load.b [1]\n ret v9\nblock2(v7):\n v3 = add v7, v2\n ret v3\nblock3:\n v8 = load.b [2]\n ret v8\n",
        )
        .unwrap();
        // Values no block defines any more.
        f.values.extend([Inst::WireLen, Inst::Const(4)]);
        let before = crate::testutil::canonical(&f);
        let rpo = crate::cfg::rpo(&f);
        compact_values(&mut f, &rpo);
        assert_eq!(f.values.len(), 6, "{f}");
        assert_eq!(
            f.block(Block(3)).insts[..],
            [Value(5)],
            "unreachable blocks last"
        );
        sift_ir::verify(&f).unwrap();
        assert_eq!(crate::testutil::canonical(&f), before);
    }

    #[test]
    fn unreachable_blocks_go_and_params_follow() {
        let mut f = parse_function(
            "block0:\n v0 = const 1\n jump block2(v0)\nblock1:\n ret 1\nblock2(v1):\n ret v1\n",
        )
        .unwrap();
        assert_eq!(remove_unreachable(&mut f), 1);
        assert_eq!(f.blocks.len(), 2);
        assert_eq!(f.values[1], Inst::Param(Block(1)));
        sift_ir::verify(&f).unwrap();
    }
}
