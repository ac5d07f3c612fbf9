//! The seeded hash of a dispatch table's keys (see `demux_table`'s module docs for the
//! function, which the native matcher computes the same way).

/// The seeded hash of keys: word pairs folded into a running value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyHash {
    seeds: [u64; 2],
}

/// Xor of the two halves of the 128-bit product (foldhash's mixing step).
#[inline]
fn fold(a: u64, b: u64) -> u64 {
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

    /// Seeds under which every two-word key whose second word is `second` hashes to its first
    /// word (`fold(w0, 1)` is `w0`), so that tests can choose where keys land: in which trie
    /// branch, in which slot of a leaf.
    pub fn first_word_for(second: u64) -> KeyHash {
        KeyHash::new([0, second ^ 1])
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
