//! The lists of filters under listed keys: key -> filters, persistent so readers keep a
//! consistent snapshot.
//!
//! A shape's dispatch table (`dispatch`, over `sift_jit::demux_table`) holds one filter per
//! key in a one-word slot value, which is all a key has in the common case (one connection,
//! one filter). A key that several filters share (or whose filter's id or priority does not
//! fit in the word) keeps its whole rank-ordered list here instead, and the dispatch slot says
//! so. This map is only read for such keys, so it
//! stays a Rust structure: a shallow 64-way trie over a seeded hash whose leaves are small
//! open-addressing arrays of at most [`LEAF_MAX`] keys (an update copies one leaf and the trie
//! nodes above it that a published snapshot still shares), with a plain array compared key by
//! key up to [`SMALL_MAX`] keys.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use crate::shape::{Key, KEY_WORDS};
use crate::{Delivery, FilterId};

/// Keys up to which a table is a plain array.
const SMALL_MAX: usize = 8;
/// Keys above which a leaf splits into 64 leaves.
const LEAF_MAX: usize = 256;
/// Smallest leaf (a power of two).
const LEAF_MIN_SLOTS: usize = 4;
const FANOUT_BITS: u32 = 6;
const FANOUT: usize = 1 << FANOUT_BITS;
/// Hash bits the trie uses start here; a leaf probes from the lowest bits.
const TRIE_SHIFT: u32 = 20;
const MAX_LEVEL: u32 = 6;

/// One installed filter (path) under a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) priority: i32,
    pub(crate) id: FilterId,
    pub(crate) delivery: Delivery,
}

impl Entry {
    /// Matching order: higher priority first, then earlier insertion.
    pub(crate) fn rank(&self) -> (std::cmp::Reverse<i32>, FilterId) {
        (std::cmp::Reverse(self.priority), self.id)
    }
}

/// The filters under one key, in matching order. Almost always one; `Vacant` marks a free
/// slot of a leaf. 16 bytes, like an [`Entry`]: the tag lives in the niche of its
/// [`Delivery`] and `Many` is a thin pointer, so a slot of a two-word key is 32 bytes (two
/// per cache line, none straddling two).
#[derive(Clone, Debug)]
pub(crate) enum Entries {
    Vacant,
    One(Entry),
    #[allow(clippy::rc_buffer)] // a thin pointer keeps the enum at 16 bytes
    Many(Arc<Vec<Entry>>),
}

const _: () = assert!(std::mem::size_of::<Entries>() == 16);

impl Entries {
    pub(crate) fn as_slice(&self) -> &[Entry] {
        match self {
            Entries::Vacant => &[],
            Entries::One(e) => std::slice::from_ref(e),
            Entries::Many(v) => v,
        }
    }

    fn is_vacant(&self) -> bool {
        matches!(self, Entries::Vacant)
    }

    fn with(&self, entry: Entry) -> Entries {
        let mut v = self.as_slice().to_vec();
        let at = v.partition_point(|e| e.rank() < entry.rank());
        v.insert(at, entry);
        match v.len() {
            1 => Entries::One(v[0]),
            _ => Entries::Many(Arc::new(v)),
        }
    }

    /// Without `id`; `None` when nothing is left.
    fn without(&self, id: FilterId) -> Option<Entries> {
        let v: Vec<Entry> = self
            .as_slice()
            .iter()
            .filter(|e| e.id != id)
            .copied()
            .collect();
        match v.len() {
            0 => None,
            1 => Some(Entries::One(v[0])),
            _ => Some(Entries::Many(Arc::new(v))),
        }
    }
}

/// The hash function of a demultiplexer's tables (seeded per demultiplexer, so that remote
/// peers choosing addresses and ports cannot aim for collisions).
#[derive(Clone, Debug, Default)]
pub(crate) struct KeyHasher(foldhash::fast::RandomState);

impl KeyHasher {
    #[inline]
    fn hash(&self, words: &[u64]) -> u64 {
        let mut h = self.0.build_hasher();
        for w in words {
            h.write_u64(*w);
        }
        h.finish()
    }
}

#[derive(Clone, Debug)]
struct Slot<const W: usize> {
    key: [u64; W],
    entries: Entries,
}

impl<const W: usize> Slot<W> {
    const VACANT: Slot<W> = Slot {
        key: [0; W],
        entries: Entries::Vacant,
    };

    #[inline]
    fn holds(&self, key: &[u64; W]) -> bool {
        sift_jit::demux_table::same_key(&self.key, key)
    }
}

#[derive(Clone, Debug)]
enum Node<const W: usize> {
    /// At most [`SMALL_MAX`] occupied slots, compared in order (only at the root).
    Small(Arc<[Slot<W>]>),
    /// Open addressing: a power-of-two number of slots (or none), at most half occupied.
    Leaf(Arc<[Slot<W>]>),
    Branch(Arc<[Node<W>; FANOUT]>),
}

fn child_index(hash: u64, level: u32) -> usize {
    ((hash >> (TRIE_SHIFT + FANOUT_BITS * level)) as usize) & (FANOUT - 1)
}

/// The slot holding `key` in a leaf, or the vacant one where it would go.
#[inline]
fn probe<const W: usize>(slots: &[Slot<W>], hash: u64, key: &[u64; W]) -> Option<usize> {
    let mask = slots.len().checked_sub(1)?;
    let mut i = hash as usize & mask;
    loop {
        let s = &slots[i];
        // The key first: on a hit (the common case) that decides, and both lie in one slot.
        if s.holds(key) || s.entries.is_vacant() {
            return Some(i);
        }
        i = (i + 1) & mask;
    }
}

/// A leaf holding `slots` (occupied ones), with room to spare.
fn leaf_of<const W: usize>(
    slots: impl ExactSizeIterator<Item = Slot<W>>,
    hasher: &KeyHasher,
) -> Arc<[Slot<W>]> {
    let n = (slots.len() * 2).next_power_of_two().max(LEAF_MIN_SLOTS);
    let mut leaf = vec![Slot::<W>::VACANT; n];
    for s in slots {
        let i = probe(&leaf, hasher.hash(&s.key), &s.key).expect("leaf has room");
        leaf[i] = s;
    }
    leaf.into()
}

fn occupied<const W: usize>(slots: &[Slot<W>]) -> impl Iterator<Item = &Slot<W>> {
    slots.iter().filter(|s| !s.entries.is_vacant())
}

/// [`Spot::start`] of a plain array: searched from the start, key by key.
const LINEAR: usize = usize::MAX;

/// A lookup half done: the slots it searches and where it starts ([`LINEAR`]: a plain
/// array). Borrowed from the table, so it sees the snapshot the table belongs to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Spot<'a, const W: usize> {
    slots: &'a [Slot<W>],
    start: usize,
}

impl<'a, const W: usize> Spot<'a, W> {
    /// The entries under `key` (the key this spot was computed for).
    #[inline]
    fn get(&self, key: &[u64; W]) -> Option<&'a Entries> {
        if self.start == LINEAR {
            return self.slots.iter().find(|s| s.holds(key)).map(|s| &s.entries);
        }
        let mask = self.slots.len().wrapping_sub(1);
        let mut i = self.start;
        // A leaf is at most half full: the probe meets the key or a vacant slot. (An empty
        // leaf has no slot: `get` ends it.)
        loop {
            let s = self.slots.get(i)?;
            // The key first: on a hit (the common case) that decides, and both lie in one slot.
            if s.holds(key) || s.entries.is_vacant() {
                return (!s.entries.is_vacant()).then_some(&s.entries);
            }
            i = (i + 1) & mask;
        }
    }
}

/// A persistent map from keys of `W` words to entries.
#[derive(Clone, Debug)]
pub(crate) struct Trie<const W: usize> {
    root: Node<W>,
    len: usize,
}

impl<const W: usize> Trie<W> {
    fn new() -> Trie<W> {
        Trie {
            root: Node::Small(Arc::new([])),
            len: 0,
        }
    }

    /// Where a lookup of `key` searches: the plain array (no hash), or the leaf its hash
    /// leads to and the slot its probe starts at. Separate from [`Spot::get`] so that a batch
    /// can read the first slots of many lookups before it compares any key.
    #[inline]
    fn spot(&self, key: &[u64; W], hasher: &KeyHasher) -> Spot<'_, W> {
        let mut node = &self.root;
        if let Node::Small(v) = node {
            return Spot {
                slots: v,
                start: LINEAR,
            };
        }
        let hash = hasher.hash(key);
        let mut level = 0;
        loop {
            match node {
                Node::Leaf(slots) => {
                    return Spot {
                        slots,
                        start: hash as usize & slots.len().wrapping_sub(1),
                    }
                }
                Node::Branch(children) => {
                    node = &children[child_index(hash, level)];
                    level += 1;
                }
                // Only a root is small.
                Node::Small(v) => {
                    return Spot {
                        slots: v,
                        start: LINEAR,
                    }
                }
            }
        }
    }

    fn insert(&mut self, key: [u64; W], entry: Entry, hasher: &KeyHasher) {
        let hash = hasher.hash(&key);
        let mut node = &mut self.root;
        let mut level = 0;
        loop {
            match node {
                Node::Small(v) => {
                    if let Some(i) = v.iter().position(|s| s.holds(&key)) {
                        let v = Arc::make_mut(v);
                        v[i].entries = v[i].entries.with(entry);
                        return;
                    }
                    let added = Slot {
                        key,
                        entries: Entries::One(entry),
                    };
                    let slots = v.iter().cloned().chain(std::iter::once(added));
                    *node = if v.len() < SMALL_MAX {
                        Node::Small(slots.collect())
                    } else {
                        Node::Leaf(leaf_of(slots.collect::<Vec<_>>().into_iter(), hasher))
                    };
                    self.len += 1;
                    return;
                }
                Node::Leaf(slots) => {
                    let at = probe(slots, hash, &key);
                    if let Some(i) = at.filter(|&i| !slots[i].entries.is_vacant()) {
                        let slots = Arc::make_mut(slots);
                        slots[i].entries = slots[i].entries.with(entry);
                        return;
                    }
                    self.len += 1;
                    let added = Slot {
                        key,
                        entries: Entries::One(entry),
                    };
                    let count = occupied(slots).count() + 1;
                    if count * 2 <= slots.len() {
                        let i = at.expect("a leaf with room has slots");
                        Arc::make_mut(slots)[i] = added;
                        return;
                    }
                    let all: Vec<Slot<W>> = occupied(slots)
                        .cloned()
                        .chain(std::iter::once(added))
                        .collect();
                    if count <= LEAF_MAX || level >= MAX_LEVEL {
                        *node = Node::Leaf(leaf_of(all.into_iter(), hasher));
                        return;
                    }
                    let mut parts: [Vec<Slot<W>>; FANOUT] = std::array::from_fn(|_| Vec::new());
                    for s in all {
                        parts[child_index(hasher.hash(&s.key), level)].push(s);
                    }
                    let children = parts.map(|p| match p.len() {
                        0 => Node::Leaf(Arc::new([])),
                        _ => Node::Leaf(leaf_of(p.into_iter(), hasher)),
                    });
                    *node = Node::Branch(Arc::new(children));
                    return;
                }
                Node::Branch(children) => {
                    node = &mut Arc::make_mut(children)[child_index(hash, level)];
                    level += 1;
                }
            }
        }
    }

    fn remove(&mut self, key: &[u64; W], id: FilterId, hasher: &KeyHasher) -> bool {
        let hash = hasher.hash(key);
        let mut node = &mut self.root;
        let mut level = 0;
        let removed_key = loop {
            let small = matches!(node, Node::Small(_));
            let slots = match node {
                Node::Small(v) | Node::Leaf(v) => v,
                Node::Branch(children) => {
                    node = &mut Arc::make_mut(children)[child_index(hash, level)];
                    level += 1;
                    continue;
                }
            };
            let found = if small {
                slots.iter().position(|s| s.holds(key))
            } else {
                probe(slots, hash, key).filter(|&i| !slots[i].entries.is_vacant())
            };
            let Some(i) = found else {
                return false;
            };
            if !slots[i].entries.as_slice().iter().any(|e| e.id == id) {
                return false;
            }
            if let Some(rest) = slots[i].entries.without(id) {
                Arc::make_mut(slots)[i].entries = rest;
                break false;
            }
            // The key goes: rebuild the array without it (linear probing cannot just vacate
            // a slot, and the copy is made anyway).
            let rest = slots
                .iter()
                .enumerate()
                .filter(|&(j, s)| j != i && !s.entries.is_vacant());
            let rest: Vec<Slot<W>> = rest.map(|(_, s)| s.clone()).collect();
            *node = if small {
                Node::Small(rest.into())
            } else if rest.is_empty() {
                Node::Leaf(Arc::new([]))
            } else {
                Node::Leaf(leaf_of(rest.into_iter(), hasher))
            };
            break true;
        };
        if removed_key {
            self.len -= 1;
            self.shrink_root();
        }
        true
    }

    /// A table that became small goes back to an array (with some hysteresis), so that churn
    /// does not leave empty trie levels behind.
    fn shrink_root(&mut self) {
        if self.len > SMALL_MAX / 2 || matches!(self.root, Node::Small(_)) {
            return;
        }
        let mut v = Vec::with_capacity(self.len);
        self.for_each_slot(&mut |s| v.push(s.clone()));
        self.root = Node::Small(v.into());
    }

    fn for_each_slot(&self, f: &mut impl FnMut(&Slot<W>)) {
        fn walk<const W: usize>(n: &Node<W>, f: &mut impl FnMut(&Slot<W>)) {
            match n {
                Node::Small(v) | Node::Leaf(v) => occupied(v).for_each(&mut *f),
                Node::Branch(c) => c.iter().for_each(|n| walk(n, f)),
            }
        }
        walk(&self.root, f);
    }

    fn heap_bytes(&self) -> usize {
        fn walk<const W: usize>(n: &Node<W>) -> usize {
            match n {
                Node::Small(v) | Node::Leaf(v) => std::mem::size_of_val::<[Slot<W>]>(v),
                Node::Branch(c) => {
                    FANOUT * std::mem::size_of::<Node<W>>() + c.iter().map(walk).sum::<usize>()
                }
            }
        }
        walk(&self.root)
    }
}

/// A shape's table: a [`Trie`] as narrow as its keys.
#[derive(Clone, Debug)]
pub(crate) enum Table {
    Narrow(Trie<2>),
    Wide(Trie<KEY_WORDS>),
}

/// The first `W` words of a key (the others are zero in every key of a table this narrow).
#[inline]
fn narrow<const W: usize>(key: &Key) -> [u64; W] {
    std::array::from_fn(|i| key.0[i])
}

impl Table {
    /// An empty table whose keys use `words` words.
    pub(crate) fn new(words: usize) -> Table {
        if words <= 2 {
            Table::Narrow(Trie::new())
        } else {
            Table::Wide(Trie::new())
        }
    }

    /// Number of keys.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        match self {
            Table::Narrow(t) => t.len,
            Table::Wide(t) => t.len,
        }
    }

    pub(crate) fn get(&self, key: &Key, hasher: &KeyHasher) -> Option<&Entries> {
        match self {
            Table::Narrow(t) => {
                let key = narrow(key);
                t.spot(&key, hasher).get(&key)
            }
            Table::Wide(t) => t.spot(&key.0, hasher).get(&key.0),
        }
    }

    /// Adds `entry` under `key`.
    pub(crate) fn insert(&mut self, key: Key, entry: Entry, hasher: &KeyHasher) {
        match self {
            Table::Narrow(t) => t.insert(narrow(&key), entry, hasher),
            Table::Wide(t) => t.insert(key.0, entry, hasher),
        }
    }

    /// Removes filter `id` from under `key`; whether it was there.
    pub(crate) fn remove(&mut self, key: &Key, id: FilterId, hasher: &KeyHasher) -> bool {
        match self {
            Table::Narrow(t) => t.remove(&narrow(key), id, hasher),
            Table::Wide(t) => t.remove(&key.0, id, hasher),
        }
    }

    /// Approximate heap bytes (for the memory-per-filter estimate).
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Table::Narrow(t) => t.heap_bytes(),
            Table::Wide(t) => t.heap_bytes(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: u64, priority: i32) -> Entry {
        Entry {
            priority,
            id: FilterId(id),
            delivery: Delivery::Exclusive,
        }
    }

    fn key(i: u64, words: usize) -> Key {
        let mut k = Key::default();
        k.0[0] = i.wrapping_mul(0x9e37_79b9);
        k.0[words - 1] ^= i;
        k
    }

    fn root_is_small(t: &Table) -> bool {
        match t {
            Table::Narrow(t) => matches!(t.root, Node::Small(_)),
            Table::Wide(t) => matches!(t.root, Node::Small(_)),
        }
    }

    #[test]
    fn grows_splits_and_shrinks() {
        for words in [2, 6] {
            grows_splits_and_shrinks_with(words);
        }
    }

    fn grows_splits_and_shrinks_with(words: usize) {
        let key = |i| key(i, words);
        let h = KeyHasher::default();
        let mut t = Table::new(words);
        let n = 5000u64;
        for i in 0..n {
            t.insert(key(i), entry(i + 1, 0), &h);
        }
        assert_eq!(t.len(), n as usize);
        for i in 0..n {
            let e = t.get(&key(i), &h).expect("present");
            assert_eq!(e.as_slice()[0].id, FilterId(i + 1));
        }
        assert!(t.get(&key(n + 1), &h).is_none());
        let snapshot = t.clone();
        for i in 0..n - 3 {
            assert!(t.remove(&key(i), FilterId(i + 1), &h));
            assert!(!t.remove(&key(i), FilterId(i + 1), &h));
        }
        assert_eq!(t.len(), 3);
        assert!(root_is_small(&t));
        for i in n - 3..n {
            assert!(t.get(&key(i), &h).is_some());
        }
        // The snapshot taken before the removals is untouched.
        assert_eq!(snapshot.len(), n as usize);
        for i in 0..n {
            assert!(snapshot.get(&key(i), &h).is_some());
        }
    }

    #[test]
    fn entries_under_one_key_stay_in_rank_order() {
        let key = |i| key(i, 1);
        let h = KeyHasher::default();
        let mut t = Table::new(1);
        t.insert(key(1), entry(5, 0), &h);
        t.insert(key(1), entry(6, 10), &h);
        t.insert(key(1), entry(7, 0), &h);
        let ids: Vec<u64> = t
            .get(&key(1), &h)
            .unwrap()
            .as_slice()
            .iter()
            .map(|e| e.id.0)
            .collect();
        assert_eq!(ids, [6, 5, 7]);
        assert!(t.remove(&key(1), FilterId(6), &h));
        let ids: Vec<u64> = t
            .get(&key(1), &h)
            .unwrap()
            .as_slice()
            .iter()
            .map(|e| e.id.0)
            .collect();
        assert_eq!(ids, [5, 7]);
        assert_eq!(t.len(), 1);
    }
}
