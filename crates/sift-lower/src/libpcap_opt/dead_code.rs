//! libpcap's dead-store elimination: unused instructions go, loads included.

use sift_ir::{Block, Function, Value};

/// Deletes every instruction whose value no reachable block uses, loads included (libpcap's
/// dead-store elimination). `reachable` lists the blocks reachable from the entry, fastest in
/// reverse postorder (any order gives the same result). Returns whether anything was deleted.
///
/// A value is live when a reachable terminator uses it, or a live instruction does. Visiting
/// the blocks backwards in reverse postorder and each block's instructions backwards, every
/// use is met before its definition when definitions dominate their uses, so one pass finds
/// them all, reading each block once. When that fails to hold (a live value whose instruction
/// was visited before its use, or one never visited, such as a block parameter), the pass is
/// redone by following uses one by one.
pub(super) fn remove_dead_code(f: &mut Function, reachable: &[Block]) -> bool {
    let one_pass = live_in_one_pass(f, reachable);
    // Tests check every answer of the one pass against following the uses.
    #[cfg(test)]
    if let Some(live) = &one_pass {
        assert!(*live == live_by_uses(f, reachable), "one-pass liveness");
    }
    let live = one_pass.unwrap_or_else(|| live_by_uses(f, reachable));
    let mut changed = false;
    for &b in reachable {
        let insts = &mut f.block_mut(b).insts;
        if insts.iter().any(|v| !live[v.index()]) {
            insts.retain(|v| live[v.index()]);
            changed = true;
        }
    }
    changed
}

/// The live values, found in one backward pass (see [`remove_dead_code`]); `None` when the
/// pass cannot tell.
fn live_in_one_pass(f: &Function, reachable: &[Block]) -> Option<Vec<bool>> {
    let n = f.values.len();
    let mut pass = OnePass {
        live: vec![false; n],
        visited: vec![false; n],
        marked: 0,
        late: false,
    };
    let mut visited_live = 0usize;
    for &b in reachable.iter().rev() {
        let data = f.block(b);
        data.term.for_each_operand(|o| pass.mark(o));
        for &v in data.insts.iter().rev() {
            if std::mem::replace(&mut pass.visited[v.index()], true) {
                continue; // listed twice: its first visit counted
            }
            if pass.live[v.index()] {
                visited_live += 1;
                f.inst(v).for_each_operand(|o| pass.mark(o));
            }
        }
    }
    // Every live value visited after it became live: nothing else is live.
    (!pass.late && pass.marked == visited_live).then_some(pass.live)
}

struct OnePass {
    live: Vec<bool>,
    /// Whether the value's instruction was visited (and its operands marked if it was live).
    visited: Vec<bool>,
    /// How many values are live.
    marked: usize,
    /// Whether a value became live after its instruction was visited.
    late: bool,
}

impl OnePass {
    fn mark(&mut self, v: Value) {
        if !std::mem::replace(&mut self.live[v.index()], true) {
            self.marked += 1;
            self.late |= self.visited[v.index()];
        }
    }
}

/// The live values, found by following each use to its definition.
fn live_by_uses(f: &Function, reachable: &[Block]) -> Vec<bool> {
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
    live
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_ir::parse_function;

    /// The one-pass liveness agrees with following uses whenever it answers, in every order
    /// of the blocks, and answers in reverse postorder.
    #[test]
    fn one_pass_agrees_with_following_uses() {
        let f = parse_function(
            "\
block0:
    v0 = load.b [14]
    v1 = const 15
    v2 = and v0, v1
    v3 = const 2
    v9 = const 7
    v10 = const 9
    br eq v2, v3, block1, block2
block1:
    v4 = shl v9, v3
    v5 = load.h [v4+14]
    v6 = const 80
    br eq v5, v6, block3, block2
block2:
    v7 = load.b [23]
    v8 = const 6
    br eq v7, v8, block3, block4
block3:
    ret 1
block4:
    ret 0
",
        )
        .unwrap();
        let rpo = f.reverse_postorder();
        let fast = live_in_one_pass(&f, &rpo).expect("answers in reverse postorder");
        assert_eq!(fast, live_by_uses(&f, &rpo));
        let unused = *f.block(Block(0)).insts.last().expect("v10");
        assert!(!fast[unused.index()], "v10 is dead");
        let mut order = rpo.clone();
        order.reverse();
        // Block 1's use of v9 comes after block 0, where v9 looked dead.
        assert_eq!(live_in_one_pass(&f, &order), None);
        let mut g = f.clone();
        assert!(remove_dead_code(&mut g, &order));
        let mut h = f.clone();
        assert!(remove_dead_code(&mut h, &rpo));
        assert_eq!(g, h);
    }
}
