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
//! on it (`-tcp[23:4] * 0`, seed 0x1a715ef1). Like the side of the zero below, these are
//! rules the soaks gave, not ones derived pass by pass.
//! `tests/libpcap_x_register.rs` checks that libpcap reads an unset X on every open case.
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
//! put anything else into X end the model there, after the reads of X that libpcap's code
//! makes before that (`x_reads.rs`: `tcp[4] >= len` reads X before the right side's `tax`).

use sift_ir::{BinOp, Block, Function, Inst, LoadSize, Terminator, Value};

use super::numbering::{binary_fold, BinaryFold};
use super::x_reads::{reads_before_x_written, Read, Site};

/// The byte offset `k` when `index` is `4*([k]&0xf)` computed as libpcap's `ldxb` does, or
/// that plus a constant (which libpcap's peephole folds into the load's offset, leaving X the
/// `ldxb`'s value).
fn header_length_offset(f: &Function, index: Value) -> Option<u32> {
    header_length(f, index).map(|(k, _)| k)
}

/// [`header_length_offset`], with the constant `index` adds to the header length (0 for
/// none).
pub(super) fn header_length(f: &Function, index: Value) -> Option<(u32, u32)> {
    let konst = |v: Value| f.const_value(v);
    let (index, added) = match *f.inst(index) {
        Inst::Binary(BinOp::Add, a, b) if konst(b).is_some() => (a, konst(b)),
        Inst::Binary(BinOp::Add, a, b) if konst(a).is_some() => (b, konst(a)),
        _ => (index, Some(0)),
    };
    let Inst::Binary(BinOp::Shl, masked, two) = *f.inst(index) else {
        return None;
    };
    let Inst::Binary(BinOp::And, byte, fifteen) = *f.inst(masked) else {
        return None;
    };
    let Inst::Load {
        index: None,
        offset,
        size: LoadSize::Byte,
    } = *f.inst(byte)
    else {
        return None;
    };
    (konst(two) == Some(2) && konst(fifteen) == Some(15)).then_some((offset, added?))
}

/// The index values of `b`'s packet loads, in order, each once.
fn indices(f: &Function, b: Block) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for &v in &f.block(b).insts {
        if let Inst::Load { index: Some(x), .. } = *f.inst(v) {
            if !out.contains(&x) {
                out.push(x);
            }
        }
    }
    out
}

/// A block's last index computation before the optimizer deletes any, when it is a header
/// length.
#[derive(Clone, Copy)]
pub(super) struct HeaderLength {
    /// The `ldxb`'s byte offset.
    offset: u32,
    /// Whether the block combines an indexed load with a zero on its left (`0 & tcp[k]`,
    /// `icmptype * tcp[k]`, `0 / udp[k]`) by an operation whose result is then 0.
    zero_on_left: bool,
    /// Whether the block has one packet load through a header length (not two, as in
    /// `tcp[17:2] & (0 % tcp[16])`).
    one_load: bool,
    /// Whether that load adds a byte offset to it (`tcp[17:2]`, not `tcp[0:1]`).
    at_offset: bool,
    /// Whether a zero on the right of an operation that then gives 0 takes that load itself
    /// (`tcp[23:4] * 0`, `tcp[23:4] & icmptype`; not `-tcp[23:4] * 0` or `(tcp[23:4] + 1) & 0`).
    zero_on_right: bool,
}

/// Per block, its [`HeaderLength`] (`None`: no index computation, or the last is not a header
/// length).
pub(super) fn header_length_loads(f: &Function) -> Vec<Option<HeaderLength>> {
    (0..f.blocks.len())
        .map(|b| {
            let b = Block(b as u32);
            let last = *indices(f, b).last()?;
            let offset = header_length_offset(f, last)?;
            let mut loads = header_length_loads_of(f, b);
            let first = loads.next();
            let one_load = first.is_some() && loads.next().is_none();
            let at_offset = first.is_some_and(|k| k != 0);
            Some(HeaderLength {
                offset,
                zero_on_left: zero_folds_load(f, b, true),
                one_load,
                at_offset,
                // Only asked for together with the two above.
                zero_on_right: one_load && at_offset && zero_folds_load(f, b, false),
            })
        })
        .collect()
}

/// The byte offsets `b`'s packet loads through a header length add to it (`tcp[17:2]`: 17,
/// `tcp[0:1]`: 0), in order.
fn header_length_loads_of(f: &Function, b: Block) -> impl Iterator<Item = u32> + '_ {
    f.block(b).insts.iter().filter_map(|&v| match *f.inst(v) {
        Inst::Load { index: Some(x), .. } => header_length(f, x).map(|(_, added)| added),
        _ => None,
    })
}

/// Whether a block's instruction is an operation that libpcap folds to 0 by a zero (the zero
/// one that libpcap's folding finds: `8 >> 23`, `-0`, `icmptype`, `len * 0`) on one side of a
/// load through the header length on the other: `0 op load` when `zero_left` (`* / % & << >>`,
/// which libpcap turns into `ld #0` as soon as it sees the zero in the accumulator), else
/// `load op 0` (`*`, `&`).
///
/// The side matters: `load op 0` becomes `op #0` first and `ld #0` a pass later, and then an
/// undecided block's successors keep their own `ldxb` (the soak's seed 0xdb65eed). On the
/// right only the load itself counts: when another operation comes between (`-tcp[23:4] *
/// 0`, `(tcp[23:4] | 1) & 0`), the load dies a pass later still, by when the blocks below rely
/// on the block's `ldxb` and libpcap keeps it (the soak's seed 0x1a715ef1; checked against
/// libpcap on `neg`, `add`, `or` and two `neg`s between). These rules come from the soaks (the
/// lines of `sift/tests/data/soak_findings.txt` they fixed), not from following libpcap's
/// passes one by one.
fn zero_folds_load(f: &Function, b: Block, zero_left: bool) -> bool {
    f.block(b).insts.iter().any(|&v| match *f.inst(v) {
        Inst::Binary(op, lhs, rhs) => {
            let (zero, load, fold) = if zero_left {
                (lhs, rhs, binary_fold(op, Some(0), None))
            } else {
                (rhs, lhs, binary_fold(op, None, Some(0)))
            };
            matches!(fold, Ok(BinaryFold::Const(0)))
                && is_header_length_load(f, load)
                && constant(f, zero, 8) == Some(0)
        }
        _ => false,
    })
}

/// Whether `v` is a packet load through a header length (`tcp[k]`; not `ether[1:1]` on a
/// link where libpcap indexes that by a constant).
fn is_header_length_load(f: &Function, v: Value) -> bool {
    matches!(*f.inst(v), Inst::Load { index: Some(x), .. } if header_length(f, x).is_some())
}

/// The value of `v` when libpcap's folding makes it a constant (at most `depth` operations
/// deep), following no identity (`x + 0` is not folded to `x`'s value).
fn constant(f: &Function, v: Value, depth: u32) -> Option<u32> {
    match *f.inst(v) {
        Inst::Const(k) => Some(k),
        Inst::Neg(a) if depth > 0 => Some(constant(f, a, depth - 1)?.wrapping_neg()),
        Inst::Binary(op, a, b) if depth > 0 => {
            let (a, b) = (constant(f, a, depth - 1), constant(f, b, depth - 1));
            match binary_fold(op, a, b) {
                Ok(BinaryFold::Const(k)) => Some(k),
                _ => None,
            }
        }
        _ => None,
    }
}

/// X as a block leaves it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Real {
    /// Nothing set X on any path.
    Unset,
    Set(Value),
    /// What each edge into a join brought, known on every one ([`Join`], by its index).
    Joined(u32),
    /// The paths disagree, and some of them are not known.
    Unknown,
}

/// A block whose entering edges leave X with different values that are each known, at least
/// one of them stale: where libpcap believes every edge left the same `ldxb` (its value
/// numbers agree) and deletes the block's own, its loads read whichever X the packet came
/// with (the soak's seed 0x3d95ef3: unset after `tcp[14:4] & 0`, the header length after
/// `udp portrange`). Should a load read it, the block gets a parameter with X per edge.
struct Join {
    block: Block,
    /// Each entering block and X as it leaves it.
    edges: Vec<(Block, Real)>,
    param: Option<Value>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct State {
    /// The offset of the `ldxb` libpcap believes X holds.
    believed: Option<u32>,
    real: Real,
    /// Whether `real` differs from what `believed` says (a lost `ldxb` since).
    stale: bool,
    /// The block whose `ldxb` that is, when a fold took its own loads and libpcap keeps it
    /// only if a block below relies on it (see [`Index::kept`]).
    kept_if_used: Option<Block>,
}

/// What [`read_stale_index`] found.
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
/// is [`header_length_loads`] from before the optimizer ran, `rpo` the reachable blocks now,
/// `skipped_by_root` the blocks `opt_root` will skip after the entry.
pub(super) fn read_stale_index(
    f: &mut Function,
    before: &[Option<HeaderLength>],
    rpo: &[Block],
    skipped_by_root: &[Block],
) -> Index {
    // The blocks whose `ldxb` went with its dead load: libpcap still believes X holds it
    // when the fold decided the block's branch (both edges lead to one place; not the entry
    // block, whose statements libpcap keeps when it skips the block, `opt_root`), or when the
    // load was folded away by a zero on its left (`0 & tcp[k]`), decided or not; in both
    // cases only when that was the block's one load through a header length, and for a
    // decided branch one at an offset from it (see the module doc). In a block that
    // `opt_root` skips, whatever libpcap kept of it goes with the block's statements (the
    // soak's seed 0x1f845ef4: `1 << 8 >> 23 & icmp[20:4] * icmp[7] - 0x2 | 4 != 4` is
    // decided, its `ldxb` kept for the blocks below).
    let lost = |b: Block| {
        if skipped_by_root.contains(&b) {
            return before[b.index()].map(|h| h.offset);
        }
        let decided = matches!(
            &f.block(b).term,
            Terminator::Branch { then_, else_, .. } if then_ == else_
        );
        before[b.index()]
            .filter(|h| {
                h.one_load
                    && (h.zero_on_left
                        || decided && b != Function::ENTRY && h.at_offset && h.zero_on_right)
            })
            .map(|h| h.offset)
    };
    // Per block: its `ldxb` lost as above, or else lost its loads to a fold (`folded`; the
    // rewrites below touch only loads that remain, so these stay as computed here).
    let mut ldxb: Vec<Ldxb> = vec![Ldxb::default(); f.blocks.len()];
    for &b in rpo {
        if before[b.index()].is_some() && indices(f, b).is_empty() {
            ldxb[b.index()] = match lost(b) {
                Some(offset) => Ldxb {
                    lost: Some(offset),
                    folded: None,
                },
                None => Ldxb {
                    lost: None,
                    folded: before[b.index()].map(|h| h.offset),
                },
            };
        }
    }
    let mut index = Index {
        changed: false,
        kept: Vec::new(),
    };
    if !rpo.iter().any(|&b| ldxb[b.index()] != Ldxb::default()) {
        return index;
    }
    // What the blocks entering each block leave (every block entering another comes before it
    // in reverse postorder).
    let mut entering: Vec<Vec<(Block, State)>> = vec![Vec::new(); f.blocks.len()];
    let mut joins: Vec<Join> = Vec::new();
    for &b in rpo {
        let state = entered(b, &entering[b.index()], &mut joins);
        let state = visit(f, b, state, ldxb[b.index()], &mut index, &mut joins);
        for s in super::edges::successors(&f.block(b).term) {
            let edges = &mut entering[s.index()];
            if edges.last().is_none_or(|&(from, _)| from != b) {
                edges.push((b, state));
            }
        }
    }
    index
}

/// The state `b` is entered with, from what each block entering it left: a [`Join`] when
/// libpcap believes they all left one `ldxb`, at least one of them stale, and what each left
/// in X is known.
fn entered(b: Block, edges: &[(Block, State)], joins: &mut Vec<Join>) -> State {
    let Some(&(_, first)) = edges.first() else {
        return State {
            believed: None,
            real: Real::Unset,
            stale: false,
            kept_if_used: None,
        };
    };
    let mut merged = first;
    for &(_, s) in &edges[1..] {
        merged = State {
            believed: merged.believed.filter(|&k| s.believed == Some(k)),
            real: if merged.real == s.real {
                merged.real
            } else {
                Real::Unknown
            },
            stale: merged.stale && s.stale,
            kept_if_used: merged.kept_if_used.filter(|&k| s.kept_if_used == Some(k)),
        };
    }
    let joined = merged.believed.is_some()
        && merged.real == Real::Unknown
        && edges.iter().any(|(_, s)| s.stale)
        && edges.iter().all(|(_, s)| s.real != Real::Unknown);
    if joined {
        joins.push(Join {
            block: b,
            edges: edges.iter().map(|&(from, s)| (from, s.real)).collect(),
            param: None,
        });
        merged.real = Real::Joined(joins.len() as u32 - 1);
        merged.stale = true;
    }
    merged
}

/// The value X holds as `real` says, defined where block `at` can use it: a constant 0 put
/// into `at` for an unset X, a join's parameter (added now, with its edges' arguments, when it
/// is first asked for).
fn real_value(f: &mut Function, joins: &mut [Join], real: Real, at: Block) -> Option<Value> {
    match real {
        Real::Unset => {
            let zero = Value(f.values.len() as u32);
            f.values.push(Inst::Const(0));
            f.block_mut(at).insts.insert(0, zero);
            Some(zero)
        }
        Real::Set(v) => Some(v),
        Real::Unknown => None,
        Real::Joined(j) => {
            // The joins this one needs, each only from earlier ones: given parameters in
            // order of creation, without recursing along a chain of joins.
            let mut needed = vec![j as usize];
            let mut i = 0;
            while let Some(&k) = needed.get(i) {
                i += 1;
                for &(_, r) in &joins[k].edges {
                    if let Real::Joined(e) = r {
                        if joins[e as usize].param.is_none() && !needed.contains(&(e as usize)) {
                            needed.push(e as usize);
                        }
                    }
                }
            }
            needed.sort_unstable();
            for k in needed {
                if joins[k].param.is_some() {
                    continue;
                }
                let block = joins[k].block;
                let param = f.add_param(block);
                for e in 0..joins[k].edges.len() {
                    let (from, r) = joins[k].edges[e];
                    let arg = real_value(f, joins, r, from).expect("every edge is known");
                    f.block_mut(from).term.for_each_target_mut(|t| {
                        if t.block == block {
                            t.args.push(arg);
                        }
                    });
                }
                joins[k].param = Some(param);
            }
            joins[j as usize].param
        }
    }
}

/// What became of a block's `ldxb` whose loads the optimizer removed: the offset of the one
/// that went with its dead load (`lost`), or of one libpcap keeps if a block below relies on it
/// (`folded`).
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct Ldxb {
    lost: Option<u32>,
    folded: Option<u32>,
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
) -> State {
    let now = indices(f, b);
    if sets_x_otherwise(f, b, &now) {
        // The reads of X before the block first puts something else into it read X as it
        // came in (`x_reads.rs`). Past that, not modelled: X holds something else.
        let reads = reads_before_x_written(f, b);
        read_indices(f, b, &reads, &mut state, index, joins);
        return State {
            believed: None,
            real: Real::Unknown,
            stale: false,
            kept_if_used: None,
        };
    }
    let reads: Vec<Read> = now
        .iter()
        .map(|&x| Read {
            index: x,
            site: Site::AllLoads,
        })
        .collect();
    read_indices(f, b, &reads, &mut state, index, joins);
    if let Some(lost) = ldxb.lost {
        state.believed = Some(lost);
        state.stale = true;
    }
    if let Some(offset) = ldxb.folded {
        state = State {
            believed: Some(offset),
            real: Real::Unknown,
            stale: false,
            kept_if_used: Some(b),
        };
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
) {
    let changed = &mut index.changed;
    for &Read { index: x, site } in reads {
        let x = &x;
        let offset = header_length_offset(f, *x);
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
        let (held, alone) = match *f.inst(*x) {
            Inst::Binary(BinOp::Add, a, c) if f.const_value(c).is_some() => (a, false),
            Inst::Binary(BinOp::Add, c, a) if f.const_value(c).is_some() => (a, false),
            _ => (*x, true),
        };
        match (nop && state.stale && alone, state.real) {
            (true, real) => {
                if let Some(v) = real_value(f, joins, real, b) {
                    replace_read(f, b, *x, site, v);
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

/// Whether libpcap's code for `b` puts into X something other than an `ldxb`: the right
/// operand of a comparison (`jge x`), or of an operation when it is computed (`add x`, also
/// after a constant, `ld #17; mod x`), or an index that is not a header length (`tax`).
fn sets_x_otherwise(f: &Function, b: Block, indices: &[Value]) -> bool {
    let computed = |v: Value| f.const_value(v).is_none();
    let term = match f.block(b).term {
        Terminator::Branch { rhs, .. } => computed(rhs),
        _ => false,
    };
    term || indices
        .iter()
        .any(|&x| header_length_offset(f, x).is_none())
        || f.block(b).insts.iter().any(|&v| writes_x(f, v))
}

/// Whether libpcap computes `v` with its right operand in X, put there for it: an operation
/// whose right operand is computed and not the header length X already holds (the `16` of
/// `tcp[16]` is added to it as `ld #16; add x`).
pub(super) fn writes_x(f: &Function, v: Value) -> bool {
    match *f.inst(v) {
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
