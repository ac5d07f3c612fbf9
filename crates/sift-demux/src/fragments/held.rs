//! Fragments postponed until their datagram's first fragment arrives: the caller's handles,
//! in arrival order, findable by datagram.
//!
//! Arrival order is also expiry order (every fragment waits the same timeout and the clock
//! never goes back), so the oldest entry is both the next to expire and the one to evict.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::parse::DatagramKey;

/// One postponed fragment.
#[derive(Debug)]
pub(crate) struct Held<H> {
    pub(crate) key: DatagramKey,
    pub(crate) handle: H,
    pub(crate) arrival: u64,
    /// Bytes accounted against `max_postponed_bytes`.
    pub(crate) bytes: usize,
}

#[derive(Debug)]
pub(crate) struct Postponed<H> {
    /// By arrival sequence number: the first entry is the oldest.
    by_seq: BTreeMap<u64, Held<H>>,
    /// Each datagram's postponed fragments, oldest first. Keyed by addresses an attacker
    /// chooses, so the std hasher (SipHash with a random key) rather than a fast one.
    by_key: HashMap<DatagramKey, VecDeque<u64>>,
    next_seq: u64,
    bytes: usize,
}

impl<H> Default for Postponed<H> {
    fn default() -> Postponed<H> {
        Postponed {
            by_seq: BTreeMap::new(),
            by_key: HashMap::new(),
            next_seq: 0,
            bytes: 0,
        }
    }
}

impl<H> Postponed<H> {
    pub(crate) fn len(&self) -> usize {
        self.by_seq.len()
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// The arrival time of the oldest held fragment.
    pub(crate) fn oldest_arrival(&self) -> Option<u64> {
        self.by_seq.first_key_value().map(|(_, h)| h.arrival)
    }

    pub(crate) fn push(&mut self, held: Held<H>) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.bytes += held.bytes;
        self.by_key.entry(held.key).or_default().push_back(seq);
        self.by_seq.insert(seq, held);
    }

    pub(crate) fn pop_oldest(&mut self) -> Option<Held<H>> {
        let (seq, held) = self.by_seq.pop_first()?;
        let queue = self.by_key.get_mut(&held.key).expect("indexed by datagram");
        // The globally oldest fragment is the oldest of its datagram.
        debug_assert_eq!(queue.front(), Some(&seq));
        queue.pop_front();
        if queue.is_empty() {
            self.by_key.remove(&held.key);
        }
        self.bytes -= held.bytes;
        Some(held)
    }

    /// Removes and returns a datagram's postponed fragments, oldest first.
    pub(crate) fn take(&mut self, key: &DatagramKey) -> Vec<Held<H>> {
        let Some(seqs) = self.by_key.remove(key) else {
            return Vec::new();
        };
        let held: Vec<Held<H>> = seqs
            .into_iter()
            .map(|s| self.by_seq.remove(&s).expect("indexed fragment is held"))
            .collect();
        self.bytes -= held.iter().map(|h| h.bytes).sum::<usize>();
        held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: u16) -> DatagramKey {
        DatagramKey::V4 {
            src: [1, 2, 3, 4],
            dst: [5, 6, 7, 8],
            protocol: 17,
            id,
        }
    }

    #[test]
    fn take_and_evict_keep_both_indexes_consistent() {
        let mut p = Postponed::default();
        for (i, id) in [1u16, 2, 1, 3, 1].into_iter().enumerate() {
            p.push(Held {
                key: key(id),
                handle: i,
                arrival: i as u64,
                bytes: 10 + i,
            });
        }
        assert_eq!((p.len(), p.bytes()), (5, 60));
        let ones: Vec<usize> = p.take(&key(1)).into_iter().map(|h| h.handle).collect();
        assert_eq!(ones, [0, 2, 4]);
        assert_eq!((p.len(), p.bytes()), (2, 24));
        assert_eq!(p.oldest_arrival(), Some(1));
        assert_eq!(p.pop_oldest().map(|h| h.handle), Some(1));
        assert!(p.take(&key(2)).is_empty());
        assert_eq!(p.pop_oldest().map(|h| h.handle), Some(3));
        assert!(p.pop_oldest().is_none());
        assert_eq!((p.len(), p.bytes(), p.by_key.len()), (0, 0, 0));
    }
}
