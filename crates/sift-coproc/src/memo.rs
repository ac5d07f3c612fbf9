//! Per-packet memory of search results, so that several `contains` calls on one packet read
//! the payload once.
//!
//! A result is a bitset of the patterns of one set found from one start offset. Results are
//! tagged with the packet's generation number: starting a packet bumps the number, which makes
//! every stored result stale at once without touching them, and stale slots are reused.

/// Per-thread scratch: the search results of the current packet.
///
/// Engines call [`next_packet`](Memo::next_packet) before running a filter on each packet
/// (O(1): a generation counter, no clearing). A memo remembers which [`Coprocessors`](crate::Coprocessors)
/// filled it and forgets everything when used with another, so sharing one memo between
/// several filters is safe (if slower than one memo each).
#[derive(Debug, Default)]
pub struct Memo {
    /// The current packet's number; slots of other generations are stale.
    generation: u64,
    /// The identity of the `Coprocessors` the current results belong to.
    owner: u64,
    /// For each pattern set, results by start offset.
    sets: Vec<Vec<Slot>>,
}

#[derive(Debug)]
struct Slot {
    generation: u64,
    start: u32,
    found: Vec<u64>,
}

impl Memo {
    pub fn new() -> Memo {
        Memo::default()
    }

    /// Forgets the results of the previous packet.
    pub fn next_packet(&mut self) {
        self.generation = self.generation.wrapping_add(1);
    }

    /// The result bitset (`words` long) of set `set` searched from `start` in the current
    /// packet, computed by `search` (which receives a zeroed bitset) unless already known.
    pub(crate) fn results(
        &mut self,
        owner: u64,
        set: u32,
        start: u32,
        words: usize,
        search: impl FnOnce(&mut [u64]),
    ) -> &[u64] {
        if owner != self.owner {
            self.owner = owner;
            self.next_packet();
        }
        let set = set as usize;
        if self.sets.len() <= set {
            self.sets.resize_with(set + 1, Vec::new);
        }
        let generation = self.generation;
        let slots = &mut self.sets[set];
        let position = match slots
            .iter()
            .position(|s| s.generation == generation && s.start == start)
        {
            Some(i) => i,
            None => {
                let i = match slots.iter().position(|s| s.generation != generation) {
                    Some(stale) => stale,
                    None => {
                        slots.push(Slot {
                            generation,
                            start,
                            found: Vec::new(),
                        });
                        slots.len() - 1
                    }
                };
                let slot = &mut slots[i];
                slot.generation = generation;
                slot.start = start;
                slot.found.clear();
                slot.found.resize(words, 0);
                search(&mut slot.found);
                i
            }
        };
        &slots[position].found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_kept_per_packet_set_and_start() {
        let mut memo = Memo::new();
        let searches = std::cell::Cell::new(0);
        let fill = |value: u64| {
            let searches = &searches;
            move |bits: &mut [u64]| {
                assert!(bits.iter().all(|&w| w == 0));
                searches.set(searches.get() + 1);
                bits[0] = value;
            }
        };
        assert_eq!(memo.results(1, 0, 14, 1, fill(1)), &[1]);
        assert_eq!(memo.results(1, 0, 14, 1, fill(2)), &[1]);
        assert_eq!(memo.results(1, 0, 20, 1, fill(3)), &[3]);
        assert_eq!(memo.results(1, 2, 14, 1, fill(4)), &[4]);
        memo.next_packet();
        assert_eq!(memo.results(1, 0, 14, 1, fill(5)), &[5]);
        assert_eq!(memo.results(1, 0, 20, 1, fill(6)), &[6]);
        assert_eq!(memo.results(1, 0, 14, 1, fill(7)), &[5]);
        // Another owner's results are never returned.
        assert_eq!(memo.results(2, 0, 14, 1, fill(8)), &[8]);
        assert_eq!(memo.sets[0].len(), 2, "stale slots are reused");
        assert_eq!(searches.get(), 6);
    }
}
