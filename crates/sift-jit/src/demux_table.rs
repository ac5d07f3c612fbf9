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
//! * a *slot* of a table of `W`-word keys is `W + 2` words: the key, then the value
//!   ([`Value`]: a non-zero tag and a data word); a tag of 0 marks a vacant slot (its key words
//!   are 0 too);
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

use std::num::NonZeroU64;
use std::sync::Arc;

/// Most keys a leaf holds before it splits into a branch (at most [`MAX_LEVEL`] levels deep, below
/// which leaves only grow). Each level costs a lookup a dependent load and a branch: 1,024
/// keys keep tables of up to 1,024 keys without a trie, and 10^6 at two levels (64 was
/// three). Measured against 64 (`match_loop`, `demux` bench): 1,000 keys 8.2
/// -> 6.9 ns per local match and 6.5 -> 5.8 batched, 10^6 keys 25 -> 15 ns. An update copies
/// the leaf (at most 128 KB for two-word keys, see [`SLOTS_PER_KEY`]): inserts measured 2.6-4.4
/// µs up to 10^5 keys, most of it the filter's front end.
pub const LEAF_MAX: usize = 1024;
/// Slots per key a leaf has at least (it grows past a quarter full, and shrinks below a
/// sixteenth). Linear probing leaves more keys past their first slot the fuller the array, and
/// each of them costs the probe a mispredicted branch: half full (2) left 20-30% of keys
/// there, a quarter full about 12%. Measured against 2 (`match_loop ... compare`): 1,000 keys
/// 7.6-7.9 -> 6.8 ns per local match and 5.6-5.8 -> 5.3-5.4 batched, 10^4 keys 8.6-8.9 ->
/// 8.0-8.2 local; it doubles the table's memory (66-103 -> 131-208 bytes per key) and an
/// update's copy of a leaf (at most 128 KB for two-word keys). A sixteenth full (16) was
/// another 0.7-0.9 ns faster per local match from 100 to 10^4 keys, for four times the memory:
/// not kept. The native probe compares a key's first slot apart from the loop over the others,
/// which makes a key past its first slot cost less (`demux_matcher_probe.rs`).
const SLOTS_PER_KEY: usize = 4;
/// Smallest leaf array (a power of two).
const LEAF_MIN_SLOTS: usize = 4;
/// Children of the root, when it is a branch: 128 keep tables up to ~1.2 * 10^5 keys at one
/// level (64 split them at ~5 * 10^4). Measured against 64 (`match_loop ... compare`, minimum
/// of 3-6): 10^5 keys 11.0 -> 8.6 ns per local match and 8.6 -> 7.4 batched, 10^4 keys the
/// same, 10^6 keys 12.2 -> 13.2 local (its second-level branches take twice the memory); 256
/// were slower at 10^6 (16.2).
pub(crate) const ROOT_BITS: u32 = 7;
/// Children of a branch below the root.
pub(crate) const FANOUT_BITS: u32 = 6;

/// Hash bits a branch at `level` indexes its children with.
pub(crate) fn level_bits(level: u32) -> u32 {
    if level == 0 {
        ROOT_BITS
    } else {
        FANOUT_BITS
    }
}

/// The lowest hash bit a branch at `level` indexes its children with.
pub(crate) fn level_shift(level: u32) -> u32 {
    match level {
        0 => TRIE_SHIFT,
        _ => TRIE_SHIFT + ROOT_BITS + FANOUT_BITS * (level - 1),
    }
}
/// Hash bits the trie uses start here; a leaf probes from the lowest bits (a leaf has at most
/// 2^20 slots, so the two never overlap).
pub(crate) const TRIE_SHIFT: u32 = 20;
/// Deepest trie level (level 0 is the root's children): branches at levels 0 to 5 read hash
/// bits 20 to 56.
pub const MAX_LEVEL: u32 = 6;
/// A node reference's `meta` word for a branch.
pub const BRANCH: u64 = u64::MAX;
/// Widest key, in words.
pub const MAX_KEY_WORDS: usize = 6;

/// What a key maps to: a non-zero tag (what a vacant slot lacks) and a data word, both the
/// caller's to interpret.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Value {
    pub tag: NonZeroU64,
    pub data: u64,
}

/// The seeded hash of keys (see the module docs for the function).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyHash {
    seeds: [u64; 2],
}

#[inline]
pub(crate) fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

impl KeyHash {
    pub fn new(seeds: [u64; 2]) -> KeyHash {
        KeyHash { seeds }
    }

    /// Seeds from the standard library's per-process random keys.
    pub fn random() -> KeyHash {
        use std::hash::{BuildHasher, Hasher};
        let state = std::collections::hash_map::RandomState::new();
        let seed = |salt: u64| {
            let mut h = state.build_hasher();
            h.write_u64(salt);
            h.finish()
        };
        KeyHash::new([seed(1), seed(2)])
    }

    pub fn seeds(&self) -> [u64; 2] {
        self.seeds
    }

    #[inline]
    pub fn hash(&self, key: &[u64]) -> u64 {
        let [s0, s1] = self.seeds;
        let mut h = 0;
        for pair in key.chunks(2) {
            let b = pair.get(1).copied().unwrap_or(0);
            h = fold(pair[0] ^ h ^ s0, b ^ s1);
        }
        h
    }
}

/// One slot: a key and its value (tag 0: vacant).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot<const W: usize> {
    key: [u64; W],
    tag: u64,
    data: u64,
}

impl<const W: usize> Slot<W> {
    const VACANT: Slot<W> = Slot {
        key: [0; W],
        tag: 0,
        data: 0,
    };

    pub fn key(&self) -> &[u64; W] {
        &self.key
    }

    /// `None` for a vacant slot.
    pub fn value(&self) -> Option<Value> {
        NonZeroU64::new(self.tag).map(|tag| Value {
            tag,
            data: self.data,
        })
    }

    fn is_vacant(&self) -> bool {
        self.tag == 0
    }

    #[inline]
    fn holds(&self, key: &[u64; W]) -> bool {
        same_key(&self.key, key)
    }
}

/// Whether two keys are equal, without branches (a derived comparison may call `memcmp`,
/// which costs more than the whole comparison of a few words).
#[inline]
pub fn same_key<const W: usize>(a: &[u64; W], b: &[u64; W]) -> bool {
    a.iter().zip(b).fold(0, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// A node as native code sees it (see the module docs).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NodeRef {
    pub(crate) address: u64,
    pub(crate) meta: u64,
}

/// The table's entry point for native code: the root, the hash seeds, and the number of keys
/// (which tells a batch whether the table is large enough for its probes to miss the cache).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub(crate) root: NodeRef,
    pub(crate) seeds: [u64; 2],
    pub(crate) keys: u64,
}

/// The empty leaf every empty node refers to: one vacant slot of the widest key.
static EMPTY_LEAF: [u64; MAX_KEY_WORDS + 2] = [0; MAX_KEY_WORDS + 2];

#[derive(Clone, Debug)]
enum Node<const W: usize> {
    /// `count` occupied slots of a power-of-two array (or none).
    Leaf {
        slots: Arc<[Slot<W>]>,
        count: usize,
    },
    Branch(Arc<Branch<W>>),
}

/// Children per shared chunk of a branch (see [`Branch`]).
const CHUNK: usize = 8;

/// A branch: the references native code follows, and the nodes they refer to (which keep the
/// referred memory alive). `refs[i]` is always `child(i).native_ref()`.
///
/// The children are held in shared chunks of [`CHUNK`]: an update copies the branches on its
/// path (a published snapshot still holds them), and copying one takes a reference to each
/// chunk and copies the one chunk it changes, 16 reference counts for 64 children instead of
/// 64 (24 for the root's 128). Each count lives with its node, elsewhere in memory: in a
/// table of 10^6 keys most are cache misses, which made the copies most of an update's cost.
#[derive(Clone, Debug)]
struct Branch<const W: usize> {
    refs: Box<[NodeRef]>,
    children: Box<[Arc<[Node<W>; CHUNK]>]>,
}

impl<const W: usize> Branch<W> {
    fn child(&self, i: usize) -> &Node<W> {
        &self.children[i / CHUNK][i % CHUNK]
    }

    /// Child `i`, for an update (its chunk copied first if shared).
    fn child_mut(&mut self, i: usize) -> &mut Node<W> {
        &mut Arc::make_mut(&mut self.children[i / CHUNK])[i % CHUNK]
    }

    fn each_child(&self) -> impl Iterator<Item = &Node<W>> {
        self.children.iter().flat_map(|c| c.iter())
    }
}

impl<const W: usize> Node<W> {
    fn empty() -> Node<W> {
        Node::Leaf {
            slots: Arc::new([]),
            count: 0,
        }
    }

    fn native_ref(&self) -> NodeRef {
        match self {
            Node::Leaf { slots, .. } if slots.is_empty() => NodeRef {
                address: EMPTY_LEAF.as_ptr() as u64,
                meta: 0,
            },
            Node::Leaf { slots, .. } => NodeRef {
                address: slots.as_ptr() as u64,
                meta: slots.len() as u64 - 1,
            },
            Node::Branch(b) => NodeRef {
                address: b.refs.as_ptr() as u64,
                meta: BRANCH,
            },
        }
    }
}

fn child_index(hash: u64, level: u32) -> usize {
    ((hash >> level_shift(level)) as usize) & ((1 << level_bits(level)) - 1)
}

/// The slot holding `key` in a non-empty leaf, or the vacant one where it would go.
#[inline]
fn probe<const W: usize>(slots: &[Slot<W>], hash: u64, key: &[u64; W]) -> usize {
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
fn leaf_of<const W: usize>(slots: &[Slot<W>], hash: &KeyHash) -> Arc<[Slot<W>]> {
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

fn occupied<const W: usize>(slots: &[Slot<W>]) -> impl Iterator<Item = &Slot<W>> {
    slots.iter().filter(|s| !s.is_vacant())
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
                seeds: hash.seeds,
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
        let mut node = &self.root;
        let mut level = 0;
        let slots = loop {
            match node {
                Node::Leaf { slots, .. } => break slots,
                Node::Branch(b) => {
                    node = b.child(child_index(hash, level));
                    level += 1;
                }
            }
        };
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
        let slot = Slot {
            key,
            tag: value.tag.get(),
            data: value.data,
        };
        let hash = self.hash.hash(&key);
        let old = insert(&mut self.root, 0, hash, slot, &self.hash);
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
        let old = remove(&mut self.root, 0, hash, key, &self.hash)?;
        self.len -= 1;
        if self.len <= LEAF_MAX / 4 && matches!(self.root, Node::Branch(_)) {
            // Few keys left: one leaf again, so that churn leaves no empty levels behind.
            let mut all = Vec::with_capacity(self.len);
            self.for_each(|key, value| {
                all.push(Slot {
                    key: *key,
                    tag: value.tag.get(),
                    data: value.data,
                })
            });
            self.root = Node::Leaf {
                slots: leaf_of(&all, &self.hash),
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
                    for s in occupied(slots) {
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

    /// Checks the invariants native code relies on; the first broken one (for tests): every
    /// reference names exactly the memory of the node it stands for (so a masked index stays
    /// inside it), leaves are power-of-two arrays at most a quarter full, keys sit where a probe
    /// finds them, and the counts add up.
    pub fn check_layout(&self) -> Result<(), String> {
        fn walk<const W: usize>(
            n: &Node<W>,
            level: u32,
            hash: &KeyHash,
            seen: &mut usize,
        ) -> Result<(), String> {
            match n {
                Node::Leaf { slots, count } => {
                    if !slots.is_empty() && !slots.len().is_power_of_two() {
                        return Err(format!("leaf of {} slots", slots.len()));
                    }
                    let real = occupied(slots).count();
                    if real != *count || real * SLOTS_PER_KEY > slots.len() {
                        return Err(format!(
                            "leaf of {} slots: {real} keys, counted {count}",
                            slots.len()
                        ));
                    }
                    for s in occupied(slots) {
                        let h = hash.hash(&s.key);
                        if probe(slots, h, &s.key)
                            != slots
                                .iter()
                                .position(|x| std::ptr::eq(x, s))
                                .unwrap_or(usize::MAX)
                        {
                            return Err(format!("key {:x?} not where its probe leads", s.key));
                        }
                    }
                    if slots.iter().any(|s| s.is_vacant() && s.key != [0; W]) {
                        return Err("vacant slot with key words".into());
                    }
                    *seen += real;
                    Ok(())
                }
                Node::Branch(b) => {
                    if level >= MAX_LEVEL {
                        return Err(format!("branch at level {level}"));
                    }
                    let fanout = 1 << level_bits(level);
                    if b.refs.len() != fanout || b.each_child().count() != fanout {
                        return Err(format!("branch of {} at level {level}", b.refs.len()));
                    }
                    for (i, (r, c)) in b.refs.iter().zip(b.each_child()).enumerate() {
                        if *r != c.native_ref() {
                            return Err(format!("stale reference {i} at level {level}"));
                        }
                        walk(c, level + 1, hash, seen)?;
                    }
                    Ok(())
                }
            }
        }
        if self.header.root != self.root.native_ref()
            || self.header.seeds != self.hash.seeds
            || self.header.keys != self.len as u64
        {
            return Err("stale header".into());
        }
        let mut seen = 0;
        walk(&self.root, 0, &self.hash, &mut seen)?;
        if seen != self.len {
            return Err(format!("{seen} keys, counted {}", self.len));
        }
        Ok(())
    }
}

/// Inserts into the subtree at `node` (at `level`); the replaced value, if the key was there.
fn insert<const W: usize>(
    node: &mut Node<W>,
    level: u32,
    hash: u64,
    slot: Slot<W>,
    hasher: &KeyHash,
) -> Option<Value> {
    match node {
        Node::Branch(b) => {
            let i = child_index(hash, level);
            let b = Arc::make_mut(b);
            let child = b.child_mut(i);
            let old = insert(child, level + 1, hash, slot, hasher);
            b.refs[i] = child.native_ref();
            old
        }
        Node::Leaf { slots, count } => {
            if !slots.is_empty() {
                let i = probe(slots, hash, &slot.key);
                if !slots[i].is_vacant() {
                    let old = slots[i].value();
                    Arc::make_mut(slots)[i] = slot;
                    return old;
                }
                if (*count + 1) * SLOTS_PER_KEY <= slots.len() {
                    Arc::make_mut(slots)[i] = slot;
                    *count += 1;
                    return None;
                }
            }
            let mut all: Vec<Slot<W>> = occupied(slots).copied().collect();
            all.push(slot);
            *node = if all.len() <= LEAF_MAX || level >= MAX_LEVEL {
                Node::Leaf {
                    slots: leaf_of(&all, hasher),
                    count: all.len(),
                }
            } else {
                split(&all, level, hasher)
            };
            None
        }
    }
}

/// A branch at `level` over `all`'s keys.
fn split<const W: usize>(all: &[Slot<W>], level: u32, hasher: &KeyHash) -> Node<W> {
    let fanout = 1 << level_bits(level);
    let mut parts: Vec<Vec<Slot<W>>> = vec![Vec::new(); fanout];
    for s in all {
        parts[child_index(hasher.hash(&s.key), level)].push(*s);
    }
    let nodes: Vec<Node<W>> = parts
        .into_iter()
        .map(|p| match p.len() {
            0 => Node::empty(),
            n if n > LEAF_MAX && level + 1 < MAX_LEVEL => split(&p, level + 1, hasher),
            n => Node::Leaf {
                slots: leaf_of(&p, hasher),
                count: n,
            },
        })
        .collect();
    let refs = nodes.iter().map(Node::native_ref).collect();
    let mut nodes = nodes.into_iter();
    let children = (0..fanout / CHUNK)
        .map(|_| Arc::new(std::array::from_fn(|_| nodes.next().expect("fanout nodes"))))
        .collect();
    Node::Branch(Arc::new(Branch { refs, children }))
}

/// Removes `key` from the subtree at `node`; its value, if it was there.
fn remove<const W: usize>(
    node: &mut Node<W>,
    level: u32,
    hash: u64,
    key: &[u64; W],
    hasher: &KeyHash,
) -> Option<Value> {
    match node {
        Node::Branch(b) => {
            let i = child_index(hash, level);
            // Look before copying: a miss must not copy shared nodes.
            if !contains(b.child(i), level + 1, hash, key) {
                return None;
            }
            let b = Arc::make_mut(b);
            let child = b.child_mut(i);
            let old = remove(child, level + 1, hash, key, hasher);
            b.refs[i] = child.native_ref();
            old
        }
        Node::Leaf { slots, count } => {
            if slots.is_empty() {
                return None;
            }
            let i = probe(slots, hash, key);
            let old = slots[i].value()?;
            *count -= 1;
            if *count == 0 {
                *node = Node::empty();
                return Some(old);
            }
            if *count * 4 * SLOTS_PER_KEY < slots.len() && slots.len() > LEAF_MIN_SLOTS {
                // Mostly empty: a smaller array (the copy is made anyway).
                let rest: Vec<Slot<W>> =
                    occupied(slots).filter(|s| !s.holds(key)).copied().collect();
                *slots = leaf_of(&rest, hasher);
                return Some(old);
            }
            backward_shift(Arc::make_mut(slots), i, hasher);
            Some(old)
        }
    }
}

fn contains<const W: usize>(node: &Node<W>, level: u32, hash: u64, key: &[u64; W]) -> bool {
    match node {
        Node::Branch(b) => contains(b.child(child_index(hash, level)), level + 1, hash, key),
        Node::Leaf { slots, .. } => {
            !slots.is_empty() && !slots[probe(slots, hash, key)].is_vacant()
        }
    }
}

/// Vacates slot `hole` of a linear-probing array and moves later keys of its cluster back so
/// that every key stays reachable from its home slot without passing a vacant one (instead of
/// rebuilding the array).
fn backward_shift<const W: usize>(slots: &mut [Slot<W>], mut hole: usize, hasher: &KeyHash) {
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

#[cfg(test)]
#[path = "demux_table_tests.rs"]
mod tests;
