//! The reader side: matching packets against the current snapshot.

use std::sync::Arc;

use arc_swap::cache::Cache;
use arc_swap::ArcSwap;

use crate::snapshot::{Matches, Snapshot};

/// Matches packets against a [`crate::Demux`]'s filters. Cheap to clone; `Send + Sync`.
///
/// Matching never blocks: each call (or each batch) loads the current snapshot with one
/// atomic operation and works on it alone, so an update that happens meanwhile is either
/// wholly visible or not at all.
#[derive(Clone, Debug)]
pub struct Reader {
    shared: Arc<ArcSwap<Snapshot>>,
}

impl Reader {
    pub(crate) fn new(shared: Arc<ArcSwap<Snapshot>>) -> Reader {
        Reader { shared }
    }

    /// Matches one packet (`packet`: the captured bytes; `wire_len`: its length on the wire)
    /// with CSPF delivery: the accepting copy filters ranked before the first accepting
    /// exclusive filter, then that filter (see [`Matches`]).
    pub fn match_packet(&self, packet: &[u8], wire_len: u32, out: &mut Matches) {
        self.shared.load().run(packet, wire_len, out, false);
    }

    /// Every filter that accepts the packet, exclusive or not, in matching order
    /// ([`Matches::exclusive`] is still the CSPF winner).
    pub fn match_all(&self, packet: &[u8], wire_len: u32, out: &mut Matches) {
        self.shared.load().run(packet, wire_len, out, true);
    }

    /// Matches a batch of packets, calling `deliver(i, matches)` for the `i`-th packet, in
    /// order, with exactly the delivery [`Reader::match_packet`] gives it (CSPF delivery).
    ///
    /// Faster per packet than single matches on large tables: packets are taken in chunks,
    /// and the table lookups of a chunk overlap (all keys are extracted and the probes' first
    /// slots read before any delivery is resolved). No allocation per packet.
    ///
    /// The whole batch sees one snapshot, loaded when the call starts: a filter inserted or
    /// removed by another thread during the batch takes effect from the next call on, never
    /// in the middle of one (so a long batch delays when its packets see updates).
    pub fn match_batch<'p, I>(
        &self,
        packets: I,
        scratch: &mut Matches,
        deliver: impl FnMut(usize, &Matches),
    ) where
        I: IntoIterator<Item = (&'p [u8], u32)>,
    {
        self.shared.load().run_batch(packets, scratch, deliver);
    }

    /// The exclusive winner for one packet, for callers that only dispatch.
    pub fn best(
        &self,
        packet: &[u8],
        wire_len: u32,
        scratch: &mut Matches,
    ) -> Option<crate::FilterId> {
        self.match_packet(packet, wire_len, scratch);
        scratch.exclusive()
    }
}

/// A [`Reader`] for one thread (`Send`, not `Sync`): it keeps the current snapshot and only
/// checks, with one atomic load per packet, whether a newer one was published. Same results
/// as [`Reader`], without the per-call cost of `arc-swap`'s shared load; holding it keeps the
/// last snapshot it saw alive until its next match.
pub struct LocalReader {
    cache: Cache<Arc<ArcSwap<Snapshot>>, Arc<Snapshot>>,
}

impl std::fmt::Debug for LocalReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalReader").finish_non_exhaustive()
    }
}

impl Reader {
    /// A per-thread reader.
    pub fn local(&self) -> LocalReader {
        LocalReader {
            cache: Cache::new(self.shared.clone()),
        }
    }
}

impl LocalReader {
    /// As [`Reader::match_packet`].
    #[inline]
    pub fn match_packet(&mut self, packet: &[u8], wire_len: u32, out: &mut Matches) {
        self.cache.load().run(packet, wire_len, out, false);
    }

    /// As [`Reader::match_batch`] (one snapshot for the whole batch: the newest published
    /// when the call starts).
    pub fn match_batch<'p, I>(
        &mut self,
        packets: I,
        scratch: &mut Matches,
        deliver: impl FnMut(usize, &Matches),
    ) where
        I: IntoIterator<Item = (&'p [u8], u32)>,
    {
        self.cache.load().run_batch(packets, scratch, deliver);
    }

    /// As [`Reader::match_all`].
    pub fn match_all(&mut self, packet: &[u8], wire_len: u32, out: &mut Matches) {
        self.cache.load().run(packet, wire_len, out, true);
    }
}
