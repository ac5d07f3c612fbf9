//! Literal search for large sets: a hashed filter over 4-byte windows.
//!
//! Each literal (of at least [`WINDOW`] bytes) is represented by one 4-byte window of its own,
//! chosen so that as few literals as possible share a window. The search slides over the
//! payload, hashes the window at every position and tests one bit of a small table (it fits in
//! the L1 cache); a set bit sends the position to confirmation: an exact lookup of the window
//! among the literals' windows, then a full comparison of the literals that own it. Every
//! occurrence of a literal contains its window, so none is missed; a clear bit rules out every
//! literal at once, which keeps the cost per byte independent of the number of literals (the
//! reason this replaces an automaton for thousands of patterns, where a DFA's table no longer
//! fits in cache).
//!
//! Windows are compared with bit 0x20 of each byte cleared when the set has case-insensitive
//! literals, which folds ASCII case (and conflates a few non-letters, a harmless false
//! positive settled by the full comparison).

use std::collections::HashMap;

use foldhash::fast::RandomState;

use super::found::Found;
use super::Literal;

/// Length of the hashed windows, and so the minimum length of the literals handled here.
pub(crate) const WINDOW: usize = 4;

/// log2 of the number of bits of the filter table: 2^18 bits are 32 KiB, an L1 data cache, and
/// keep false positives under 1% for thousands of literals. A fixed size also lets the compiler
/// see that every hashed index is in bounds.
const FILTER_BITS: u32 = 18;
const FILTER_WORDS: usize = 1 << (FILTER_BITS - 6);

#[derive(Debug)]
pub(crate) struct WindowFilter {
    /// Bit `hash(w)` is set for the window `w` of every literal.
    filter: Box<[u64; FILTER_WORDS]>,
    /// Applied to every window (4 bytes, little-endian) before hashing: clears bit 0x20 of
    /// each byte when the set ignores case.
    mask: u32,
    /// The literals' (masked) windows, with the literals that own them.
    windows: WindowTable,
    /// (literal, offset of its window in it), grouped by window.
    owners: Vec<(u32, u32)>,
    literals: Vec<Literal>,
}

fn window_at(bytes: &[u8], at: usize) -> Option<u32> {
    let window: [u8; WINDOW] = bytes.get(at..at + WINDOW)?.try_into().ok()?;
    Some(u32::from_le_bytes(window))
}

impl WindowFilter {
    /// Builds the filter; every literal must be at least [`WINDOW`] bytes long.
    pub(crate) fn new(literals: Vec<Literal>) -> WindowFilter {
        let mask = if literals.iter().any(|l| l.nocase) {
            0xdfdf_dfdf
        } else {
            u32::MAX
        };
        // Each literal takes the window (at any offset) that the fewest literals chose before
        // it: literals with a common prefix ("GET /a", "GET /b") then spread over different
        // windows and confirmation stays short.
        let mut load: HashMap<u32, u32, RandomState> = HashMap::default();
        let mut chosen: Vec<(u32, u32, u32)> = Vec::with_capacity(literals.len());
        for (id, literal) in literals.iter().enumerate() {
            let best = (0..=literal.bytes.len().saturating_sub(WINDOW))
                .filter_map(|at| Some((window_at(&literal.bytes, at)? & mask, at as u32)))
                .min_by_key(|(w, _)| load.get(w).copied().unwrap_or(0));
            if let Some((window, at)) = best {
                *load.entry(window).or_default() += 1;
                chosen.push((window, id as u32, at));
            }
        }
        chosen.sort_unstable();
        let mut filter = Box::new([0u64; FILTER_WORDS]);
        let mut windows = WindowTable::with_capacity(load.len());
        let mut owners = Vec::with_capacity(chosen.len());
        for group in chosen.chunk_by(|a, b| a.0 == b.0) {
            let window = group[0].0;
            let h = hash(window);
            filter[h / 64] |= 1 << (h % 64);
            let first = owners.len() as u32;
            owners.extend(group.iter().map(|&(_, id, at)| (id, at)));
            windows.insert(window, first, owners.len() as u32);
        }
        WindowFilter {
            filter,
            mask,
            windows,
            owners,
            literals,
        }
    }

    /// The filter bit of `window` (already masked) in bit 0 (other bits are garbage).
    #[inline(always)]
    fn filter_bit(&self, window: u32) -> u64 {
        let h = hash(window);
        self.filter[h / 64] >> (h % 64)
    }

    pub(crate) fn search(&self, hay: &[u8], found: &mut Found) {
        // The main loop reads 12 bytes as two overlapping 8-byte words and tests the 8 windows
        // starting in the first 8 of them together; only a hit among them looks at each.
        let mut at = 0;
        while let Some(chunk) = hay.get(at..at + 12) {
            let (Ok(low), Ok(high)) = (
                <[u8; 8]>::try_from(&chunk[..8]),
                <[u8; 8]>::try_from(&chunk[4..]),
            ) else {
                break;
            };
            let mask = u64::from(self.mask) * 0x1_0000_0001;
            let low = u64::from_le_bytes(low) & mask;
            let high = u64::from_le_bytes(high) & mask;
            let any = self.filter_bit(low as u32)
                | self.filter_bit((low >> 8) as u32)
                | self.filter_bit((low >> 16) as u32)
                | self.filter_bit((low >> 24) as u32)
                | self.filter_bit(high as u32)
                | self.filter_bit((high >> 8) as u32)
                | self.filter_bit((high >> 16) as u32)
                | self.filter_bit((high >> 24) as u32);
            if any & 1 != 0 {
                let windows = [
                    low as u32,
                    (low >> 8) as u32,
                    (low >> 16) as u32,
                    (low >> 24) as u32,
                    high as u32,
                    (high >> 8) as u32,
                    (high >> 16) as u32,
                    (high >> 24) as u32,
                ];
                for (k, window) in windows.into_iter().enumerate() {
                    if self.filter_bit(window) & 1 != 0 {
                        self.confirm(hay, at + k, window, found);
                        if found.all_literals_found() {
                            return;
                        }
                    }
                }
            }
            at += 8;
        }
        while let Some(window) = window_at(hay, at) {
            let window = window & self.mask;
            if self.filter_bit(window) & 1 != 0 {
                self.confirm(hay, at, window, found);
                if found.all_literals_found() {
                    return;
                }
            }
            at += 1;
        }
    }

    /// Records the literals that occur with their window (`window`, masked) at `at`.
    fn confirm(&self, hay: &[u8], at: usize, window: u32, found: &mut Found) {
        let Some((first, end)) = self.windows.get(window) else {
            return;
        };
        for &(id, offset) in &self.owners[first as usize..end as usize] {
            let literal = &self.literals[id as usize];
            if found.contains(literal.index) {
                continue;
            }
            let Some(start) = at.checked_sub(offset as usize) else {
                continue;
            };
            if let Some(candidate) = hay.get(start..start + literal.bytes.len()) {
                if literal.matches(candidate) {
                    found.insert_literal(literal.index);
                }
            }
        }
    }
}

/// Multiplicative hash of a window to [`FILTER_BITS`] bits.
#[inline(always)]
fn hash(window: u32) -> usize {
    (window.wrapping_mul(0x9e37_79b1) >> (32 - FILTER_BITS)) as usize
}

/// An open-addressing hash table from window to a range of owners, at most half full: the
/// confirmation step's exact lookup, a few nanoseconds on a filter hit.
#[derive(Debug)]
struct WindowTable {
    /// (window, first owner, end owner); `end == 0` marks an empty slot (a window present has
    /// at least one owner).
    slots: Box<[(u32, u32, u32)]>,
    /// log2 of the number of slots.
    bits: u32,
}

impl WindowTable {
    fn with_capacity(windows: usize) -> WindowTable {
        let bits = (windows.max(1) * 2)
            .next_power_of_two()
            .trailing_zeros()
            .max(1);
        WindowTable {
            slots: vec![(0, 0, 0); 1 << bits].into_boxed_slice(),
            bits,
        }
    }

    fn home(&self, window: u32) -> usize {
        (window.wrapping_mul(0x85eb_ca6b) >> (32 - self.bits)) as usize
    }

    /// Inserts a window not present yet, with its non-empty owner range.
    fn insert(&mut self, window: u32, first: u32, end: u32) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(window);
        while self.slots[i].2 != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = (window, first, end);
    }

    fn get(&self, window: u32) -> Option<(u32, u32)> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(window);
        loop {
            let (w, first, end) = *self.slots.get(i)?;
            if end == 0 {
                return None;
            }
            if w == window {
                return Some((first, end));
            }
            i = (i + 1) & mask;
        }
    }
}
