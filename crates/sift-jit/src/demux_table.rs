//! The demultiplexer's dispatch table, in a memory layout its native matchers probe.
//!
//! `sift-demux` groups filters that differ only in constants into shapes and dispatches each
//! packet through a table from the packet's key (a few 64-bit words: addresses, ports) to the
//! filters under it. The per-packet cost of the demultiplexer is extracting that key and
//! probing the table, so both run in one machine-code function ([`crate::demux_matcher`]);
//! this module is the table such code can walk: keys and values at fixed offsets, every node
//! reachable through a `(address, mask)` pair, and every index the code computes masked by the
//! mask of the node it reads, so a probe can only read inside the table.
//!
//! Structure (persistent, so that matching threads keep a consistent snapshot while the writer
//! prepares the next one — read-copy-update): a shallow trie over the key's hash (128-way at
//! the root, 64-way below) whose leaves are open-addressing arrays (linear probing, at most a
//! quarter full) of at most [`LEAF_MAX`] keys. An update copies the one leaf and the trie
//! nodes above it that a published snapshot still shares (`Arc::make_mut`; nodes nobody else
//! holds are updated in place), never the whole table, and never generates code: the matcher
//! is handed the table's [`Header`] (root and hash seeds) at each call.
//!
//! Layout, all words native-endian `u64`:
//!
//! * a *slot* of a table of `W`-word keys is `W + 1` words: the key, then the value (a
//!   non-zero word, [`Value`]); a value of 0 marks a vacant slot (its key words are 0 too);
//! * a *node reference* is two words, `(address, meta)`: a leaf has `meta` = its number of
//!   slots minus one (a power of two minus one: the probe mask) and `address` = its first slot;
//!   a branch has `meta` = [`BRANCH`] and `address` = its `1 << level_bits(level)` child
//!   references, indexed by hash bits `level_shift(level) ..` of the key's hash; an empty
//!   leaf is one vacant slot in a static block, so no reference is ever null;
//! * the [`Header`] is the root's reference, then the two hash seeds, then the number of keys.
//!
//! The hash ([`KeyHash`]) is seeded per table (per demultiplexer), so that peers choosing
//! addresses and ports cannot aim for collisions: the key's words are taken in pairs, each pair
//! `(a, b)` folded into the running value `h` as `h = fold((a ^ h) ^ s0, b ^ s1)`, where
//! `fold(x, y)` xors the two halves of the 128-bit product `x * y` (foldhash's mixing step).
//!
//! Submodules: the hash (`demux_table_hash.rs`), a leaf's slots and probing
//! (`demux_table_leaf.rs`), the trie above the leaves and updates through it
//! (`demux_table_trie.rs`), and the check of the layout's invariants (`demux_table_check.rs`).

use std::num::NonZeroU64;

pub use hash::KeyHash;
pub use leaf::{same_key, Slot};
pub(crate) use trie::{level_bits, level_shift, NodeRef};
use trie::{Branch, Node, CHUNK};
pub use trie::{BRANCH, MAX_LEVEL};

#[path = "demux_table_check.rs"]
mod check;
#[path = "demux_table_hash.rs"]
mod hash;
#[path = "demux_table_leaf.rs"]
mod leaf;
#[path = "demux_table_trie.rs"]
mod trie;

/// Most keys a leaf holds before it splits into a branch (at most [`MAX_LEVEL`] levels deep, below
/// which leaves only grow). Each level costs a lookup a dependent load and a branch: 1,024
/// keys keep tables of up to 1,024 keys without a trie, and 10^6 at two levels (64 was
/// three). Measured against 64 (`match_loop`, `demux` bench): 1,000 keys 8.2
/// -> 6.9 ns per local match and 6.5 -> 5.8 batched, 10^6 keys 25 -> 15 ns. An update copies
/// the leaf (at most 96 KB for two-word keys, see `demux_table_leaf.rs`): inserts measured
/// 2.6-4.4 µs up to 10^5 keys, most of it the filter's front end.
pub const LEAF_MAX: usize = 1024;
/// Widest key, in words.
pub const MAX_KEY_WORDS: usize = 6;

/// What a key maps to: a non-zero word (what a vacant slot lacks), the caller's to interpret.
pub type Value = NonZeroU64;

/// The table's entry point for native code: the root, the hash seeds, and the number of keys
/// (which tells a batch whether the table is large enough for its probes to miss the cache).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub(crate) root: NodeRef,
    pub(crate) seeds: [u64; 2],
    pub(crate) keys: u64,
}

/// A persistent map from keys of `W` words (1 to [`MAX_KEY_WORDS`]) to [`Value`]s, laid out
/// for native probing (see the module docs). Cloning is cheap (the nodes are shared).
#[derive(Clone, Debug)]
pub struct Table<const W: usize> {
    header: Header,
    root: Node<W>,
    len: usize,
    hash: KeyHash,
}

impl<const W: usize> Table<W> {
    const WIDTH_OK: () = assert!(W >= 1 && W <= MAX_KEY_WORDS);

    pub fn new(hash: KeyHash) -> Table<W> {
        #[allow(clippy::let_unit_value)]
        let () = Self::WIDTH_OK;
        let root = Node::empty();
        Table {
            header: Header {
                root: root.native_ref(),
                seeds: hash.seeds(),
                keys: 0,
            },
            root,
            len: 0,
            hash,
        }
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn key_hash(&self) -> &KeyHash {
        &self.hash
    }

    /// What native code is handed: valid while the table is borrowed.
    pub(crate) fn header(&self) -> &Header {
        &self.header
    }

    /// The slot holding `key`, found as the native code finds it (hash, trie walk, masked
    /// linear probe), in Rust.
    #[inline]
    pub fn slot(&self, key: &[u64; W]) -> Option<&Slot<W>> {
        let hash = self.hash.hash(key);
        let slots = self.root.leaf(hash, 0);
        let mask = slots.len().checked_sub(1)?;
        let mut i = hash as usize & mask;
        loop {
            let s = &slots[i];
            if s.is_vacant() {
                return None;
            }
            if s.holds(key) {
                return Some(s);
            }
            i = (i + 1) & mask;
        }
    }

    pub fn get(&self, key: &[u64; W]) -> Option<Value> {
        self.slot(key).and_then(Slot::value)
    }

    /// Maps `key` to `value`; the value it replaces.
    pub fn insert(&mut self, key: [u64; W], value: Value) -> Option<Value> {
        let slot = Slot::new(key, value);
        let hash = self.hash.hash(&key);
        let old = trie::insert(&mut self.root, 0, hash, slot, &self.hash);
        if old.is_none() {
            self.len += 1;
        }
        self.header.root = self.root.native_ref();
        self.header.keys = self.len as u64;
        old
    }

    /// Removes `key`; the value it had.
    pub fn remove(&mut self, key: &[u64; W]) -> Option<Value> {
        let hash = self.hash.hash(key);
        let old = trie::remove(&mut self.root, 0, hash, key, &self.hash)?;
        self.len -= 1;
        if self.len <= LEAF_MAX / 4 && matches!(self.root, Node::Branch(_)) {
            // Few keys left: one leaf again, so that churn leaves no empty levels behind.
            let mut all = Vec::with_capacity(self.len);
            self.for_each(|key, value| all.push(Slot::new(*key, value)));
            self.root = Node::Leaf {
                slots: leaf::leaf_of(&all, &self.hash),
                count: all.len(),
            };
        }
        self.header.root = self.root.native_ref();
        self.header.keys = self.len as u64;
        Some(old)
    }

    /// Branch levels on the deepest path (0: the root is a leaf).
    pub fn depth(&self) -> u32 {
        fn walk<const W: usize>(n: &Node<W>) -> u32 {
            match n {
                Node::Leaf { .. } => 0,
                Node::Branch(b) => 1 + b.each_child().map(walk).max().unwrap_or(0),
            }
        }
        walk(&self.root)
    }

    /// Calls `f` on every key and its value.
    pub fn for_each(&self, mut f: impl FnMut(&[u64; W], Value)) {
        fn walk<const W: usize>(n: &Node<W>, f: &mut impl FnMut(&[u64; W], Value)) {
            match n {
                Node::Leaf { slots, .. } => {
                    for s in leaf::occupied(slots) {
                        if let Some(v) = s.value() {
                            f(&s.key, v);
                        }
                    }
                }
                Node::Branch(b) => b.each_child().for_each(|c| walk(c, f)),
            }
        }
        walk(&self.root, &mut f);
    }

    /// Heap bytes of the nodes.
    pub fn heap_bytes(&self) -> usize {
        fn walk<const W: usize>(n: &Node<W>) -> usize {
            match n {
                Node::Leaf { slots, .. } => std::mem::size_of_val::<[Slot<W>]>(slots),
                Node::Branch(b) => {
                    std::mem::size_of::<Branch<W>>()
                        + std::mem::size_of_val::<[NodeRef]>(&b.refs)
                        + b.children.len() * std::mem::size_of::<[Node<W>; CHUNK]>()
                        + b.each_child().map(walk).sum::<usize>()
                }
            }
        }
        walk(&self.root)
    }
}

#[cfg(test)]
#[path = "demux_table_tests.rs"]
mod tests;
