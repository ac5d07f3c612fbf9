//! The demultiplexer: thousands of filters, one pass per packet, live updates.
//!
//! This crate sits after the single-filter pipeline (text or classic BPF or the seeds'
//! languages -> predicate IR -> optionally `sift-opt`): it takes [`sift_ir::Function`]s, each
//! with a priority and a [`Delivery`] kind, and answers, for each packet, which of them receive
//! it — exactly what running every filter alone (the IR interpreter, non-zero = accept) in
//! priority order would give, with CSPF's delivery rule: filters are tried by decreasing
//! priority, ties broken by insertion order (the earlier filter first); an accepting
//! [`Delivery::Copy`] filter receives the packet and the walk continues, an accepting
//! [`Delivery::Exclusive`] filter receives it and the walk stops.
//!
//! How (MPF's collapse over DPF-style canonical atoms):
//!
//! 1. `paths`: each filter's graph is decomposed into its accepting paths, each a
//!    conjunction of canonical atoms (`canon`) — comparisons of field expressions
//!    (packet loads with their index expressions as trees, masks, shifts) with constants, plus the
//!    requirement that every load executed on the path is in bounds (an out-of-bounds load rejects
//!    the whole filter). Paths are mutually exclusive, so this is exact.
//! 2. `shape`: a conjunction's `field == constant` atoms form its key, the rest
//!    its checks; conjunctions with the same fields and checks share a shape: one compiled
//!    extractor (`extract`: checks, then the key fields packed into a fixed-size key) and one
//!    dispatch table from key to filters (`dispatch`). All per-connection filters
//!    (`ip src A and ip dst B and tcp src port P and tcp dst port Q`) share one shape, so
//!    matching costs one extraction and one lookup whatever their number.
//! 3. Filters that do not decompose (too many paths, coprocessor calls, header walks) run
//!    whole, in priority order, as native code where there is a JIT (else as verified
//!    bytecode) — only those ranked before the best keyed exclusive match. When several of them
//!    search payloads (`payload contains`/`matches`), their patterns are compiled into one
//!    [`sift_coproc::SharedSearch`] whenever the set of filters changes, and a packet's payload
//!    is searched once (per start offset, on first need) for all of them; each filter's
//!    `contains` calls read their answers from that search, which are exactly the answers it
//!    would compute alone ([`Demux::share_searches`] turns this off, for measuring).
//! 4. [`Demux`] (the writer) publishes immutable snapshots (`snapshot`) through an atomic
//!    pointer swap (`arc-swap`); [`Reader`]s and [`LocalReader`]s never block and each match
//!    sees one whole snapshot (a [`Reader`] revalidates a per-thread cached snapshot with one
//!    plain atomic load per match; see `reader`). Tables are persistent (a shallow trie of
//!    open-addressing arrays, `sift_jit::demux_table`), so an update copies one leaf (at most
//!    1,024 keys, a quarter full: up to 128 KB) and the trie nodes above it, not the table;
//!    removing a key shifts the rest of its probe cluster back instead of rebuilding the leaf.
//!
//! Batch matching ([`Reader::match_batch`], module `batch`) gives each packet the same
//! delivery as a single match, but takes packets in chunks of 32 and reads all their probes'
//! first table slots before resolving any, so that the cache misses of a large table overlap
//! (over a small table, in cache, the chunk is matched in one loop of generated code). A
//! caller that holds its packets as descriptors ([`PacketRef`]: a capture buffer's or a ring's
//! array) passes them to [`Reader::match_batch_refs`], which reads them in place.
//!
//! Inserting a filter that differs from an earlier one only in constants (the next
//! connection's addresses and ports) skips the front end (verifying and decomposing the
//! graph): the earlier filter's paths are reused with the new constants in place when its
//! decomposition's trace shows that is exactly what decomposing would give (`templates`).
//!
//! [`Demux::overlaps`] is the exclusivity check (which installed filters may accept a packet a
//! new filter accepts); see `overlap` for when it is exact.
//!
//! [`FragmentDemux`] puts MPF's fragment dispatch (section 3) in front of a [`Reader`]: later
//! fragments of an IP datagram go where its first fragment (the one with the transport
//! header) went, through bounded per-datagram state; fragments that arrive before their first
//! are postponed and handed back when it comes, or dropped (counted) at the timeout.
//!
//! Native code (modules `native` and `dispatch`): where the host has a JIT
//! ([`sift_jit::supported`]), each shape is compiled once, when it is created, into one
//! machine-code function (`sift_jit::demux_matcher`) that runs the shape's checks, packs the
//! key (fields in packet byte order, without swaps, and fields adjacent in the packet read
//! with one load: the two addresses, the two ports, which `shape` packs side by side; one
//! bounds check per index; the table's keys are converted to that order in `dispatch`),
//! hashes it with the demultiplexer's seeded hash, walks the trie and probes
//! the leaf, and returns the slot; a slot holds the first filter under its key (a key several
//! filters share also has its rank-ordered list in a second persistent map, read only then).
//! The table is not part of the code: its header (root, hash seeds, key count) is passed at each
//! call, so inserting or removing a key never generates code, and every index the code
//! computes is masked by the node it reads (a guard-page test checks that no probe reads past
//! a table). A second function per shape matches a batch of 32 packets (in one loop over a
//! small table, in passes over a large one: see `batch`). Elsewhere, or with
//! [`Demux::interpreted`], the steps are interpreted and the same table is walked in Rust (the
//! differential tests compare both).
//!
//! Not here yet: DPF's sharing of atom prefixes between shapes, and one native function for
//! the whole structure when there are several shapes (each shape is its own function, called
//! in turn; residual filters are separate functions).
//!
//! ```
//! use sift_demux::{Delivery, Demux, Matches};
//! # fn conn() -> sift_ir::Function { sift_ir::parse_function("block0:\n ret 1\n").unwrap() }
//! let mut demux = Demux::new();
//! let id = demux.insert(&conn(), 0, Delivery::Exclusive).unwrap();
//! let reader = demux.reader(); // clone it into each matching thread
//! let mut m = Matches::new();
//! reader.match_packet(&[0u8; 60], 60, &mut m);
//! assert_eq!(m.exclusive(), Some(id));
//! ```

#![forbid(unsafe_code)]

mod batch;
mod canon;
mod demux;
mod dispatch;
mod extract;
mod fragments;
mod native;
mod overlap;
mod paths;
mod reader;
mod shape;
mod snapshot;
mod table;
mod templates;

pub use demux::{Batch, Delivery, Demux, FilterId, InsertError, Placement, Stats};
pub use fragments::{
    DatagramKey, DropReason, FragmentConfig, FragmentDemux, FragmentError, FragmentOutcome,
    FragmentStats, Overflow, Recipients, Release, Verdict, DATAGRAM_STATE_BYTES,
    POSTPONED_OVERHEAD_BYTES,
};
pub use paths::NotDecomposed;
pub use reader::{LocalReader, Reader};
pub use sift_jit::PacketRef;
pub use snapshot::Matches;
