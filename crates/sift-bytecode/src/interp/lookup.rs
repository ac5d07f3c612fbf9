//! Lookup tables as the interpreter searches them, the search chosen once at load time.
//!
//! A verified table is a list of `(key, target)` pairs in ascending key order. Searching it by
//! bisection costs a chain of dependent loads (five for twenty keys) before the next step is
//! known, so [`Lookup::new`] picks, per table:
//!
//! * up to [`LINEAR_MAX`] keys: compared one after the other (predictable branches; the common
//!   "ethertype is one of three VLAN tags" test);
//! * up to [`HASH_MAX`] keys: a collision-free multiplicative hash, `slot = (key * mul) >> shift`,
//!   found by trying a few multipliers and table sizes: one multiply, one load, one compare;
//! * anything larger, or a key set no multiplier separates: bisection.
//!
//! A program comes from an untrusted side, so hashing is bounded per program by a [`Budget`]:
//! memory (hash slots) and load-time work (keys hashed while searching for a multiplier), both
//! proportional to the program's table entries. Tables past the budget are bisected.

/// Largest table searched linearly.
pub(crate) const LINEAR_MAX: usize = 4;
/// Largest table hashed (bounds the load-time search).
pub(crate) const HASH_MAX: usize = 4096;
/// Multipliers tried per table size.
const HASH_TRIES: u32 = 64;

/// What hashing may still spend for one program.
#[derive(Clone, Debug)]
pub(crate) struct Budget {
    slots: usize,
    work: usize,
}

impl Budget {
    /// For a program with `entries` table entries in all: at most four hash slots per entry
    /// (plus a little for small programs) and a few hundred key hashes per entry.
    pub(crate) fn new(entries: usize) -> Budget {
        Budget {
            slots: 4 * entries + 4096,
            work: 256 * entries + 65_536,
        }
    }
}

/// One table in its searchable form.
#[derive(Clone, Debug)]
pub(crate) enum Lookup {
    Linear {
        keys: Box<[u32]>,
        targets: Box<[u32]>,
    },
    /// `slots[(key * mul) >> shift]` holds the key and its target. An empty slot holds a key that
    /// hashes elsewhere, so no search key can match it.
    Hashed {
        mul: u32,
        shift: u32,
        slots: Box<[(u32, u32)]>,
    },
    Sorted {
        keys: Box<[u32]>,
        targets: Box<[u32]>,
    },
}

impl Lookup {
    /// The searchable form of `entries` (keys strictly ascending, as verified).
    pub(crate) fn new(entries: &[(u32, u32)], budget: &mut Budget) -> Lookup {
        let keys: Box<[u32]> = entries.iter().map(|&(k, _)| k).collect();
        let targets: Box<[u32]> = entries.iter().map(|&(_, t)| t).collect();
        if entries.len() <= LINEAR_MAX {
            return Lookup::Linear { keys, targets };
        }
        if entries.len() <= HASH_MAX {
            if let Some(hashed) = hashed(entries, budget) {
                return hashed;
            }
        }
        Lookup::Sorted { keys, targets }
    }

    /// The target listed for `key`, if any.
    #[inline(always)]
    pub(crate) fn find(&self, key: u32) -> Option<u32> {
        match self {
            Lookup::Linear { keys, targets } => {
                let i = keys.iter().position(|&k| k == key)?;
                targets.get(i).copied()
            }
            Lookup::Hashed { mul, shift, slots } => {
                let slot = key.wrapping_mul(*mul) >> shift;
                let &(k, target) = slots.get(slot as usize)?;
                (k == key).then_some(target)
            }
            Lookup::Sorted { keys, targets } => {
                let i = keys.binary_search(&key).ok()?;
                targets.get(i).copied()
            }
        }
    }
}

/// A collision-free hash of `entries` (at least two), or `None` if no multiplier tried works
/// within the budget.
fn hashed(entries: &[(u32, u32)], budget: &mut Budget) -> Option<Lookup> {
    let bits = entries.len().next_power_of_two().trailing_zeros();
    // Deterministic odd multipliers (a SplitMix-style sequence): the same table always gets the
    // same layout.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next_multiplier = move || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) as u32) | 1
    };
    for extra in 1..=3u32 {
        let size_bits = bits + extra;
        if size_bits > 31 {
            break;
        }
        let shift = 32 - size_bits;
        let size = 1usize << size_bits;
        if size > budget.slots {
            return None;
        }
        let mut used = vec![false; size];
        for _ in 0..HASH_TRIES {
            if budget.work < entries.len() {
                return None;
            }
            budget.work -= entries.len();
            let mul = next_multiplier();
            used.iter_mut().for_each(|u| *u = false);
            let slot = |k: u32| (k.wrapping_mul(mul) >> shift) as usize;
            let collision_free = entries
                .iter()
                .all(|&(k, _)| !std::mem::replace(&mut used[slot(k)], true));
            if !collision_free {
                continue;
            }
            // Empty slots hold the first key, which hashes to its own (occupied) slot.
            let filler = (entries[0].0, 0);
            let mut slots = vec![filler; size].into_boxed_slice();
            for &(k, t) in entries {
                slots[slot(k)] = (k, t);
            }
            budget.slots -= size;
            return Some(Lookup::Hashed { mul, shift, slots });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup(entries: &[(u32, u32)]) -> Lookup {
        Lookup::new(entries, &mut Budget::new(entries.len()))
    }

    fn check(entries: &[(u32, u32)], probes: impl IntoIterator<Item = u32>) {
        let lookup = lookup(entries);
        for x in probes {
            let want = entries.iter().find(|&&(k, _)| k == x).map(|&(_, t)| t);
            assert_eq!(lookup.find(x), want, "key {x} in {lookup:?}");
        }
    }

    #[test]
    fn every_form_finds_exactly_the_listed_keys() {
        let small = [(1, 10), (9, 11), (200, 12)];
        assert!(matches!(lookup(&small), Lookup::Linear { .. }));
        check(&small, 0..300);

        let hosts: Vec<(u32, u32)> = (1..=20).map(|i| (0x0a00_0000 + i, 100 + i)).collect();
        assert!(matches!(lookup(&hosts), Lookup::Hashed { .. }));
        check(&hosts, (0x09ff_fff0..0x0a00_0030).chain([0, u32::MAX]));

        let big: Vec<(u32, u32)> = (0..5000).map(|i| (i * 7 + 3, i)).collect();
        assert!(matches!(lookup(&big), Lookup::Sorted { .. }));
        check(&big, (0..40_000).step_by(3));
    }

    #[test]
    fn hashing_stops_at_the_budget() {
        let hosts: Vec<(u32, u32)> = (1..=20).map(|i| (0x0a00_0000 + i, i)).collect();
        let mut budget = Budget { slots: 0, work: 0 };
        assert!(matches!(
            Lookup::new(&hosts, &mut budget),
            Lookup::Sorted { .. }
        ));
        let mut budget = Budget::new(hosts.len());
        let before = budget.slots;
        assert!(matches!(
            Lookup::new(&hosts, &mut budget),
            Lookup::Hashed { .. }
        ));
        assert!(budget.slots < before);
    }

    #[test]
    fn empty_slots_never_match() {
        // The filler key is the first key: probing it must find its own entry, and probing
        // other values that land on empty slots must find nothing.
        let entries: Vec<(u32, u32)> = [0u32, 5, 6, 7, 1 << 31, u32::MAX]
            .iter()
            .enumerate()
            .map(|(i, &k)| (k, i as u32 + 1))
            .collect();
        check(&entries, (0..64).chain([u32::MAX, u32::MAX - 1, 1 << 31]));
    }
}
