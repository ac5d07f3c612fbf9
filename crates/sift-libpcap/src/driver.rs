//! The pass structure of libpcap's `bpf_optimize`: a loop of passes that only number
//! statements (but already run the peepholes, dead stores and all branch moves), a loop of
//! passes that rewrite statements, then merging of identical blocks and the root fix-up.

use crate::dominators::Dominators;
use crate::edge_dominators::EdgeDominators;
use crate::error::OptimizeError;
use crate::flow::{find_levels, find_preds, find_ud};
use crate::graph::Graph;
use crate::interning::intern_blocks;
use crate::jumps::FoldIndex;
use crate::pullups::Walks;
use crate::state::{Optimizer, Progress};
use crate::trace::{Stage, Tracer};
use crate::values::Values;

/// After this many passes in a row that only moved edges, libpcap assumes it is cycling.
const MAX_EDGE_ONLY_PASSES: u32 = 100;

impl Optimizer {
    /// One pass (libpcap's `opt_blks` after the analyses).
    fn pass(&mut self, do_stmts: bool) -> Result<(), OptimizeError> {
        self.values = Values::new();
        let levels = std::mem::take(&mut self.levels);
        find_preds(&mut self.g, &levels);
        for level in levels.iter().rev() {
            for &b in level {
                self.opt_blk(b, do_stmts)?;
            }
        }
        if !do_stmts {
            self.folds = FoldIndex::new(&self.g, &self.edom);
            for level in levels.iter().skip(1) {
                for &b in level {
                    self.opt_j(b, true);
                    self.opt_j(b, false);
                }
            }
            find_preds(&mut self.g, &levels);
            let mut walks = Walks::new(&self.g);
            for level in levels.iter().skip(1) {
                for &b in level {
                    self.pullup(&mut walks, b, false);
                    self.pullup(&mut walks, b, true);
                }
            }
        }
        self.levels = levels;
        Ok(())
    }

    /// Passes until one changes nothing (libpcap's `opt_loop`).
    ///
    /// A pass is a function of the graph alone (the analyses and value numbers start afresh),
    /// and libpcap stops only when a pass changes nothing or after 100 passes in a row that
    /// only moved edges. A pass that changed more than edges and left a graph an earlier such
    /// pass left therefore starts a cycle libpcap never leaves (a branch its constant A
    /// decides, so the peephole points both edges at the next block, while `opt_j` moves the
    /// edge the decision removed past that block, which has no statements for the peephole to
    /// decide, pass after pass): the model reports it instead of following it.
    fn run_loop(&mut self, do_stmts: bool, tracer: &mut Tracer<'_>) -> Result<(), OptimizeError> {
        let mut edge_only = 0;
        let mut after_progress: Vec<Graph> = Vec::new();
        for pass in 0.. {
            self.progress = Progress {
                done: true,
                progressed: false,
            };
            self.levels = find_levels(&mut self.g);
            self.dom = Dominators::new(&self.g, &self.levels);
            find_ud(&mut self.g, &self.levels);
            self.edom = EdgeDominators::new(&self.g, &self.levels);
            self.pass(do_stmts)?;
            tracer.snapshot(Stage::Pass { do_stmts, pass }, &self.g, Some(self.progress));
            if self.progress.done {
                break;
            }
            if self.progress.progressed {
                edge_only = 0;
                if after_progress.contains(&self.g) {
                    return Err(OptimizeError::NeverFinishes);
                }
                after_progress.push(self.g.clone());
            } else {
                edge_only += 1;
                if edge_only >= MAX_EDGE_ONLY_PASSES {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Skips tests at the root whose outcomes lead to the same place, moving the root's
    /// statements in front of the new root's; a returning root keeps no statements.
    fn opt_root(&mut self) {
        let old = self.g.root;
        let moved = std::mem::take(&mut self.g.blocks[old].stmts);
        let mut root = old;
        loop {
            let b = &self.g.blocks[root];
            match (b.jt, b.jf) {
                (Some(t), Some(f)) if t == f => root = t,
                _ => break,
            }
        }
        let own = std::mem::take(&mut self.g.blocks[root].stmts);
        let mut stmts = moved;
        stmts.extend(own);
        if self.g.blocks[root].is_return() {
            stmts.clear();
        }
        self.g.blocks[root].stmts = stmts;
        self.g.root = root;
    }
}

/// Runs libpcap's whole optimizer on a graph; the optimized graph has its new root.
pub fn optimize_graph(g: Graph, tracer: &mut Tracer<'_>) -> Result<Graph, OptimizeError> {
    let mut opt = Optimizer::new(g);
    tracer.snapshot(Stage::Input, &opt.g, None);
    opt.run_loop(false, tracer)?;
    opt.run_loop(true, tracer)?;
    intern_blocks(&mut opt.g);
    tracer.snapshot(Stage::Interned, &opt.g, None);
    opt.opt_root();
    tracer.snapshot(Stage::Rooted, &opt.g, None);
    Ok(opt.g)
}
