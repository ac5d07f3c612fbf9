//! A shape's dispatch table, and looking a packet up in it.
//!
//! The table matching reads is `sift_jit::demux_table::Table`: a persistent trie of
//! open-addressing leaves in a fixed memory layout, which the shape's native matcher
//! (`sift_jit::demux_matcher`, compiled once per shape in `native`) probes itself: checks,
//! key, hash, walk and probe in one call of generated code, with the table handed over at each
//! call, so inserting or removing a key never generates code. Where there is no JIT, the
//! extractor's steps are interpreted and the same table is walked in Rust.
//!
//! A slot's value is the first filter under the key in matching order, packed into two words
//! (id; priority, delivery, and whether more filters share the key). Nearly every key has one
//! filter — a connection's — so a lookup ends at the slot. A key several filters share is also
//! *crowded*: its whole rank-ordered list lives in a second persistent map (`table`), read
//! only when the slot says so.
//!
//! The table holds keys as the shape's native matcher computes them: fields that are plain
//! packet loads in packet byte order ([`PacketOrder`], so that the matcher swaps no bytes).
//! The rest of the crate speaks of keys with big-endian fields (what the constants of a filter
//! give); [`Dispatch`] converts at its boundary, and an interpreted lookup of a native shape
//! converts the key it extracted the same way (an interpreted shape's table keeps the
//! extractor's order).

use std::num::NonZeroU64;

use sift_jit::demux_matcher::DemuxMatcher;
use sift_jit::demux_table::{KeyHash, Slot, Table as Keys, Value};
use sift_jit::key_extractor::PacketOrder;

use crate::extract::Regs;
use crate::native::Matcher;
use crate::shape::{Key, KEY_WORDS};
use crate::snapshot::{deliver_in_order, Matches, ShapeView};
use crate::table::{Entry, KeyHasher, Table as Crowded};
use crate::{Delivery, FilterId};

const EXCLUSIVE: u64 = 1 << 32;
const CROWDED: u64 = 1 << 33;

/// The filters under a key, in matching order.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Found<'a> {
    One(Entry),
    Many(&'a [Entry]),
}

impl Found<'_> {
    pub(crate) fn as_slice(&self) -> &[Entry] {
        match self {
            Found::One(e) => std::slice::from_ref(e),
            Found::Many(list) => list,
        }
    }
}

/// Keys of `W` words, with the crowded keys' lists (both keyed in the table's order).
#[derive(Clone, Debug)]
pub(crate) struct Keyed<const W: usize> {
    pub(crate) keys: Keys<W>,
    crowded: Crowded,
    hasher: KeyHasher,
    /// From the crate's keys to the table's, and back.
    order: PacketOrder,
}

/// A shape's table, as narrow as its keys.
#[derive(Clone, Debug)]
pub(crate) enum Dispatch {
    Narrow(Keyed<2>),
    Wide(Keyed<KEY_WORDS>),
}

fn encode(e: Entry, crowded: bool) -> Value {
    let mut data = u64::from(e.priority as u32);
    if e.delivery == Delivery::Exclusive {
        data |= EXCLUSIVE;
    }
    if crowded {
        data |= CROWDED;
    }
    Value {
        tag: NonZeroU64::new(e.id.0).expect("filter ids are never 0"),
        data,
    }
}

#[inline]
fn decode(v: Value) -> (Entry, bool) {
    let entry = Entry {
        priority: v.data as u32 as i32,
        id: FilterId(v.tag.get()),
        delivery: if v.data & EXCLUSIVE != 0 {
            Delivery::Exclusive
        } else {
            Delivery::Copy
        },
    };
    (entry, v.data & CROWDED != 0)
}

/// The first `W` words of a key (the others are zero in every key of a table this narrow).
#[inline]
fn narrow<const W: usize>(key: &Key) -> [u64; W] {
    std::array::from_fn(|i| key.0[i])
}

fn widen(words: &[u64]) -> Key {
    let mut k = Key::default();
    k.0[..words.len()].copy_from_slice(words);
    k
}

impl<const W: usize> Keyed<W> {
    fn new(hash: KeyHash, order: PacketOrder) -> Keyed<W> {
        Keyed {
            keys: Keys::new(hash),
            crowded: Crowded::new(W),
            hasher: KeyHasher::default(),
            order,
        }
    }

    /// `key` (big-endian fields) as the table holds it, and back (the conversion is its own
    /// inverse).
    #[inline]
    fn convert(&self, key: &Key) -> Key {
        if self.order.is_identity() {
            return *key;
        }
        let mut k = *key;
        self.order.apply(&mut k.0);
        k
    }

    /// The filters a found slot stands for.
    #[inline]
    pub(crate) fn found<'a>(&'a self, slot: &Slot<W>) -> Option<Found<'a>> {
        let (first, crowded) = decode(slot.value()?);
        if !crowded {
            return Some(Found::One(first));
        }
        self.crowded_list(&widen(slot.key()))
    }

    /// CSPF delivery of the filters in `slot` (none for `None`), as [`deliver_in_order`]
    /// gives it, with the one-filter case inline.
    #[inline(always)]
    pub(crate) fn deliver(&self, slot: Option<&Slot<W>>, m: &mut Matches) {
        match slot.and_then(Slot::value) {
            None => m.deliver_none(),
            Some(v) if v.data & CROWDED == 0 => m.deliver_one(v.tag.get(), v.data & EXCLUSIVE != 0),
            Some(_) => self.deliver_crowded(slot, m),
        }
    }

    #[inline(never)]
    fn deliver_crowded(&self, slot: Option<&Slot<W>>, m: &mut Matches) {
        deliver_in_order(slot.and_then(|s| self.found(s)), m);
    }

    #[cold]
    fn crowded_list(&self, key: &Key) -> Option<Found<'_>> {
        self.crowded
            .get(key, &self.hasher)
            .map(|e| Found::Many(e.as_slice()))
    }

    fn get(&self, key: &Key) -> Option<Found<'_>> {
        self.found(self.keys.slot(&narrow(&self.convert(key)))?)
    }

    fn insert(&mut self, key: &Key, entry: Entry) {
        let key = &self.convert(key);
        let words = narrow::<W>(key);
        let Some((first, crowded)) = self.keys.get(&words).map(decode) else {
            self.keys.insert(words, encode(entry, false));
            return;
        };
        if !crowded {
            self.crowded.insert(*key, first, &self.hasher);
        }
        self.crowded.insert(*key, entry, &self.hasher);
        let head = self
            .crowded
            .get(key, &self.hasher)
            .expect("just inserted")
            .as_slice()[0];
        self.keys.insert(words, encode(head, true));
    }

    fn remove(&mut self, key: &Key, id: FilterId) -> bool {
        let key = &self.convert(key);
        let words = narrow::<W>(key);
        let Some((first, crowded)) = self.keys.get(&words).map(decode) else {
            return false;
        };
        if !crowded {
            if first.id != id {
                return false;
            }
            self.keys.remove(&words);
            return true;
        }
        if !self.crowded.remove(key, id, &self.hasher) {
            return false;
        }
        let rest: Vec<Entry> = self
            .crowded
            .get(key, &self.hasher)
            .map_or_else(Vec::new, |e| e.as_slice().to_vec());
        match rest[..] {
            [] => {
                self.keys.remove(&words);
            }
            [only] => {
                self.crowded.remove(key, only.id, &self.hasher);
                self.keys.insert(words, encode(only, false));
            }
            [head, ..] => {
                self.keys.insert(words, encode(head, true));
            }
        }
        true
    }

    fn for_each(&self, f: &mut impl FnMut(&Key, &[Entry])) {
        self.keys.for_each(|words, value| {
            let key = widen(words);
            let ours = self.convert(&key);
            match decode(value) {
                (first, false) => f(&ours, std::slice::from_ref(&first)),
                (_, true) => {
                    if let Some(list) = self.crowded_list(&key) {
                        f(&ours, list.as_slice());
                    }
                }
            }
        });
    }
}

impl Dispatch {
    /// An empty table for keys of `words` words, hashed with `hash`, holding them in `order`
    /// (the shape's key program's [`PacketOrder`] when it has native code; the identity, the
    /// default, when it is interpreted).
    pub(crate) fn new(words: usize, hash: KeyHash, order: PacketOrder) -> Dispatch {
        if words <= 2 {
            Dispatch::Narrow(Keyed::new(hash, order))
        } else {
            Dispatch::Wide(Keyed::new(hash, order))
        }
    }

    /// Number of keys.
    pub(crate) fn len(&self) -> usize {
        match self {
            Dispatch::Narrow(t) => t.keys.len(),
            Dispatch::Wide(t) => t.keys.len(),
        }
    }

    pub(crate) fn get(&self, key: &Key) -> Option<Found<'_>> {
        match self {
            Dispatch::Narrow(t) => t.get(key),
            Dispatch::Wide(t) => t.get(key),
        }
    }

    /// Adds `entry` under `key`.
    pub(crate) fn insert(&mut self, key: &Key, entry: Entry) {
        match self {
            Dispatch::Narrow(t) => t.insert(key, entry),
            Dispatch::Wide(t) => t.insert(key, entry),
        }
    }

    /// Removes filter `id` from under `key`; whether it was there.
    pub(crate) fn remove(&mut self, key: &Key, id: FilterId) -> bool {
        match self {
            Dispatch::Narrow(t) => t.remove(key, id),
            Dispatch::Wide(t) => t.remove(key, id),
        }
    }

    /// Calls `f` on every key and its filters.
    pub(crate) fn for_each(&self, f: &mut impl FnMut(&Key, &[Entry])) {
        match self {
            Dispatch::Narrow(t) => t.for_each(f),
            Dispatch::Wide(t) => t.for_each(f),
        }
    }

    /// Approximate heap bytes (for the memory-per-filter estimate).
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Dispatch::Narrow(t) => t.keys.heap_bytes() + t.crowded.heap_bytes(),
            Dispatch::Wide(t) => t.keys.heap_bytes() + t.crowded.heap_bytes(),
        }
    }
}

/// The only shape of a snapshot when it takes the common path (native code, two-word keys):
/// kept inline in the snapshot (a clone of the matcher's function pointers and of the table's
/// root), so that a match reaches the code and the table's header with one load from the
/// snapshot instead of a chain through the shape list, the extractor and its matcher.
#[derive(Clone, Debug)]
pub(crate) struct FastShape {
    pub(crate) matcher: DemuxMatcher<2>,
    pub(crate) table: Keyed<2>,
}

impl FastShape {
    pub(crate) fn of(shape: &ShapeView) -> Option<FastShape> {
        match (&shape.extractor.native, &shape.table) {
            (Some(Matcher::Narrow(m)), Dispatch::Narrow(t)) => Some(FastShape {
                matcher: m.clone(),
                table: t.clone(),
            }),
            _ => None,
        }
    }

    /// CSPF delivery of a packet ([`ShapeView::deliver`]).
    #[inline(always)]
    pub(crate) fn deliver(&self, pkt: &[u8], wire_len: u32, m: &mut Matches) {
        let t = &self.table;
        t.deliver(self.matcher.lookup(&t.keys, pkt, wire_len), m);
    }
}

impl ShapeView {
    /// CSPF delivery of a packet when this is the only shape ([`deliver_in_order`]), with the
    /// common case inline: native code, two-word keys, one filter under the key.
    #[inline(always)]
    pub(crate) fn deliver(&self, pkt: &[u8], wire_len: u32, m: &mut Matches) {
        let (Some(Matcher::Narrow(x)), Dispatch::Narrow(t)) = (&self.extractor.native, &self.table)
        else {
            return self.deliver_looked_up(pkt, wire_len, m);
        };
        t.deliver(x.lookup(&t.keys, pkt, wire_len), m);
    }

    /// [`ShapeView::deliver`] through [`ShapeView::lookup`].
    #[inline(never)]
    fn deliver_looked_up(&self, pkt: &[u8], wire_len: u32, m: &mut Matches) {
        let found = self.lookup(pkt, wire_len, &mut m.regs);
        deliver_in_order(found, m);
    }

    /// The filters under the packet's key; `None` when the shape's checks reject the packet
    /// or the key is absent. One call of native code where the shape has some.
    #[inline]
    pub(crate) fn lookup(&self, pkt: &[u8], wire_len: u32, regs: &mut Regs) -> Option<Found<'_>> {
        match (&self.extractor.native, &self.table) {
            (Some(Matcher::Narrow(m)), Dispatch::Narrow(t)) => {
                t.found(m.lookup(&t.keys, pkt, wire_len)?)
            }
            (Some(Matcher::Wide(m)), Dispatch::Wide(t)) => {
                t.found(m.lookup(&t.keys, pkt, wire_len)?)
            }
            _ => self.lookup_interpreted(pkt, wire_len, regs),
        }
    }

    /// [`ShapeView::lookup`] by the extractor's steps and a walk of the table in Rust.
    #[inline(never)]
    pub(crate) fn lookup_interpreted(
        &self,
        pkt: &[u8],
        wire_len: u32,
        regs: &mut Regs,
    ) -> Option<Found<'_>> {
        let mut key = Key::default();
        if !self.extractor.interpret(pkt, wire_len, regs, &mut key) {
            return None;
        }
        self.table.get(&key)
    }

    /// [`ShapeView::lookup`] for each of `packets` (at most [`sift_jit::demux_matcher::BATCH`])
    /// into `out[i]`; native code overlaps the probes' cache misses.
    pub(crate) fn lookup_batch<'s>(
        &'s self,
        packets: &[(&[u8], u32)],
        refs: &[sift_jit::PacketRef<'_>],
        regs: &mut Regs,
        out: &mut [Option<Found<'s>>],
    ) {
        const BATCH: usize = sift_jit::demux_matcher::BATCH;
        match (&self.extractor.native, &self.table) {
            (Some(Matcher::Narrow(m)), Dispatch::Narrow(t)) => {
                let mut slots = [None; BATCH];
                let n = m.lookup_batch(&t.keys, refs, &mut slots);
                for (o, s) in out.iter_mut().zip(&slots[..n]) {
                    *o = s.and_then(|s| t.found(s));
                }
            }
            (Some(Matcher::Wide(m)), Dispatch::Wide(t)) => {
                let mut slots = [None; BATCH];
                let n = m.lookup_batch(&t.keys, refs, &mut slots);
                for (o, s) in out.iter_mut().zip(&slots[..n]) {
                    *o = s.and_then(|s| t.found(s));
                }
            }
            _ => {
                for (o, &(pkt, wire_len)) in out.iter_mut().zip(packets) {
                    *o = self.lookup_interpreted(pkt, wire_len, regs);
                }
            }
        }
    }
}
