//! Edge dominators (libpcap's `find_edom`), as a [`DominatorTree`] over the edges out of
//! blocks with a branch: both edges out of a block hang below the deepest common dominator
//! of the edges into it (the root's two edges, and those out of a block its paths from the
//! root reach by both of them, are roots). Members come out in ascending order, as libpcap's
//! word-by-word scan of its bit sets finds them: the order in which the jump optimizer tries
//! the dominators is part of its result.

use crate::dominator_tree::DominatorTree;
use crate::flow::edge_id;
use crate::graph::{BlockId, Graph};

/// Edge dominators of one pass: an edge `e` out of block `b` is dominated by `e` itself and by
/// the edges every path from the root to `b` takes.
#[derive(Clone, Debug, Default)]
pub struct EdgeDominators {
    tree: DominatorTree,
    /// Per edge, whether it led to a block with a branch: only such an edge can dominate
    /// another edge out of a branch.
    into_branch: Vec<bool>,
}

impl EdgeDominators {
    /// The edge dominators of `g`'s reachable blocks (`levels`, leaves first).
    pub fn new(g: &Graph, levels: &[Vec<BlockId>]) -> EdgeDominators {
        let n = g.blocks.len();
        let mut tree = DominatorTree::new(2 * n);
        let mut into_branch = vec![false; 2 * n];
        // Per block, the deepest common dominator of the edges into it seen so far: `None`
        // before the first, `Some(None)` when they share none.
        let mut common: Vec<Option<Option<usize>>> = vec![None; n];
        // From the root down, every edge into a block comes before the edges out of it.
        for level in levels.iter().rev() {
            for &b in level {
                let (Some(t), Some(f)) = (g.blocks[b].jt, g.blocks[b].jf) else {
                    continue;
                };
                let above = common[b].flatten();
                for (taken, s) in [(true, t), (false, f)] {
                    let e = edge_id(n, b, taken);
                    tree.place(e, above);
                    into_branch[e] = !g.blocks[s].is_return();
                    if into_branch[e] {
                        common[s] = Some(match common[s] {
                            None => Some(e),
                            Some(c) => c.and_then(|c| tree.common_dominator(c, e)),
                        });
                    }
                }
            }
        }
        tree.number();
        EdgeDominators { tree, into_branch }
    }

    /// Whether edge `d` can dominate an edge out of a block with a branch other than itself.
    pub fn may_dominate_branches(&self, d: usize) -> bool {
        self.into_branch.get(d).copied().unwrap_or(false)
    }

    /// Whether edge `d` dominates edge `e` (or is `e`), `e` out of a reachable branch.
    pub fn dominates(&self, d: usize, e: usize) -> bool {
        self.tree.contains(d) && self.tree.dominates(d, e)
    }

    /// How many edges dominate edge `e` (itself included), `e` out of a reachable branch.
    pub fn count(&self, e: usize) -> usize {
        self.tree.path_len(e)
    }

    /// The edges dominating edge `e` (itself included), ascending, into `out` (cleared first),
    /// `e` out of a reachable branch.
    pub fn dominators_of(&self, e: usize, out: &mut Vec<usize>) {
        out.clear();
        let mut at = Some(e);
        while let Some(d) = at {
            out.push(d);
            at = self.tree.parent(d);
        }
        out.sort_unstable();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::find_levels;
    use crate::graph::tests::{intersect_rows, random_graph};

    /// libpcap's `find_edom` as it is written: a full set per edge.
    fn reference(g: &Graph, levels: &[Vec<BlockId>]) -> Vec<Vec<bool>> {
        let n = g.blocks.len();
        let mut edom = vec![vec![true; 2 * n]; 2 * n];
        edom[edge_id(n, g.root, true)] = vec![false; 2 * n];
        edom[edge_id(n, g.root, false)] = vec![false; 2 * n];
        for level in levels.iter().rev() {
            for &b in level {
                for (taken, succ) in [(true, g.blocks[b].jt), (false, g.blocks[b].jf)] {
                    let e = edge_id(n, b, taken);
                    edom[e][e] = true;
                    let Some(s) = succ else { continue };
                    intersect_rows(&mut edom, edge_id(n, s, true), e);
                    intersect_rows(&mut edom, edge_id(n, s, false), e);
                }
            }
        }
        edom
    }

    /// Every edge out of a reachable branch has the reference's set, in ascending order, on
    /// chains and random graphs past several words of edges.
    #[test]
    fn sets_are_libpcaps() {
        let mut rng = sift_testgen::Rng::new(0xed0e_d0e5);
        let mut members = Vec::new();
        for _ in 0..300 {
            let mut g = random_graph(&mut rng);
            let levels = find_levels(&mut g);
            let want = reference(&g, &levels);
            let got = EdgeDominators::new(&g, &levels);
            let n = g.blocks.len();
            for &b in levels.iter().flatten() {
                if g.blocks[b].is_return() {
                    continue;
                }
                for taken in [true, false] {
                    let e = edge_id(n, b, taken);
                    got.dominators_of(e, &mut members);
                    let expected: Vec<usize> = (0..2 * n).filter(|&d| want[e][d]).collect();
                    assert_eq!(members, expected, "edge {e} of {n} blocks");
                    assert_eq!(got.count(e), expected.len());
                    for (d, &dominates) in want[e].iter().enumerate() {
                        assert_eq!(got.dominates(d, e), dominates, "{d} over {e}");
                    }
                }
            }
        }
    }
}
