//! One lookup for two `switch`es on paths that never meet. A host set tests the same keys
//! against the IPv4 source and destination and, on the other side of the EtherType test,
//! against ARP's sender and target: four vector tests, of which any packet needs at most
//! two. Where a branch dominates two `switch`es with the same table and each lies on only one
//! side of it, no execution passes both. The earlier one then tests the key that the branch's
//! condition picks: its own key on its side, the later one's (loaded ahead of time) on the
//! other; the later `switch` takes over that test's conditions. The branch's condition (an
//! EtherType compare) is ready early and cheap, where the `switch`'s reach predicate would
//! put its whole path's logic before the lookup.
//!
//! The later key must be a load at a constant offset just before its `switch`: its safe
//! address does not depend on the path, so loading it early reads what the later block would
//! read whenever that block is reached (its bounds guard still joins that block's reach).

use cranelift_codegen::ir::{InstBuilder, Value};
use sift_bytecode::{Insn, Program};

use super::{Emitter, Pred, State};
use crate::bounds::Guard;
use crate::translate::Plan;

/// The conditions of one `switch`: one per case (with its target) and whether any case holds.
pub(super) type Tests = (Vec<(Value, u32)>, Option<Value>);

/// A later `switch` that shares the lookup of an earlier one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Partner {
    /// The later `switch`.
    pub later: usize,
    /// The branch that separates them, and whether the earlier one lies on its `then` side.
    pub branch: usize,
    pub earlier_on_then: bool,
}

/// For each instruction, the later `switch` that shares the lookup of the `switch` there.
pub(super) fn partners(plan: &Plan<'_>) -> Vec<Option<Partner>> {
    let p = plan.program;
    let n = p.code.len();
    let mut partner = vec![None; n];
    let mut taken = vec![false; n];
    let switches: Vec<usize> = (0..n)
        .filter(|&i| switch_table(p, plan, i).is_some())
        .collect();
    if switches.len() < 2 {
        return partner;
    }
    let reaches: Vec<Vec<bool>> = (0..n).map(|i| reachable_from(plan, i)).collect();
    let dominators = dominators(plan);
    for (at, &i) in switches.iter().enumerate() {
        if taken[i] {
            continue;
        }
        let same_table = |j: usize| {
            switch_table(p, plan, j).map(|t| &p.tables[t as usize].entries)
                == switch_table(p, plan, i).map(|t| &p.tables[t as usize].entries)
                && plan.native_operand(i) == plan.native_operand(j)
        };
        let found = switches[at + 1..].iter().find_map(|&j| {
            if taken[j] || !same_table(j) || !key_loaded_just_before(p, plan, j) {
                return None;
            }
            // A branch that dominates both, with each on one side only.
            (0..i).find_map(|d| {
                let Insn::Branch { then_, else_, .. } = p.code[d] else {
                    return None;
                };
                if !plan.flow.reachable[d] || !dominators[i][d] || !dominators[j][d] {
                    return None;
                }
                let leads =
                    |from: u32, to: usize| from as usize == to || reaches[from as usize][to];
                let side = |on: u32, off: u32| {
                    leads(on, i) && !leads(off, i) && leads(off, j) && !leads(on, j)
                };
                let earlier_on_then = if side(then_, else_) {
                    true
                } else if side(else_, then_) {
                    false
                } else {
                    return None;
                };
                Some(Partner {
                    later: j,
                    branch: d,
                    earlier_on_then,
                })
            })
        });
        if let Some(found) = found {
            taken[i] = true;
            taken[found.later] = true;
            partner[i] = Some(found);
        }
    }
    partner
}

/// `dominators[i][d]`: every path from the entry to instruction `i` passes `d`.
fn dominators(plan: &Plan<'_>) -> Vec<Vec<bool>> {
    let p = plan.program;
    let n = p.code.len();
    let mut dom: Vec<Option<Vec<bool>>> = vec![None; n];
    if n == 0 {
        return Vec::new();
    }
    let mut entry = vec![false; n];
    entry[0] = true;
    dom[0] = Some(entry);
    let mut succ = Vec::new();
    // Targets lie forward, so every predecessor comes first.
    for i in 0..n {
        if !plan.flow.reachable[i] {
            continue;
        }
        let Some(mut mine) = dom[i].clone() else {
            continue;
        };
        mine[i] = true;
        plan.flow.successors.of(p, i, &mut succ);
        for &s in &succ {
            let s = s as usize;
            if s < n {
                dom[s] = Some(match dom[s].take() {
                    None => mine.clone(),
                    Some(theirs) => theirs.iter().zip(&mine).map(|(a, b)| *a && *b).collect(),
                });
            }
        }
        dom[i] = Some(mine);
    }
    dom.into_iter()
        .map(|d| d.unwrap_or_else(|| vec![false; n]))
        .collect()
}

/// The table of the reachable `switch` at `i`.
fn switch_table(p: &Program, plan: &Plan<'_>, i: usize) -> Option<u32> {
    match p.code[i] {
        Insn::Switch { table, .. } if plan.flow.reachable[i] => Some(table),
        _ => None,
    }
}

/// Whether the key of the `switch` at `j` is always the value that the instruction before it
/// loads from a constant offset (no join in between, no coalescing, no certain reject).
fn key_loaded_just_before(p: &Program, plan: &Plan<'_>, j: usize) -> bool {
    let Insn::Switch { key, .. } = p.code[j] else {
        return false;
    };
    j > 0
        && !plan.flow.block_start[j]
        && plan.pairs[j - 1].is_none()
        && plan.bounds.guard[j - 1] != Guard::Reject
        && matches!(p.code[j - 1], Insn::Load { dst, base: None, .. } if dst == key)
}

/// The instructions some path from `from` (excluded) reaches.
fn reachable_from(plan: &Plan<'_>, from: usize) -> Vec<bool> {
    let p = plan.program;
    let mut seen = vec![false; p.code.len()];
    let (mut succ, mut stack) = (Vec::new(), vec![from]);
    while let Some(i) = stack.pop() {
        plan.flow.successors.of(p, i, &mut succ);
        for &s in &succ {
            let s = s as usize;
            if s < seen.len() && !seen[s] {
                seen[s] = true;
                stack.push(s);
            }
        }
    }
    seen
}

impl Emitter<'_, '_, '_> {
    /// The key that the `switch` at `i` (reached on `reach`, with `key` in the register)
    /// tests: `key`, or, when a later `switch` shares its lookup, `key` on the earlier one's
    /// side of the separating branch and the later one's key on the other.
    pub(super) fn shared_key(&mut self, i: usize, reach: Pred, state: &State, key: Value) -> Value {
        let Some(partner) = self.partners[i] else {
            return key;
        };
        // The load belongs to the later block: its bounds guard joins that block's reach
        // there, not this block's.
        let guards = self.guards.len();
        let (_, other) = self.load(partner.later - 1, Pred::True, state);
        self.guards.truncate(guards);
        match self.conditions.get(&partner.branch) {
            Some(&holds) if partner.earlier_on_then => self.b.ins().select(holds, key, other),
            Some(&holds) => self.b.ins().select(holds, other, key),
            // Decided at compile time: then only one side is ever reached.
            None => self.pick(reach, key, other),
        }
    }
}
