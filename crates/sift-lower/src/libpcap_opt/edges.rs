//! A terminator's edges by position, in the order of `Terminator::targets`, without building
//! the list: the optimizer's walks ask for one edge at a time, several times per block per
//! round, and on long chains the lists' allocations were a tenth of its time.

use sift_ir::{Target, Terminator};

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
pub(super) fn successors(term: &Terminator) -> impl Iterator<Item = sift_ir::Block> + '_ {
    (0..edge_count(term)).filter_map(move |i| edge(term, i).map(|t| t.block))
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
