//! Scratch-word allocation: virtual slots (one per spilled value) to `M[0]` .. `M[15]`.
//!
//! The item list is in a topological order of the control-flow graph, so a value is live only
//! between its first and its last slot access in that order; intervals that do not overlap
//! share a word (greedy colouring in order of start, lowest free word first).
//!
//! A `protochain` loop is an access of its result's slot, which is the loop's scratch word: the
//! loop runs at one point of the order, so no value live across it gets that word, and the
//! result (stored after the loop, when it is reloaded) may reuse it.

use std::collections::{BTreeSet, HashMap};

use sift_ir::Value;

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
        .filter(|i| !matches!(i, Item::Store(v) | Item::StoreX(v) if !loaded.contains(v)))
        .collect();

    let mut interval: HashMap<Value, (usize, usize)> = HashMap::new();
    for (pos, item) in items.iter().enumerate() {
        if let Item::Store(v)
        | Item::StoreX(v)
        | Item::LoadA(v)
        | Item::LoadX(v)
        | Item::Walk { value: v, .. } = item
        {
            let e = interval.entry(*v).or_insert((pos, pos));
            e.1 = pos;
        }
    }
    let mut by_start: Vec<(usize, usize, Value)> =
        interval.iter().map(|(&v, &(s, e))| (s, e, v)).collect();
    by_start.sort();

    let mut slot_of: HashMap<Value, u32> = HashMap::new();
    // (end, slot) of the values holding a word.
    let mut active: Vec<(usize, u32)> = Vec::new();
    for (start, end, v) in by_start {
        active.retain(|&(e, _)| e >= start);
        let free = (0..code::MEMWORDS).find(|s| active.iter().all(|&(_, t)| t != *s));
        let Some(slot) = free else {
            return Err(CodegenError::TooManyLiveValues {
                value: v,
                live: active.len(),
            });
        };
        active.push((end, slot));
        slot_of.insert(v, slot);
    }

    let mut out = Vec::with_capacity(items.len());
    for i in items {
        match i {
            Item::Store(v) => out.push(Item::Insn(Op::St.with_k(slot_of[&v]))),
            Item::StoreX(v) => out.push(Item::Insn(Op::Stx.with_k(slot_of[&v]))),
            Item::LoadA(v) => out.push(Item::Insn(Op::LdMem.with_k(slot_of[&v]))),
            Item::LoadX(v) => out.push(Item::Insn(Op::LdxMem.with_k(slot_of[&v]))),
            // The loop's jumps are relative and stay inside it (its exits go to the next
            // instruction), so it travels on as plain instructions that nothing separates.
            Item::Walk {
                chain,
                base,
                target,
                value,
            } => out.extend(
                loop_code(chain, base, target, slot_of[&value])
                    .into_iter()
                    .map(Item::Insn),
            ),
            other => out.push(other),
        }
    }
    Ok(out)
}
