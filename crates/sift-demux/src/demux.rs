//! The writer side: installing and removing filters, and publishing snapshots.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwap;
use sift_coproc::SharedSearch;
use sift_ir::{Function, Interpreter, VerifyError};
use sift_jit::demux_table::KeyHash;

use crate::dispatch::Dispatch;
use crate::extract::Extractor;
use crate::paths::{decompose_traced, Conjunction, Limits, NotDecomposed};
use crate::reader::Reader;
use crate::shape::{split, Key, ShapeSig};
use crate::snapshot::{Engine, Residual, ShapeView, Snapshot};
use crate::table::Entry;
use crate::templates::Templates;
use sift_jit::key_extractor::PacketOrder;

/// Identifies an installed filter. Ids are never reused; their order is insertion order, which
/// breaks ties between filters of equal priority (the earlier filter wins). Never 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FilterId(pub u64);

impl fmt::Display for FilterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// What a filter does with a packet it accepts (CSPF section 3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Delivery {
    /// The filter takes the packet: lower-ranked filters do not see it.
    Exclusive,
    /// The filter receives a copy; lower-ranked filters are still tried (monitors, groups).
    Copy,
}

/// Why a filter could not be installed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InsertError {
    /// The function breaks the IR's invariants (every violation is listed).
    InvalidIr(VerifyError),
}

impl fmt::Display for InsertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InsertError::InvalidIr(e) => write!(f, "invalid filter IR: {e}"),
        }
    }
}

impl std::error::Error for InsertError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            InsertError::InvalidIr(e) => Some(e),
        }
    }
}

/// How an installed filter is represented.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Decomposed into this many accepting paths, each a key in a shape's table (0: the filter
    /// never accepts anything).
    Keyed { paths: usize },
    /// Run whole, in priority order, because it did not decompose.
    Residual(NotDecomposed),
}

#[derive(Debug)]
struct Shape {
    sig: Arc<ShapeSig>,
    view: ShapeView,
}

#[derive(Debug)]
pub(crate) enum Where {
    Paths(Vec<(usize, Key)>),
    Residual(NotDecomposed),
}

#[derive(Debug)]
pub(crate) struct Installed {
    pub(crate) entry: Entry,
    pub(crate) at: Where,
}

/// Counts describing the merged structure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub filters: usize,
    /// Shapes (one extractor and one table each): the per-packet cost grows with this number.
    pub shapes: usize,
    /// Keys over all tables.
    pub keys: usize,
    /// Filters run whole.
    pub residuals: usize,
    /// Approximate heap bytes of the published tables.
    pub table_bytes: usize,
    /// Shapes whose extractor runs as native code (the others are interpreted).
    pub native_shapes: usize,
    /// Residual filters run as native code (the others by the bytecode interpreter).
    pub native_residuals: usize,
    /// Residual filters whose payload searches are answered by the shared search (one search
    /// per packet for all of them); 0 when fewer than two residuals search.
    pub shared_search_filters: usize,
    /// Distinct patterns in the shared search.
    pub shared_search_patterns: usize,
}

/// A demultiplexer: many filters, one pass per packet.
///
/// Updates (`&mut self`) publish a new snapshot atomically; [`Reader`]s (from
/// [`Demux::reader`], any number, on any threads) never block and always match against one
/// complete snapshot, the one before or the one after an update.
#[derive(Debug)]
pub struct Demux {
    shared: Arc<ArcSwap<Snapshot>>,
    shapes: Vec<Option<Shape>>,
    free_shapes: Vec<usize>,
    by_sig: HashMap<Arc<ShapeSig>, usize>,
    residuals: Vec<Residual>,
    published_residuals: Arc<[Residual]>,
    /// The published residuals' pattern sets searched together.
    shared_search: Option<Arc<SharedSearch>>,
    /// Whether residuals' searches are merged into `shared_search` (see
    /// [`Demux::share_searches`]).
    share_searches: bool,
    pub(crate) filters: HashMap<FilterId, Installed>,
    next_id: u64,
    /// The hash of every shape's table (seeded per demultiplexer).
    key_hash: KeyHash,
    limits: Limits,
    /// Recent decompositions, reused by filters that differ only in constants.
    templates: Templates,
    /// Whether new shapes get native extractors and new residuals native code.
    native: bool,
}

impl Default for Demux {
    fn default() -> Demux {
        Demux::new()
    }
}

impl Demux {
    /// A demultiplexer whose shapes' extractors are compiled to native code where the host has
    /// a JIT ([`sift_jit::supported`]), interpreted elsewhere.
    pub fn new() -> Demux {
        Demux {
            native: sift_jit::supported(),
            ..Demux::interpreted()
        }
    }

    /// A demultiplexer that interprets every extractor (same deliveries as [`Demux::new`];
    /// for measuring the native code and testing it against the interpreter).
    pub fn interpreted() -> Demux {
        Demux {
            shared: Arc::new(ArcSwap::from_pointee(Snapshot::default())),
            shapes: Vec::new(),
            free_shapes: Vec::new(),
            by_sig: HashMap::new(),
            residuals: Vec::new(),
            published_residuals: Arc::from(Vec::new()),
            shared_search: None,
            share_searches: true,
            filters: HashMap::new(),
            next_id: 1,
            key_hash: KeyHash::random(),
            limits: Limits::default(),
            templates: Templates::default(),
            native: false,
        }
    }

    /// Whether the payload searches of residual filters are merged (the default): when two or
    /// more installed residual filters search payloads (`contains` calls), their patterns are
    /// compiled into one [`SharedSearch`] whenever the set of filters changes, and each packet
    /// is searched once for all of them instead of once per filter. Deliveries are the same
    /// either way; turning it off is for measuring. Published at once.
    pub fn share_searches(&mut self, on: bool) {
        self.share_searches = on;
        self.shared_search = self.build_shared_search();
        self.publish();
    }

    /// A handle for matching packets (cheap to clone, `Send + Sync`).
    pub fn reader(&self) -> Reader {
        Reader::new(self.shared.clone())
    }

    /// Installs a filter and publishes the new set.
    ///
    /// The filter accepts a packet iff `sift_ir::Interpreter` would return non-zero for it.
    pub fn insert(
        &mut self,
        filter: &Function,
        priority: i32,
        delivery: Delivery,
    ) -> Result<FilterId, InsertError> {
        let id = self.insert_unpublished(filter, priority, delivery)?;
        self.publish();
        Ok(id)
    }

    /// Removes a filter and publishes the new set; `false` for an unknown id. Once this
    /// returns, no match that starts afterwards reports `id`.
    pub fn remove(&mut self, id: FilterId) -> bool {
        let removed = self.remove_unpublished(id);
        if removed {
            self.publish();
        }
        removed
    }

    /// Several updates published together, at the end of the batch (readers see all of them
    /// or none; loading many filters this way also avoids copying tables once per filter).
    pub fn batch(&mut self) -> Batch<'_> {
        Batch { demux: self }
    }

    /// How a filter is installed.
    pub fn placement(&self, id: FilterId) -> Option<Placement> {
        self.filters.get(&id).map(|f| match &f.at {
            Where::Paths(p) => Placement::Keyed { paths: p.len() },
            Where::Residual(why) => Placement::Residual(*why),
        })
    }

    /// The priority and delivery an installed filter was given.
    pub fn priority(&self, id: FilterId) -> Option<(i32, Delivery)> {
        self.filters
            .get(&id)
            .map(|f| (f.entry.priority, f.entry.delivery))
    }

    pub fn len(&self) -> usize {
        self.filters.len()
    }

    pub fn is_empty(&self) -> bool {
        self.filters.is_empty()
    }

    pub fn stats(&self) -> Stats {
        let live = self.shapes.iter().flatten();
        Stats {
            filters: self.filters.len(),
            shapes: live.clone().count(),
            keys: live.clone().map(|s| s.view.table.len()).sum(),
            residuals: self.residuals.len(),
            table_bytes: live.clone().map(|s| s.view.table.heap_bytes()).sum(),
            native_shapes: live.filter(|s| s.view.extractor.is_native()).count(),
            native_residuals: self
                .residuals
                .iter()
                .filter(|r| r.engine.is_native())
                .count(),
            shared_search_filters: self.shared_search.as_ref().map_or(0, |s| s.members()),
            shared_search_patterns: self.shared_search.as_ref().map_or(0, |s| s.patterns()),
        }
    }

    fn insert_unpublished(
        &mut self,
        filter: &Function,
        priority: i32,
        delivery: Delivery,
    ) -> Result<FilterId, InsertError> {
        let paths = self.accepting_paths(filter)?;
        let id = FilterId(self.next_id);
        self.next_id += 1;
        let entry = Entry {
            priority,
            id,
            delivery,
        };
        let split_paths = paths.and_then(|paths| {
            let split: Vec<(ShapeSig, Key)> = paths.iter().map(split).collect();
            // Every shape must compile before anything is installed.
            for (sig, _) in &split {
                if !self.by_sig.contains_key(sig) && Extractor::compile(sig).is_none() {
                    return Err(NotDecomposed::TooManyValues);
                }
            }
            Ok(split)
        });
        let at = match split_paths {
            Ok(paths) => {
                let mut placed: Vec<(usize, Key)> = Vec::with_capacity(paths.len());
                for (sig, key) in paths {
                    let shape = self.shape_for(sig);
                    // Paths are mutually exclusive, so two with one key can only both be
                    // unsatisfiable; one entry is enough.
                    if placed.contains(&(shape, key)) {
                        continue;
                    }
                    let s = self.shapes[shape].as_mut().expect("live shape");
                    s.view.table.insert(&key, entry);
                    placed.push((shape, key));
                }
                Where::Paths(placed)
            }
            Err(why) => {
                let engine = match sift_bytecode::compile(filter) {
                    Ok(p) => self.residual_engine(p),
                    Err(_) => Engine::Reference(
                        Interpreter::new(filter.clone()).map_err(InsertError::InvalidIr)?,
                    ),
                };
                let r = Residual {
                    entry,
                    engine: Arc::new(engine),
                };
                let at = self
                    .residuals
                    .partition_point(|x| x.entry.rank() < entry.rank());
                self.residuals.insert(at, r);
                Where::Residual(why)
            }
        };
        self.filters.insert(id, Installed { entry, at });
        Ok(id)
    }

    /// The filter's accepting paths (`paths::decompose`), from a kept decomposition of a filter
    /// that differs only in constants when there is one (`templates`: the same result, and the
    /// filter is known to verify), else verified and decomposed in full.
    fn accepting_paths(
        &mut self,
        filter: &Function,
    ) -> Result<Result<Vec<Conjunction>, NotDecomposed>, InsertError> {
        if let Some(paths) = self.templates.paths(filter) {
            return Ok(Ok(paths));
        }
        sift_ir::verify(filter).map_err(InsertError::InvalidIr)?;
        Ok(decompose_traced(filter, self.limits).map(|(paths, trace)| {
            self.templates.learn(filter, &paths, trace);
            paths
        }))
    }

    /// Native code for a residual's program where there is a JIT (and the JIT takes it), else
    /// the program itself.
    fn residual_engine(&self, program: sift_bytecode::VerifiedProgram) -> Engine {
        if self.native {
            if let Ok(code) = sift_jit::JitFilter::compile(&program) {
                return Engine::Native {
                    code,
                    coprocessors: program.coprocessors().cloned(),
                };
            }
        }
        Engine::Bytecode(program)
    }

    fn shape_for(&mut self, sig: ShapeSig) -> usize {
        if let Some(&i) = self.by_sig.get(&sig) {
            return i;
        }
        let mut extractor = Extractor::compile(&sig).expect("checked by the caller");
        if self.native {
            // Only a new shape compiles: a key added to an existing one never does.
            extractor.compile_native();
        }
        // Keys in the order the native matcher computes them; an interpreted shape keeps the
        // extractor's (converting each lookup's key would cost it for nothing).
        let order = if extractor.is_native() {
            extractor.packet_order()
        } else {
            PacketOrder::default()
        };
        let table = Dispatch::new(extractor.key_words, self.key_hash, order);
        let sig = Arc::new(sig);
        let shape = Shape {
            sig: sig.clone(),
            view: ShapeView {
                extractor: Arc::new(extractor),
                table,
            },
        };
        let i = match self.free_shapes.pop() {
            Some(i) => {
                self.shapes[i] = Some(shape);
                i
            }
            None => {
                self.shapes.push(Some(shape));
                self.shapes.len() - 1
            }
        };
        self.by_sig.insert(sig, i);
        i
    }

    fn remove_unpublished(&mut self, id: FilterId) -> bool {
        let Some(f) = self.filters.remove(&id) else {
            return false;
        };
        match f.at {
            Where::Paths(placed) => {
                for (shape, key) in placed {
                    let Some(s) = self.shapes[shape].as_mut() else {
                        continue;
                    };
                    s.view.table.remove(&key, id);
                    if s.view.table.len() == 0 {
                        self.by_sig.remove(&s.sig);
                        self.shapes[shape] = None;
                        self.free_shapes.push(shape);
                    }
                }
            }
            Where::Residual(_) => self.residuals.retain(|r| r.entry.id != id),
        }
        true
    }

    /// Makes the current state visible to readers.
    fn publish(&mut self) {
        if self.published_residuals.len() != self.residuals.len()
            || self
                .published_residuals
                .iter()
                .zip(&self.residuals)
                .any(|(a, b)| a.entry != b.entry)
        {
            self.published_residuals = self.residuals.clone().into();
            self.shared_search = self.build_shared_search();
        }
        let snapshot = Snapshot::new(
            self.shapes
                .iter()
                .flatten()
                .map(|s| s.view.clone())
                .collect(),
            self.published_residuals.clone(),
            self.shared_search.clone(),
        );
        self.shared.store(Arc::new(snapshot));
    }

    /// The union of the residuals' pattern sets, when sharing is on and at least two residuals
    /// search (one alone gains nothing). A union that fails to compile (the `regex` crate's
    /// limits, say) leaves each filter searching alone: same answers, more searches.
    fn build_shared_search(&self) -> Option<Arc<SharedSearch>> {
        if !self.share_searches {
            return None;
        }
        let searching: Vec<&sift_coproc::Coprocessors> = self
            .residuals
            .iter()
            .filter_map(|r| r.engine.coprocessors())
            .filter(|c| c.searches())
            .map(|c| &**c)
            .collect();
        if searching.len() < 2 {
            return None;
        }
        SharedSearch::build(searching).ok().map(Arc::new)
    }

    /// The shapes and their signatures (for the overlap check).
    pub(crate) fn shape_list(&self) -> impl Iterator<Item = (usize, &ShapeSig, &Dispatch)> {
        self.shapes
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().map(|s| (i, &*s.sig, &s.view.table)))
    }

    pub(crate) fn shape_index(&self, sig: &ShapeSig) -> Option<usize> {
        self.by_sig.get(sig).copied()
    }

    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }
}

/// Updates published together when the batch is dropped (see [`Demux::batch`]).
pub struct Batch<'a> {
    demux: &'a mut Demux,
}

impl Batch<'_> {
    pub fn insert(
        &mut self,
        filter: &Function,
        priority: i32,
        delivery: Delivery,
    ) -> Result<FilterId, InsertError> {
        self.demux.insert_unpublished(filter, priority, delivery)
    }

    pub fn remove(&mut self, id: FilterId) -> bool {
        self.demux.remove_unpublished(id)
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        self.demux.publish();
    }
}
