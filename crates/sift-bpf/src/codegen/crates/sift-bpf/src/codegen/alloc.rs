//! Scratch-word allocation: virtual slots (one per spilled value) to `M[0]` .. `M[15]`.
//!
//! The item list is in a topological order of the control-flow graph, so a value is live only
//! between its first and its last slot access in that order; intervals that do not overlap
//! share a word (greedy colouring in order of start, lowest free word first).

use std::collections::{BTreeSet, HashMap};

use sift_ir::Value;

use super::select::Item;
use super::CodegenError;
use crate::insn::{code, Op};

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
        if let Item::Store(v) | Item::StoreX(v) | Item::LoadA(v) | Item::LoadX(v) = item {
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

    Ok(items
        .into_iter()
        .map(|i| match i {
            Item::Store(v) => Item::Insn(Op::St.with_k(slot_of[&v])),
            Item::StoreX(v) => Item::Insn(Op::Stx.with_k(slot_of[&v])),
            Item::LoadA(v) => Item::Insn(Op::LdMem.with_k(slot_of[&v])),
            Item::LoadX(v) => Item::Insn(Op::LdxMem.with_k(slot_of[&v])),
            other => other,
        })
        .collect())
}
