//! The reader side: matching packets against the current snapshot.
//!
//! Publication is read-copy-update: the writer swaps in a new [`Snapshot`] with one atomic
//! pointer store (`arc-swap`), and a match works on whichever snapshot it loaded. What a
//! match pays to load it matters at these speeds: `arc-swap`'s shared load protects the
//! pointer with a hazard slot (two atomic read-modify-write operations and a thread-local
//! lookup per call, 10-40 ns, more than the match itself on a small table). So a [`Reader`]
//! keeps, per thread, the last snapshot it saw (an `arc-swap` cache) and per call only
//! compares that snapshot's address with the published one (one plain load): a changed
//! pointer reloads. The cached snapshot is kept alive by the cache, so its address cannot be
//! reused by a newer one, and equal addresses mean the same snapshot.
//!
//! The cost of the cache is memory: a thread that matched keeps the last snapshot it saw
//! alive until it matches again (with any reader of the same demultiplexer) or exits, and a
//! thread keeps at most [`MAX_CACHED`] demultiplexers' snapshots (entries of dropped
//! demultiplexers are pruned whenever the thread meets a demultiplexer it has not cached).
//! [`LocalReader`] is the same cache owned by the caller instead of the thread.

use std::cell::RefCell;
use std::sync::{Arc, Weak};

use arc_swap::cache::Cache;
use arc_swap::ArcSwap;

use sift_jit::PacketRef;

use crate::batch::{Pairs, Refs};
use crate::snapshot::{Matches, Snapshot};

type Shared = Arc<ArcSwap<Snapshot>>;
type SnapshotCache = Cache<Shared, Arc<Snapshot>>;

/// Demultiplexers whose snapshots one thread caches at most (the oldest entry goes first).
const MAX_CACHED: usize = 8;

/// One demultiplexer's snapshot as this thread last saw it.
struct Cached {
    /// Identifies the demultiplexer (its shared slot; the allocation stays while this weak
    /// reference does, so no other demultiplexer can have this address) and tells whether it
    /// is gone (only the cache's own strong reference left).
    source: Weak<ArcSwap<Snapshot>>,
    cache: SnapshotCache,
}

thread_local! {
    static CACHED: RefCell<Vec<Cached>> = const { RefCell::new(Vec::new()) };
}

/// Matches packets against a [`crate::Demux`]'s filters. Cheap to clone; `Send + Sync`.
///
/// Matching never blocks and never waits for the writer: each call (or each batch) takes the
/// current snapshot and works on it alone, so an update that happens meanwhile is either
/// wholly visible or not at all. The snapshot is taken from a per-thread cache revalidated
/// with one plain atomic load (see the module docs for what the cache keeps alive).
#[derive(Clone, Debug)]
pub struct Reader {
    shared: Shared,
}

impl Reader {
    pub(crate) fn new(shared: Shared) -> Reader {
        Reader { shared }
    }

    /// Matches with this thread's cached snapshot; `false` when the cache is unavailable (a
    /// match inside a batch's callback on this thread, or a thread being torn down).
    #[inline(always)]
    fn run_cached(&self, packet: &[u8], wire_len: u32, out: &mut Matches, all: bool) -> bool {
        CACHED
            .try_with(|cell| match cell.try_borrow_mut() {
                Ok(mut caches) => {
                    let i = cache_index(&mut caches, &self.shared);
                    caches[i].cache.load().run(packet, wire_len, out, all);
                    true
                }
                Err(_) => false,
            })
            .unwrap_or(false)
    }

    /// Matches through `arc-swap`'s shared load (the uncached way).
    #[cold]
    #[inline(never)]
    fn run_shared(&self, packet: &[u8], wire_len: u32, out: &mut Matches, all: bool) {
        self.shared.load().run(packet, wire_len, out, all);
    }

    /// Matches one packet (`packet`: the captured bytes; `wire_len`: its length on the wire)
    /// with CSPF delivery: the accepting copy filters ranked before the first accepting
    /// exclusive filter, then that filter (see [`Matches`]).
    #[inline]
    pub fn match_packet(&self, packet: &[u8], wire_len: u32, out: &mut Matches) {
        if !self.run_cached(packet, wire_len, out, false) {
            self.run_shared(packet, wire_len, out, false);
        }
    }

    /// Every filter that accepts the packet, exclusive or not, in matching order
    /// ([`Matches::exclusive`] is still the CSPF winner).
    pub fn match_all(&self, packet: &[u8], wire_len: u32, out: &mut Matches) {
        if !self.run_cached(packet, wire_len, out, true) {
            self.run_shared(packet, wire_len, out, true);
        }
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
        // `deliver` may match on this thread: the batch holds its own reference to the
        // snapshot (one reference-count update per batch) rather than the thread's cache.
        self.current()
            .run_batch(Pairs(packets.into_iter()), scratch, deliver);
    }

    /// [`Reader::match_batch`] of packets the caller holds as descriptors (a capture
    /// buffer's or a NIC ring's array, built once): the native matchers read them where they
    /// are instead of from a copy made per chunk.
    pub fn match_batch_refs(
        &self,
        packets: &[PacketRef<'_>],
        scratch: &mut Matches,
        deliver: impl FnMut(usize, &Matches),
    ) {
        self.current().run_batch(Refs(packets), scratch, deliver);
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

    /// The current snapshot as an owned reference (this thread's cached one when present).
    fn current(&self) -> Arc<Snapshot> {
        CACHED
            .try_with(|cell| {
                let mut caches = cell.try_borrow_mut().ok()?;
                let i = cache_index(&mut caches, &self.shared);
                Some(Arc::clone(caches[i].cache.load()))
            })
            .ok()
            .flatten()
            .unwrap_or_else(|| self.shared.load_full())
    }
}

/// The index of `shared`'s entry in this thread's caches, adding it (and pruning entries of
/// dropped demultiplexers) when missing.
#[inline]
fn cache_index(caches: &mut Vec<Cached>, shared: &Shared) -> usize {
    let target = Arc::as_ptr(shared);
    // Most threads match against one demultiplexer: its entry is checked first.
    if caches.first().is_some_and(|c| c.source.as_ptr() == target) {
        return 0;
    }
    match caches.iter().position(|c| c.source.as_ptr() == target) {
        Some(i) => i,
        None => add_cache(caches, shared),
    }
}

#[cold]
fn add_cache(caches: &mut Vec<Cached>, shared: &Shared) -> usize {
    // Only this cache's strong reference left: the demultiplexer and its readers are gone.
    caches.retain(|c| c.source.strong_count() > 1);
    if caches.len() >= MAX_CACHED {
        caches.remove(0);
    }
    caches.push(Cached {
        source: Arc::downgrade(shared),
        cache: Cache::new(shared.clone()),
    });
    caches.len() - 1
}

/// A [`Reader`] for one thread (`Send`, not `Sync`) that owns its snapshot cache: it keeps
/// the current snapshot and only checks, with one atomic load per packet, whether a newer one
/// was published. Same results as [`Reader`]; holding it keeps the last snapshot it saw alive
/// until its next match.
pub struct LocalReader {
    cache: SnapshotCache,
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
        self.cache
            .load()
            .run_batch(Pairs(packets.into_iter()), scratch, deliver);
    }

    /// As [`Reader::match_batch_refs`].
    pub fn match_batch_refs(
        &mut self,
        packets: &[PacketRef<'_>],
        scratch: &mut Matches,
        deliver: impl FnMut(usize, &Matches),
    ) {
        self.cache.load().run_batch(Refs(packets), scratch, deliver);
    }

    /// As [`Reader::match_all`].
    pub fn match_all(&mut self, packet: &[u8], wire_len: u32, out: &mut Matches) {
        self.cache.load().run(packet, wire_len, out, true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Delivery, Demux};

    fn accept_all() -> sift_ir::Function {
        sift_ir::parse_function("block0:\n ret 1\n").unwrap()
    }

    #[test]
    fn the_thread_cache_sees_every_update_at_once() {
        let mut d = Demux::new();
        let reader = d.reader();
        let mut m = Matches::new();
        reader.match_packet(&[0; 20], 20, &mut m);
        assert!(m.is_empty());
        let a = d.insert(&accept_all(), 0, Delivery::Exclusive).unwrap();
        reader.match_packet(&[0; 20], 20, &mut m);
        assert_eq!(m.exclusive(), Some(a));
        let b = d.insert(&accept_all(), 5, Delivery::Exclusive).unwrap();
        assert_eq!(reader.best(&[0; 20], 20, &mut m), Some(b));
        assert!(d.remove(b));
        assert_eq!(reader.best(&[0; 20], 20, &mut m), Some(a));
        assert!(d.remove(a));
        assert_eq!(reader.best(&[0; 20], 20, &mut m), None);
    }

    #[test]
    fn demultiplexers_on_one_thread_keep_apart() {
        let mut demuxes: Vec<Demux> = (0..2 * MAX_CACHED).map(|_| Demux::new()).collect();
        let ids: Vec<_> = demuxes
            .iter_mut()
            .map(|d| d.insert(&accept_all(), 0, Delivery::Exclusive).unwrap())
            .collect();
        let readers: Vec<Reader> = demuxes.iter().map(Demux::reader).collect();
        let mut m = Matches::new();
        for _ in 0..3 {
            for (r, id) in readers.iter().zip(&ids) {
                assert_eq!(r.best(&[0; 4], 4, &mut m), Some(*id));
            }
        }
        // Dropped demultiplexers (and their readers) are pruned from the cache.
        drop(readers);
        drop(demuxes);
        let mut fresh = Demux::new();
        let id = fresh.insert(&accept_all(), 0, Delivery::Exclusive).unwrap();
        assert_eq!(fresh.reader().best(&[0; 4], 4, &mut m), Some(id));
        CACHED.with(|c| assert_eq!(c.borrow().len(), 1));
    }

    #[test]
    fn matching_inside_a_batch_callback_works() {
        let mut d = Demux::new();
        let id = d.insert(&accept_all(), 0, Delivery::Exclusive).unwrap();
        let reader = d.reader();
        let mut scratch = Matches::new();
        let mut inner = Matches::new();
        let packets = [[0u8; 8]; 3];
        let mut seen = 0;
        reader.match_batch(packets.iter().map(|p| (&p[..], 8)), &mut scratch, |_, m| {
            assert_eq!(m.exclusive(), Some(id));
            // Nested single match while the batch runs.
            assert_eq!(reader.best(&[0; 8], 8, &mut inner), Some(id));
            seen += 1;
        });
        assert_eq!(seen, 3);
    }
}
