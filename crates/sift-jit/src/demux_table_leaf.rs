//! A dispatch table's leaf: a power-of-two array of slots, open addressing with linear
//! probing, at most a quarter full; keys removed by moving the rest of their cluster back.

use std::sync::Arc;

use super::{KeyHash, Value};

/// Slots per key a leaf has at least (it grows past a quarter full, and shrinks below a
/// sixteenth). Linear probing leaves more keys past their first slot the fuller the array, and
/// each of them costs the probe a mispredicted branch: half full (2) left 20-30% of keys
/// there, a quarter full about 12%. Measured against 2 (`match_loop ... compare`): 1,000 keys
/// 7.6-7.9 -> 6.8 ns per local match and 5.6-5.8 -> 5.3-5.4 batched, 10^4 keys 8.6-8.9 ->
/// 8.0-8.2 local; it doubles the table's memory and an update's copy of a leaf (at most 96 KB
/// for two-word keys). A sixteenth full (16) was another 0.7-0.9 ns faster per local match
/// from 100 to 10^4 keys, for four times the memory: not kept. The native probe compares a
/// key's first slot apart from the loop over the others, which makes a key past its first slot
/// cost less (`demux_matcher_probe.rs`).
pub(super) const SLOTS_PER_KEY: usize = 4;
/// Smallest leaf array (a power of two).
pub(super) const LEAF_MIN_SLOTS: usize = 4;

/// One slot: a key and its value (0: vacant). Three words for the two-word keys of IPv4
/// connections: a value of one word rather than two takes a quarter less memory and a quarter
/// less to copy per update (matching measured the same).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot<const W: usize> {
    pub(super) key: [u64; W],
    pub(super) value: u64,
}

impl<const W: usize> Slot<W> {
    pub(super) const VACANT: Slot<W> = Slot {
        key: [0; W],
        value: 0,
    };

    pub(super) fn new(key: [u64; W], value: Value) -> Slot<W> {
        Slot {
            key,
            value: value.get(),
        }
    }

    pub fn key(&self) -> &[u64; W] {
        &self.key
    }

    /// `None` for a vacant slot.
    #[inline]
    pub fn value(&self) -> Option<Value> {
        Value::new(self.value)
    }

    pub(super) fn is_vacant(&self) -> bool {
        self.value == 0
    }

    #[inline]
    pub(super) fn holds(&self, key: &[u64; W]) -> bool {
        same_key(&self.key, key)
    }
}

/// Whether two keys are equal, without branches (a derived comparison may call `memcmp`,
/// which costs more than the whole comparison of a few words).
#[inline]
pub fn same_key<const W: usize>(a: &[u64; W], b: &[u64; W]) -> bool {
    a.iter().zip(b).fold(0, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// The slot holding `key` in a non-empty leaf, or the vacant one where it would go.
#[inline]
pub(super) fn probe<const W: usize>(slots: &[Slot<W>], hash: u64, key: &[u64; W]) -> usize {
    let mask = slots.len() - 1;
    let mut i = hash as usize & mask;
    loop {
        let s = &slots[i];
        if s.is_vacant() || s.holds(key) {
            return i;
        }
        i = (i + 1) & mask;
    }
}

/// A leaf array holding `slots` (occupied ones), at most a quarter full.
pub(super) fn leaf_of<const W: usize>(slots: &[Slot<W>], hash: &KeyHash) -> Arc<[Slot<W>]> {
    let n = (slots.len() * SLOTS_PER_KEY)
        .next_power_of_two()
        .max(LEAF_MIN_SLOTS);
    let mut leaf = vec![Slot::<W>::VACANT; n];
    for s in slots {
        let i = probe(&leaf, hash.hash(&s.key), &s.key);
        leaf[i] = *s;
    }
    leaf.into()
}

pub(super) fn occupied<const W: usize>(slots: &[Slot<W>]) -> impl Iterator<Item = &Slot<W>> {
    slots.iter().filter(|s| !s.is_vacant())
}

/// Whether `count` keys fit in a leaf of `slots` slots.
pub(super) fn fits(count: usize, slots: usize) -> bool {
    count * SLOTS_PER_KEY <= slots
}

/// Whether a leaf of `slots` slots holding `count` keys (at least one) is worth replacing by a
/// smaller one.
pub(super) fn mostly_empty(count: usize, slots: usize) -> bool {
    count * 4 * SLOTS_PER_KEY < slots && slots > LEAF_MIN_SLOTS
}

/// Vacates slot `hole` of a linear-probing array and moves later keys of its cluster back so
/// that every key stays reachable from its home slot without passing a vacant one (instead of
/// rebuilding the array).
pub(super) fn backward_shift<const W: usize>(
    slots: &mut [Slot<W>],
    mut hole: usize,
    hasher: &KeyHash,
) {
    let mask = slots.len() - 1;
    let mut j = hole;
    loop {
        j = (j + 1) & mask;
        if slots[j].is_vacant() {
            break;
        }
        let home = hasher.hash(&slots[j].key) as usize & mask;
        // Distances from home, cyclically: the key at `j` may fill the hole iff the hole lies
        // on its probe path (between its home and `j`).
        let hole_distance = hole.wrapping_sub(home) & mask;
        let j_distance = j.wrapping_sub(home) & mask;
        if hole_distance <= j_distance {
            slots[hole] = slots[j];
            hole = j;
        }
    }
    slots[hole] = Slot::VACANT;
}
