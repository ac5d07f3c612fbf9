//! The optimizer's working state: the graph, the pass-wide analyses and the "did anything
//! change" flags that decide when libpcap stops iterating.

use crate::dominators::Dominators;
use crate::edge_dominators::EdgeDominators;
use crate::graph::{BlockId, Graph};
use crate::jumps::FoldIndex;
use crate::values::Values;

/// libpcap's two progress flags. A pass that only moved branches clears `done` but not
/// `progressed`; 100 such passes in a row end the loop (libpcap's guard against cycling).
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    /// Nothing changed in this pass (so far).
    pub done: bool,
    /// Something other than branch movement changed in this pass.
    pub progressed: bool,
}

impl Progress {
    /// A statement or branch opcode changed.
    pub fn changed(&mut self) {
        self.done = false;
        self.progressed = true;
    }

    /// Only an edge moved.
    pub fn moved_edge(&mut self) {
        self.done = false;
    }
}

/// Everything one run of the optimizer works on.
pub struct Optimizer {
    /// The graph being optimized.
    pub g: Graph,
    /// This pass's value numbers.
    pub values: Values,
    /// This pass's levels (see [`crate::flow::find_levels`]).
    pub levels: Vec<Vec<BlockId>>,
    /// This pass's block dominators.
    pub dom: Dominators,
    /// This pass's edge dominators.
    pub edom: EdgeDominators,
    /// This pass's index of the edges that can move others (see [`Optimizer::opt_j`]).
    pub folds: FoldIndex,
    /// The dominators of the edge being moved (a buffer kept between edges).
    pub dominators: Vec<usize>,
    /// This pass's flags.
    pub progress: Progress,
}

impl Optimizer {
    /// Prepares to optimize `g`.
    pub fn new(g: Graph) -> Optimizer {
        Optimizer {
            values: Values::new(),
            levels: Vec::new(),
            dom: Dominators::default(),
            edom: EdgeDominators::default(),
            folds: FoldIndex::default(),
            dominators: Vec::new(),
            progress: Progress::default(),
            g,
        }
    }

    /// The successor of edge `(pred, taken)`.
    pub fn edge_succ(&self, pred: BlockId, taken: bool) -> Option<BlockId> {
        let b = &self.g.blocks[pred];
        if taken {
            b.jt
        } else {
            b.jf
        }
    }

    /// Points edge `(pred, taken)` at `to`.
    pub fn set_edge_succ(&mut self, pred: BlockId, taken: bool, to: Option<BlockId>) {
        let b = &mut self.g.blocks[pred];
        if taken {
            b.jt = to;
        } else {
            b.jf = to;
        }
    }
}
