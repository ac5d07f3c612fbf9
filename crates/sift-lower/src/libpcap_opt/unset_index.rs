//! libpcap's index register read where nothing set it: the value number outlives the store.
//!
//! A block that loads `4*([k]&0xf)` into X (`ldxb`, the IP header length) for a packet load
//! whose value a fold then made unused (`tcp[k] & 0`) keeps only that `ldxb`. libpcap's
//! dead-store pass deletes it (the blocks below load X themselves, when the pass starts), but
//! the block's record of X's value number stays. A block entered from it alone (once the
//! block's branch is decided and both its edges lead there, or along either edge when the fold
//! was a zero on the load's left, `0 & tcp[k]`) inherits that number, and its
//! own identical `ldxb` becomes a no-op: its loads read whatever X held before, and X starts
//! at 0 in a filter that never set it. So do the blocks after it that inherit in turn.
//! Only blocks with one load through the header length count, and for a decided branch only
//! one at an offset from it: a block that loads through X twice (`tcp[17:2] & (0 %
//! tcp[16])`), or at offset 0 under a decided branch (`tcp[0:1] & 0 == 8`, where libpcap's
//! `add x` with a zero accumulator becomes `txa` and the load's `tax` a no-op), keeps its
//! `ldxb` in libpcap's program, for the block below (the soak's seeds 0x11d65ef1 and
//! 0x11f35eed); so does a decided block whose zero takes not the load itself but an operation
//! on it (`-tcp[23:4] * 0`, seed 0x1a715ef1); but at offset 0 a decided block loses it when
//! another block entering the one below leaves something else in X ([`FirstLoop`]).
//! Like the side of the zero below, these are rules the soaks gave, not ones derived pass by
//! pass.
//! `tests/libpcap_x_register.rs` checks that libpcap reads an unset X on the filters it lists.
//!
//! The other way round: when a fold takes a block's loads through X but the rules above do
//! not lose its `ldxb`, libpcap keeps that `ldxb` as long as a block below relies on it (its
//! own `ldxb` a no-op, as every block entering it left that value in X). Its byte load then
//! still rejects a packet too short for it, before any test when the block is the entry, so
//! it is put back ([`Index::kept`]; the soak's seed 0x1b145ef0). Not in a block that
//! `opt_root` skips: its statements are dropped, and that `ldxb` with them.
//!
//! Here, after libpcap's second loop: the blocks whose index computations the optimizer
//! removed as dead code, and then, in reverse postorder, X as libpcap believes it (the last
//! `ldxb`'s offset) against X as it is (the index value, or unset, or at a join of paths that
//! leave different ones a block parameter with X per edge, [`Join`]) at each block. Blocks that
//! put anything else into X leave it holding what they put there last, after the reads of X
//! that libpcap's code makes before that (`x_reads.rs`: `tcp[4] >= len` reads X before the
//! right side's `tax`). A block whose one load libpcap finds in the accumulator (every block
//! entering it compares that load) loses that load and its `ldxb` while libpcap believes X
//! holds it: below a block that put something else into X, the next loads read that.

use sift_ir::{BinOp, Block, Function, Inst, Terminator, Value};

use super::edges::{compared, replace_in_block, successors_once, Entering};
use super::header_length::{header_length, header_length_offset, indices, HeaderLength};
use super::x_paths::{entered, header_length_held, real_value, Join, Real, State};
use super::x_reads::{x_code, Read, Site};

/// What the model needs of the edges as libpcap's first loop leaves them (`f` and `before`
/// then): its second loop decides branches and drops paths, but what X and the accumulator
/// held at the joins of the first passes decided some `ldxb`s.
#[derive(Default)]
pub(super) struct FirstLoop {
    /// The blocks whose `ldxb` a decided branch loses even with its load at offset 0 from the
    /// header length (`udp[0:2] & 0 <= 0`), with the successor that another block enters too,
    /// leaving something else in X.
    ///
    /// At offset 0 libpcap's `add x` after a zero is a `txa` and the load's `tax` a no-op, so
    /// the block leaves X holding its `ldxb`; a successor entered from it alone (or from blocks
    /// that set no X, or only the same header length) finds that value there and its own
    /// `ldxb` becomes a no-op early, which keeps this one (`(udp[0:2] & 0 <= 0) and udp[2:2] >=
    /// len`). When another block enters that successor leaving something else in X (a load at
    /// an offset, `or udp[2:2] != 8080`, whose `tax` leaves the header length plus 2; a
    /// comparison with `len`), the successor keeps its own `ldxb` until this one has died, and
    /// once the branch is decided and the other paths gone, libpcap believes X holds it there
    /// (the index suite's seeds 0x81d8e, 0x151d95 and 0x531d92 show the three kinds).
    shared: Vec<(Block, Block)>,
    /// Blocks with one load that some entering block did not compare: libpcap's accumulator
    /// did not hold that load on every way in then, so it keeps the block's `ldxb` even where
    /// the way that did is the only one left (`(sctp[0:2] < len or 0 / icmp[1] > 0) and port
    /// 22`: libpcap 1.10 has `ldxb 4*([0]&0xf); jeq #0x16` for the source port).
    mixed: Vec<Block>,
}

impl FirstLoop {
    // Out of line, as is `read_stale_index`: called once each from the emulation's driver, they
    // would otherwise be inlined there and move what LLVM inlines on its hot paths.
    #[inline(never)]
    pub(super) fn record(
        f: &Function,
        before: &[Option<HeaderLength>],
        x_written: bool,
    ) -> FirstLoop {
        let candidate = |b: Block| {
            before[b.index()]
                .filter(|h| h.one_load && !h.at_offset && h.zero_on_right && !h.computed_last)
        };
        // A block that puts something else into X (`tcp[2:2] < len`), or loads at an offset
        // from the header length (`udp[2:2] != 8080`: its `tax` leaves X holding the header
        // length plus that offset until the peephole folds it into the load).
        let leaves_other = |p: Block, offset: u32| {
            sets_x_otherwise(f, p)
                || before[p.index()].is_some_and(|o| {
                    o.offset == offset
                        && o.one_load
                        && o.at_offset
                        && !o.zero_on_left
                        && !o.computed_last
                })
        };
        // The accumulator rule matters only below a block that puts something else into X or
        // after a fold took an `ldxb`'s load (never in long chains of primitives).
        let accumulator = x_written
            || before
                .iter()
                .flatten()
                .any(|h| h.zero_on_left || h.zero_on_right);
        let candidates = (0..before.len()).any(|i| candidate(Block(i as u32)).is_some());
        let mut first = FirstLoop::default();
        if !accumulator && !candidates {
            return first;
        }
        let rpo = f.reverse_postorder();
        let entering = Entering::new(f, &rpo);
        let mut targets = Vec::new();
        for &b in &rpo {
            if accumulator
                && before[b.index()].is_some_and(|h| h.one_load)
                && compares_held_load(f, b, entering.of_block(b), |_| true) == Some(false)
            {
                first.mixed.push(b);
            }
            let Some(h) = candidate(b) else {
                continue;
            };
            successors_once(&f.block(b).term, &mut targets);
            for &s in &targets {
                if entering
                    .of_block(s)
                    .iter()
                    .any(|&p| p != b && leaves_other(p, h.offset))
                {
                    first.shared.push((b, s));
                }
            }
        }
        first
    }
}

/// What [`read_stale_index`] found.
#[derive(Default)]
pub(super) struct Index {
    /// Whether a load was rewritten.
    pub(super) changed: bool,
    /// Blocks whose `ldxb` lost its own loads to a fold but that libpcap keeps because a block
    /// below reads X instead of loading it again (its `ldxb` a no-op: every block entering it
    /// left that value in X), with the `ldxb`'s byte offset. Its byte load still rejects a
    /// packet too short for it, where sift's dead code has none (the soak's seed 0x1b145ef0).
    pub(super) kept: Vec<(Block, u32)>,
}

/// Rewrites the packet loads that read X where libpcap's program reads a stale X; `before`
/// is [`header_length_loads`](super::header_length::header_length_loads) from before the
/// optimizer ran, `rpo` the reachable blocks now, `skipped_by_root` the blocks `opt_root` will
/// skip after the entry, `first` what [`FirstLoop::record`] found, `x_written` what
/// [`writes_x_anywhere`] said before the optimizer ran.
#[inline(never)]
pub(super) fn read_stale_index(
    f: &mut Function,
    before: &[Option<HeaderLength>],
    rpo: &[Block],
    skipped_by_root: &[Block],
    first: &FirstLoop,
    x_written: bool,
) -> Index {
    let modelled =
        |b: Block| before[b.index()].filter(|h| !h.computed_last || skipped_by_root.contains(&b));
    // X is stale only after an `ldxb` whose loads went (a fold took them, or `opt_root`), or
    // after a block that puts something else into X (where an `ldxb` whose load libpcap found
    // in the accumulator is the next to go): without either, X holds what every load means.
    let loads_gone = rpo
        .iter()
        .any(|&b| modelled(b).is_some() && !has_index_loads(f, b));
    if !(loads_gone || x_written && rpo.iter().any(|&b| sets_x_otherwise(f, b))) {
        return Index::default();
    }
    let entering = Entering::new(f, rpo);
    let mut ldxb: Vec<Ldxb> = {
        let f = &*f;
        let mut ldxb = vec![Ldxb::Kept; f.blocks.len()];
        for &b in rpo {
            if let Some(h) = modelled(b) {
                ldxb[b.index()] = fate(f, b, h, before, &entering, skipped_by_root, first);
            }
        }
        ldxb
    };
    if rpo.iter().all(|&b| ldxb[b.index()] == Ldxb::Kept) {
        return Index::default();
    }
    if !ldxb.iter().any(|l| matches!(l, Ldxb::Folded(_))) {
        return walk(f, rpo, &entering, &ldxb).0;
    }
    // A folded `ldxb` holds X below only if libpcap keeps it, which it does where a block below
    // relies on it. When the fold was a literal zero on the right of the load (`tcp[0:2] &
    // icmptype`), it comes early enough that a stale read below (a lost `ldxb` between) does
    // not: libpcap's code set X again there before the optimizer deleted that. So where such a
    // read took X from such a folded `ldxb` that nothing keeps, libpcap deleted that one too and
    // only believes X holds it (the index suite's seed 0xa1d8e: `tcp[0:2] & icmptype != 69`
    // above `0 / tcp[7] < 6`, whose `tcp[2:2]` below libpcap 1.10 reads at X unset): it is
    // lost, and the walk runs again. A zero libpcap computes (`tcp[2:1] & 0 * 7`) folds a pass
    // later, by when that read relies on the `ldxb` (seed 0x341d90).
    loop {
        let mut trial = f.clone();
        let (index, assumed) = walk(&mut trial, rpo, &entering, &ldxb);
        let mut settled = true;
        for b in assumed {
            if let Ldxb::Folded(offset) = ldxb[b.index()] {
                let early = modelled(b).is_some_and(|h| h.zero_on_right);
                if early && !index.kept.iter().any(|&(k, _)| k == b) {
                    ldxb[b.index()] = Ldxb::Lost(offset);
                    settled = false;
                }
            }
        }
        if settled {
            *f = trial;
            return index;
        }
    }
}

/// The model's walk over the blocks in reverse postorder, given each block's [`Ldxb`];
/// returns what it found and the blocks whose folded `ldxb` a rewritten read took X from.
fn walk(
    f: &mut Function,
    rpo: &[Block],
    entering: &Entering,
    ldxb: &[Ldxb],
) -> (Index, Vec<Block>) {
    let mut index = Index::default();
    let mut assumed = Vec::new();
    // What the blocks entering each block leave, in the order of `entering` (every block
    // entering another comes before it in reverse postorder).
    let mut left = vec![State::ENTRY; entering.from.len()];
    let mut filled: Vec<u32> = entering.start.clone();
    let mut joins: Vec<Join> = Vec::new();
    let mut targets = Vec::new();
    for &b in rpo {
        let edges = entering.of(b);
        let state = entered(
            f,
            b,
            &entering.from[edges.clone()],
            &left[edges],
            &mut joins,
        );
        let mut fate = ldxb[b.index()];
        if let Ldxb::InAccumulator(offset) | Ldxb::LateInAccumulator(offset) = fate {
            let stale = state.stale && state.believed == Some(offset);
            match compare_accumulator(f, b, entering.of_block(b), stale) {
                Some(changed) => index.changed |= changed,
                None if fate == Ldxb::InAccumulator(offset) => fate = Ldxb::Reloaded(offset),
                None => fate = Ldxb::Kept,
            }
        }
        let state = visit(f, b, state, fate, &mut index, &mut joins, &mut assumed);
        successors_once(&f.block(b).term, &mut targets);
        for s in &targets {
            left[filled[s.index()] as usize] = state;
            filled[s.index()] += 1;
        }
    }
    (index, assumed)
}

/// What became of the `ldxb` of block `b` (last a header length, `h`, before the optimizer).
///
/// Lost with its dead load: libpcap still believes X holds it when the fold decided the
/// block's branch (both edges lead to one place; not the entry block, whose statements libpcap
/// keeps when it skips the block, `opt_root`), or when the load was folded away by a zero on
/// its left (`0 & tcp[k]`), decided or not; in both cases only when that was the block's one
/// load through a header length, and for a decided branch one at an offset from it (see the
/// module doc). In a block that `opt_root` skips, whatever libpcap kept of it goes with the
/// block's statements (the soak's seed 0x1f845ef4: `1 << 8 >> 23 & icmp[20:4] * icmp[7] - 0x2
/// | 4 != 4` is decided, its `ldxb` kept for the blocks below).
///
/// Found in the accumulator: every block entering it compares the value of the block's one
/// load, which libpcap deletes with its `ldxb` in the pass that numbers the blocks below (the
/// soak's seed 0x5eed: in `tcp[0:2] < len and not tcp portrange 2393-5351` the source port
/// tests use the port `tcp[0:2]` left, and the destination port's `ldxb` is a no-op).
///
/// Else, when a fold took the block's loads, kept if a block below relies on it.
fn fate(
    f: &Function,
    b: Block,
    h: HeaderLength,
    before: &[Option<HeaderLength>],
    entering: &Entering,
    skipped_by_root: &[Block],
    first: &FirstLoop,
) -> Ldxb {
    // libpcap finds the load in the accumulator early, and deletes the `ldxb` with it, only
    // when both loads have the same form in its code: both at an offset added to the header
    // length (`udp[2:2] = len`, then `udp[2:2] > 8080`: `ld #2; add x; tax; ldh [x + 0]`), or
    // neither (`tcp[0:2] < len`, then `tcp src port`: `ldh [x + 0]`). Otherwise they match
    // only once the peephole has folded the offset into the load, by when the blocks below
    // rely on the `ldxb` and libpcap keeps it (`tcp[2:2] < len`, then `tcp dst port 123`: the
    // index suite's seed 0xab1d91). An arithmetic load at offset 0 (`udp[0:2] = 80`) is found
    // there a pass later: its `add x` after the zero is a `txa`, which puts X into the
    // accumulator first, and only once that has gone as dead code does the load match. By then
    // the blocks below rely on its `ldxb`, which libpcap keeps where they do (`not (udp[0:2] =
    // len or udp[0:2] = 80) and udp[2:2] = len`) and deletes where nothing reads X below (`src
    // port 123 or tcp[0:2] <= 53`, the index suite's seed 0x1b81d90). Each checked against
    // libpcap 1.10.
    let same_form = |p: Block| before[p.index()].is_some_and(|o| o.at_offset) == h.at_offset;
    let from = entering.of_block(b);
    let in_accumulator = h.one_load
        && !first.mixed.contains(&b)
        && !from.is_empty()
        && compares_held_load(f, b, from, same_form) == Some(true);
    if in_accumulator {
        return if h.at_offset || !h.arithmetic {
            Ldxb::InAccumulator(h.offset)
        } else {
            Ldxb::LateInAccumulator(h.offset)
        };
    }
    if has_index_loads(f, b) {
        return Ldxb::Kept;
    }
    let decided_to = match &f.block(b).term {
        Terminator::Branch { then_, else_, .. } if then_ == else_ => Some(then_.block),
        _ => None,
    };
    let lost = skipped_by_root.contains(&b)
        || h.one_load
            && (h.zero_on_left
                || decided_to.is_some_and(|to| {
                    b != Function::ENTRY
                        && h.zero_on_right
                        && (h.at_offset || first.shared.contains(&(b, to)))
                }));
    if lost {
        Ldxb::Lost(h.offset)
    } else {
        Ldxb::Folded(h.offset)
    }
}

/// Whether every block of `from` compares the load `b` compares (and passes `also`): what
/// libpcap's accumulator holds on the way into `b`. `None` when `b` compares no load of its
/// own.
fn compares_held_load(
    f: &Function,
    b: Block,
    from: &[Block],
    also: impl Fn(Block) -> bool,
) -> Option<bool> {
    let own = compared(f, b).filter(|lhs| f.block(b).insts.contains(lhs))?;
    Some(
        from.iter()
            .all(|&p| also(p) && compared(f, p).is_some_and(|v| same_load(f, v, own))),
    )
}

/// Whether a packet load of `b` is indexed.
fn has_index_loads(f: &Function, b: Block) -> bool {
    f.block(b)
        .insts
        .iter()
        .any(|&v| matches!(f.inst(v), Inst::Load { index: Some(_), .. }))
}

/// Makes `b`, whose load libpcap found in the accumulator, compare what the blocks entering
/// it compared when that is one value: libpcap's accumulator holds it. Only where that differs
/// from `b`'s own load: when they read another X (a load through another index now), or when
/// `b`'s own would read a `stale` X. Returns whether `b` changed, `None` when the blocks
/// entering it compare different values.
fn compare_accumulator(
    f: &mut Function,
    b: Block,
    entering: &[Block],
    stale: bool,
) -> Option<bool> {
    let own = compared(f, b)?;
    let mut values = entering.iter().map(|&p| compared(f, p));
    let held = values.next()??;
    if !values.all(|v| v == Some(held)) {
        return None;
    }
    let changed = stale || !same_load(f, held, own);
    if changed {
        replace_in_block(f, b, own, held);
    }
    Some(changed)
}

/// Whether `a` and `c` are the same packet load as libpcap numbers them: through a header
/// length of the same byte, at the same offset.
fn same_load(f: &Function, a: Value, c: Value) -> bool {
    match (f.inst(a), f.inst(c)) {
        (
            Inst::Load {
                index: Some(x),
                offset,
                size,
            },
            Inst::Load {
                index: Some(y),
                offset: offset_c,
                size: size_c,
            },
        ) => {
            (offset, size) == (offset_c, size_c)
                && header_length(f, *x).is_some()
                && header_length(f, *x) == header_length(f, *y)
        }
        _ => false,
    }
}

/// What became of a block's `ldxb` in libpcap's program, with the header length's byte
/// offset ([`fate`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ldxb {
    /// There, or never was one.
    Kept,
    /// Gone while libpcap believes X holds it.
    Lost(u32),
    /// Its loads found in the accumulator: deleted, the loads with it, while libpcap believes
    /// X holds it.
    InAccumulator(u32),
    /// As [`Ldxb::InAccumulator`], but the blocks entering it compare different values (each
    /// the same load): sift's own load stands for the accumulator, read as they read theirs.
    Reloaded(u32),
    /// Its loads folded away; kept if a block below relies on it.
    Folded(u32),
    /// Its load found in the accumulator a pass later than [`Ldxb::InAccumulator`]'s: deleted;
    /// the `ldxb` kept, as [`Ldxb::Folded`]'s, if a block below relies on it.
    LateInAccumulator(u32),
}

/// The model at block `b`, entered with `state`, with what became of its `ldxb`; returns the
/// state it leaves.
fn visit(
    f: &mut Function,
    b: Block,
    mut state: State,
    ldxb: Ldxb,
    index: &mut Index,
    joins: &mut [Join],
    assumed: &mut Vec<Block>,
) -> State {
    if sets_x_otherwise(f, b) {
        // The reads of X before the block first puts something else into it read X as it
        // came in (`x_reads.rs`); it leaves X holding what it put there last.
        let code = x_code(f, b);
        read_indices(f, b, &code.reads, &mut state, index, joins, assumed);
        return State {
            real: code.last_write.map_or(Real::Unknown, Real::Set),
            ..State::ENTRY
        };
    }
    let reads = || -> Vec<Read> {
        indices(f, b)
            .into_iter()
            .map(|x| Read {
                index: x,
                site: Site::AllLoads,
            })
            .collect()
    };
    match ldxb {
        // libpcap deleted the block's load and its `ldxb`: nothing is read. The block compares
        // what the blocks entering it compared (see `compare_accumulator`).
        Ldxb::InAccumulator(_) | Ldxb::LateInAccumulator(_) => {}
        // The same, but sift's own load stands for that value: it reads X as theirs did,
        // without the deleted `ldxb` changing what X holds.
        Ldxb::Reloaded(_) => {
            let reads = reads();
            read_indices(f, b, &reads, &mut state.clone(), index, joins, assumed);
        }
        _ => {
            let reads = reads();
            read_indices(f, b, &reads, &mut state, index, joins, assumed);
        }
    }
    match ldxb {
        Ldxb::Kept => {}
        Ldxb::Lost(offset) | Ldxb::InAccumulator(offset) | Ldxb::Reloaded(offset) => {
            // Stale unless X holds that header length anyway.
            let holds = header_length_held(f, joins, state.real) == Some(offset);
            state.believed = Some(offset);
            state.stale = !holds;
        }
        // A no-op where libpcap already believes X holds it: X stays as the block found it.
        Ldxb::Folded(offset) | Ldxb::LateInAccumulator(offset)
            if state.believed == Some(offset) => {}
        Ldxb::Folded(offset) | Ldxb::LateInAccumulator(offset) => {
            state = State {
                believed: Some(offset),
                real: Real::HeaderLength { offset, block: b },
                stale: false,
                kept_if_used: Some(b),
            };
        }
    }
    state
}

/// The model over `b`'s reads of X, in order: marks the `ldxb`s kept for them and rewrites
/// the reads of a stale X.
fn read_indices(
    f: &mut Function,
    b: Block,
    reads: &[Read],
    state: &mut State,
    index: &mut Index,
    joins: &mut [Join],
    assumed: &mut Vec<Block>,
) {
    let changed = &mut index.changed;
    for &Read { index: x, site } in reads {
        let offset = header_length_offset(f, x);
        let nop = offset.is_some() && offset == state.believed;
        if let (true, false, Some(source)) = (nop, state.stale, state.kept_if_used) {
            if !index.kept.iter().any(|&(k, _)| k == source) {
                index
                    .kept
                    .push((source, offset.expect("a no-op has an offset")));
            }
        }
        // X itself: the `ldxb`'s value, without a constant the load's offset absorbed. Only
        // loads indexed by it alone are rewritten.
        let (held, alone) = match *f.inst(x) {
            Inst::Binary(BinOp::Add, a, c) if f.const_value(c).is_some() => (a, false),
            Inst::Binary(BinOp::Add, c, a) if f.const_value(c).is_some() => (a, false),
            _ => (x, true),
        };
        match (nop && state.stale && alone, state.real) {
            (true, real) => {
                if let Some(v) = real_value(f, joins, real, b, assumed) {
                    replace_read(f, b, x, site, v);
                    *changed = true;
                }
            }
            // A stale read this model does not rewrite: X keeps what libpcap believes.
            (false, _) if nop && state.stale => {}
            (false, _) => {
                *state = State {
                    believed: offset,
                    real: Real::Set(held),
                    stale: false,
                    kept_if_used: None,
                };
            }
        }
    }
}

/// Whether some block may put into X something other than an `ldxb` ([`sets_x_otherwise`]),
/// asked once before the optimizer runs: it only deletes such instructions and folds the
/// constant indices away, so where none was, none is later. One pass over the values and
/// the terminators, cheaper than asking every block (a chain of 1,000 `port`s has 10^5).
pub(super) fn writes_x_anywhere(f: &Function) -> bool {
    (0..f.values.len()).any(|i| writes_x(f, Value(i as u32)))
        || f.blocks.iter().any(|b| compares_with_x(f, &b.term))
}

/// Whether libpcap's code for `b` puts into X something other than an `ldxb`: the right
/// operand of a comparison (`jge x`), or of an operation when it is computed (`add x`, also
/// after a constant, `ld #17; mod x`), or an index that is not a header length (`tax`).
fn sets_x_otherwise(f: &Function, b: Block) -> bool {
    compares_with_x(f, &f.block(b).term) || f.block(b).insts.iter().any(|&v| writes_x(f, v))
}

/// Whether `term` compares with a computed right side, which libpcap puts into X (`jge x`).
fn compares_with_x(f: &Function, term: &Terminator) -> bool {
    matches!(*term, Terminator::Branch { rhs, .. } if f.const_value(rhs).is_none())
}

/// Whether libpcap's code for `v` puts into X something other than an `ldxb`: a load at an
/// offset that is not a header length (its `tax`), or an operation whose right operand is
/// computed and not the header length X already holds (the `16` of `tcp[16]` is added to it
/// as `ld #16; add x`).
pub(super) fn writes_x(f: &Function, v: Value) -> bool {
    match *f.inst(v) {
        // Not at a constant index (`ip[1]` on LINUX_SLL2): libpcap makes that load absolute in
        // the first pass of its second loop, its `tax` dead with it.
        Inst::Load { index: Some(x), .. } => {
            f.const_value(x).is_none() && header_length(f, x).is_none()
        }
        // After a zero, `add x`, `or x` and `xor x` are `txa`, and libpcap's peephole then
        // loads the right side into A instead of X.
        Inst::Binary(BinOp::Add | BinOp::Or | BinOp::Xor, l, _) if f.const_value(l) == Some(0) => {
            false
        }
        Inst::Binary(_, _, r) => f.const_value(r).is_none() && header_length(f, r).is_none(),
        _ => false,
    }
}

/// Makes the read of X at `site` in `b`, the index value `old`, read `new`.
fn replace_read(f: &mut Function, b: Block, old: Value, site: Site, new: Value) {
    let sites = match site {
        Site::AllLoads => f.block(b).insts.to_vec(),
        Site::Load(v) | Site::AddOperand(v) => vec![v],
    };
    for v in sites {
        match &mut f.values[v.index()] {
            Inst::Load { index, .. } if *index == Some(old) => *index = Some(new),
            Inst::Binary(_, a, c) if site != Site::AllLoads => {
                for operand in [a, c] {
                    if *operand == old {
                        *operand = new;
                    }
                }
            }
            _ => {}
        }
    }
}
