//! Remembered datagrams: for each datagram whose first fragment was matched, where that
//! fragment went, until the datagram's timeout.
//!
//! Entries are only ever removed oldest first (expiry or eviction), so a queue in creation
//! order (which is also deadline order: one timeout, a clock that never goes back) indexes the
//! table exactly.

use std::collections::{HashMap, VecDeque};

use super::parse::DatagramKey;
use super::Recipients;

#[derive(Debug)]
struct Remembered {
    recipients: Recipients,
    bytes: usize,
}

#[derive(Debug, Default)]
pub(crate) struct Datagrams {
    /// Keyed by addresses an attacker chooses: the std hasher (SipHash, random key).
    map: HashMap<DatagramKey, Remembered>,
    /// (deadline, key), oldest first.
    order: VecDeque<(u64, DatagramKey)>,
    bytes: usize,
}

impl Datagrams {
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    pub(crate) fn get(&self, key: &DatagramKey) -> Option<&Recipients> {
        self.map.get(key).map(|r| &r.recipients)
    }

    /// Remembers a datagram the table does not hold yet.
    pub(crate) fn insert(
        &mut self,
        key: DatagramKey,
        recipients: Recipients,
        deadline: u64,
        bytes: usize,
    ) {
        debug_assert!(self.order.back().is_none_or(|&(d, _)| d <= deadline));
        let old = self.map.insert(key, Remembered { recipients, bytes });
        debug_assert!(old.is_none(), "a remembered datagram is never re-inserted");
        self.order.push_back((deadline, key));
        self.bytes += bytes;
    }

    /// Forgets the oldest datagram; false if there is none.
    pub(crate) fn pop_oldest(&mut self) -> bool {
        let Some((_, key)) = self.order.pop_front() else {
            return false;
        };
        let r = self
            .map
            .remove(&key)
            .expect("queued datagram is remembered");
        self.bytes -= r.bytes;
        true
    }

    /// Forgets the datagrams whose deadline is at or before `now`; returns how many.
    pub(crate) fn expire(&mut self, now: u64) -> u64 {
        let mut n = 0;
        while self.order.front().is_some_and(|&(d, _)| d <= now) {
            self.pop_oldest();
            n += 1;
        }
        n
    }
}
