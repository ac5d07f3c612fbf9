//! Scratch-word allocation: virtual slots (one per spilled value) to `M[0]` .. `M[15]`.
//!
//! The item list is in a topological order of the control-flow graph, so a value is live only
//! between its first and its last slot access in that order; intervals that do not overlap
//! share a word (greedy colouring in order of start, lowest free word first).
//!
//! Block parameters share their arguments' words where [`super::coalesce`] finds that safe;
//! a group of values sharing a word is live over the union of its members' intervals.
//!
//! A `protochain` loop is an access of its result's slot, which is the loop's scratch word: the
//! loop runs at one point of the order, so no value live across it gets that word, and the
//! result (stored after the loop, when it is reloaded) may reuse it.

use std::collections::BTreeSet;

use foldhash::{HashMap, HashMapExt};

use sift_ir::Value;

use super::coalesce::coalesce;
use super::select::Item;
use super::CodegenError;
use crate::insn::{code, Op};
use crate::protochain::loop_code;

pub(super) fn allocate(items: Vec<Item>) -> Result<Vec<Item>, CodegenError> {
    // Stores nobody reloads (the value was always found in A) are dropped.
    let loaded: BTreeSet<Value> = items
        .iter()
        .filter_map(|i| match i {
            Item::LoadA(v) | Item::LoadX(v) => Some(*v),
            _ => None,
        })
        .collect();
    let items: Vec<Item> = items
        .into_iter()
        .filter(|i| {
            !matches!(i, Item::Store(v) | Item::StoreX(v) | Item::Copy { param: v, .. }
                if !loaded.contains(v))
        })
        .collect();

    // Groups of values sharing a word ([`super::coalesce`]), each live over one interval.
    let groups = coalesce(&items);
    let mut by_start: Vec<(usize, usize, Value)> =
        groups.range.iter().map(|(&g, &(s, e))| (s, e, g)).collect();
    by_start.sort();

    let mut slot_of_group: HashMap<Value, u32> = HashMap::new();
    // (end, slot) of the groups holding a word.
    let mut active: Vec<(usize, u32)> = Vec::new();
    for (start, end, g) in by_start {
        active.retain(|&(e, _)| e >= start);
        let free = (0..code::MEMWORDS).find(|s| active.iter().all(|&(_, t)| t != *s));
        let Some(slot) = free else {
            return Err(CodegenError::TooManyLiveValues {
                value: g,
                live: active.len(),
            });
        };
        active.push((end, slot));
        slot_of_group.insert(g, slot);
    }
    let slot_of = |v: Value| slot_of_group[&groups.of(v)];

    let mut out = Vec::with_capacity(items.len());
    for i in items {
        match i {
            Item::Store(v) => out.push(Item::Insn(Op::St.with_k(slot_of(v)))),
            Item::StoreX(v) => out.push(Item::Insn(Op::Stx.with_k(slot_of(v)))),
            // The word already holds the argument.
            Item::Copy { param, arg, .. } if groups.of(param) == groups.of(arg) => {}
            Item::Copy { param, from_x, .. } => {
                let op = if from_x { Op::Stx } else { Op::St };
                out.push(Item::Insn(op.with_k(slot_of(param))));
            }
            Item::LoadA(v) => out.push(Item::Insn(Op::LdMem.with_k(slot_of(v)))),
            Item::LoadX(v) => out.push(Item::Insn(Op::LdxMem.with_k(slot_of(v)))),
            // The loop's jumps are relative and stay inside it (its exits go to the next
            // instruction), so it travels on as plain instructions that nothing separates.
            Item::Walk {
                chain,
                base,
                target,
                value,
            } => out.extend(
                loop_code(chain, base, target, slot_of(value))
                    .into_iter()
                    .map(Item::Insn),
            ),
            other => out.push(other),
        }
    }
    Ok(out)
}
