//! Block dominators (libpcap's `find_dom`), as a [`DominatorTree`]: a block's immediate
//! dominator is the deepest common dominator of its predecessors.

use crate::dominator_tree::DominatorTree;
use crate::graph::{BlockId, Graph};

/// The block dominators of one pass, for the reachable blocks with a branch (the pullups, the
/// only users, ask about no other block).
#[derive(Clone, Debug, Default)]
pub struct Dominators(DominatorTree);

impl Dominators {
    /// The dominators of `g`'s reachable blocks (`levels`, leaves first).
    pub fn new(g: &Graph, levels: &[Vec<BlockId>]) -> Dominators {
        let n = g.blocks.len();
        let mut tree = DominatorTree::new(n);
        // The deepest common dominator of the predecessors seen so far, per block.
        let mut common: Vec<Option<usize>> = vec![None; n];
        // From the root down, every predecessor comes before its successors.
        for level in levels.iter().rev() {
            for &b in level {
                let (Some(t), Some(f)) = (g.blocks[b].jt, g.blocks[b].jf) else {
                    continue;
                };
                tree.place(b, common[b]);
                for s in [t, f] {
                    if !g.blocks[s].is_return() {
                        common[s] = Some(match common[s] {
                            None => b,
                            Some(c) => tree
                                .common_dominator(c, b)
                                .expect("one root: every block is below the graph's"),
                        });
                    }
                }
            }
        }
        tree.number();
        Dominators(tree)
    }

    /// Whether block `b` dominates block `d` (every block dominates itself). As in libpcap,
    /// whose sets of unreachable blocks stay full, every block dominates an unreachable one.
    pub fn dominates(&self, b: BlockId, d: BlockId) -> bool {
        if !self.0.contains(d) {
            return true;
        }
        self.0.contains(b) && self.0.dominates(b, d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::find_levels;
    use crate::graph::tests::{intersect_rows, random_graph};

    /// libpcap's `find_dom` as it is written: a full set per block.
    fn reference(g: &Graph, levels: &[Vec<BlockId>]) -> Vec<Vec<bool>> {
        let n = g.blocks.len();
        let mut dom = vec![vec![true; n]; n];
        dom[g.root] = vec![false; n];
        for level in levels.iter().rev() {
            for &b in level {
                dom[b][b] = true;
                if let (Some(t), Some(f)) = (g.blocks[b].jt, g.blocks[b].jf) {
                    intersect_rows(&mut dom, t, b);
                    intersect_rows(&mut dom, f, b);
                }
            }
        }
        dom
    }

    /// On random graphs, every block with a branch has libpcap's dominators, and every block
    /// dominates the unreachable ones.
    #[test]
    fn dominators_are_libpcaps() {
        let mut rng = sift_testgen::Rng::new(0xd0d0_4242);
        for _ in 0..300 {
            let mut g = random_graph(&mut rng);
            let levels = find_levels(&mut g);
            let want = reference(&g, &levels);
            let got = Dominators::new(&g, &levels);
            let reached = g.reachable();
            for (d, row) in want.iter().enumerate() {
                if reached[d] && g.blocks[d].is_return() {
                    continue;
                }
                for (b, &dominates) in row.iter().enumerate() {
                    assert_eq!(got.dominates(b, d), dominates, "{b} over {d}");
                }
            }
        }
    }
}
