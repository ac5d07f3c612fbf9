//! Fragment dispatch (MPF section 3): every fragment of an IP datagram goes where its first
//! fragment went.
//!
//! Only the first fragment (offset 0) carries the transport header that per-connection filters
//! test; later fragments carry none, so matched alone they would reach nobody (or the wrong
//! filter). [`FragmentDemux`] sits in front of a [`crate::Reader`]'s match:
//!
//! * a packet that is not a fragment is matched as usual;
//! * a first fragment is matched, and its recipients are remembered for its datagram — keyed as
//!   IP reassembly keys it (see [`DatagramKey`]) — for `timeout_ns`;
//! * a later fragment of a remembered datagram gets the same recipients without being matched;
//! * a later fragment that arrives before its first is *postponed*: the caller's handle for it
//!   is held, and comes back as a [`Release`] — delivered with the first fragment's recipients
//!   when it arrives, or dropped at the timeout or when the limits require it.
//!
//! Decisions, and why:
//!
//! * **No reassembly.** Duplicate and overlapping fragments are dispatched like any other
//!   fragment of their datagram: the demultiplexer routes packets, the endpoint reassembles
//!   (and applies RFC 5722 / RFC 791 rules on overlaps). Offsets are not tracked.
//! * **A repeated first fragment** (one arriving while its datagram is remembered) goes to the
//!   remembered recipients, like the rest of its datagram: the first one seen owns the datagram,
//!   so a forged first fragment cannot redirect a datagram already claimed. It is still matched,
//!   to count the repeats that would have gone elsewhere (`conflicting_first`).
//! * **A first fragment no filter accepts** is remembered too (with no recipients): its later
//!   fragments are then delivered to nobody on arrival instead of being held and timed out.
//! * **Later fragments never reach filters by their own content**: in this mode a fragment's
//!   delivery is its first fragment's. (A filter testing non-first fragments directly, e.g.
//!   `ip[6:2] & 0x1fff != 0`, receives none of them.)
//! * **Time** is the caller's (`now_ns` on every call; capture timestamps for files); there is
//!   no clock inside. A `now` earlier than one already seen counts as the latest seen, so state
//!   never outlives its timeout measured on the latest clock.
//! * **Bounds**: remembered datagrams and postponed fragments are limited in count and in bytes
//!   ([`FragmentConfig`]); at a limit the oldest are evicted or newcomers refused
//!   ([`Overflow`]); every fragment not delivered is counted by [`DropReason`].
//! * **Filters change meanwhile**: recipients are those of the first fragment's match, even if
//!   the filters were updated since (the datagram belongs to whoever owned its first fragment).
//! * **Expiry**: a datagram is forgotten `timeout_ns` after its first fragment, not refreshed by
//!   later ones (as Linux's reassembly timer); a postponed fragment is dropped `timeout_ns` after
//!   its own arrival (MPF's `postpone #T`).

mod config;
mod datagrams;
mod held;
mod parse;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

pub use config::{
    DropReason, FragmentConfig, FragmentError, FragmentStats, Overflow, DATAGRAM_STATE_BYTES,
    POSTPONED_OVERHEAD_BYTES,
};
pub use parse::DatagramKey;

use crate::{FilterId, LocalReader, Matches, Reader};
use datagrams::Datagrams;
use held::{Held, Postponed};
use parse::LinkLayer;

/// Where a datagram's first fragment went: shared by all its fragments.
///
/// Recorded when the first fragment was matched: a filter removed since then still appears
/// here (its id is never reused), so a caller that removes filters checks ids it no longer
/// serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recipients {
    delivered: Arc<[FilterId]>,
    exclusive: Option<FilterId>,
}

impl Recipients {
    fn of(m: &Matches) -> Recipients {
        Recipients {
            delivered: m.delivered().into(),
            exclusive: m.exclusive(),
        }
    }

    /// As [`Matches::delivered`] for the first fragment.
    pub fn delivered(&self) -> &[FilterId] {
        &self.delivered
    }

    /// As [`Matches::exclusive`] for the first fragment.
    pub fn exclusive(&self) -> Option<FilterId> {
        self.exclusive
    }

    /// The copy filters among [`Recipients::delivered`].
    pub fn copies(&self) -> impl Iterator<Item = FilterId> + '_ {
        let winner = self.exclusive;
        self.delivered
            .iter()
            .copied()
            .filter(move |&id| Some(id) != winner)
    }

    pub fn is_empty(&self) -> bool {
        self.delivered.is_empty()
    }

    fn same_as(&self, m: &Matches) -> bool {
        *self.delivered == *m.delivered() && self.exclusive == m.exclusive()
    }
}

/// What [`FragmentDemux::dispatch`] did with a packet. For the outcomes that deliver
/// ([`FragmentOutcome::delivers_now`]) the `Matches` passed in hold its recipients; otherwise
/// they are empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FragmentOutcome {
    /// Not an IP fragment (or not readable as one): matched as it is.
    Unfragmented,
    /// A first fragment: matched; its datagram's later fragments will follow it. Fragments
    /// postponed for it were queued as releases.
    First,
    /// A first fragment of a datagram already remembered: delivered to the recorded
    /// recipients.
    RepeatedFirst,
    /// A later fragment whose first was seen: delivered to the first fragment's recipients.
    Following,
    /// A later fragment whose first has not been seen: held (the `handle` closure was called);
    /// it will come back as a [`Release`].
    Postponed,
    /// Not delivered and not held ([`DropReason::Refused`]).
    Dropped(DropReason),
}

impl FragmentOutcome {
    /// Whether the packet is delivered now, to the recipients in the `Matches`.
    pub fn delivers_now(self) -> bool {
        matches!(
            self,
            FragmentOutcome::Unfragmented
                | FragmentOutcome::First
                | FragmentOutcome::RepeatedFirst
                | FragmentOutcome::Following
        )
    }
}

/// What finally happens to a postponed fragment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Its first fragment arrived: deliver it to these recipients.
    Deliver(Recipients),
    Drop(DropReason),
}

/// A postponed fragment coming back to the caller, with the handle it gave.
#[derive(Debug)]
pub struct Release<H> {
    pub handle: H,
    /// The `now_ns` it was dispatched with (as the clock saw it: never earlier than an earlier
    /// call's).
    pub arrival_ns: u64,
    pub verdict: Verdict,
}

/// A demultiplexer match that dispatches IP fragments by their datagram (see the module doc).
///
/// One per packet stream (it keeps per-datagram state: `&mut self`, `Send`, not `Sync`); it
/// matches through a [`LocalReader`], so filters may be inserted and removed meanwhile. `H` is
/// whatever the caller needs to get a postponed packet back (a capture record, a copy of the
/// bytes, a cookie); it is only created, through the `handle` closure, when a packet is
/// postponed.
///
/// Usage: call [`dispatch`](FragmentDemux::dispatch) for every packet in arrival order with its
/// timestamp; after each call, drain [`releases`](FragmentDemux::releases) (releases concern
/// packets that arrived before the one just dispatched, so handling them first keeps each
/// datagram's fragments in arrival order); at the end of the input call
/// [`flush`](FragmentDemux::flush) and drain again. Releases not drained stay queued (they are
/// outside the postponed limits, so drain after every call).
///
/// ```
/// use sift_demux::{Demux, FragmentConfig, FragmentDemux, Matches, Verdict};
/// # let records: Vec<(u64, Vec<u8>)> = vec![(1_000, vec![0u8; 60])];
/// # fn write(_record: &(u64, Vec<u8>), _to: &[sift_demux::FilterId]) {}
/// let demux = Demux::new(); // filters inserted elsewhere
/// // The handle is the capture record itself: released packets are written out as recorded.
/// let mut frag: FragmentDemux<(u64, Vec<u8>)> =
///     FragmentDemux::new(&demux.reader(), 1, FragmentConfig::default()).unwrap();
/// let mut m = Matches::new();
/// let mut handle = |frag: &mut FragmentDemux<_>| {
///     for r in frag.releases() {
///         if let Verdict::Deliver(to) = &r.verdict {
///             write(&r.handle, to.delivered());
///         }
///     }
/// };
/// for record in &records {
///     let (ts_ns, data) = record;
///     let outcome = frag.dispatch(data, data.len() as u32, *ts_ns, || record.clone(), &mut m);
///     handle(&mut frag); // earlier packets first: each datagram stays in arrival order
///     if outcome.delivers_now() {
///         write(record, m.delivered());
///     }
/// }
/// frag.flush();
/// handle(&mut frag);
/// println!("{} fragments dropped", frag.stats().dropped());
/// ```
pub struct FragmentDemux<H> {
    reader: LocalReader,
    link: LinkLayer,
    config: FragmentConfig,
    clock: u64,
    datagrams: Datagrams,
    postponed: Postponed<H>,
    releases: VecDeque<Release<H>>,
    stats: FragmentStats,
    /// For matching repeated first fragments.
    scratch: Matches,
}

impl<H> fmt::Debug for FragmentDemux<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FragmentDemux")
            .field("link", &self.link)
            .field("config", &self.config)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl<H> FragmentDemux<H> {
    /// Fragment dispatch for frames of capture link type `linktype` in front of `reader`'s
    /// filters.
    pub fn new(
        reader: &Reader,
        linktype: u32,
        config: FragmentConfig,
    ) -> Result<FragmentDemux<H>, FragmentError> {
        let link = LinkLayer::from_linktype(linktype)
            .ok_or(FragmentError::UnsupportedLinkType(linktype))?;
        Ok(FragmentDemux {
            reader: reader.local(),
            link,
            config,
            clock: 0,
            datagrams: Datagrams::default(),
            postponed: Postponed::default(),
            releases: VecDeque::new(),
            stats: FragmentStats::default(),
            scratch: Matches::new(),
        })
    }

    pub fn config(&self) -> &FragmentConfig {
        &self.config
    }

    /// Dispatches one packet (`packet`: captured bytes, `wire_len`: length on the wire) that
    /// arrived at `now_ns`. Expires what timed out first (see [`FragmentDemux::expire`]).
    /// `handle` is called only if the packet is postponed. `out` receives the recipients when
    /// the outcome [`delivers_now`](FragmentOutcome::delivers_now), and is emptied otherwise.
    pub fn dispatch(
        &mut self,
        packet: &[u8],
        wire_len: u32,
        now_ns: u64,
        handle: impl FnOnce() -> H,
        out: &mut Matches,
    ) -> FragmentOutcome {
        self.expire(now_ns);
        let Some(fragment) = parse::fragment(self.link, packet) else {
            self.stats.unfragmented += 1;
            self.run_match(packet, wire_len, out);
            return FragmentOutcome::Unfragmented;
        };
        if fragment.first {
            self.first_fragment(fragment.key, packet, wire_len, out)
        } else if let Some(recipients) = self.datagrams.get(&fragment.key) {
            self.stats.following += 1;
            out.set_delivery(recipients.delivered(), recipients.exclusive());
            FragmentOutcome::Following
        } else {
            out.set_delivery(&[], None);
            self.postpone(fragment.key, packet.len(), handle)
        }
    }

    /// Forgets the datagrams and drops the postponed fragments whose timeout has passed at
    /// `now_ns` (drops are queued as releases). `dispatch` does this itself; call it when time
    /// passes without packets (a live capture's idle periods).
    pub fn expire(&mut self, now_ns: u64) {
        self.clock = self.clock.max(now_ns);
        self.stats.datagrams_expired += self.datagrams.expire(self.clock);
        while self
            .postponed
            .oldest_arrival()
            .is_some_and(|a| a.saturating_add(self.config.timeout_ns) <= self.clock)
        {
            let held = self.postponed.pop_oldest().expect("an oldest fragment");
            self.drop_held(held, DropReason::Timeout);
        }
    }

    /// Drops every postponed fragment ([`DropReason::Flushed`]), e.g. at the end of a capture
    /// (whose fragments' firsts can no longer come). Remembered datagrams are kept.
    pub fn flush(&mut self) {
        while let Some(held) = self.postponed.pop_oldest() {
            self.drop_held(held, DropReason::Flushed);
        }
    }

    /// The queued releases, oldest first (the C API's drain: call until `None`).
    pub fn next_release(&mut self) -> Option<Release<H>> {
        self.releases.pop_front()
    }

    /// Drains the queued releases, oldest first.
    pub fn releases(&mut self) -> std::collections::vec_deque::Drain<'_, Release<H>> {
        self.releases.drain(..)
    }

    /// Releases waiting to be drained.
    pub fn pending_releases(&self) -> usize {
        self.releases.len()
    }

    /// Counters and current occupancy.
    pub fn stats(&self) -> FragmentStats {
        FragmentStats {
            datagrams_now: self.datagrams.len(),
            datagram_bytes_now: self.datagrams.bytes(),
            postponed_now: self.postponed.len(),
            postponed_bytes_now: self.postponed.bytes(),
            ..self.stats
        }
    }

    fn run_match(&mut self, packet: &[u8], wire_len: u32, out: &mut Matches) {
        if self.config.match_all {
            self.reader.match_all(packet, wire_len, out);
        } else {
            self.reader.match_packet(packet, wire_len, out);
        }
    }

    fn first_fragment(
        &mut self,
        key: DatagramKey,
        packet: &[u8],
        wire_len: u32,
        out: &mut Matches,
    ) -> FragmentOutcome {
        if let Some(recipients) = self.datagrams.get(&key).cloned() {
            self.stats.repeated_first += 1;
            let mut scratch = std::mem::take(&mut self.scratch);
            self.run_match(packet, wire_len, &mut scratch);
            if !recipients.same_as(&scratch) {
                self.stats.conflicting_first += 1;
            }
            self.scratch = scratch;
            out.set_delivery(recipients.delivered(), recipients.exclusive());
            return FragmentOutcome::RepeatedFirst;
        }
        self.stats.first += 1;
        self.run_match(packet, wire_len, out);
        let recipients = Recipients::of(out);
        for held in self.postponed.take(&key) {
            self.stats.released += 1;
            self.releases.push_back(Release {
                handle: held.handle,
                arrival_ns: held.arrival,
                verdict: Verdict::Deliver(recipients.clone()),
            });
        }
        self.remember(key, recipients);
        FragmentOutcome::First
    }

    fn remember(&mut self, key: DatagramKey, recipients: Recipients) {
        let bytes = DATAGRAM_STATE_BYTES + recipients.delivered.len() * size_of::<FilterId>();
        let limits = (self.config.max_datagrams, self.config.max_datagram_bytes);
        if limits.0 == 0 || bytes > limits.1 {
            self.stats.datagrams_refused += 1;
            return;
        }
        while self.datagrams.len() >= limits.0
            || self.datagrams.bytes().saturating_add(bytes) > limits.1
        {
            match self.config.overflow {
                Overflow::EvictOldest => {
                    self.datagrams.pop_oldest();
                    self.stats.datagrams_evicted += 1;
                }
                Overflow::RefuseNew => {
                    self.stats.datagrams_refused += 1;
                    return;
                }
            }
        }
        let deadline = self.clock.saturating_add(self.config.timeout_ns);
        self.datagrams.insert(key, recipients, deadline, bytes);
        self.stats.datagrams_created += 1;
        let s = &mut self.stats;
        s.peak_datagrams = s.peak_datagrams.max(self.datagrams.len());
        s.peak_datagram_bytes = s.peak_datagram_bytes.max(self.datagrams.bytes());
    }

    fn postpone(
        &mut self,
        key: DatagramKey,
        caplen: usize,
        handle: impl FnOnce() -> H,
    ) -> FragmentOutcome {
        let bytes = caplen.saturating_add(POSTPONED_OVERHEAD_BYTES);
        let limits = (self.config.max_postponed, self.config.max_postponed_bytes);
        if limits.0 == 0 || bytes > limits.1 {
            return self.refuse();
        }
        while self.postponed.len() >= limits.0
            || self.postponed.bytes().saturating_add(bytes) > limits.1
        {
            match self.config.overflow {
                Overflow::EvictOldest => {
                    let held = self.postponed.pop_oldest().expect("full, so not empty");
                    self.drop_held(held, DropReason::Evicted);
                }
                Overflow::RefuseNew => return self.refuse(),
            }
        }
        self.postponed.push(Held {
            key,
            handle: handle(),
            arrival: self.clock,
            bytes,
        });
        self.stats.postponed += 1;
        let s = &mut self.stats;
        s.peak_postponed = s.peak_postponed.max(self.postponed.len());
        s.peak_postponed_bytes = s.peak_postponed_bytes.max(self.postponed.bytes());
        FragmentOutcome::Postponed
    }

    fn refuse(&mut self) -> FragmentOutcome {
        self.stats.count_drop(DropReason::Refused);
        FragmentOutcome::Dropped(DropReason::Refused)
    }

    fn drop_held(&mut self, held: Held<H>, reason: DropReason) {
        self.stats.count_drop(reason);
        self.releases.push_back(Release {
            handle: held.handle,
            arrival_ns: held.arrival,
            verdict: Verdict::Drop(reason),
        });
    }
}
