//! Early exits: before a block, when every path still going somewhere other than `ret 0` has
//! passed a rare test, one well-predicted branch leaves with the result so far (see the module
//! docs of [`super`]), saving the tail's work on nearly every packet.

use cranelift_codegen::ir::InstBuilder;
use sift_bytecode::{Insn, Operand};

use super::{Emitter, Pred, MIN_TAIL};
use crate::translate::exit_with;

impl Emitter<'_, '_, '_> {
    /// Whether block `i` does nothing but `ret 0` (paths into it decide nothing).
    fn rejects(&self, i: usize) -> bool {
        matches!(
            self.plan.program.code.get(i),
            Some(Insn::Return {
                value: Operand::Imm(0)
            })
        )
    }

    /// Before block `x`: leaves with the result so far unless a path into `x` or a later
    /// block (other than a `ret 0`) holds, when every such path is rare and enough work
    /// follows.
    pub(super) fn early_exit(&mut self, x: usize) {
        if self.exits_left == 0 || self.tail[x] < MIN_TAIL {
            return;
        }
        let mut alive: Option<Pred> = None;
        let mut preds = Vec::new();
        // The blocks the surviving paths enter (in order, repeated per edge).
        let mut targets = Vec::new();
        for j in x..self.incoming.len() {
            if self.rejects(j) {
                continue;
            }
            for e in &self.incoming[j] {
                if !e.rare || e.pred == Pred::True {
                    return;
                }
                preds.push(e.pred);
                targets.push(j);
            }
        }
        for p in preds {
            alive = Some(match alive {
                None => p,
                Some(a) => self.or(a, p),
            });
        }
        let Some(Pred::Value(alive)) = alive else {
            return;
        };
        self.exits_left -= 1;
        let fits = self.entry_guard();
        let result = self.outcomes.result(self.b, x, fits);
        let (leave, go_on) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(alive, go_on, &[], leave, &[]);
        self.b.switch_to_block(leave);
        exit_with(self.b, self.finish, result);
        self.b.switch_to_block(go_on);
        targets.dedup();
        if let [j] = targets[..] {
            // Past the exit, the path runs through `j`: the tests that led there held, and the
            // result is `j`'s outcome (fewer values live to the end, fewer operations).
            self.outcomes.start_at(j);
        }
    }
}
