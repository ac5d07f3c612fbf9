//! Lookup tables (`switch`) to native code, by size (BPF+ section 7.2.1).
//!
//! * Up to [`crate::Options::hash_min_keys`] keys, and any table whose keys are dense: Cranelift's
//!   `Switch`, which splits the keys into contiguous ranges, tests up to three ranges with a
//!   compare chain, bisects more with a tree of compares, and turns each long contiguous range
//!   into a jump table.
//! * Larger sparse tables (host sets): a collision-free hash chosen at compile time ("hash and
//!   displace"): a first multiplicative hash picks a bucket, whose displacement is XORed into a
//!   second multiplicative hash to give a slot; the multipliers and displacements are searched
//!   until every key has a slot of its own. A lookup is two multiplications, two loads and one
//!   compare, whatever the table's size; the slot's stored key confirms the match.
//!
//! Empty slots hold a key of the table that hashes elsewhere, so no probe of an empty slot can
//! ever match.

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData as MemFlags, Value};
use cranelift_frontend::FunctionBuilder;

/// The code of one hashed lookup: whether the key is in the table, and which of its distinct
/// targets it maps to.
pub(crate) struct Lookup {
    /// `i8`: the key is one of the table's.
    pub found: Value,
    /// `i32`: index in `distinct` of the key's target (meaningless when not `found`); `None`
    /// when every key has the same target.
    pub number: Option<Value>,
    /// The distinct targets, ascending.
    pub distinct: Vec<u32>,
}

/// Emits a lookup of `key` (`i32`) in a table laid out as `[displacements | slot keys | slot
/// target numbers]`, which is appended to `data` (the compiled filter owns it; the code holds
/// its address). `targets[i]` is the target of the `i`-th key given to `hash`. No branch; every
/// index is below the table's length by construction (multiplicative hashes keep the top bits,
/// displacements are below the slot count).
pub(crate) fn emit_lookup(
    b: &mut FunctionBuilder<'_>,
    key: Value,
    hash: &PerfectHash,
    targets: &[u32],
    data: &mut Vec<Box<[u32]>>,
) -> Lookup {
    let mut distinct: Vec<u32> = targets.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    let mut table: Vec<u32> = hash.displacement.clone();
    let keys_at = table.len();
    table.extend(&hash.keys);
    let targets_at = table.len();
    if distinct.len() > 1 {
        table.extend(hash.entry.iter().map(|&e| {
            let t = targets[e as usize];
            distinct.binary_search(&t).unwrap_or(0) as u32
        }));
    }
    let table: Box<[u32]> = table.into_boxed_slice();
    let base_address = table.as_ptr() as usize as i64;
    data.push(table);

    let flags = MemFlags::trusted().with_readonly();
    let base = b.ins().iconst(types::I64, base_address);
    let h1 = b.ins().imul_imm_u(key, i64::from(hash.bucket_multiplier));
    let bucket = b.ins().ushr_imm_u(h1, i64::from(32 - hash.bucket_bits));
    let bucket = b.ins().uextend(types::I64, bucket);
    let at = b.ins().ishl_imm_u(bucket, 2);
    let at = b.ins().iadd(base, at);
    let displacement = b.ins().load(types::I32, flags, at, 0);
    let h2 = b.ins().imul_imm_u(key, i64::from(hash.slot_multiplier));
    let h2 = b.ins().ushr_imm_u(h2, i64::from(32 - hash.slot_bits));
    // The displacement is below 1 << slot_bits, so the slot is too.
    let slot = b.ins().bxor(h2, displacement);
    let slot = b.ins().uextend(types::I64, slot);
    let slot_at = b.ins().ishl_imm_u(slot, 2);
    let slot_at = b.ins().iadd(base, slot_at);
    let stored = b
        .ins()
        .load(types::I32, flags, slot_at, (keys_at * 4) as i32);
    let found = b.ins().icmp(IntCC::Equal, stored, key);
    let number = (distinct.len() > 1).then(|| {
        b.ins()
            .load(types::I32, flags, slot_at, (targets_at * 4) as i32)
    });
    Lookup {
        found,
        number,
        distinct,
    }
}

/// A collision-free hash for one table's keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PerfectHash {
    pub bucket_multiplier: u32,
    pub bucket_bits: u32,
    pub slot_multiplier: u32,
    pub slot_bits: u32,
    /// Per bucket: XORed into the slot hash (below `1 << slot_bits`).
    pub displacement: Vec<u32>,
    /// Per slot: the key stored there.
    pub keys: Vec<u32>,
    /// Per slot: index of the table entry whose key is stored there.
    pub entry: Vec<u32>,
}

fn multiplicative(x: u32, multiplier: u32, bits: u32) -> u32 {
    x.wrapping_mul(multiplier) >> (32 - bits)
}

fn ceil_log2(n: usize) -> u32 {
    usize::BITS - n.saturating_sub(1).leading_zeros()
}

impl PerfectHash {
    #[cfg(test)]
    fn bucket(&self, key: u32) -> u32 {
        multiplicative(key, self.bucket_multiplier, self.bucket_bits)
    }

    #[cfg(test)]
    fn slot(&self, key: u32) -> u32 {
        let d = self.displacement[self.bucket(key) as usize];
        multiplicative(key, self.slot_multiplier, self.slot_bits) ^ d
    }

    /// The entry index for `key`, as the generated code computes it.
    #[cfg(test)]
    pub(crate) fn lookup(&self, key: u32) -> Option<u32> {
        let s = self.slot(key) as usize;
        (self.keys[s] == key).then_some(self.entry[s])
    }

    /// Searches a hash for `keys` (distinct; at least one). Deterministic; `None` if no
    /// multipliers in the search budget work (never observed for random or structured sets).
    pub(crate) fn build(keys: &[u32]) -> Option<PerfectHash> {
        let n = keys.len();
        if n == 0 || n > 1 << 24 {
            return None;
        }
        let log = ceil_log2(n);
        // Load factor at most 1/2; about two keys per bucket.
        let slot_bits = (log + 1).clamp(1, 31);
        let bucket_bits = log.saturating_sub(1).clamp(1, 31);
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next_odd = || {
            // SplitMix64 step: a fixed sequence of candidate multipliers.
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            ((z ^ (z >> 31)) as u32) | 1
        };
        for _attempt in 0..64 {
            let (bm, sm) = (next_odd(), next_odd());
            if let Some(h) = Self::try_build(keys, bm, bucket_bits, sm, slot_bits) {
                return Some(h);
            }
        }
        None
    }

    fn try_build(
        keys: &[u32],
        bucket_multiplier: u32,
        bucket_bits: u32,
        slot_multiplier: u32,
        slot_bits: u32,
    ) -> Option<PerfectHash> {
        let slots = 1usize << slot_bits;
        let bucket_count = 1usize << bucket_bits;
        let bucket_of = |k: u32| multiplicative(k, bucket_multiplier, bucket_bits) as usize;
        // Each bucket's keys (indices into `keys`, ascending), in one array: `members[start[b]
        // ..start[b + 1]]`. Tables have 10^4 keys; a vector per bucket was most of the time.
        let mut start = vec![0u32; bucket_count + 1];
        for &k in keys {
            start[bucket_of(k) + 1] += 1;
        }
        for b in 0..bucket_count {
            start[b + 1] += start[b];
        }
        let mut fill = start.clone();
        let mut members = vec![0u32; keys.len()];
        for (i, &k) in keys.iter().enumerate() {
            let b = bucket_of(k);
            members[fill[b] as usize] = i as u32;
            fill[b] += 1;
        }
        let bucket = |b: usize| &members[start[b] as usize..start[b + 1] as usize];
        // Largest buckets first (they are the hardest to place), ties in bucket order.
        let mut order: Vec<usize> = (0..bucket_count)
            .filter(|&b| !bucket(b).is_empty())
            .collect();
        order.sort_by_key(|&b| std::cmp::Reverse(bucket(b).len()));
        let mut taken = vec![false; slots];
        let mut displacement = vec![0u32; bucket_count];
        let mut keys_at = vec![keys[0]; slots];
        let mut entry = vec![0u32; slots];
        let mut hashes = Vec::new();
        for b in order {
            hashes.clear();
            hashes.extend(
                bucket(b)
                    .iter()
                    .map(|&i| multiplicative(keys[i as usize], slot_multiplier, slot_bits)),
            );
            // Buckets hold about two keys: comparing every pair beats sorting a copy, except
            // in the rare large bucket.
            let clash = if hashes.len() <= 16 {
                (1..hashes.len()).any(|j| hashes[..j].contains(&hashes[j]))
            } else {
                let mut sorted = hashes.clone();
                sorted.sort_unstable();
                sorted.windows(2).any(|w| w[0] == w[1])
            };
            if clash {
                return None; // no displacement can separate these keys
            }
            let d =
                (0..slots as u32).find(|&d| hashes.iter().all(|&h| !taken[(h ^ d) as usize]))?;
            displacement[b] = d;
            for (&i, &h) in bucket(b).iter().zip(&hashes) {
                let s = (h ^ d) as usize;
                taken[s] = true;
                keys_at[s] = keys[i as usize];
                entry[s] = i;
            }
        }
        Some(PerfectHash {
            bucket_multiplier,
            bucket_bits,
            slot_multiplier,
            slot_bits,
            displacement,
            keys: keys_at,
            entry,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(keys: &[u32]) {
        let h = PerfectHash::build(keys).expect("a hash exists");
        for (i, &k) in keys.iter().enumerate() {
            assert_eq!(h.lookup(k), Some(i as u32), "key {k}");
        }
        // Keys outside the set never match, including the filler key's neighbours.
        let set: std::collections::HashSet<u32> = keys.iter().copied().collect();
        for probe in (0..5000u32)
            .map(|x| x.wrapping_mul(2_654_435_761))
            .chain(0..300)
        {
            if !set.contains(&probe) {
                assert_eq!(h.lookup(probe), None, "probe {probe}");
            }
        }
    }

    #[test]
    fn host_sets_get_collision_free_hashes() {
        for n in [1, 2, 3, 10, 100, 1000, 5000] {
            let keys: Vec<u32> = (0..n).map(|i| 0x0a00_0000 + i * 3 + 1).collect();
            check(&keys);
        }
        let random: Vec<u32> = (0..2000u32)
            .map(|i| i.wrapping_mul(0x9e37_79b9).rotate_left(7))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        check(&random);
    }

    #[test]
    fn extreme_keys() {
        check(&[0, 1, u32::MAX - 1, u32::MAX]);
        check(
            &(0..64)
                .map(|i| 1u32 << (i % 32) ^ (i / 32))
                .collect::<Vec<_>>()[..33],
        );
    }
}
