//! libpcap's `or_pullup` and `and_pullup`: in a chain of tests sharing their true (or: false)
//! target, a test of the A value the chain was entered with is moved up to the chain's top.
//!
//! The chain is walked through the successor *slots* (which of a block's two pointers leads
//! on), because the rewrite re-points slots. It uses the dominators and predecessor lists from
//! before any edge moved in this pass.

use crate::atoms::A;
use crate::graph::BlockId;
use crate::state::Optimizer;

/// A successor pointer: block and whether it is the true one.
type Slot = (BlockId, bool);

impl Optimizer {
    fn slot(&self, (b, taken): Slot) -> Option<BlockId> {
        self.edge_succ(b, taken)
    }

    /// `or_pullup` (`along_true = false`: the chain continues through false edges and shares
    /// the true target) and `and_pullup` (`along_true = true`: the mirror image).
    pub fn pullup(&mut self, b: BlockId, along_true: bool) {
        let preds = self.g.blocks[b].preds.clone();
        let Some(&first) = preds.first() else {
            return;
        };
        // All predecessors must leave the same A.
        let val = self.g.blocks[first].val[A];
        if preds.iter().any(|&p| self.g.blocks[p].val[A] != val) {
            return;
        }
        // The shared target: the one the chain does not continue through.
        let shared = |o: &Optimizer, x: BlockId| o.edge_succ(x, !along_true);
        let target = shared(self, b);
        let mut diff: Slot = (first, self.g.blocks[first].jt == Some(b));
        let mut at_top = true;
        // Walk down while the tests look at the entry value of A.
        loop {
            let Some(d) = self.slot(diff) else { return };
            if shared(self, d) != target || !self.dom.contains(d, b) {
                return;
            }
            if self.g.blocks[d].val[A] != val {
                break;
            }
            diff = (d, along_true);
            at_top = false;
        }
        // Then find the next test that looks at the entry value again.
        let Some(d) = self.slot(diff) else { return };
        let mut same: Slot = (d, along_true);
        loop {
            let Some(s) = self.slot(same) else { return };
            if shared(self, s) != target || !self.dom.contains(s, b) {
                return;
            }
            if self.g.blocks[s].val[A] == val {
                break;
            }
            same = (s, along_true);
        }
        // Pull it up in front of the chain.
        let Some(pull) = self.slot(same) else { return };
        let after_pull = self.edge_succ(pull, along_true);
        self.set_edge_succ(same.0, same.1, after_pull);
        let diff_target = self.slot(diff);
        self.set_edge_succ(pull, along_true, diff_target);
        if at_top {
            for &p in &preds {
                let taken = self.g.blocks[p].jt == Some(b);
                self.set_edge_succ(p, taken, Some(pull));
            }
        } else {
            self.set_edge_succ(diff.0, diff.1, Some(pull));
        }
        self.progress.moved_edge();
    }
}
