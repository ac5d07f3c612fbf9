//! Shapes: conjunctions with their equality constants abstracted out (MPF's collapse).
//!
//! `ip src A and ip dst B and tcp src port P and tcp dst port Q` decomposes into one conjunction
//! whose `field == constant` atoms (the ethertype, both addresses, the protocol, both ports) are
//! its *key* and whose other atoms (not a fragment; enough bytes captured) are its *checks*. Every
//! connection filter has the same fields and checks, so they share one [`ShapeSig`]; each shape is
//! compiled once into an [`Extractor`](crate::extract::Extractor) that evaluates the checks and packs the key fields of a
//! packet into a fixed-size [`Key`], looked up in the shape's table. The filter's own constants
//! only ever live in that table, so inserting another connection touches nothing else.

use std::sync::Arc;

use crate::canon::{Atom, Expr, Rel};
use crate::paths::Conjunction;

/// Key size in 64-bit words: enough for an IPv6 4-tuple with its ethertype and next header.
pub(crate) const KEY_WORDS: usize = 6;

/// A packed tuple of key field values.
#[derive(Clone, Copy, Debug, Default, Eq)]
pub(crate) struct Key(pub(crate) [u64; KEY_WORDS]);

impl PartialEq for Key {
    /// Branch-free (the derived comparison calls `memcmp`, which dominated lookups).
    #[inline]
    fn eq(&self, other: &Key) -> bool {
        sift_jit::demux_table::same_key(&self.0, &other.0)
    }
}

/// What filters sharing a table have in common: the key fields (in packing order) and the
/// checks (constants included).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ShapeSig {
    pub(crate) keys: Vec<Arc<Expr>>,
    pub(crate) checks: Vec<Atom>,
}

/// Where a key field goes in the [`Key`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    pub(crate) word: u8,
    pub(crate) shift: u8,
}

/// Packs fields of the given value masks greedily into words; `None` for fields that no longer
/// fit (they are then compared as checks instead).
pub(crate) fn layout(masks: impl Iterator<Item = u32>) -> Vec<Option<Slot>> {
    let mut bit = 0usize;
    masks
        .map(|mask| {
            let width = 32 - mask.leading_zeros() as usize;
            if bit % 64 + width > 64 {
                bit = (bit / 64 + 1) * 64;
            }
            if bit + width > KEY_WORDS * 64 {
                return None;
            }
            let slot = Slot {
                word: (bit / 64) as u8,
                shift: (bit % 64) as u8,
            };
            bit += width;
            Some(slot)
        })
        .collect()
}

/// The order in which key fields are packed: fields that follow each other in the packet
/// (loads at one index, each starting where the previous ends: two addresses, two ports) stay
/// together, in packet order, and the widest such groups come first, so that a group fills a
/// word rather than straddling two. The native matcher then reads each group with one load,
/// as the bytes lie in the packet (`sift_jit::key_extractor::PacketOrder`). `keyed` comes in
/// the conjunction's canonical order, in which loads are sorted by index, then offset (the
/// derived order of `Expr::Load`'s fields), so adjacent loads are already neighbours; groups
/// move stably, so the order stays canonical.
fn packing_order(keyed: &mut [(&Arc<Expr>, u32)]) {
    fn place(e: &Expr) -> Option<(&Option<Arc<Expr>>, u32, u32)> {
        match e {
            Expr::Load {
                index,
                offset,
                bytes,
            } => Some((index, *offset, u32::from(*bytes))),
            _ => None,
        }
    }
    // Groups of adjacent loads, widest first (ties in their order): the widest of the groups
    // not yet placed moves ahead of the others, in place (inserting a filter splits its paths,
    // so this runs on every insert).
    let group_end = |keyed: &[(&Arc<Expr>, u32)], start: usize| {
        let mut end = start + 1;
        while end < keyed.len()
            && matches!(
                (place(keyed[end - 1].0), place(keyed[end].0)),
                (Some((ia, oa, ba)), Some((ib, ob, _))) if ia == ib && oa + ba == ob
            )
        {
            end += 1;
        }
        end
    };
    let width = |group: &[(&Arc<Expr>, u32)]| -> u32 {
        group
            .iter()
            .map(|(e, _)| match place(e) {
                Some((_, _, bytes)) => 8 * bytes,
                None => 32 - e.possible_bits().leading_zeros(),
            })
            .sum()
    };
    let mut placed = 0;
    while placed < keyed.len() {
        let mut best = (placed, group_end(keyed, placed));
        let mut best_width = width(&keyed[best.0..best.1]);
        let mut start = best.1;
        while start < keyed.len() {
            let end = group_end(keyed, start);
            let w = width(&keyed[start..end]);
            if w > best_width {
                (best, best_width) = ((start, end), w);
            }
            start = end;
        }
        keyed[placed..best.1].rotate_right(best.1 - best.0);
        placed += best.1 - best.0;
    }
}

/// Splits a conjunction into its shape and its key.
pub(crate) fn split(conj: &Conjunction) -> (ShapeSig, Key) {
    let mut keyed: Vec<(&Arc<Expr>, u32)> = conj.atoms.iter().filter_map(Atom::as_key).collect();
    packing_order(&mut keyed);
    let slots = layout(keyed.iter().map(|(e, _)| e.possible_bits()));
    let mut sig = ShapeSig {
        keys: Vec::new(),
        checks: Vec::new(),
    };
    let mut key = Key::default();
    for (&(field, k), slot) in keyed.iter().zip(&slots) {
        match slot {
            Some(s) => {
                sig.keys.push(field.clone());
                key.0[usize::from(s.word)] |= u64::from(k) << s.shift;
            }
            None => sig.checks.push(Atom::Cmp {
                rel: Rel::Eq,
                lhs: field.clone(),
                rhs: Arc::new(Expr::Const(k)),
            }),
        }
    }
    sig.checks
        .extend(conj.atoms.iter().filter(|a| a.as_key().is_none()).cloned());
    sig.checks.sort();
    (sig, key)
}

/// Rebuilds the conjunction a shape and key stand for (used by the overlap check).
pub(crate) fn key_values(sig: &ShapeSig, key: &Key) -> Vec<(Arc<Expr>, u32)> {
    let slots = layout(sig.keys.iter().map(|e| e.possible_bits()));
    sig.keys
        .iter()
        .zip(slots)
        .map(|(e, s)| {
            let s = s.expect("keys of a signature fit by construction");
            let width = 32 - e.possible_bits().leading_zeros();
            let mask = if width == 0 {
                0
            } else {
                u64::MAX >> (64 - width)
            };
            let v = (key.0[usize::from(s.word)] >> s.shift) & mask;
            (e.clone(), v as u32)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paths::{decompose, Limits};

    /// The connection filters' fields: both addresses fill word 0 and both ports start word 1,
    /// each pair in packet order (so the native matcher reads each with one load), then the
    /// ethertype and the protocol.
    #[test]
    fn adjacent_fields_share_a_word_in_packet_order() {
        let e = "ip src 10.0.0.1 and ip dst 10.0.0.2 and tcp src port 1000 and tcp dst port 80";
        let f = sift::compile_ir(e, &sift::Options::new(1, 262144)).unwrap();
        let paths = decompose(&f, Limits::default()).unwrap();
        let [conj] = &paths[..] else {
            panic!("one path: {paths:?}");
        };
        let (sig, key) = split(conj);
        assert_eq!(sig.keys.len(), 6);
        assert_eq!(
            key.0[..2],
            [
                0x0a00_0002 << 32 | 0x0a00_0001,
                6 << 48 | 0x0800 << 32 | 80 << 16 | 1000
            ]
        );
    }
}
