//! A fast hash for the optimizer's tables.
//!
//! The keys are value and block numbers, constants and small tuples of them, and the tables
//! are hit several times per instruction (value numbering, the fact base of predicate
//! elimination, subgraph comparison), so the standard library's SipHash was a large share of
//! the optimizer's time on long chains. This is a multiply-rotate hash in the manner of
//! rustc's FxHash, seeded per table from the standard library's random state so that keys
//! chosen to collide (constants come from the filter text) cannot be prepared in advance.
//! Nothing iterates over these tables, so the seed never changes the optimizer's output.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};

/// A hash map with [`FastState`].
pub type FastMap<K, V> = HashMap<K, V, FastState>;
/// A hash set with [`FastState`].
pub type FastSet<K> = HashSet<K, FastState>;

/// Builds [`FastHasher`]s with one random seed.
#[derive(Clone, Debug)]
pub struct FastState {
    seed: u64,
}

impl Default for FastState {
    fn default() -> FastState {
        FastState {
            seed: RandomState::new().build_hasher().finish(),
        }
    }
}

impl BuildHasher for FastState {
    type Hasher = FastHasher;

    fn build_hasher(&self) -> FastHasher {
        FastHasher { hash: self.seed }
    }
}

/// Multiply-rotate hashing of machine words.
#[derive(Clone, Debug)]
pub struct FastHasher {
    hash: u64,
}

const MULTIPLIER: u64 = 0x517c_c1b7_2722_0a95;

impl FastHasher {
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(MULTIPLIER);
    }
}

impl Hasher for FastHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut word = [0u8; 8];
            word[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, x: u8) {
        self.add(u64::from(x));
    }

    fn write_u16(&mut self, x: u16) {
        self.add(u64::from(x));
    }

    fn write_u32(&mut self, x: u32) {
        self.add(u64::from(x));
    }

    fn write_u64(&mut self, x: u64) {
        self.add(x);
    }

    fn write_usize(&mut self, x: usize) {
        self.add(x as u64);
    }

    fn finish(&self) -> u64 {
        // The table indexes by the low bits, which a final multiplication leaves weak.
        self.hash ^ (self.hash >> 29)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_work_with_tuple_keys() {
        let mut m: FastMap<(u32, u32), u32> = FastMap::default();
        for i in 0..1000 {
            m.insert((i, i * 7), i);
        }
        assert_eq!(m.len(), 1000);
        assert_eq!(m.get(&(10, 70)), Some(&10));
        assert_eq!(m.get(&(10, 71)), None);
    }
}
