//! `Switch` terminators as generated code: eBPF has no indirect jumps, so a lookup table becomes
//! a binary search over its runs of consecutive keys with one target ([`sift_ir::runs`]), with
//! a few runs tested one by one: a single key with one `jeq`, a longer run with `jlt #lo` and
//! `jle #hi`. A table of `n` runs costs about `log2(n) + 8` comparisons on any path and a few
//! instructions per run; a port list written out is one run.

use sift_ir::runs::Run;

use super::Emitter;
use crate::assembler::Label;
use crate::insn::{JmpOp, Reg};

/// At most this many runs are tested linearly.
const LINEAR: usize = 4;

/// Jumps to the label of the run holding `key` in `runs` (in key order), else to `default`,
/// which `default_follows` says is placed right after this code (so no jump is needed).
/// `key` must not be the scratch register `jmp_const` uses for large constants.
pub(super) fn emit(
    e: &mut Emitter<'_>,
    key: Reg,
    runs: &[Run<Label>],
    default: Label,
    default_follows: bool,
) {
    if runs.len() <= LINEAR {
        for run in runs {
            if run.lo == run.hi {
                e.jmp_const(JmpOp::Eq, key, run.lo, run.target);
            } else {
                let next = e.new_label();
                e.jmp_const(JmpOp::Lt, key, run.lo, next);
                e.jmp_const(JmpOp::Le, key, run.hi, run.target);
                e.place(next);
            }
        }
        if !default_follows {
            e.ja(default);
        }
        return;
    }
    let mid = runs.len() / 2;
    let upper = e.new_label();
    e.jmp_const(JmpOp::Gt, key, runs[mid - 1].hi, upper);
    emit(e, key, &runs[..mid], default, false);
    e.place(upper);
    emit(e, key, &runs[mid..], default, default_follows);
}
