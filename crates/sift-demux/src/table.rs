//! A shape's dispatch table: key -> filters, persistent so readers keep a consistent snapshot.
//!
//! Matching threads read a published snapshot while the writer prepares the next one, so every
//! update must leave the old table intact (read-copy-update). Copying a table of 10^6 keys per
//! update is far too slow, and a fine-grained persistent map (a HAMT with small nodes) costs
//! several dependent cache misses per lookup. This table sits between the two: a shallow
//! 64-way trie over the hash whose leaves are ordinary SwissTable hash tables of at most
//! [`LEAF_MAX`] keys. An update copies one leaf and the trie nodes above it (`Arc::make_mut`
//! copies only what a published snapshot still shares; unshared nodes are updated in place,
//! which makes batched updates cheap); a lookup is one or two pointer hops plus one hash probe.
//! A table of at most [`SMALL_MAX`] keys is a plain array compared key by key, without hashing
//! (DPF's "few keys: compare directly").

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use hashbrown::HashTable;

use crate::shape::Key;
use crate::{Delivery, FilterId};

/// Keys up to which a table is a plain array.
const SMALL_MAX: usize = 8;
/// Keys above which a leaf splits into 64 leaves.
const LEAF_MAX: usize = 64;
const FANOUT_BITS: u32 = 6;
const FANOUT: usize = 1 << FANOUT_BITS;
/// Hash bits the trie uses start here: hashbrown uses the lowest bits for the bucket and the top
/// seven for its control bytes, so the trie takes the middle.
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

/// The filters under one key, in matching order. Almost always one.
#[derive(Clone, Debug)]
pub(crate) enum Entries {
    One(Entry),
    Many(Arc<[Entry]>),
}

impl Entries {
    pub(crate) fn as_slice(&self) -> &[Entry] {
        match self {
            Entries::One(e) => std::slice::from_ref(e),
            Entries::Many(v) => v,
        }
    }

    fn with(&self, entry: Entry) -> Entries {
        let mut v = self.as_slice().to_vec();
        let at = v.partition_point(|e| e.rank() < entry.rank());
        v.insert(at, entry);
        Entries::Many(v.into())
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
            _ => Some(Entries::Many(v.into())),
        }
    }
}

#[derive(Clone, Debug)]
struct Slot {
    key: Key,
    entries: Entries,
}

#[derive(Clone, Debug)]
enum Node {
    Small(Arc<Vec<Slot>>),
    Leaf(Arc<HashTable<Slot>>),
    Branch(Arc<[Node; FANOUT]>),
}

/// The hash function of a demultiplexer's tables (seeded per demultiplexer, so that remote
/// peers choosing addresses and ports cannot aim for collisions).
#[derive(Clone, Debug, Default)]
pub(crate) struct KeyHasher(foldhash::fast::RandomState);

impl KeyHasher {
    #[inline]
    pub(crate) fn hash(&self, key: &Key, words: usize) -> u64 {
        let mut h = self.0.build_hasher();
        for w in &key.0[..words] {
            h.write_u64(*w);
        }
        h.finish()
    }
}

/// A persistent map from keys to entries.
#[derive(Clone, Debug)]
pub(crate) struct Table {
    root: Node,
    words: usize,
    len: usize,
}

fn child_index(hash: u64, level: u32) -> usize {
    ((hash >> (TRIE_SHIFT + FANOUT_BITS * level)) as usize) & (FANOUT - 1)
}

impl Table {
    /// An empty table whose keys use `words` words.
    pub(crate) fn new(words: usize) -> Table {
        Table {
            root: Node::Small(Arc::new(Vec::new())),
            words,
            len: 0,
        }
    }

    /// Number of keys.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(crate) fn get(&self, key: &Key, hasher: &KeyHasher) -> Option<&Entries> {
        let hash = match &self.root {
            Node::Small(v) => return v.iter().find(|s| s.key == *key).map(|s| &s.entries),
            _ => hasher.hash(key, self.words),
        };
        let mut node = &self.root;
        let mut level = 0;
        loop {
            match node {
                Node::Small(v) => return v.iter().find(|s| s.key == *key).map(|s| &s.entries),
                Node::Leaf(t) => return t.find(hash, |s| s.key == *key).map(|s| &s.entries),
                Node::Branch(children) => {
                    node = &children[child_index(hash, level)];
                    level += 1;
                }
            }
        }
    }

    /// Adds `entry` under `key`.
    pub(crate) fn insert(&mut self, key: Key, entry: Entry, hasher: &KeyHasher) {
        let words = self.words;
        let hash = hasher.hash(&key, words);
        let rehash = |s: &Slot| hasher.hash(&s.key, words);
        let mut node = &mut self.root;
        let mut level = 0;
        loop {
            match node {
                Node::Small(v) => {
                    let v = Arc::make_mut(v);
                    if let Some(s) = v.iter_mut().find(|s| s.key == key) {
                        s.entries = s.entries.with(entry);
                        return;
                    }
                    v.push(Slot {
                        key,
                        entries: Entries::One(entry),
                    });
                    self.len += 1;
                    if v.len() > SMALL_MAX {
                        let mut t = HashTable::with_capacity(v.len());
                        for s in v.drain(..) {
                            t.insert_unique(rehash(&s), s, rehash);
                        }
                        *node = Node::Leaf(Arc::new(t));
                    }
                    return;
                }
                Node::Leaf(t) => {
                    let t = Arc::make_mut(t);
                    if let Some(s) = t.find_mut(hash, |s| s.key == key) {
                        s.entries = s.entries.with(entry);
                        return;
                    }
                    t.insert_unique(
                        hash,
                        Slot {
                            key,
                            entries: Entries::One(entry),
                        },
                        rehash,
                    );
                    self.len += 1;
                    if t.len() > LEAF_MAX && level < MAX_LEVEL {
                        let mut children: [Node; FANOUT] =
                            std::array::from_fn(|_| Node::Leaf(Arc::new(HashTable::new())));
                        for s in t.drain() {
                            let h = rehash(&s);
                            if let Node::Leaf(c) = &mut children[child_index(h, level)] {
                                Arc::make_mut(c).insert_unique(h, s, rehash);
                            }
                        }
                        *node = Node::Branch(Arc::new(children));
                    }
                    return;
                }
                Node::Branch(children) => {
                    node = &mut Arc::make_mut(children)[child_index(hash, level)];
                    level += 1;
                }
            }
        }
    }

    /// Removes filter `id` from under `key`; whether it was there.
    pub(crate) fn remove(&mut self, key: &Key, id: FilterId, hasher: &KeyHasher) -> bool {
        let words = self.words;
        let hash = hasher.hash(key, words);
        let mut node = &mut self.root;
        let mut level = 0;
        let removed_key = loop {
            match node {
                Node::Small(v) => {
                    let Some(i) = v.iter().position(|s| s.key == *key) else {
                        return false;
                    };
                    if !v[i].entries.as_slice().iter().any(|e| e.id == id) {
                        return false;
                    }
                    let v = Arc::make_mut(v);
                    match v[i].entries.without(id) {
                        Some(rest) => {
                            v[i].entries = rest;
                            break false;
                        }
                        None => {
                            v.swap_remove(i);
                            break true;
                        }
                    }
                }
                Node::Leaf(t) => {
                    let present = t
                        .find(hash, |s| s.key == *key)
                        .is_some_and(|s| s.entries.as_slice().iter().any(|e| e.id == id));
                    if !present {
                        return false;
                    }
                    let t = Arc::make_mut(t);
                    let Ok(slot) = t.find_entry(hash, |s| s.key == *key) else {
                        return false;
                    };
                    match slot.get().entries.without(id) {
                        Some(rest) => {
                            slot.into_mut().entries = rest;
                            break false;
                        }
                        None => {
                            slot.remove();
                            break true;
                        }
                    }
                }
                Node::Branch(children) => {
                    node = &mut Arc::make_mut(children)[child_index(hash, level)];
                    level += 1;
                }
            }
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
        self.root = Node::Small(Arc::new(v));
    }

    fn for_each_slot(&self, f: &mut impl FnMut(&Slot)) {
        fn walk(n: &Node, f: &mut impl FnMut(&Slot)) {
            match n {
                Node::Small(v) => v.iter().for_each(&mut *f),
                Node::Leaf(t) => t.iter().for_each(&mut *f),
                Node::Branch(c) => c.iter().for_each(|n| walk(n, f)),
            }
        }
        walk(&self.root, f);
    }

    /// Calls `f` on every key and its entries.
    pub(crate) fn for_each(&self, f: &mut impl FnMut(&Key, &[Entry])) {
        self.for_each_slot(&mut |s| f(&s.key, s.entries.as_slice()));
    }

    /// Approximate heap bytes (for the memory-per-filter estimate).
    pub(crate) fn heap_bytes(&self) -> usize {
        fn walk(n: &Node) -> usize {
            let slot = std::mem::size_of::<Slot>();
            match n {
                Node::Small(v) => v.capacity() * slot,
                Node::Leaf(t) => t.capacity() * (slot + 1),
                Node::Branch(c) => {
                    FANOUT * std::mem::size_of::<Node>() + c.iter().map(walk).sum::<usize>()
                }
            }
        }
        walk(&self.root)
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

    fn key(i: u64) -> Key {
        let mut k = Key::default();
        k.0[0] = i.wrapping_mul(0x9e37_79b9);
        k.0[1] = i;
        k
    }

    #[test]
    fn grows_splits_and_shrinks() {
        let h = KeyHasher::default();
        let mut t = Table::new(2);
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
        assert!(matches!(t.root, Node::Small(_)) || matches!(t.root, Node::Branch(_)));
        // The snapshot taken before the removals is untouched.
        assert_eq!(snapshot.len(), n as usize);
        for i in 0..n {
            assert!(snapshot.get(&key(i), &h).is_some());
        }
    }

    #[test]
    fn entries_under_one_key_stay_in_rank_order() {
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
