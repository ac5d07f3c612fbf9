//! A dispatch table's trie: branches over the key's hash above the leaves, shared between
//! snapshots and copied along the path of an update (`Arc::make_mut`).

use std::sync::Arc;

use super::leaf::{backward_shift, fits, leaf_of, mostly_empty, occupied, probe, Slot};
use super::{KeyHash, Value, LEAF_MAX, MAX_KEY_WORDS};

/// Children of the root, when it is a branch: 128 keep tables up to ~1.2 * 10^5 keys at one
/// level (64 split them at ~5 * 10^4). Measured against 64 (`match_loop ... compare`, minimum
/// of 3-6): 10^5 keys 11.0 -> 8.6 ns per local match and 8.6 -> 7.4 batched, 10^4 keys the
/// same, 10^6 keys 12.2 -> 13.2 local (its second-level branches take twice the memory); 256
/// were slower at 10^6 (16.2).
pub(crate) const ROOT_BITS: u32 = 7;
/// Children of a branch below the root.
pub(crate) const FANOUT_BITS: u32 = 6;
/// Hash bits the trie uses start here; a leaf probes from the lowest bits (a leaf has at most
/// 2^20 slots, so the two never overlap).
pub(crate) const TRIE_SHIFT: u32 = 20;
/// Deepest trie level (level 0 is the root's children): branches at levels 0 to 5 read hash
/// bits 20 to 56.
pub const MAX_LEVEL: u32 = 6;
/// A node reference's `meta` word for a branch.
pub const BRANCH: u64 = u64::MAX;

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

pub(super) fn child_index(hash: u64, level: u32) -> usize {
    ((hash >> level_shift(level)) as usize) & ((1 << level_bits(level)) - 1)
}

/// A node as native code sees it (see the module docs of `demux_table`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct NodeRef {
    pub(crate) address: u64,
    pub(crate) meta: u64,
}

/// The empty leaf every empty node refers to: one vacant slot of the widest key.
static EMPTY_LEAF: [u64; MAX_KEY_WORDS + 1] = [0; MAX_KEY_WORDS + 1];

#[derive(Clone, Debug)]
pub(super) enum Node<const W: usize> {
    /// `count` occupied slots of a power-of-two array (or none).
    Leaf {
        slots: Arc<[Slot<W>]>,
        count: usize,
    },
    Branch(Arc<Branch<W>>),
}

/// Children per shared chunk of a branch (see [`Branch`]).
pub(super) const CHUNK: usize = 8;

/// A branch: the references native code follows, and the nodes they refer to (which keep the
/// referred memory alive). `refs[i]` is always `child(i).native_ref()`.
///
/// The children are held in shared chunks of [`CHUNK`]: an update copies the branches on its
/// path (a published snapshot still holds them), and copying one takes a reference to each
/// chunk and copies the one chunk it changes, 16 reference counts for 64 children instead of
/// 64 (24 for the root's 128). Each count lives with its node, elsewhere in memory: in a
/// table of 10^6 keys most are cache misses, which made the copies most of an update's cost.
#[derive(Clone, Debug)]
pub(super) struct Branch<const W: usize> {
    pub(super) refs: Box<[NodeRef]>,
    pub(super) children: Box<[Arc<[Node<W>; CHUNK]>]>,
}

impl<const W: usize> Branch<W> {
    pub(super) fn child(&self, i: usize) -> &Node<W> {
        &self.children[i / CHUNK][i % CHUNK]
    }

    /// Child `i`, for an update (its chunk copied first if shared).
    fn child_mut(&mut self, i: usize) -> &mut Node<W> {
        &mut Arc::make_mut(&mut self.children[i / CHUNK])[i % CHUNK]
    }

    pub(super) fn each_child(&self) -> impl Iterator<Item = &Node<W>> {
        self.children.iter().flat_map(|c| c.iter())
    }
}

impl<const W: usize> Node<W> {
    pub(super) fn empty() -> Node<W> {
        Node::Leaf {
            slots: Arc::new([]),
            count: 0,
        }
    }

    pub(super) fn native_ref(&self) -> NodeRef {
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

    /// The leaf `hash` leads to from this node at `level`.
    pub(super) fn leaf(&self, hash: u64, mut level: u32) -> &[Slot<W>] {
        let mut node = self;
        loop {
            match node {
                Node::Leaf { slots, .. } => return slots,
                Node::Branch(b) => {
                    node = b.child(child_index(hash, level));
                    level += 1;
                }
            }
        }
    }
}

/// Inserts `slot` into the subtree at `node` (at `level`); the replaced value, if the key was
/// there.
pub(super) fn insert<const W: usize>(
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
                if fits(*count + 1, slots.len()) {
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
pub(super) fn split<const W: usize>(all: &[Slot<W>], level: u32, hasher: &KeyHash) -> Node<W> {
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
pub(super) fn remove<const W: usize>(
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
            let leaf = b.child(i).leaf(hash, level + 1);
            if leaf.is_empty() || leaf[probe(leaf, hash, key)].is_vacant() {
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
            if mostly_empty(*count, slots.len()) {
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
