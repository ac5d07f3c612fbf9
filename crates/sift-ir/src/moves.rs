//! Parallel moves: the copies that pass block arguments along an edge, for every back end that
//! turns block parameters into registers or stack slots.
//!
//! All sources are read before any destination is written, as if at once. A move is emitted
//! once no pending move still reads its destination; when every pending move is blocked, the
//! rest are cycles (each destination is written once), and one destination is saved in a spare
//! location to break its cycle. How one move becomes instructions is the back end's business.

/// The source of a move: a location or a constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoveSource<L> {
    Loc(L),
    Imm(u32),
}

/// Orders `moves` (destination, source), meant to happen at once, into a sequence of single
/// moves handed to `emit`. Destinations must be distinct; `cycle_temp` must be neither a
/// destination nor a source.
pub fn sequentialize<L: Copy + Eq>(
    moves: &[(L, MoveSource<L>)],
    cycle_temp: L,
    mut emit: impl FnMut(L, MoveSource<L>),
) {
    let mut pending: Vec<(L, MoveSource<L>)> = moves
        .iter()
        .copied()
        .filter(|&(d, s)| s != MoveSource::Loc(d))
        .collect();
    while !pending.is_empty() {
        let reads = |loc: L, pending: &[(L, MoveSource<L>)]| {
            pending.iter().any(|&(_, s)| s == MoveSource::Loc(loc))
        };
        if let Some(i) = (0..pending.len()).find(|&i| !reads(pending[i].0, &pending)) {
            let (d, s) = pending.remove(i);
            emit(d, s);
            continue;
        }
        // Every destination is still read: save one and redirect its readers.
        let d = pending[0].0;
        emit(cycle_temp, MoveSource::Loc(d));
        for (_, s) in pending.iter_mut() {
            if *s == MoveSource::Loc(d) {
                *s = MoveSource::Loc(cycle_temp);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the sequence on a machine of 16 cells (cell 15 is the cycle temporary) and checks
    /// the parallel semantics.
    fn check(moves: &[(u8, MoveSource<u8>)]) {
        let mut cells: [u32; 16] = std::array::from_fn(|i| 100 + i as u32);
        let read = |cells: &[u32; 16], s: MoveSource<u8>| match s {
            MoveSource::Imm(k) => k,
            MoveSource::Loc(l) => cells[usize::from(l)],
        };
        let expected: Vec<u32> = moves.iter().map(|&(_, s)| read(&cells, s)).collect();
        let mut sequence = Vec::new();
        sequentialize(moves, 15, |d, s| sequence.push((d, s)));
        for &(d, s) in &sequence {
            cells[usize::from(d)] = read(&cells, s);
        }
        for (&(d, _), want) in moves.iter().zip(expected) {
            assert_eq!(cells[usize::from(d)], want, "{moves:?} -> {sequence:?}");
        }
    }

    fn from(l: u8) -> MoveSource<u8> {
        MoveSource::Loc(l)
    }

    #[test]
    fn swaps_rotations_chains_and_constants() {
        check(&[(0, from(1)), (1, from(0))]);
        check(&[(0, from(1)), (1, from(2)), (2, from(0))]);
        check(&[(0, from(1)), (1, from(2)), (3, from(0))]);
        check(&[(0, from(0)), (1, MoveSource::Imm(7))]);
        // Two independent cycles and a tree hanging off one of them.
        check(&[
            (0, from(1)),
            (1, from(0)),
            (2, from(3)),
            (3, from(2)),
            (4, from(2)),
        ]);
    }

    #[test]
    fn every_permutation_of_five() {
        fn permute(prefix: &mut Vec<u8>, rest: &mut Vec<u8>) {
            if rest.is_empty() {
                let moves: Vec<_> = prefix
                    .iter()
                    .enumerate()
                    .map(|(d, &s)| (d as u8, from(s)))
                    .collect();
                check(&moves);
                return;
            }
            for i in 0..rest.len() {
                let x = rest.remove(i);
                prefix.push(x);
                permute(prefix, rest);
                prefix.pop();
                rest.insert(i, x);
            }
        }
        permute(&mut Vec::new(), &mut (0..5).collect());
    }
}
