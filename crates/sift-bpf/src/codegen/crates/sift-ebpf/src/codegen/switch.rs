//! `Switch` terminators as generated code: eBPF has no indirect jumps, so a lookup table becomes
//! a binary search over the sorted keys, with short runs tested one by one. A table of `n` keys
//! costs about `log2(n) + 4` comparisons on any path, and `2n` instructions.

use super::{Emitter, Label};
use crate::insn::{JmpOp, Reg};

/// Runs of at most this many keys are tested linearly.
const LINEAR: usize = 4;

/// Jumps to the label of `key`'s entry in `table` (sorted by key, keys distinct), else to
/// `default`. `key` must not be the scratch register `jmp_const` uses for large constants.
pub(super) fn emit(e: &mut Emitter<'_>, key: Reg, table: &[(u32, Label)], default: Label) {
    if table.len() <= LINEAR {
        for &(k, l) in table {
            e.jmp_const(JmpOp::Eq, key, k, l);
        }
        e.ja(default);
        return;
    }
    let mid = table.len() / 2;
    let upper = e.new_label();
    e.jmp_const(JmpOp::Gt, key, table[mid - 1].0, upper);
    emit(e, key, &table[..mid], default);
    e.place(upper);
    emit(e, key, &table[mid..], default);
}
