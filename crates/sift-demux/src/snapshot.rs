//! The published, immutable state readers match against, and the matching itself.
//!
//! Semantics (CSPF section 3.2): filters are tried in order of decreasing priority, ties broken
//! by insertion order (the earlier filter first). A matching *copy* filter receives the packet
//! and the walk goes on; a matching *exclusive* filter receives it and the walk stops. The
//! snapshot computes the same result without walking: every shape is looked up once, the best
//! exclusive hit bounds which run-whole ("residual") filters still need to run, and copies
//! ranked after the winner are dropped.

use std::sync::Arc;

use sift_bytecode::VerifiedProgram;
use sift_coproc::{Coprocessors, SharedSearch};
use sift_ir::Interpreter;
use sift_jit::JitFilter;

use crate::dispatch::{Dispatch, FastShape, Found};
use crate::extract::{Extractor, Regs, MAX_REGS};
use crate::table::Entry;
use crate::{Delivery, FilterId};

/// A shape as readers see it.
#[derive(Clone, Debug)]
pub(crate) struct ShapeView {
    pub(crate) extractor: Arc<Extractor>,
    pub(crate) table: Dispatch,
}

/// How a filter that was not decomposed runs.
// One per residual filter, behind an `Arc`: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub(crate) enum Engine {
    /// Native code, where the host has a JIT (calls go to the program's coprocessor tables,
    /// kept here for the shared search).
    Native {
        code: JitFilter,
        coprocessors: Option<Arc<Coprocessors>>,
    },
    Bytecode(VerifiedProgram),
    /// For the rare function the bytecode code generator refuses (too many live values).
    Reference(Interpreter),
}

/// A filter run whole, in rank order with the others.
#[derive(Clone, Debug)]
pub(crate) struct Residual {
    pub(crate) entry: Entry,
    pub(crate) engine: Arc<Engine>,
}

/// One consistent set of installed filters.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    pub(crate) shapes: Vec<ShapeView>,
    /// In rank order.
    pub(crate) residuals: Arc<[Residual]>,
    /// The residuals' pattern sets searched together (when at least two residuals search).
    pub(crate) shared_search: Option<Arc<SharedSearch>>,
    /// The only shape, inline, when every filter is in it and it takes the common path
    /// (see [`FastShape`]).
    pub(crate) fast: Option<FastShape>,
}

impl Snapshot {
    pub(crate) fn new(
        shapes: Vec<ShapeView>,
        residuals: Arc<[Residual]>,
        shared_search: Option<Arc<SharedSearch>>,
    ) -> Snapshot {
        let fast = match (&shapes[..], &residuals[..]) {
            ([shape], []) => FastShape::of(shape),
            _ => None,
        };
        Snapshot {
            shapes,
            residuals,
            shared_search,
            fast,
        }
    }
}

/// [`Matches::single`] when the delivery is the list [`Matches::delivered`] (never an id: ids
/// are counted up from 1 and stay below 2^63, the C API's bound).
const LIST: FilterId = FilterId(u64::MAX);

/// The result of matching one packet, and the scratch space matching needs (keep one per thread
/// and reuse it: matching then allocates nothing).
#[derive(Debug)]
pub struct Matches {
    /// The one filter that receives the packet; `FilterId(0)` when none does; [`LIST`] when
    /// `delivered` holds the delivery. The common cases, no filter and one filter whose lookup
    /// needed no list, are two plain stores per match instead of resetting and growing a list
    /// (and one filter and none are the same stores: an exclusive filter's slot word, or 0).
    single: FilterId,
    delivered: Vec<FilterId>,
    /// The exclusive winner's id, 0 for none (ids are never 0): one word, so that a caller
    /// reading it right after the match gets it forwarded from the store (an `Option` of two
    /// words written separately and read as one 16-byte value stalled every match).
    exclusive: u64,
    pub(crate) regs: Box<Regs>,
    candidates: Vec<Entry>,
    bytecode: Option<sift_bytecode::Cache>,
    reference: Option<sift_ir::Cache>,
}

impl Default for Matches {
    fn default() -> Matches {
        Matches {
            single: FilterId(0),
            delivered: Vec::new(),
            exclusive: 0,
            regs: Box::new([0; MAX_REGS]),
            candidates: Vec::new(),
            bytecode: None,
            reference: None,
        }
    }
}

impl Matches {
    pub fn new() -> Matches {
        Matches::default()
    }

    /// The exclusive filter that receives the packet: the first exclusive filter in matching
    /// order that accepts it.
    #[inline]
    pub fn exclusive(&self) -> Option<FilterId> {
        (self.exclusive != 0).then_some(FilterId(self.exclusive))
    }

    /// Every filter that receives the packet, in matching order (priority descending, then
    /// insertion order). After [`crate::Reader::match_packet`]: the accepting copy filters
    /// ranked before the exclusive winner, then the winner. After
    /// [`crate::Reader::match_all`]: every accepting filter.
    pub fn delivered(&self) -> &[FilterId] {
        match self.single {
            FilterId(0) => &[],
            LIST => &self.delivered,
            _ => std::slice::from_ref(&self.single),
        }
    }

    /// The accepting copy filters among [`Matches::delivered`].
    pub fn copies(&self) -> impl Iterator<Item = FilterId> + '_ {
        let winner = self.exclusive();
        self.delivered()
            .iter()
            .copied()
            .filter(move |&id| Some(id) != winner)
    }

    pub fn is_empty(&self) -> bool {
        self.delivered().is_empty()
    }

    /// No filter receives the packet.
    #[inline(always)]
    pub(crate) fn deliver_none(&mut self) {
        self.deliver_exclusive(0);
    }

    /// Only filter `id` receives the packet.
    #[inline(always)]
    pub(crate) fn deliver_one(&mut self, id: u64, exclusive: bool) {
        self.single = FilterId(id);
        self.exclusive = if exclusive { id } else { 0 };
    }

    /// Only exclusive filter `id` receives the packet, or none for 0.
    #[inline(always)]
    pub(crate) fn deliver_exclusive(&mut self, id: u64) {
        self.single = FilterId(id);
        self.exclusive = id;
    }

    /// Empties the delivery, to be built in `delivered` (no exclusive winner yet).
    #[inline(always)]
    fn start_list(&mut self) {
        self.single = LIST;
        self.delivered.clear();
        self.exclusive = 0;
    }

    /// Sets a delivery decided elsewhere (fragment dispatch: the first fragment's recipients).
    pub(crate) fn set_delivery(&mut self, delivered: &[FilterId], exclusive: Option<FilterId>) {
        self.start_list();
        self.delivered.extend_from_slice(delivered);
        self.exclusive = exclusive.map_or(0, |id| id.0);
    }
}

impl Engine {
    /// The compiled coprocessor tables the filter's calls use (`None` without calls, or for
    /// the reference interpreter, which searches with `sift-ir`'s definition).
    pub(crate) fn coprocessors(&self) -> Option<&Arc<Coprocessors>> {
        match self {
            Engine::Native { coprocessors, .. } => coprocessors.as_ref(),
            Engine::Bytecode(p) => p.coprocessors(),
            Engine::Reference(_) => None,
        }
    }

    pub(crate) fn is_native(&self) -> bool {
        matches!(self, Engine::Native { .. })
    }

    fn accepts(&self, m: &mut Matches, pkt: &[u8], wire_len: u32) -> bool {
        match self {
            Engine::Native { code, .. } => code.run(pkt, wire_len) != 0,
            Engine::Bytecode(p) => {
                let cache = m.bytecode.get_or_insert_with(sift_bytecode::Cache::new);
                p.run(cache, pkt, wire_len) != 0
            }
            Engine::Reference(i) => {
                let cache = m.reference.get_or_insert_with(sift_ir::Cache::new);
                i.run(cache, pkt, wire_len) != 0
            }
        }
    }
}

impl Snapshot {
    /// Fills `m` for one packet. `all`: every accepting filter instead of CSPF delivery.
    /// Always inlined: the one-shape path (a server's connection filters) is a call of native
    /// code and a few stores, and a call around it would cost as much again.
    #[inline(always)]
    pub(crate) fn run(&self, pkt: &[u8], wire_len: u32, m: &mut Matches, all: bool) {
        if let (Some(fast), false) = (&self.fast, all) {
            return fast.deliver(pkt, wire_len, m);
        }
        if let Some(shape) = self.one_shape(all) {
            return shape.deliver(pkt, wire_len, m);
        }
        self.run_general(pkt, wire_len, m, all);
    }

    /// [`Snapshot::run`] when the one-shape fast path does not apply (kept out of line so
    /// that the fast path inlines into the caller's loop).
    #[inline(never)]
    fn run_general(&self, pkt: &[u8], wire_len: u32, m: &mut Matches, all: bool) {
        self.resolve(pkt, wire_len, m, all, |_, shape, regs| {
            shape.lookup(pkt, wire_len, regs)
        });
    }

    /// The only shape, when CSPF delivery can take the one-shape fast path
    /// ([`deliver_in_order`]): every filter is in it (a server's connection filters).
    #[inline(always)]
    pub(crate) fn one_shape(&self, all: bool) -> Option<&ShapeView> {
        match (&self.shapes[..], &self.residuals[..], all) {
            ([shape], [], false) => Some(shape),
            _ => None,
        }
    }

    /// Fills `m` for one packet given `lookup(i, shape, regs)`: the entries under the
    /// packet's key in shape `i` (`None` when the shape's checks reject the packet or the key
    /// is absent). The per-packet and the batch paths differ only in how they look up.
    #[inline]
    pub(crate) fn resolve<'s>(
        &'s self,
        pkt: &[u8],
        wire_len: u32,
        m: &mut Matches,
        all: bool,
        mut lookup: impl FnMut(usize, &'s ShapeView, &mut Regs) -> Option<Found<'s>>,
    ) {
        m.start_list();
        m.candidates.clear();
        let mut best: Option<Entry> = None;
        for (i, shape) in self.shapes.iter().enumerate() {
            let Some(entries) = lookup(i, shape, &mut m.regs) else {
                continue;
            };
            for e in entries.as_slice() {
                if e.delivery == Delivery::Exclusive {
                    if outranks(e, &best) {
                        best = Some(*e);
                    }
                    if !all {
                        // Entries are in rank order: the rest rank after this winner.
                        break;
                    }
                }
                m.candidates.push(*e);
            }
        }
        let residuals_run = match self.residuals.first() {
            None => false,
            Some(first) => all || best.is_none_or(|b| first.entry.rank() <= b.rank()),
        };
        if residuals_run {
            match &self.shared_search {
                // One search of the payload answers every residual's `contains` calls.
                Some(shared) => {
                    shared.packet(|| self.run_residuals(pkt, wire_len, m, all, &mut best))
                }
                None => self.run_residuals(pkt, wire_len, m, all, &mut best),
            }
        }
        m.exclusive = best.map_or(0, |b| b.id.0);
        if !all {
            if let Some(b) = best {
                m.candidates.retain(|c| c.rank() < b.rank());
                m.candidates.push(b);
            }
        }
        if m.candidates.len() > 1 {
            m.candidates.sort_unstable_by_key(Entry::rank);
        }
        m.delivered.extend(m.candidates.iter().map(|e| e.id));
    }
}

impl Snapshot {
    /// Runs the residual filters in rank order after the shapes' lookups: pushes the
    /// accepting ones to `m.candidates` and updates `best`, the best exclusive match so far.
    #[inline]
    fn run_residuals(
        &self,
        pkt: &[u8],
        wire_len: u32,
        m: &mut Matches,
        all: bool,
        best: &mut Option<Entry>,
    ) {
        for r in self.residuals.iter() {
            if !all && best.is_some_and(|b| r.entry.rank() > b.rank()) {
                break;
            }
            if !r.engine.accepts(m, pkt, wire_len) {
                continue;
            }
            if r.entry.delivery == Delivery::Exclusive {
                if outranks(&r.entry, best) {
                    *best = Some(r.entry);
                }
                if !all {
                    break;
                }
            }
            m.candidates.push(r.entry);
        }
    }
}

/// CSPF delivery when every filter is in one shape: the entries under the packet's key are
/// already in matching order, so the delivery is their prefix up to the first exclusive one;
/// no candidate list, no sort.
#[inline]
pub(crate) fn deliver_in_order(found: Option<Found<'_>>, m: &mut Matches) {
    let list = match found {
        None => return m.deliver_none(),
        // A connection's filter: the common case, without a loop.
        Some(Found::One(e)) => return m.deliver_one(e.id.0, e.delivery == Delivery::Exclusive),
        Some(Found::Many(list)) => list,
    };
    m.start_list();
    for e in list {
        m.delivered.push(e.id);
        if e.delivery == Delivery::Exclusive {
            m.exclusive = e.id.0;
            return;
        }
    }
}

/// Whether `e` comes before the best exclusive match so far.
#[inline]
fn outranks(e: &Entry, best: &Option<Entry>) -> bool {
    match best {
        None => true,
        Some(b) => e.rank() < b.rank(),
    }
}
