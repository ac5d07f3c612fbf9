//! Edge moving (libpcap's `opt_j`): an edge whose target repeats a test already decided on
//! every path to the edge is pointed past that test.
//!
//! The decision uses value numbers only: the same branch opcode, the same A number on exit
//! and the same operand number (or, on a true `jeq #k` edge, any other constant). The move is
//! refused only if the new target's successors read an atom whose number differs between the
//! edge's source and the new target - the source and target *exit* values, by use summaries
//! from the start of the pass. Nothing checks the blocks skipped in between, which is how a
//! skipped `ldxb` leaves a later `ld [x + k]` reading an X that nothing on the new path set.

use sift_bpf::code;

use crate::atoms::{A, N_ATOMS};
use crate::flow::edge_id;
use crate::graph::BlockId;
use crate::state::Optimizer;

impl Optimizer {
    /// Whether an atom read below `succ` has different numbers on exit from `b` and `succ`.
    pub fn use_conflict(&self, b: BlockId, succ: BlockId) -> bool {
        let used = self.g.blocks[succ].out_use;
        let (bv, sv) = (&self.g.blocks[b].val, &self.g.blocks[succ].val);
        (0..N_ATOMS).any(|atom| used & (1 << atom) != 0 && bv[atom] != sv[atom])
    }

    /// Where edge `dominator` (a decided test) lets an edge into `child` go instead, if
    /// `child` repeats that test.
    fn fold_edge(&self, child: BlockId, dominator: usize) -> Option<BlockId> {
        let n = self.g.blocks.len();
        let (pred, taken) = (dominator % n, dominator < n);
        let p = &self.g.blocks[pred];
        let c = &self.g.blocks[child];
        if c.code != p.edge_code || c.val[A] != p.val[A] {
            return None;
        }
        if c.oval == p.oval {
            return if taken { c.jt } else { c.jf };
        }
        // On the true edge of `jeq #k`, A is k; a different constant cannot be equal.
        if taken && p.edge_code == code::JMP | code::JEQ | code::K {
            return c.jf;
        }
        None
    }

    /// Moves edge `(pred, taken)` as far down as decided tests allow.
    pub fn opt_j(&mut self, pred: BlockId, taken: bool) {
        let Some(succ) = self.edge_succ(pred, taken) else {
            return;
        };
        let Some(succ_t) = self.g.blocks[succ].jt else {
            return;
        };
        // A test whose outcomes lead to the same place can be skipped.
        if Some(succ_t) == self.g.blocks[succ].jf && !self.use_conflict(pred, succ_t) {
            self.progress.changed();
            self.set_edge_succ(pred, taken, Some(succ_t));
        }
        let me = edge_id(self.g.blocks.len(), pred, taken);
        // The dominators in ascending order, a word of the set at a time (moving edges leaves
        // the sets as they are; this runs for every edge of every pass).
        'restart: loop {
            for w in 0..self.edom.words() {
                let mut word = self.edom.word(me, w);
                while word != 0 {
                    let d = w * 32 + word.trailing_zeros() as usize;
                    word &= word - 1;
                    let Some(cur) = self.edge_succ(pred, taken) else {
                        return;
                    };
                    let Some(target) = self.fold_edge(cur, d) else {
                        continue;
                    };
                    if self.use_conflict(pred, target) {
                        continue;
                    }
                    self.progress.moved_edge();
                    self.set_edge_succ(pred, taken, Some(target));
                    if self.g.blocks[target].jt.is_some() {
                        continue 'restart;
                    }
                    return;
                }
            }
            return;
        }
    }
}
