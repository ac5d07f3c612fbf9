//! libpcap's dead-store elimination: unused instructions go, loads included.

use sift_ir::{Block, Function, Value};

/// Deletes every instruction whose value no reachable block uses, loads included (libpcap's
/// dead-store elimination). `reachable` lists the blocks reachable from the entry (in any
/// order). Returns whether anything was deleted.
pub(super) fn remove_dead_code(f: &mut Function, reachable: &[Block]) -> bool {
    let mut live = vec![false; f.values.len()];
    let mut work: Vec<Value> = Vec::new();
    for &b in reachable {
        f.block(b).term.for_each_operand(|v| work.push(v));
    }
    while let Some(v) = work.pop() {
        if !std::mem::replace(&mut live[v.index()], true) {
            f.inst(v).for_each_operand(|o| work.push(o));
        }
    }
    let mut changed = false;
    for &b in reachable {
        let insts = &mut f.block_mut(b).insts;
        let before = insts.len();
        insts.retain(|v| live[v.index()]);
        changed |= insts.len() != before;
    }
    changed
}
