//! A multiplicative hash for tables keyed by value numbers.
//!
//! The edge-fact tables are probed several times per block per round; keys are small tuples
//! of value numbers the optimizer itself assigned (dense, not chosen by the filter's author),
//! so a keyed hash's resistance to crafted collisions buys nothing there and SipHash's cost
//! was a tenth of the optimizer's time on long chains.

use std::hash::{BuildHasherDefault, Hasher};

/// Folds each word in with a rotate, xor and multiply by an odd constant (the golden ratio's
/// fraction, which spreads consecutive integers over the high bits hashbrown uses).
#[derive(Default, Clone, Copy)]
pub(super) struct WordHasher(u64);

const MULTIPLIER: u64 = 0x9e37_79b9_7f4a_7c15;

impl WordHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(MULTIPLIER);
    }
}

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A `HashMap` over [`WordHasher`].
pub(super) type WordMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<WordHasher>>;
