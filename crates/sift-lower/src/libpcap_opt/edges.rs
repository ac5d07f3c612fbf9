//! A terminator's edges by position, in the order of `Terminator::targets`, without building
//! the list: the optimizer's walks ask for one edge at a time, several times per block per
//! round, and on long chains the lists' allocations were a tenth of its time. Also the edges
//! the other way ([`Entering`], each block's predecessors), what a block's branch compares,
//! and replacing a value within a block.

use sift_ir::{Block, Function, Target, Terminator, Value};

pub(super) fn edge_count(term: &Terminator) -> usize {
    match term {
        Terminator::Branch { .. } => 2,
        Terminator::Jump(_) => 1,
        Terminator::Switch { cases, .. } => cases.len() + 1,
        Terminator::Unset | Terminator::Return(_) | Terminator::ReturnValue(_) => 0,
    }
}

pub(super) fn edge(term: &Terminator, i: usize) -> Option<&Target> {
    match term {
        Terminator::Branch { then_, else_, .. } => [then_, else_].get(i).copied(),
        Terminator::Jump(t) => (i == 0).then_some(t),
        Terminator::Switch { cases, default, .. } => match cases.get(i) {
            Some((_, t)) => Some(t),
            None => (i == cases.len()).then_some(default),
        },
        Terminator::Unset | Terminator::Return(_) | Terminator::ReturnValue(_) => None,
    }
}

pub(super) fn edge_mut(term: &mut Terminator, i: usize) -> Option<&mut Target> {
    match term {
        Terminator::Branch { then_, else_, .. } => match i {
            0 => Some(then_),
            1 => Some(else_),
            _ => None,
        },
        Terminator::Jump(t) => (i == 0).then_some(t),
        Terminator::Switch { cases, default, .. } => {
            let n = cases.len();
            match cases.get_mut(i) {
                Some((_, t)) => Some(t),
                None => (i == n).then_some(default),
            }
        }
        Terminator::Unset | Terminator::Return(_) | Terminator::ReturnValue(_) => None,
    }
}

/// The successors of `term`'s block, in edge order.
pub(super) fn successors(term: &Terminator) -> impl Iterator<Item = Block> + '_ {
    (0..edge_count(term)).filter_map(move |i| edge(term, i).map(|t| t.block))
}

/// The blocks entering each block, as slices of one array in reverse postorder of the
/// entering blocks (a list per block would be an allocation for each of 10^5 blocks).
pub(super) struct Entering {
    pub(super) start: Vec<u32>,
    pub(super) from: Vec<Block>,
}

impl Entering {
    pub(super) fn new(f: &Function, rpo: &[Block]) -> Entering {
        let n = f.blocks.len();
        let mut start = vec![0u32; n + 1];
        let mut targets = Vec::new();
        for &p in rpo {
            successors_once(&f.block(p).term, &mut targets);
            for s in &targets {
                start[s.index() + 1] += 1;
            }
        }
        for i in 1..=n {
            start[i] += start[i - 1];
        }
        let mut filled = start.clone();
        let mut from = vec![Block(0); start[n] as usize];
        for &p in rpo {
            successors_once(&f.block(p).term, &mut targets);
            for s in &targets {
                from[filled[s.index()] as usize] = p;
                filled[s.index()] += 1;
            }
        }
        Entering { start, from }
    }

    pub(super) fn of(&self, b: Block) -> std::ops::Range<usize> {
        self.start[b.index()] as usize..self.start[b.index() + 1] as usize
    }

    pub(super) fn of_block(&self, b: Block) -> &[Block] {
        &self.from[self.of(b)]
    }
}

/// A terminator's successors, each once, into `out`.
pub(super) fn successors_once(term: &Terminator, out: &mut Vec<Block>) {
    out.clear();
    for s in successors(term) {
        if !out.contains(&s) {
            out.push(s);
        }
    }
}

/// The value `b`'s branch compares: what libpcap's accumulator holds as the block ends.
pub(super) fn compared(f: &Function, b: Block) -> Option<Value> {
    match f.block(b).term {
        Terminator::Branch { lhs, .. } => Some(lhs),
        _ => None,
    }
}

/// Makes `b`'s instructions and terminator use `new` where they use `old`.
pub(super) fn replace_in_block(f: &mut Function, b: Block, old: Value, new: Value) {
    let insts = f.block(b).insts.clone();
    for v in insts {
        f.values[v.index()].map_operands(|x| if x == old { new } else { x });
    }
    f.block_mut(b)
        .term
        .map_operands(|x| if x == old { new } else { x });
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_ir::parse_function;

    /// Positions agree with `Terminator::targets` for every kind of terminator.
    #[test]
    fn edges_by_position_match_targets() {
        let f = parse_function(
            "\
block0:
    v0 = load.b [14]
    v1 = const 1
    br eq v0, v1, block1, block2
block1:
    switch v0, default block4, 1: block2, 2: block3
block2:
    jump block4
block3:
    ret 0
block4:
    ret 1
",
        )
        .unwrap();
        for data in &f.blocks {
            let listed: Vec<&Target> = data.term.targets();
            assert_eq!(edge_count(&data.term), listed.len());
            for (i, t) in listed.iter().enumerate() {
                assert_eq!(edge(&data.term, i), Some(*t));
            }
            assert_eq!(edge(&data.term, listed.len()), None);
        }
    }
}
