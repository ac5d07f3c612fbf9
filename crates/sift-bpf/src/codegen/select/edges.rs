//! Edges into blocks with parameters: the copies of the arguments into the parameters' slots
//! (in a stub after the branching block when the edge is conditional), and the register state
//! the edge leaves at its target's entry.
//!
//! A parameter whose block reads it first as a packet load's index ([`super::super::recompute`])
//! is copied into `X` on every edge, so that all edges agree and the block finds it in place.

use sift_ir::{Target, Value};

use super::{Item, Label, Selector};
use crate::codegen::regs::Regs;

impl Selector<'_> {
    /// Writes the edge arguments into the parameters' slots. Sequential copies are a correct
    /// parallel copy: the allocator gives a parameter its argument's word only when no other
    /// copy of the edge still reads that word afterwards.
    pub(super) fn copies(&mut self, t: &Target) {
        let params = self.f.block(t.block).params.clone();
        let mut pairs: Vec<(Value, Value)> = params
            .iter()
            .copied()
            .zip(t.args.iter().copied())
            .filter(|(p, _)| self.uses[p.index()] > 0)
            .collect();
        // Arguments already in a register go first, before loading the others clobbers `A`;
        // then the parameter that arrives in `X` (loading it may go through `A`, and the other
        // loads leave `X` alone), so that the copies reading the same words come together:
        // the last one reading a word then precedes the copies storing into parameters, and
        // [`super::coalesce`] can give those that word.
        pairs.sort_by_key(|&(p, arg)| {
            let in_reg = self.in_a(arg) || self.in_x(arg);
            match (in_reg, self.index_param[p.index()]) {
                (true, false) => 0,
                (_, true) => 1,
                (false, false) => 2,
            }
        });
        for (param, arg) in pairs {
            let from_x = if self.index_param[param.index()] {
                self.load_x(arg);
                true
            } else if self.in_x(arg) && !self.in_a(arg) {
                true
            } else {
                self.load_a(arg);
                false
            };
            self.items.push(Item::Copy { param, arg, from_x });
            let class = self.class[param.index()];
            if from_x {
                self.regs.x.alias(class);
            } else {
                self.regs.a.alias(class);
            }
        }
    }

    /// Records the register state an edge leaves at its target's entry.
    pub(super) fn leave(&mut self, t: &Target) {
        let params = &self.f.block(t.block).params;
        let class = &self.class;
        let args = t.args.iter().map(|a| class[a.index()]);
        Regs::merge_edge_into(&mut self.entry[t.block.index()], &self.regs, params, args);
    }

    /// The label to jump to for an edge: the block itself, or a stub doing the copies first.
    pub(super) fn edge_label(&mut self, t: &Target) -> Label {
        let params = &self.f.block(t.block).params;
        if params.iter().any(|p| self.uses[p.index()] > 0) {
            let l = self.fresh_label();
            self.stubs.push((l, t.clone(), self.regs.clone()));
            l
        } else {
            self.leave(t);
            self.block_label[t.block.index()]
        }
    }

    pub(super) fn jump(&mut self, t: &Target) {
        self.copies(t);
        self.leave(t);
        self.items
            .push(Item::Jump(self.block_label[t.block.index()]));
    }
}
