//! The reference runtime for MPF's state: a group of filters collapsed into one program, their
//! key tables, the filter's static memory and its postponed-packet queue (section 3).
//!
//! A [`Session`] holds filters of one shape (the same program but for its keys); each installed
//! filter is an endpoint. A packet runs through the shared program once ([`super::interp`]
//! splits the endpoint set at match instructions); then the postponed packets are run again if
//! the static memory gained an entry since their last attempt, until nothing changes.
//!
//! Time is the caller's: every call passes `now` in milliseconds (a capture's timestamps, or a
//! test's clock), and nothing happens between calls. Everything the state may hold is bounded
//! ([`Limits`]); what the bounds throw away is counted in [`Stats`].
//!
//! * Static memory: an entry is `(M[0..N], endpoint)`, valid while `now < registered + T`.
//!   Registering an existing entry renews its deadline. A new entry that does not fit evicts the
//!   entries closest to their deadline.
//! * Postponed packets: a copy of the packet, the endpoints that postponed it, and a deadline of
//!   first postponement + `T` (postponing again does not extend it). A packet is dropped at its
//!   deadline; when the queue is full, the oldest packet is dropped to make room.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt;

use super::interp::{execute, Endpoints, Env, Fate};
use super::program::{Insn, Program};

/// An installed filter: the endpoint its packets go to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EndpointId(pub u32);

/// One packet given to one endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// Which packet: the index of the [`Session::filter`] call that brought it (from 0).
    pub packet: u64,
    pub endpoint: EndpointId,
    /// How many bytes the filter returned (`u32::MAX` for `ALL`).
    pub length: u32,
}

/// Bounds on the state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Static memory entries.
    pub max_entries: usize,
    /// Static memory bytes (4 per registered word).
    pub max_entry_bytes: usize,
    /// Postponed packets.
    pub max_postponed: usize,
    /// Bytes of postponed packets.
    pub max_postponed_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_entries: 4096,
            max_entry_bytes: 64 * 1024,
            max_postponed: 64,
            max_postponed_bytes: 256 * 1024,
        }
    }
}

/// Counters; every packet or entry the session lets go of is in one of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub packets: u64,
    pub deliveries: u64,
    /// Packets postponed (counted once, when first postponed).
    pub postponed: u64,
    /// Postponed packets delivered on a later attempt.
    pub released: u64,
    /// Postponed packets rejected on a later attempt.
    pub rejected_later: u64,
    /// Postponed packets dropped at their deadline.
    pub expired: u64,
    /// Postponed packets dropped for room (or too large to keep).
    pub dropped: u64,
    /// New static memory entries.
    pub registered: u64,
    /// Static memory entries removed at their deadline.
    pub entries_expired: u64,
    /// Static memory entries evicted for room (or too large to keep).
    pub entries_evicted: u64,
}

/// Why a filter cannot join the session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstallError {
    /// The program differs from the session's in more than its keys.
    ShapeMismatch,
}

impl fmt::Display for InstallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the program differs from the session's programs in more than its keys")
    }
}

impl std::error::Error for InstallError {}

/// Key tables and static memory: what the interpreter consults.
#[derive(Default)]
struct Tables {
    /// Per match slot: key values -> endpoints with those keys.
    keys: HashMap<(usize, Vec<u32>), Vec<u32>>,
    /// Registered data -> endpoint -> deadline.
    data: HashMap<Vec<u32>, BTreeMap<u32, u64>>,
    entries: usize,
    bytes: usize,
    /// Bumped whenever an entry is added: postponed packets only need another try then.
    generation: u64,
    now: u64,
    limits: Limits,
    stats: Stats,
}

impl Tables {
    fn remove(&mut self, values: &[u32], endpoint: u32) {
        if let Some(owners) = self.data.get_mut(values) {
            if owners.remove(&endpoint).is_some() {
                self.entries -= 1;
                self.bytes -= 4 * values.len();
            }
            if owners.is_empty() {
                self.data.remove(values);
            }
        }
    }

    /// Evicts the entry closest to its deadline.
    fn evict_one(&mut self) -> bool {
        let victim = self
            .data
            .iter()
            .flat_map(|(v, owners)| owners.iter().map(move |(&e, &d)| (d, e, v)))
            .min()
            .map(|(_, e, v)| (v.clone(), e));
        match victim {
            Some((values, e)) => {
                self.remove(&values, e);
                self.stats.entries_evicted += 1;
                true
            }
            None => false,
        }
    }

    fn expire(&mut self) {
        let now = self.now;
        let dead: Vec<(Vec<u32>, u32)> = self
            .data
            .iter()
            .flat_map(|(v, owners)| {
                owners
                    .iter()
                    .filter(|&(_, &d)| d <= now)
                    .map(move |(&e, _)| (v.clone(), e))
            })
            .collect();
        for (values, e) in dead {
            self.remove(&values, e);
            self.stats.entries_expired += 1;
        }
    }
}

impl Env for Tables {
    fn match_keys(&self, slot: usize, values: &[u32], among: &Endpoints) -> BTreeSet<u32> {
        self.keys
            .get(&(slot, values.to_vec()))
            .into_iter()
            .flatten()
            .copied()
            .filter(|&e| among.contains(e))
            .collect()
    }

    fn match_data(&self, values: &[u32], among: &Endpoints) -> Option<BTreeSet<u32>> {
        let owners: Vec<u32> = self
            .data
            .get(values)?
            .iter()
            .filter(|&(_, &deadline)| deadline > self.now)
            .map(|(&e, _)| e)
            .collect();
        if owners.is_empty() {
            return None;
        }
        Some(owners.into_iter().filter(|&e| among.contains(e)).collect())
    }

    fn register(&mut self, values: &[u32], owners: &Endpoints, timeout_ms: u32) {
        let deadline = self.now.saturating_add(u64::from(timeout_ms));
        let size = 4 * values.len();
        for e in owners.members() {
            if let Some(d) = self.data.get_mut(values).and_then(|o| o.get_mut(&e)) {
                *d = deadline;
                continue;
            }
            if size > self.limits.max_entry_bytes || self.limits.max_entries == 0 {
                self.stats.entries_evicted += 1;
                continue;
            }
            while self.entries + 1 > self.limits.max_entries
                || self.bytes + size > self.limits.max_entry_bytes
            {
                if !self.evict_one() {
                    break;
                }
            }
            self.data
                .entry(values.to_vec())
                .or_default()
                .insert(e, deadline);
            self.entries += 1;
            self.bytes += size;
            self.generation += 1;
            self.stats.registered += 1;
        }
    }
}

/// A postponed packet.
struct Pending {
    packet: u64,
    data: Vec<u8>,
    wire_len: u32,
    deadline: u64,
    who: Endpoints,
    /// The static memory generation it was last tried against.
    tried: u64,
}

/// A group of collapsed MPF filters and their state (see the module docs).
pub struct Session {
    program: Option<Program>,
    endpoints: u32,
    tables: Tables,
    pending: VecDeque<Pending>,
    pending_bytes: usize,
    next_packet: u64,
}

impl Session {
    pub fn new(limits: Limits) -> Session {
        Session {
            program: None,
            endpoints: 0,
            tables: Tables {
                limits,
                ..Tables::default()
            },
            pending: VecDeque::new(),
            pending_bytes: 0,
            next_packet: 0,
        }
    }

    /// Adds a filter: the first one fixes the shape, later ones must have the same shape
    /// ([`Program::shape`]); their keys go into the key tables.
    pub fn install(&mut self, program: &Program) -> Result<EndpointId, InstallError> {
        match &self.program {
            Some(p) if p.shape() != program.shape() => return Err(InstallError::ShapeMismatch),
            Some(_) => {}
            None => self.program = Some(program.clone()),
        }
        let id = self.endpoints;
        for (slot, insn) in program.insns().iter().enumerate() {
            if matches!(insn, Insn::RetMatchImm { .. } | Insn::JmpMatchImm { .. }) {
                let keys = program.keys_at(slot);
                self.tables.keys.entry((slot, keys)).or_default().push(id);
            }
        }
        self.endpoints += 1;
        Ok(EndpointId(id))
    }

    /// Filters one packet arriving at `now` (milliseconds; time never goes back: an earlier
    /// `now` counts as the latest seen). Returns the deliveries of this packet, then those of
    /// postponed packets it released.
    pub fn filter(&mut self, packet: &[u8], wire_len: u32, now: u64) -> Vec<Delivery> {
        self.expire(now);
        let id = self.next_packet;
        self.next_packet += 1;
        self.tables.stats.packets += 1;
        let mut out = Vec::new();
        let Some(program) = &self.program else {
            return out;
        };
        let fates = execute(
            program,
            &mut self.tables,
            packet,
            wire_len,
            u32::MAX,
            Endpoints::all(self.endpoints),
        );
        let mut postponed = Vec::new();
        for (who, fate) in fates {
            match fate {
                Fate::Deliver(length) => {
                    deliver(&mut out, &mut self.tables.stats, id, &who, length)
                }
                Fate::Reject => {}
                Fate::Postpone { timeout_ms } => postponed.push(Pending {
                    packet: id,
                    data: packet.to_vec(),
                    wire_len,
                    deadline: self.tables.now.saturating_add(u64::from(timeout_ms)),
                    who,
                    tried: self.tables.generation,
                }),
            }
        }
        if !postponed.is_empty() {
            self.tables.stats.postponed += 1;
        }
        for p in postponed {
            self.queue(p);
        }
        self.retry(&mut out);
        out
    }

    /// Drops the static memory entries and postponed packets whose deadline is `now` or past.
    pub fn expire(&mut self, now: u64) {
        self.tables.now = self.tables.now.max(now);
        self.tables.expire();
        let now = self.tables.now;
        let before = self.pending.len();
        self.pending.retain(|p| p.deadline > now);
        self.tables.stats.expired += (before - self.pending.len()) as u64;
        self.pending_bytes = self.pending.iter().map(|p| p.data.len()).sum();
    }

    /// Postponed packets waiting.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Static memory entries.
    pub fn entries(&self) -> usize {
        self.tables.entries
    }

    /// Installed filters.
    pub fn endpoints(&self) -> u32 {
        self.endpoints
    }

    pub fn stats(&self) -> Stats {
        self.tables.stats
    }

    fn queue(&mut self, p: Pending) {
        let limits = self.tables.limits;
        if p.data.len() > limits.max_postponed_bytes || limits.max_postponed == 0 {
            self.tables.stats.dropped += 1;
            return;
        }
        while self.pending.len() >= limits.max_postponed
            || self.pending_bytes + p.data.len() > limits.max_postponed_bytes
        {
            let Some(old) = self.pending.pop_front() else {
                break;
            };
            self.pending_bytes -= old.data.len();
            self.tables.stats.dropped += 1;
        }
        self.pending_bytes += p.data.len();
        self.pending.push_back(p);
    }

    /// Runs the postponed packets again while the static memory keeps gaining entries (at most
    /// once per waiting packet, plus one).
    fn retry(&mut self, out: &mut Vec<Delivery>) {
        let Some(program) = &self.program else { return };
        for _ in 0..=self.pending.len() {
            let start = self.tables.generation;
            let waiting = std::mem::take(&mut self.pending);
            self.pending_bytes = 0;
            let mut keep = Vec::new();
            for mut p in waiting {
                if p.tried == self.tables.generation {
                    keep.push(p);
                    continue;
                }
                let fates = execute(
                    program,
                    &mut self.tables,
                    &p.data,
                    p.wire_len,
                    u32::MAX,
                    p.who.clone(),
                );
                p.tried = self.tables.generation;
                for (who, fate) in fates {
                    match fate {
                        Fate::Deliver(length) => {
                            self.tables.stats.released += 1;
                            deliver(out, &mut self.tables.stats, p.packet, &who, length);
                        }
                        Fate::Reject => self.tables.stats.rejected_later += 1,
                        Fate::Postpone { .. } => keep.push(Pending {
                            packet: p.packet,
                            data: p.data.clone(),
                            wire_len: p.wire_len,
                            deadline: p.deadline,
                            who,
                            tried: p.tried,
                        }),
                    }
                }
            }
            for p in keep {
                self.pending_bytes += p.data.len();
                self.pending.push_back(p);
            }
            if self.tables.generation == start {
                break;
            }
        }
    }
}

fn deliver(out: &mut Vec<Delivery>, stats: &mut Stats, packet: u64, who: &Endpoints, length: u32) {
    for e in who.members() {
        stats.deliveries += 1;
        out.push(Delivery {
            packet,
            endpoint: EndpointId(e),
            length,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mpf::parse;

    /// A miniature of appendix B: `[key, id]` is a first fragment (registers `id` for the
    /// filter whose key it is), `[0, id]` a later one (delivered to whoever registered `id`,
    /// postponed while nobody has).
    fn program(key: u8) -> Program {
        parse(&format!(
            "ldb [0]\njeq #0, later, first\n\
             first: st M[0]\njmp_match_imm #1, mine, fail\nkey #{key}\n\
             mine: ldb [1]\nst M[0]\nregister_data #1, #100\nret #ALL\n\
             later: ldb [1]\nst M[0]\nret_match_data #1, #ALL\npostpone #50\n\
             fail: ret #0\n"
        ))
        .unwrap()
    }

    #[test]
    fn postponed_then_released() {
        let mut s = Session::new(Limits::default());
        let a = s.install(&program(1)).unwrap();
        let b = s.install(&program(2)).unwrap();
        assert!(s.filter(&[0, 7], 2, 0).is_empty()); // nobody registered 7 yet
        assert_eq!(s.pending(), 1);
        let d = s.filter(&[2, 7], 2, 10); // b registers 7; packet 0 goes to b
        let got: Vec<_> = d.iter().map(|d| (d.packet, d.endpoint)).collect();
        assert_eq!(got, vec![(1, b), (0, b)]);
        assert_eq!(s.pending(), 0);
        assert_eq!(s.filter(&[1, 8], 2, 20)[0].endpoint, a);
        assert_eq!(s.filter(&[0, 8], 2, 30)[0].endpoint, a);
        let st = s.stats();
        assert_eq!((st.postponed, st.released, st.registered), (1, 1, 2));
    }

    #[test]
    fn deadlines_and_limits() {
        let limits = Limits {
            max_entries: 1,
            max_postponed: 2,
            ..Limits::default()
        };
        let mut s = Session::new(limits);
        s.install(&program(1)).unwrap();
        s.filter(&[0, 7], 2, 0);
        s.filter(&[0, 8], 2, 0);
        s.filter(&[0, 9], 2, 0); // the queue holds two: packet 0 is dropped
        assert_eq!((s.pending(), s.stats().dropped), (2, 1));
        s.expire(50); // deadline 0 + 50
        assert_eq!((s.pending(), s.stats().expired), (0, 2));
        s.filter(&[1, 7], 2, 60);
        s.filter(&[1, 8], 2, 61); // evicts 7
        assert_eq!((s.entries(), s.stats().entries_evicted), (1, 1));
        s.expire(161);
        assert_eq!((s.entries(), s.stats().entries_expired), (0, 1));
    }

    #[test]
    fn shapes_must_agree() {
        let mut s = Session::new(Limits::default());
        s.install(&program(1)).unwrap();
        let other = parse("ret #1\n").unwrap();
        assert_eq!(s.install(&other), Err(InstallError::ShapeMismatch));
    }
}
