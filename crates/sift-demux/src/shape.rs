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

/// Splits a conjunction into its shape and its key.
pub(crate) fn split(conj: &Conjunction) -> (ShapeSig, Key) {
    let keyed: Vec<(&Arc<Expr>, u32)> = conj.atoms.iter().filter_map(Atom::as_key).collect();
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
