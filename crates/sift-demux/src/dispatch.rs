//! A shape's dispatch table, and looking a packet up in it.
//!
//! The table matching reads is `sift_jit::demux_table::Table`: a persistent trie of
//! open-addressing leaves in a fixed memory layout, which the shape's native matcher
//! (`sift_jit::demux_matcher`, compiled once per shape in `native`) probes itself: checks,
//! key, hash, walk and probe in one call of generated code, with the table handed over at each
//! call, so inserting or removing a key never generates code. Where there is no JIT, the
//! extractor's steps are interpreted and the same table is walked in Rust.
//!
//! A slot's value is one word: the one filter under the key (id, priority and delivery), or a
//! mark that the key's filters are *listed*. Nearly every key has one filter — a connection's —
//! so a lookup ends at the slot. A key several filters share, or whose one filter's id or
//! priority does not fit in the word, is listed instead: its rank-ordered list lives in a
//! second persistent map (`table`), read only when the slot says so.
//!
//! The table holds keys as the shape's native matcher computes them: fields that are plain
//! packet loads in packet byte order ([`PacketOrder`], so that the matcher swaps no bytes).
//! The rest of the crate speaks of keys with big-endian fields (what the constants of a filter
//! give); [`Dispatch`] converts at its boundary, and an interpreted lookup of a native shape
//! converts the key it extracted the same way (an interpreted shape's table keeps the
//! extractor's order).

use sift_jit::demux_matcher::DemuxMatcher;
use sift_jit::demux_table::{KeyHash, Slot, Table as Keys, Value};
use sift_jit::key_extractor::PacketOrder;

use crate::extract::Regs;
use crate::native::Matcher;
use crate::shape::{Key, KEY_WORDS};
use crate::snapshot::{deliver_in_order, Matches, ShapeView};
use crate::table::{Entry, KeyHasher, Table as Lists};
use crate::{Delivery, FilterId};

/// A slot's value word (see the module docs): bit 63 set for a listed key (nothing else set
/// then); otherwise bit 62 for copy delivery, bits 40-61 the priority (two's complement), bits
/// 0-39 the id (never 0, so the word is not either). An exclusive filter's word is its id
/// under a mask: a match delivers it with one operation, which measured 0.3-0.5 ns per match
/// faster than shifting the id out and testing the delivery bit.
const LISTED: u64 = 1 << 63;
const COPY: u64 = 1 << 62;
const ID_BITS: u32 = 40;
const ID_MASK: u64 = (1 << ID_BITS) - 1;
const PRIORITY_BITS: u32 = 22;
const LISTED_VALUE: Value = Value::new(LISTED).expect("non-zero");

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

/// Keys of `W` words, with the listed keys' lists (both keyed in the table's order).
#[derive(Clone, Debug)]
pub(crate) struct Keyed<const W: usize> {
    pub(crate) keys: Keys<W>,
    lists: Lists,
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

/// The value word of a key with `e` as its one filter, if its id and priority fit.
fn encode(e: Entry) -> Option<Value> {
    let half = 1i64 << (PRIORITY_BITS - 1);
    let priority = i64::from(e.priority);
    if !(-half..half).contains(&priority) || e.id.0 > ID_MASK {
        return None;
    }
    let mut word = e.id.0 | (priority as u64 & ((1 << PRIORITY_BITS) - 1)) << ID_BITS;
    if e.delivery == Delivery::Copy {
        word |= COPY;
    }
    Value::new(word)
}

/// The one filter a value word holds; `None` for a listed key.
#[inline]
fn decode(v: Value) -> Option<Entry> {
    let word = v.get();
    if word & LISTED != 0 {
        return None;
    }
    let priority = ((word << (64 - ID_BITS - PRIORITY_BITS)) as i64 >> (64 - PRIORITY_BITS)) as i32;
    Some(Entry {
        priority,
        id: FilterId(word & ID_MASK),
        delivery: if word & COPY != 0 {
            Delivery::Copy
        } else {
            Delivery::Exclusive
        },
    })
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
            lists: Lists::new(W),
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
        self.found_value(slot.value(), || Some(slot))
    }

    /// The filters a slot's value stands for (`None`: no slot); `slot` finds the slot, needed
    /// only for a listed key.
    #[inline]
    pub(crate) fn found_value<'a, 's>(
        &'a self,
        value: Option<Value>,
        slot: impl FnOnce() -> Option<&'s Slot<W>>,
    ) -> Option<Found<'a>> {
        match decode(value?) {
            Some(only) => Some(Found::One(only)),
            None => self.listed(&widen(slot()?.key())),
        }
    }

    /// [`ShapeView::lookup_batch`] with `matcher`, the native code of this table's shape.
    #[inline]
    fn lookup_batch<'s>(
        &'s self,
        matcher: &DemuxMatcher<W>,
        refs: &[sift_jit::PacketRef<'_>],
        out: &mut [Option<Found<'s>>],
    ) {
        let mut values = [None; sift_jit::demux_matcher::BATCH];
        let n = matcher.lookup_batch(&self.keys, refs, &mut values);
        for ((o, v), r) in out.iter_mut().zip(&values[..n]).zip(refs) {
            *o = self.found_value(*v, || matcher.lookup_ref(&self.keys, r));
        }
    }

    /// CSPF delivery of the filters in `slot` (none for `None`), as [`deliver_in_order`]
    /// gives it, with the one-filter case inline.
    #[inline(always)]
    pub(crate) fn deliver(&self, slot: Option<&Slot<W>>, m: &mut Matches) {
        self.deliver_value(slot.and_then(Slot::value), m, || slot);
    }

    /// [`Keyed::deliver`] given the slot's value (`None`: no slot); `slot` finds the slot,
    /// needed only for a listed key. No filter and one exclusive filter are the same two
    /// stores (the word under the id mask; 0 for none), without a branch between them.
    #[inline(always)]
    pub(crate) fn deliver_value<'s>(
        &self,
        value: Option<Value>,
        m: &mut Matches,
        slot: impl FnOnce() -> Option<&'s Slot<W>>,
    ) {
        let w = value.map_or(0, Value::get);
        if w & (LISTED | COPY) == 0 {
            m.deliver_exclusive(w & ID_MASK);
        } else if w & LISTED == 0 {
            m.deliver_one(w & ID_MASK, false);
        } else {
            self.deliver_listed(slot(), m);
        }
    }

    #[inline(never)]
    fn deliver_listed(&self, slot: Option<&Slot<W>>, m: &mut Matches) {
        deliver_in_order(slot.and_then(|s| self.found(s)), m);
    }

    #[cold]
    fn listed(&self, key: &Key) -> Option<Found<'_>> {
        self.lists
            .get(key, &self.hasher)
            .map(|e| Found::Many(e.as_slice()))
    }

    fn get(&self, key: &Key) -> Option<Found<'_>> {
        self.found(self.keys.slot(&narrow(&self.convert(key)))?)
    }

    fn insert(&mut self, key: &Key, entry: Entry) {
        let key = &self.convert(key);
        let words = narrow::<W>(key);
        match self.keys.get(&words).map(decode) {
            None => {
                if let Some(v) = encode(entry) {
                    self.keys.insert(words, v);
                    return;
                }
            }
            Some(Some(only)) => self.lists.insert(*key, only, &self.hasher),
            Some(None) => {}
        }
        self.lists.insert(*key, entry, &self.hasher);
        self.keys.insert(words, LISTED_VALUE);
    }

    fn remove(&mut self, key: &Key, id: FilterId) -> bool {
        let key = &self.convert(key);
        let words = narrow::<W>(key);
        let Some(under) = self.keys.get(&words).map(decode) else {
            return false;
        };
        if let Some(only) = under {
            if only.id != id {
                return false;
            }
            self.keys.remove(&words);
            return true;
        }
        if !self.lists.remove(key, id, &self.hasher) {
            return false;
        }
        let rest = self.lists.get(key, &self.hasher).map(|e| e.as_slice());
        match rest {
            None | Some([]) => {
                self.keys.remove(&words);
            }
            Some(&[only]) => {
                if let Some(v) = encode(only) {
                    self.lists.remove(key, only.id, &self.hasher);
                    self.keys.insert(words, v);
                }
            }
            Some(_) => {}
        }
        true
    }

    fn for_each(&self, f: &mut impl FnMut(&Key, &[Entry])) {
        self.keys.for_each(|words, value| {
            let key = widen(words);
            let ours = self.convert(&key);
            match decode(value) {
                Some(only) => f(&ours, std::slice::from_ref(&only)),
                None => {
                    if let Some(list) = self.listed(&key) {
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
            Dispatch::Narrow(t) => t.keys.heap_bytes() + t.lists.heap_bytes(),
            Dispatch::Wide(t) => t.keys.heap_bytes() + t.lists.heap_bytes(),
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
        refs: &[sift_jit::PacketRef<'_>],
        regs: &mut Regs,
        out: &mut [Option<Found<'s>>],
    ) {
        match (&self.extractor.native, &self.table) {
            (Some(Matcher::Narrow(m)), Dispatch::Narrow(t)) => t.lookup_batch(m, refs, out),
            (Some(Matcher::Wide(m)), Dispatch::Wide(t)) => t.lookup_batch(m, refs, out),
            _ => {
                for (o, r) in out.iter_mut().zip(refs) {
                    *o = self.lookup_interpreted(r.data(), r.wire_len(), regs);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: u64, priority: i32, delivery: Delivery) -> Entry {
        Entry {
            priority,
            id: FilterId(id),
            delivery,
        }
    }

    #[test]
    fn value_words_hold_what_fits() {
        let half = 1 << (PRIORITY_BITS - 1);
        for e in [
            entry(1, 0, Delivery::Exclusive),
            entry(ID_MASK, -half, Delivery::Copy),
            entry(77, half - 1, Delivery::Exclusive),
            entry(5, -1, Delivery::Copy),
        ] {
            let v = encode(e).expect("fits");
            assert_eq!(decode(v), Some(e));
        }
        // Exclusive delivery: the word is the id.
        assert_eq!(encode(entry(9, 0, Delivery::Exclusive)).unwrap().get(), 9);
        for e in [
            entry(ID_MASK + 1, 0, Delivery::Exclusive),
            entry(3, half, Delivery::Copy),
            entry(3, i32::MIN, Delivery::Exclusive),
        ] {
            assert_eq!(encode(e), None);
        }
        assert_eq!(decode(LISTED_VALUE), None);
    }

    /// Keys whose one filter does not fit in a value word are listed, and go back to a word
    /// when what is left fits.
    #[test]
    fn filters_that_do_not_fit_are_listed() {
        let mut t = Keyed::<2>::new(KeyHash::new([1, 2]), PacketOrder::default());
        let key = |i: u64| widen(&[i, i * 7]);
        let big = entry(ID_MASK + 5, 0, Delivery::Exclusive);
        let odd = entry(6, i32::MAX, Delivery::Copy);
        let plain = entry(7, 3, Delivery::Copy);
        t.insert(&key(1), big);
        t.insert(&key(2), odd);
        t.insert(&key(3), plain);
        let ids = |t: &Keyed<2>, i| {
            t.get(&key(i))
                .map(|f| f.as_slice().iter().map(|e| e.id).collect::<Vec<_>>())
        };
        assert_eq!(ids(&t, 1), Some(vec![big.id]));
        assert_eq!(ids(&t, 2), Some(vec![odd.id]));
        assert_eq!(ids(&t, 3), Some(vec![plain.id]));
        let slot_word = |t: &Keyed<2>, i| {
            let words = narrow::<2>(&t.convert(&key(i)));
            t.keys.get(&words).map(Value::get)
        };
        assert_eq!(slot_word(&t, 1), Some(LISTED));
        assert_eq!(slot_word(&t, 2), Some(LISTED));
        // A second filter under a fitting key lists it; removing the other unlists it.
        t.insert(&key(3), big);
        assert_eq!(slot_word(&t, 3), Some(LISTED));
        assert!(t.remove(&key(3), big.id));
        assert_eq!(slot_word(&t, 3), encode(plain).map(Value::get));
        // A listed key left with a filter that does not fit stays listed.
        t.insert(&key(1), plain);
        assert!(t.remove(&key(1), plain.id));
        assert_eq!(slot_word(&t, 1), Some(LISTED));
        assert_eq!(ids(&t, 1), Some(vec![big.id]));
        assert!(t.remove(&key(1), big.id));
        assert!(t.remove(&key(2), odd.id));
        assert!(!t.remove(&key(2), odd.id));
        assert_eq!(ids(&t, 1), None);
        assert_eq!(slot_word(&t, 2), None);
        let mut seen = 0;
        t.for_each(&mut |_, list| seen += list.len());
        assert_eq!(seen, 1);
    }
}
