//! Constant-time set membership: the compiled form of a [`ValueSet`].
//!
//! A set is kept as sorted ranges in the IR, where a lookup is a binary search. Here each set
//! gets the representation that answers fastest for its shape:
//! - a bitmap when every range lies below 65536 (ports, VLAN IDs, protocol numbers);
//! - a few comparisons when there are only a handful of ranges;
//! - otherwise the ranges are cut into aligned blocks (address prefixes, CIDR blocks) and each
//!   prefix length present gets a hash table of prefixes. A key is in the set when its prefix of
//!   some present length is in that length's table, so a lookup costs at most one probe per
//!   distinct prefix length. Blocks of length 16 or less are expanded into a bitmap over the
//!   top 16 bits of the key instead, which costs one load whatever their number, and other
//!   lengths are expanded to the next multiple of 8 while memory allows (IPv4: at most the /24
//!   and /32 tables remain).
//!
//! Arbitrary ranges can cut into up to 2 × width blocks each; when the decomposition would
//! outgrow [`BLOCK_BUDGET_PER_RANGE`] times the number of ranges, the set keeps the sorted ranges
//! and binary search (logarithmic, and with no memory blow-up).

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::Arc;

use foldhash::fast::RandomState;
use sift_ir::{KeyWidth, ValueSet};

/// Sets with at most this many ranges are answered by comparing against each.
const FEW_RANGES: usize = 4;

/// Largest number of blocks per range (on average) a set may decompose into before it falls
/// back to binary search; plus a flat allowance so small sets of wide ranges still hash.
const BLOCK_BUDGET_PER_RANGE: usize = 4;
const BLOCK_BUDGET_FLAT: usize = 1 << 16;

/// Keys below this use the small-key bitmap.
const SMALL_KEY_LIMIT: u128 = 1 << 16;

/// The compiled form of one [`ValueSet`].
#[derive(Debug)]
pub(crate) enum SetMatcher {
    Empty,
    /// Keys below [`SMALL_KEY_LIMIT`] only: bit `k` is set when `k` is in the set.
    SmallKeys(Bitmap),
    /// A handful of inclusive ranges.
    Few(Vec<(u128, u128)>),
    W32(PrefixTables<u32>),
    W128(PrefixTables<u128>),
    /// The IR's sorted ranges, searched by bisection.
    Sorted(Arc<ValueSet>),
}

/// A fixed-size bitmap.
#[derive(Debug)]
pub(crate) struct Bitmap(Box<[u64]>);

impl Bitmap {
    fn new(bits: usize) -> Bitmap {
        Bitmap(vec![0; bits.div_ceil(64)].into_boxed_slice())
    }

    /// Sets bits `lo..=hi`.
    fn set_range(&mut self, lo: usize, hi: usize) {
        for bit in lo..=hi {
            self.0[bit / 64] |= 1 << (bit % 64);
        }
    }

    fn get(&self, bit: usize) -> bool {
        self.0
            .get(bit / 64)
            .is_some_and(|w| w >> (bit % 64) & 1 == 1)
    }
}

/// The key types of the prefix tables: `u32` for [`KeyWidth::W32`], `u128` for `W128`.
pub(crate) trait Key: Copy + Eq + Hash + std::fmt::Debug {
    const BITS: u32;
    /// Truncates a key known to fit.
    fn from_u128(v: u128) -> Self;
    /// The top `len` bits (`len` ≤ `BITS`), as a number.
    fn prefix(self, len: u32) -> Self;
    /// The prefix `depth` bits longer made of this prefix followed by `suffix`.
    fn extend(self, depth: u32, suffix: u32) -> Self;
}

impl Key for u32 {
    const BITS: u32 = 32;
    fn from_u128(v: u128) -> u32 {
        v as u32
    }
    fn prefix(self, len: u32) -> u32 {
        self.checked_shr(32 - len).unwrap_or(0)
    }
    fn extend(self, depth: u32, suffix: u32) -> u32 {
        (self << depth) | suffix
    }
}

impl Key for u128 {
    const BITS: u32 = 128;
    fn from_u128(v: u128) -> u128 {
        v
    }
    fn prefix(self, len: u32) -> u128 {
        self.checked_shr(128 - len).unwrap_or(0)
    }
    fn extend(self, depth: u32, suffix: u32) -> u128 {
        (self << depth) | u128::from(suffix)
    }
}

/// A set as hash tables of aligned blocks, one per prefix length, plus a bitmap of the top 16
/// bits for the short prefixes.
#[derive(Debug)]
pub(crate) struct PrefixTables<K: Key> {
    /// Bit `t` is set when every key whose top 16 bits are `t` is in the set (blocks of prefix
    /// length ≤ 16); `None` when there are no such blocks.
    short: Option<Bitmap>,
    /// (prefix length, prefixes of that length), most populated first so hits end early.
    tables: Vec<(u32, HashSet<K, RandomState>)>,
}

impl<K: Key> PrefixTables<K> {
    /// Builds the tables, or `None` when the ranges cut into more than `budget` blocks.
    fn build(ranges: &[(u128, u128)], budget: usize) -> Option<PrefixTables<K>> {
        let bits = K::BITS;
        let mut short: Option<Bitmap> = None;
        let mut by_len: Vec<Vec<K>> = vec![Vec::new(); bits as usize + 1];
        let mut blocks = 0usize;
        for &(lo, hi) in ranges {
            for (start, len) in aligned_blocks(lo, hi, bits) {
                blocks += 1;
                if blocks > budget {
                    return None;
                }
                if len <= 16 {
                    let first = (start >> (bits - 16)) as usize;
                    let count = 1usize << (16 - len);
                    short
                        .get_or_insert_with(|| Bitmap::new(1 << 16))
                        .set_range(first, first + count - 1);
                } else {
                    by_len[len as usize].push(K::from_u128(start).prefix(len));
                }
            }
        }
        expand_prefixes(&mut by_len, budget.saturating_sub(blocks));
        let mut tables: Vec<(u32, HashSet<K, RandomState>)> = by_len
            .into_iter()
            .enumerate()
            .filter(|(_, prefixes)| !prefixes.is_empty())
            .map(|(len, prefixes)| {
                let mut table =
                    HashSet::with_capacity_and_hasher(prefixes.len(), RandomState::default());
                table.extend(prefixes);
                (len as u32, table)
            })
            .collect();
        tables.sort_by_key(|(len, table)| (std::cmp::Reverse(table.len()), *len));
        Some(PrefixTables { short, tables })
    }

    fn contains(&self, key: K, top16: usize) -> bool {
        if let Some(short) = &self.short {
            if short.get(top16) {
                return true;
            }
        }
        self.tables
            .iter()
            .any(|(len, table)| table.contains(&key.prefix(*len)))
    }
}

/// Controlled prefix expansion: rewrites prefixes of lengths that are not a multiple of 8 as
/// all their extensions to the next multiple of 8 (a /20 becomes sixteen /24s), cheapest
/// lengths first, as long as the added entries stay within `budget`. Fewer distinct lengths
/// mean fewer probes per lookup: an IPv4 set of /32s and prefixes between /17 and /32 needs at
/// most two, whatever the mix.
fn expand_prefixes<K: Key>(by_len: &mut [Vec<K>], mut budget: usize) {
    let mut costs: Vec<(usize, usize)> = by_len
        .iter()
        .enumerate()
        .filter(|&(len, prefixes)| !prefixes.is_empty() && len % 8 != 0 && len + 8 < by_len.len())
        .map(|(len, prefixes)| (prefixes.len() << (8 - len % 8), len))
        .collect();
    costs.sort_unstable();
    for (cost, len) in costs {
        if cost > budget {
            break;
        }
        budget -= cost;
        let depth = (8 - len % 8) as u32;
        let target = len + depth as usize;
        let prefixes = std::mem::take(&mut by_len[len]);
        let expanded = prefixes
            .into_iter()
            .flat_map(|p| (0..1u32 << depth).map(move |suffix| p.extend(depth, suffix)));
        by_len[target].extend(expanded);
    }
}

/// The aligned blocks `(first key, prefix length)` that exactly cover `lo..=hi` in a `bits`-bit
/// key space, from low to high: each is the largest block starting at the current key that is
/// aligned to its size and ends at or before `hi`.
fn aligned_blocks(lo: u128, hi: u128, bits: u32) -> impl Iterator<Item = (u128, u32)> {
    let mut next = Some(lo);
    std::iter::from_fn(move || {
        let start = next?;
        let mut size_log = if start == 0 {
            bits
        } else {
            start.trailing_zeros().min(bits)
        };
        let mask = |log: u32| u128::MAX.checked_shr(128 - log).unwrap_or(0);
        while start | mask(size_log) > hi {
            size_log -= 1;
        }
        let end = start | mask(size_log);
        next = (end < hi).then(|| end + 1);
        Some((start, bits - size_log))
    })
}

impl SetMatcher {
    pub(crate) fn compile(set: &Arc<ValueSet>) -> SetMatcher {
        let ranges = set.ranges();
        let Some(&(_, max_hi)) = ranges.last() else {
            return SetMatcher::Empty;
        };
        if max_hi < SMALL_KEY_LIMIT {
            let mut bitmap = Bitmap::new(max_hi as usize + 1);
            for &(lo, hi) in ranges {
                bitmap.set_range(lo as usize, hi as usize);
            }
            return SetMatcher::SmallKeys(bitmap);
        }
        if ranges.len() <= FEW_RANGES {
            return SetMatcher::Few(ranges.to_vec());
        }
        let budget = ranges
            .len()
            .saturating_mul(BLOCK_BUDGET_PER_RANGE)
            .saturating_add(BLOCK_BUDGET_FLAT);
        let tables = match set.width() {
            KeyWidth::W32 => PrefixTables::build(ranges, budget).map(SetMatcher::W32),
            KeyWidth::W128 => PrefixTables::build(ranges, budget).map(SetMatcher::W128),
        };
        tables.unwrap_or_else(|| SetMatcher::Sorted(Arc::clone(set)))
    }

    /// Whether the key formed by `words` (most significant first) is in the set.
    pub(crate) fn contains(&self, words: &[u32]) -> bool {
        match self {
            SetMatcher::Empty => false,
            SetMatcher::SmallKeys(bitmap) => {
                let key = ValueSet::key(words);
                key < SMALL_KEY_LIMIT && bitmap.get(key as usize)
            }
            SetMatcher::Few(ranges) => {
                let key = ValueSet::key(words);
                ranges.iter().any(|&(lo, hi)| lo <= key && key <= hi)
            }
            SetMatcher::W32(tables) => match *words {
                [key] => tables.contains(key, (key >> 16) as usize),
                _ => u32::try_from(ValueSet::key(words))
                    .is_ok_and(|key| tables.contains(key, (key >> 16) as usize)),
            },
            SetMatcher::W128(tables) => {
                let key = ValueSet::key(words);
                tables.contains(key, (key >> 112) as usize)
            }
            SetMatcher::Sorted(set) => set.contains(ValueSet::key(words)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_cover_ranges_exactly() {
        let blocks: Vec<_> = aligned_blocks(1, 6, 32).collect();
        assert_eq!(blocks, [(1, 32), (2, 31), (4, 31), (6, 32)]);
        assert_eq!(
            aligned_blocks(0, u128::MAX, 128).collect::<Vec<_>>(),
            [(0, 0)]
        );
        assert_eq!(
            aligned_blocks(0, u32::MAX.into(), 32).collect::<Vec<_>>(),
            [(0, 0)]
        );
        let top: Vec<_> = aligned_blocks(u128::MAX - 2, u128::MAX, 128).collect();
        assert_eq!(top, [(u128::MAX - 2, 128), (u128::MAX - 1, 127)]);
        // The worst case: 2 × (width − 1) blocks.
        assert_eq!(aligned_blocks(1, u128::MAX - 1, 128).count(), 254);
    }

    #[test]
    fn representations() {
        let compile = |w, r: &[(u128, u128)]| {
            SetMatcher::compile(&Arc::new(ValueSet::new(w, r.iter().copied())))
        };
        assert!(matches!(compile(KeyWidth::W32, &[]), SetMatcher::Empty));
        assert!(matches!(
            compile(KeyWidth::W32, &[(80, 80), (443, 443)]),
            SetMatcher::SmallKeys(_)
        ));
        assert!(matches!(
            compile(KeyWidth::W32, &[(1 << 20, 1 << 21)]),
            SetMatcher::Few(_)
        ));
        let many: Vec<_> = (0..100u128).map(|i| (i << 20, i << 20)).collect();
        assert!(matches!(compile(KeyWidth::W32, &many), SetMatcher::W32(_)));
        assert!(matches!(
            compile(KeyWidth::W128, &many),
            SetMatcher::W128(_)
        ));
        // Ranges that each cut into many blocks fall back to bisection past the flat allowance.
        let wide: Vec<_> = (0..100_000u128)
            .map(|i| ((i << 40) + 1, (i << 40) + (1 << 39)))
            .collect();
        assert!(matches!(
            compile(KeyWidth::W128, &wide),
            SetMatcher::Sorted(_)
        ));
    }
}
