//! libpcap's `or_pullup` and `and_pullup`: in a chain of tests sharing their true (or: false)
//! target, a test of the A value the chain was entered with is moved up to the chain's top.
//!
//! The chain is walked through the successor *slots* (which of a block's two pointers leads
//! on), because the rewrite re-points slots. It uses the dominators and predecessor lists from
//! before any edge moved in this pass.

use crate::atoms::A;
use crate::graph::{BlockId, Graph};
use crate::state::Optimizer;

/// A successor pointer: block and whether it is the true one.
type Slot = (BlockId, bool);

/// Marks a missing successor.
const NONE: u32 = u32::MAX;

/// What the pullups' walks read of each block, side by side: the successors (which the
/// pullups rewrite, here and in the graph alike) and the number of A on exit (fixed during
/// the pass). A walk down a chain of hundreds of tests reads a few bytes of each, which the
/// blocks themselves hold far apart.
pub struct Walks {
    succ: Vec<[u32; 2]>,
    a: Vec<u32>,
}

impl Walks {
    /// The view of `g` as the pullups start.
    pub fn new(g: &Graph) -> Walks {
        let id = |s: Option<BlockId>| s.map_or(NONE, |s| s as u32);
        Walks {
            succ: g.blocks.iter().map(|b| [id(b.jf), id(b.jt)]).collect(),
            a: g.blocks.iter().map(|b| b.val[A]).collect(),
        }
    }

    fn slot(&self, (b, taken): Slot) -> Option<BlockId> {
        let s = self.succ[b][usize::from(taken)];
        (s != NONE).then_some(s as usize)
    }
}

impl Optimizer {
    /// Points slot `(b, taken)` at `to`, in the graph and in `walks`.
    fn repoint(&mut self, walks: &mut Walks, (b, taken): Slot, to: Option<BlockId>) {
        self.set_edge_succ(b, taken, to);
        walks.succ[b][usize::from(taken)] = to.map_or(NONE, |s| s as u32);
    }

    /// `or_pullup` (`along_true = false`: the chain continues through false edges and shares
    /// the true target) and `and_pullup` (`along_true = true`: the mirror image).
    pub fn pullup(&mut self, walks: &mut Walks, b: BlockId, along_true: bool) {
        let preds = &self.g.blocks[b].preds;
        let Some(&first) = preds.first() else {
            return;
        };
        // All predecessors must leave the same A.
        let val = walks.a[first];
        if preds.iter().any(|&p| walks.a[p] != val) {
            return;
        }
        // The shared target: the one the chain does not continue through.
        let shared = |w: &Walks, x: BlockId| w.slot((x, !along_true));
        let target = shared(walks, b);
        let mut diff: Slot = (first, walks.slot((first, true)) == Some(b));
        let mut at_top = true;
        // Walk down while the tests look at the entry value of A.
        loop {
            let Some(d) = walks.slot(diff) else { return };
            if shared(walks, d) != target || !self.dom.dominates(b, d) {
                return;
            }
            if walks.a[d] != val {
                break;
            }
            diff = (d, along_true);
            at_top = false;
        }
        // Then find the next test that looks at the entry value again.
        let Some(d) = walks.slot(diff) else { return };
        let mut same: Slot = (d, along_true);
        loop {
            let Some(s) = walks.slot(same) else { return };
            if shared(walks, s) != target || !self.dom.dominates(b, s) {
                return;
            }
            if walks.a[s] == val {
                break;
            }
            same = (s, along_true);
        }
        // Pull it up in front of the chain.
        let Some(pull) = walks.slot(same) else { return };
        let after_pull = walks.slot((pull, along_true));
        self.repoint(walks, same, after_pull);
        let diff_target = walks.slot(diff);
        self.repoint(walks, (pull, along_true), diff_target);
        if at_top {
            // The lists stay as they were at the start of the pass.
            for p in self.g.blocks[b].preds.clone() {
                let taken = walks.slot((p, true)) == Some(b);
                self.repoint(walks, (p, taken), Some(pull));
            }
        } else {
            self.repoint(walks, diff, Some(pull));
        }
        self.progress.moved_edge();
    }
}
