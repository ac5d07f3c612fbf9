//! Immediate dominators, computed in one pass over the reverse postorder.
//!
//! Every pass that reasons about "always executed before" needs the dominator tree, and on long
//! `or` chains (10^5 blocks, a tree as deep as the chain, a reject block with as many
//! predecessors) it is recomputed many times, so it must be linear in practice and never
//! quadratic.
//!
//! The graphs are acyclic, so one pass in reverse postorder sees every predecessor of a block
//! before the block, and its immediate dominator is the meet of its predecessors (Cooper,
//! Harvey and Kennedy's intersection, on reverse-postorder positions). A block's predecessors
//! are met latest first: along a chain each meet then moves the candidate up by a step instead
//! of walking the whole chain again. Meets that still walk far (shapes no filter produces, but
//! possible) are bounded: past a budget linear in the graph the computation switches to binary
//! lifting, `O(E log N)` whatever the shape.

use crate::function::{Block, Function};

const NONE: u32 = u32::MAX;

/// Immediate dominators of the reachable blocks (`None` for the entry and unreachable blocks),
/// and the reverse postorder they were computed over. Back edges (a malformed, cyclic graph)
/// are ignored.
pub fn dominators(f: &Function) -> (Vec<Option<Block>>, Vec<Block>) {
    let rpo = f.reverse_postorder();
    let preds = Predecessors::new(f, &rpo);
    let idom = walking_meets(&preds).unwrap_or_else(|| lifted_meets(&preds));
    let mut out = vec![None; f.blocks.len()];
    for (i, &d) in idom.iter().enumerate().skip(1) {
        if d != NONE {
            out[rpo[i].index()] = Some(rpo[d as usize]);
        }
    }
    (out, rpo)
}

/// The dominator tree numbered depth first, so that "a dominates b" is an interval test
/// instead of a walk up a tree as deep as the chain.
#[derive(Clone, Debug)]
pub struct DominatorTree {
    /// Depth-first entry time of each block in the tree (`u32::MAX`: not in the tree).
    pub enter: Vec<u32>,
    /// One past the last entry time in each block's subtree.
    pub exit: Vec<u32>,
}

impl DominatorTree {
    /// The tree of `idom` (as [`dominators`] gives it); the entry and every block without a
    /// dominator are roots.
    pub fn new(idom: &[Option<Block>]) -> DominatorTree {
        let n = idom.len();
        // Children lists in one array, in block order.
        let mut start = vec![0u32; n + 1];
        for d in idom.iter().flatten() {
            start[d.index() + 1] += 1;
        }
        for i in 1..=n {
            start[i] += start[i - 1];
        }
        let mut fill = start.clone();
        let mut children = vec![0u32; start[n] as usize];
        for (b, d) in idom.iter().enumerate() {
            if let Some(d) = d {
                children[fill[d.index()] as usize] = b as u32;
                fill[d.index()] += 1;
            }
        }
        let (mut enter, mut exit) = (vec![NONE; n], vec![0; n]);
        let mut clock = 0u32;
        let mut stack: Vec<(u32, u32)> = Vec::new();
        for root in (0..n).filter(|&b| idom[b].is_none()) {
            stack.push((root as u32, start[root]));
            enter[root] = clock;
            clock += 1;
            while let Some((b, next)) = stack.last_mut() {
                if *next < start[*b as usize + 1] {
                    let c = children[*next as usize];
                    *next += 1;
                    enter[c as usize] = clock;
                    clock += 1;
                    stack.push((c, start[c as usize]));
                } else {
                    exit[*b as usize] = clock;
                    stack.pop();
                }
            }
        }
        DominatorTree { enter, exit }
    }

    /// Whether `a` dominates `b` (every block dominates itself; blocks of other roots' trees,
    /// unreachable ones, dominate only themselves and their own subtrees).
    pub fn dominates(&self, a: Block, b: Block) -> bool {
        match (self.enter.get(a.index()), self.enter.get(b.index())) {
            (Some(&ea), Some(&eb)) if ea != NONE && eb != NONE => {
                ea <= eb && eb < self.exit[a.index()]
            }
            _ => a == b,
        }
    }
}

/// Forward predecessors of each reachable block, as reverse-postorder positions, latest first,
/// in one array.
struct Predecessors {
    start: Vec<u32>,
    list: Vec<u32>,
}

impl Predecessors {
    fn new(f: &Function, rpo: &[Block]) -> Predecessors {
        let mut position = vec![NONE; f.blocks.len()];
        for (i, b) in rpo.iter().enumerate() {
            position[b.index()] = i as u32;
        }
        // Forward edges (from an earlier position to a later one) as (from, to) positions.
        let forward = |i: usize| {
            let position = &position;
            f.block(rpo[i])
                .term
                .successors()
                .filter_map(move |s| position.get(s.index()).copied())
                .filter(move |&to| to != NONE && to as usize > i)
        };
        let m = rpo.len();
        let mut start = vec![0u32; m + 1];
        for i in 0..m {
            for to in forward(i) {
                start[to as usize + 1] += 1;
            }
        }
        for i in 1..=m {
            start[i] += start[i - 1];
        }
        let mut fill = start.clone();
        let mut list = vec![0u32; start[m] as usize];
        // Visiting sources latest first fills each list in decreasing order.
        for i in (0..m).rev() {
            for to in forward(i) {
                list[fill[to as usize] as usize] = i as u32;
                fill[to as usize] += 1;
            }
        }
        Predecessors { start, list }
    }

    fn blocks(&self) -> usize {
        self.start.len() - 1
    }

    fn of(&self, i: usize) -> &[u32] {
        &self.list[self.start[i] as usize..self.start[i + 1] as usize]
    }
}

/// Immediate dominators by position (`NONE` for the entry), meeting by walking up the tree;
/// `None` if the walks exceed a budget linear in the graph.
///
/// While the predecessors of block `i` are met, every block a walk passed is marked with `i`:
/// it lies under the current candidate (which only moves up), so a later walk reaching a mark
/// stops there with the candidate as the meet. A block whose predecessors come from long
/// chains (the accept block of a 10^4-term `or`) then costs the size of those chains once,
/// instead of once per predecessor.
fn walking_meets(preds: &Predecessors) -> Option<Vec<u32>> {
    let m = preds.blocks();
    let mut idom = vec![NONE; m];
    let mut mark = vec![NONE; m];
    let mut budget = 8 * (m + preds.list.len()) + 64;
    for i in 1..m {
        let stamp = i as u32;
        let mut d = NONE;
        for &p in preds.of(i) {
            if d == NONE {
                d = p;
                mark[p as usize] = stamp;
                continue;
            }
            // The finger further down the reverse postorder is never the meet: it moves up.
            let (mut a, mut b) = (d, p);
            if mark[b as usize] == stamp {
                continue;
            }
            while a != b {
                if a > b {
                    a = idom[a as usize];
                    mark[a as usize] = stamp;
                } else {
                    mark[b as usize] = stamp;
                    b = idom[b as usize];
                    if mark[b as usize] == stamp {
                        // Under the candidate, which has not moved, or on this walk's path
                        // of the candidate, which stopped there: `a` is the meet.
                        break;
                    }
                }
                budget = budget.checked_sub(1)?;
            }
            d = a;
        }
        idom[i] = d;
    }
    Some(idom)
}

/// Immediate dominators by position, meeting by binary lifting: `O(E log N)` for any shape.
fn lifted_meets(preds: &Predecessors) -> Vec<u32> {
    let m = preds.blocks();
    let levels = (usize::BITS - m.leading_zeros()).max(1) as usize;
    // up[k][i]: the 2^k-th dominator of i (the entry is its own).
    let mut up: Vec<Vec<u32>> = vec![vec![0; m]; levels];
    let mut depth = vec![0u32; m];
    let mut idom = vec![NONE; m];
    let meet = |up: &[Vec<u32>], depth: &[u32], mut a: usize, mut b: usize| -> usize {
        if depth[a] < depth[b] {
            std::mem::swap(&mut a, &mut b);
        }
        let diff = depth[a] - depth[b];
        for (k, row) in up.iter().enumerate() {
            if diff >> k & 1 == 1 {
                a = row[a] as usize;
            }
        }
        if a == b {
            return a;
        }
        for row in up.iter().rev() {
            if row[a] != row[b] {
                a = row[a] as usize;
                b = row[b] as usize;
            }
        }
        up[0][a] as usize
    };
    for i in 1..m {
        let mut d: Option<usize> = None;
        for &p in preds.of(i) {
            d = Some(match d {
                None => p as usize,
                Some(x) => meet(&up, &depth, x, p as usize),
            });
        }
        let Some(d) = d else { continue };
        idom[i] = d as u32;
        depth[i] = depth[d] + 1;
        up[0][i] = d as u32;
        for k in 1..levels {
            let mid = up[k - 1][i] as usize;
            up[k][i] = up[k - 1][mid];
        }
    }
    idom
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::function::{CmpOp, Inst, Target, Terminator};

    /// A random acyclic function: each block branches or jumps to later blocks.
    fn random_dag(seed: u64, n: usize) -> Function {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = move |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % bound as u64) as usize
        };
        let mut f = Function::new();
        for _ in 0..n {
            f.create_block();
        }
        let v = f.push(Block(0), Inst::Const(0));
        for i in 0..n {
            let later = |next: &mut dyn FnMut(usize) -> usize| {
                Target::from(Block((i + 1 + next((n - i - 1).min(6))) as u32))
            };
            f.blocks[i].term = if i + 1 == n {
                Terminator::Return(0)
            } else if next(4) == 0 {
                Terminator::Jump(later(&mut next))
            } else {
                Terminator::Branch {
                    op: CmpOp::Eq,
                    lhs: v,
                    rhs: v,
                    then_: later(&mut next),
                    else_: later(&mut next),
                }
            };
        }
        f
    }

    fn both(f: &Function) -> (Vec<u32>, Vec<u32>) {
        let rpo = f.reverse_postorder();
        let preds = Predecessors::new(f, &rpo);
        (walking_meets(&preds).unwrap(), lifted_meets(&preds))
    }

    #[test]
    fn walking_and_lifting_agree_on_random_graphs() {
        for seed in 0..2000 {
            let f = random_dag(seed, 2 + seed as usize % 200);
            let (walked, lifted) = both(&f);
            assert_eq!(walked, lifted, "seed {seed}");
        }
    }

    /// A 10^4-block `or` chain: every block's true edge goes to one accept block, the false
    /// edge to the next test; the reject block ends the chain.
    #[test]
    fn long_chain_stays_within_the_walking_budget() {
        let n = 10_000;
        let mut f = Function::new();
        for _ in 0..n + 2 {
            f.create_block();
        }
        let v = f.push(Block(0), Inst::Const(0));
        let (accept, reject) = (Block(n as u32), Block(n as u32 + 1));
        for i in 0..n {
            let next = if i + 1 == n {
                reject
            } else {
                Block(i as u32 + 1)
            };
            f.blocks[i].term = Terminator::Branch {
                op: CmpOp::Eq,
                lhs: v,
                rhs: v,
                then_: Target::from(accept),
                else_: Target::from(next),
            };
        }
        f.blocks[n].term = Terminator::Return(1);
        f.blocks[n + 1].term = Terminator::Return(0);
        let (walked, lifted) = both(&f);
        assert_eq!(walked, lifted);
        let (idom, _) = dominators(&f);
        assert_eq!(idom[accept.index()], Some(Block(0)));
        assert_eq!(idom[reject.index()], Some(Block(n as u32 - 1)));
    }
}
