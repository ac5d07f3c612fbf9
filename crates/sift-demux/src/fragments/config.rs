//! What fragment dispatch may hold (its limits), what it did (its counters), and why a
//! fragment was dropped.

use std::fmt;

/// What happens when per-datagram state or postponed fragments reach their limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Overflow {
    /// Make room by dropping the oldest entries (postponed fragments: dropped and reported;
    /// datagram state: forgotten, so that datagram's later fragments are postponed and, unless
    /// a first fragment comes again, dropped). Recent traffic wins; a flood ages out old
    /// datagrams instead of locking new ones out.
    #[default]
    EvictOldest,
    /// Keep what is held and refuse the newcomer (a postponed fragment is dropped at once; a
    /// first fragment is still delivered but its datagram is not remembered).
    RefuseNew,
}

/// Limits and timeout of a [`crate::FragmentDemux`].
///
/// Memory is bounded by `max_datagrams`/`max_datagram_bytes` (state) plus
/// `max_postponed`/`max_postponed_bytes` (held packets), whatever the traffic. Bytes are
/// accounted as documented on each field (an estimate of the heap the entry really uses).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FragmentConfig {
    /// How long a datagram's dispatch is remembered after its first fragment arrived, and how
    /// long a fragment waits for its first (from its own arrival). A fragment is too late when
    /// `now >= arrival + timeout`. Default 30 s (Linux's `ipfrag_time`).
    pub timeout_ns: u64,
    /// Datagrams whose first fragment was seen, remembered at once.
    pub max_datagrams: usize,
    /// Bytes of that state: [`DATAGRAM_STATE_BYTES`] per datagram plus 8 per recipient.
    pub max_datagram_bytes: usize,
    /// Fragments held waiting for their first fragment.
    pub max_postponed: usize,
    /// Bytes of held fragments: each one's captured length plus [`POSTPONED_OVERHEAD_BYTES`].
    pub max_postponed_bytes: usize,
    /// What to do at a limit.
    pub overflow: Overflow,
    /// Record and deliver every filter accepting the first fragment (`Reader::match_all`)
    /// instead of CSPF delivery (`Reader::match_packet`).
    pub match_all: bool,
}

/// State bytes accounted per remembered datagram (key, table slot, expiry queue slot).
pub const DATAGRAM_STATE_BYTES: usize = 128;
/// Bytes accounted per postponed fragment beyond its captured length (bookkeeping, the
/// caller's handle).
pub const POSTPONED_OVERHEAD_BYTES: usize = 96;

impl Default for FragmentConfig {
    fn default() -> FragmentConfig {
        FragmentConfig {
            timeout_ns: 30_000_000_000,
            max_datagrams: 65_536,
            max_datagram_bytes: 16 << 20,
            max_postponed: 8_192,
            max_postponed_bytes: 16 << 20,
            overflow: Overflow::EvictOldest,
            match_all: false,
        }
    }
}

/// Why a fragment was not delivered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Held for `timeout_ns` without its first fragment arriving.
    Timeout,
    /// Held, then dropped to make room for a newer fragment ([`Overflow::EvictOldest`]).
    Evicted,
    /// Not held: the postponed limits were reached ([`Overflow::RefuseNew`]), or the fragment
    /// alone is larger than `max_postponed_bytes` (whatever the policy).
    Refused,
    /// Still held when [`crate::FragmentDemux::flush`] was called (end of the input).
    Flushed,
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DropReason::Timeout => "first fragment not seen within the timeout",
            DropReason::Evicted => "evicted to make room for newer fragments",
            DropReason::Refused => "postponed fragments at their limit",
            DropReason::Flushed => "first fragment not seen before the end of the input",
        })
    }
}

/// Counters of a [`crate::FragmentDemux`] (every packet passed to `dispatch` is counted in
/// exactly one of `unfragmented`, `first`, `repeated_first`, `following`, `postponed`,
/// `dropped_refused`; every postponed fragment ends in exactly one of `released`,
/// `dropped_timeout`, `dropped_evicted`, `dropped_flushed`, or is still held).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FragmentStats {
    /// Not fragments (or not readable as IP): matched as they are.
    pub unfragmented: u64,
    /// First fragments matched, whose datagram was not remembered yet.
    pub first: u64,
    /// First fragments of a datagram already remembered (retransmissions, duplicates, or
    /// attacks): delivered like the rest of the datagram, to the recorded recipients.
    pub repeated_first: u64,
    /// Of those, how many would have gone elsewhere if matched alone (overlapping first
    /// fragments rewriting the transport header, RFC 5722's concern).
    pub conflicting_first: u64,
    /// Later fragments delivered on arrival (their first had been seen).
    pub following: u64,
    /// Later fragments held for their first.
    pub postponed: u64,
    /// Held fragments delivered when their first fragment arrived.
    pub released: u64,
    pub dropped_timeout: u64,
    pub dropped_evicted: u64,
    pub dropped_refused: u64,
    pub dropped_flushed: u64,
    /// Datagrams remembered (first fragment seen).
    pub datagrams_created: u64,
    /// Datagrams forgotten at their timeout.
    pub datagrams_expired: u64,
    /// Datagrams forgotten early to make room ([`Overflow::EvictOldest`]).
    pub datagrams_evicted: u64,
    /// First fragments whose datagram could not be remembered ([`Overflow::RefuseNew`]).
    pub datagrams_refused: u64,
    /// Current occupancy.
    pub datagrams_now: usize,
    pub datagram_bytes_now: usize,
    pub postponed_now: usize,
    pub postponed_bytes_now: usize,
    /// High-water marks of the occupancy (never above the configured limits).
    pub peak_datagrams: usize,
    pub peak_datagram_bytes: usize,
    pub peak_postponed: usize,
    pub peak_postponed_bytes: usize,
}

impl FragmentStats {
    /// Fragments not delivered, all reasons.
    pub fn dropped(&self) -> u64 {
        self.dropped_timeout + self.dropped_evicted + self.dropped_refused + self.dropped_flushed
    }

    /// The counter of one drop reason.
    pub fn dropped_for(&self, reason: DropReason) -> u64 {
        match reason {
            DropReason::Timeout => self.dropped_timeout,
            DropReason::Evicted => self.dropped_evicted,
            DropReason::Refused => self.dropped_refused,
            DropReason::Flushed => self.dropped_flushed,
        }
    }

    pub(crate) fn count_drop(&mut self, reason: DropReason) {
        *match reason {
            DropReason::Timeout => &mut self.dropped_timeout,
            DropReason::Evicted => &mut self.dropped_evicted,
            DropReason::Refused => &mut self.dropped_refused,
            DropReason::Flushed => &mut self.dropped_flushed,
        } += 1;
    }
}

/// Why a [`crate::FragmentDemux`] could not be created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FragmentError {
    /// A link type whose headers fragment dispatch does not parse (supported: 0, 1, 12, 14,
    /// 101, 108, 113, 228, 229, 276).
    UnsupportedLinkType(u32),
}

impl fmt::Display for FragmentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FragmentError::UnsupportedLinkType(l) => write!(
                f,
                "fragment dispatch does not support link type {l} (supported: 0, 1, 12, 14, \
                 101, 108, 113, 228, 229, 276)"
            ),
        }
    }
}

impl std::error::Error for FragmentError {}
