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
//! put anything else into X leave it holding what they put there last, after the reads of X
//! that libpcap's code makes before that (`x_reads.rs`: `tcp[4] >= len` reads X before the
//! right side's `tax`). A block whose one load libpcap finds in the accumulator (every block
//! entering it compares that load) loses that load and its `ldxb` while libpcap believes X
//! holds it: below a block that put something else into X, the next loads read that.

use sift_ir::{BinOp, Block, Function, Inst, LoadSize, Terminator, Value};

use super::numbering::{binary_fold, BinaryFold};
use super::x_reads::{x_code, Read, Site};

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

/// A block's last header-length index computation before the optimizer deletes any.
#[derive(Clone, Copy)]
pub(super) struct HeaderLength {
    /// The `ldxb`'s byte offset.
    offset: u32,
    /// Whether a load at a computed offset (its `tax`) comes after the last such `ldxb`
    /// (`ip6[udp[10:1]]`): then only a block that `opt_root` skips is modelled, where libpcap
    /// is left believing X holds that `ldxb` (the soak's seeds 0x247f5ef1 and 0x26585ef1).
    computed_last: bool,
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

/// Per block, its [`HeaderLength`] (`None`: no index computation is a header length).
pub(super) fn header_length_loads(f: &Function) -> Vec<Option<HeaderLength>> {
    (0..f.blocks.len())
        .map(|b| {
            let b = Block(b as u32);
            let indices = indices(f, b);
            let offset = indices
                .iter()
                .rev()
                .find_map(|&x| header_length_offset(f, x))?;
            let computed_last = header_length_offset(f, *indices.last()?).is_none();
            let mut loads = header_length_loads_of(f, b);
            let first = loads.next();
            let one_load = first.is_some() && loads.next().is_none();
            let at_offset = first.is_some_and(|k| k != 0);
            Some(HeaderLength {
                offset,
                computed_last,
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

/// Whether a block's instruction is an operation that libpcap folds to 0 by a zero on one
/// side of a load through the header length on the other: `0 op load` when `zero_left` (`* / %
/// & << >>`, which libpcap turns into `ld #0` as soon as it sees the zero in the accumulator;
/// the zero one that libpcap's folding finds: `8 >> 23`, `-0`, `icmptype`, `len * 0`), else
/// `load op 0` (`*`, `&`; a literal zero, `0` or `icmptype`: one libpcap computes, `0 * 7`,
/// `8 >> 23`, `1 - 1`, it folds a pass later and keeps the `ldxb`, checked on 9 forms).
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
                && constant(f, zero, if zero_left { 8 } else { 0 }) == Some(0)
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
    /// The header length at a byte offset, from an `ldxb` libpcap keeps in a block whose own
    /// loads a fold took ([`Ldxb::Folded`]): computed there anew when a load reads it.
    HeaderLength {
        offset: u32,
        block: Block,
    },
    /// What each edge into a join brought, known on every one ([`Join`], by its index).
    Joined(u32),
    /// The paths disagree, and some of them are not known.
    Unknown,
}

/// A block whose entering edges leave X with different values that are each known: where
/// libpcap believes every edge left the same `ldxb` (its value numbers agree), or a block
/// below loses its `ldxb`, the loads read whichever X the packet came with (the soak's seed
/// 0x3d95ef3: unset after `tcp[14:4] & 0`, the header length after `udp portrange`). Should a
/// load read it, the block gets a parameter with X per edge.
struct Join {
    block: Block,
    /// Each entering block and X as it leaves it.
    edges: Vec<(Block, Real)>,
    /// The byte offset of the header length X holds on every edge, if it does.
    header_length: Option<u32>,
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
    let mut index = Index {
        changed: false,
        kept: Vec::new(),
    };
    let modelled =
        |b: Block| before[b.index()].filter(|h| !h.computed_last || skipped_by_root.contains(&b));
    // X is stale only after an `ldxb` whose loads went (a fold took them, or `opt_root`), or
    // after a block that puts something else into X (where an `ldxb` whose load libpcap found
    // in the accumulator is the next to go): without either, X holds what every load means.
    let loads_gone = rpo
        .iter()
        .any(|&b| modelled(b).is_some() && !has_index_loads(f, b));
    if !loads_gone && !rpo.iter().any(|&b| sets_x_otherwise(f, b)) {
        return index;
    }
    let entering = Entering::new(f, rpo);
    let ldxb: Vec<Ldxb> = {
        let f = &*f;
        let mut ldxb = vec![Ldxb::Kept; f.blocks.len()];
        for &b in rpo {
            if let Some(h) = modelled(b) {
                ldxb[b.index()] = fate(f, b, h, &entering, skipped_by_root);
            }
        }
        ldxb
    };
    if rpo.iter().all(|&b| ldxb[b.index()] == Ldxb::Kept) {
        return index;
    }
    // What the blocks entering each block leave, in the order of `entering` (every block
    // entering another comes before it in reverse postorder).
    let unset = State {
        believed: None,
        real: Real::Unset,
        stale: false,
        kept_if_used: None,
    };
    let mut left = vec![unset; entering.from.len()];
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
        if let Ldxb::InAccumulator(offset) = fate {
            let stale = state.stale && state.believed == Some(offset);
            match compare_accumulator(f, b, entering.of_block(b), stale) {
                Some(changed) => index.changed |= changed,
                None => fate = Ldxb::Reloaded(offset),
            }
        }
        let state = visit(f, b, state, fate, &mut index, &mut joins);
        successors_once(&f.block(b).term, &mut targets);
        for s in &targets {
            left[filled[s.index()] as usize] = state;
            filled[s.index()] += 1;
        }
    }
    index
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
    entering: &Entering,
    skipped_by_root: &[Block],
) -> Ldxb {
    let compared = |b: Block| match f.block(b).term {
        Terminator::Branch { lhs, .. } => Some(lhs),
        _ => None,
    };
    let in_accumulator = h.one_load
        && compared(b).is_some_and(|lhs| {
            let from = entering.of_block(b);
            f.block(b).insts.contains(&lhs)
                && !from.is_empty()
                && from
                    .iter()
                    .all(|&p| compared(p).is_some_and(|v| same_load(f, v, lhs)))
        });
    if in_accumulator {
        return Ldxb::InAccumulator(h.offset);
    }
    if has_index_loads(f, b) {
        return Ldxb::Kept;
    }
    let decided = matches!(
        &f.block(b).term,
        Terminator::Branch { then_, else_, .. } if then_ == else_
    );
    let lost = skipped_by_root.contains(&b)
        || h.one_load
            && (h.zero_on_left
                || decided && b != Function::ENTRY && h.at_offset && h.zero_on_right);
    if lost {
        Ldxb::Lost(h.offset)
    } else {
        Ldxb::Folded(h.offset)
    }
}

/// The blocks entering each block, as slices of one array in reverse postorder of the
/// entering blocks (a list per block would be an allocation for each of 10^5 blocks).
struct Entering {
    start: Vec<u32>,
    from: Vec<Block>,
}

impl Entering {
    fn new(f: &Function, rpo: &[Block]) -> Entering {
        let n = f.blocks.len();
        let mut start = vec![0u32; n + 1];
        let mut targets = Vec::new();
        for &p in rpo {
            successors_once(&f.block(p).term, &mut targets);
            for s in &targets {
                start[s.index() + 1] += 1;
            }
        }
        for i in 1..=n {
            start[i] += start[i - 1];
        }
        let mut filled = start.clone();
        let mut from = vec![Block(0); start[n] as usize];
        for &p in rpo {
            successors_once(&f.block(p).term, &mut targets);
            for s in &targets {
                from[filled[s.index()] as usize] = p;
                filled[s.index()] += 1;
            }
        }
        Entering { start, from }
    }

    fn of(&self, b: Block) -> std::ops::Range<usize> {
        self.start[b.index()] as usize..self.start[b.index() + 1] as usize
    }

    fn of_block(&self, b: Block) -> &[Block] {
        &self.from[self.of(b)]
    }
}

/// A terminator's successors, each once, into `out`.
fn successors_once(term: &Terminator, out: &mut Vec<Block>) {
    out.clear();
    for s in super::edges::successors(term) {
        if !out.contains(&s) {
            out.push(s);
        }
    }
}

/// Whether a packet load of `b` is indexed.
fn has_index_loads(f: &Function, b: Block) -> bool {
    f.block(b)
        .insts
        .iter()
        .any(|&v| matches!(f.inst(v), Inst::Load { index: Some(_), .. }))
}

/// The state `b` is entered with, from what each block entering it left: a [`Join`] when
/// they left different values in X, each known.
fn entered(
    f: &Function,
    b: Block,
    from: &[Block],
    states: &[State],
    joins: &mut Vec<Join>,
) -> State {
    let Some(&first) = states.first() else {
        return State {
            believed: None,
            real: Real::Unset,
            stale: false,
            kept_if_used: None,
        };
    };
    let mut merged = first;
    for &s in &states[1..] {
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
    let joined = merged.real == Real::Unknown && states.iter().all(|s| s.real != Real::Unknown);
    if joined {
        let lengths: Vec<Option<u32>> = states
            .iter()
            .map(|s| header_length_held(f, joins, s.real))
            .collect();
        let header_length = lengths[0].filter(|_| lengths.iter().all(|&l| l == lengths[0]));
        joins.push(Join {
            block: b,
            edges: from.iter().zip(states).map(|(&p, s)| (p, s.real)).collect(),
            header_length,
            param: None,
        });
        merged.real = Real::Joined(joins.len() as u32 - 1);
        merged.stale = states.iter().any(|s| s.stale);
    }
    merged
}

/// The byte offset of the header length X holds on every path as `real` says, if it does.
fn header_length_held(f: &Function, joins: &[Join], real: Real) -> Option<u32> {
    match real {
        Real::Set(v) => header_length_offset(f, v),
        Real::Joined(j) => joins[j as usize].header_length,
        Real::HeaderLength { offset, .. } => Some(offset),
        Real::Unset | Real::Unknown => None,
    }
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
        Real::HeaderLength { offset, block } => {
            let byte = f.push(
                block,
                Inst::Load {
                    index: None,
                    offset,
                    size: LoadSize::Byte,
                },
            );
            let fifteen = f.push(block, Inst::Const(15));
            let nibble = f.push(block, Inst::Binary(BinOp::And, byte, fifteen));
            let two = f.push(block, Inst::Const(2));
            Some(f.push(block, Inst::Binary(BinOp::Shl, nibble, two)))
        }
        Real::Unknown => None,
        Real::Joined(j) => {
            // The joins this one needs, each only from earlier ones: given parameters in
            // order of creation, without recursing along a chain of joins.
            let mut needed = vec![j as usize];
            let mut seen: std::collections::HashSet<usize> = needed.iter().copied().collect();
            let mut i = 0;
            while let Some(&k) = needed.get(i) {
                i += 1;
                for &(_, r) in &joins[k].edges {
                    if let Real::Joined(e) = r {
                        if joins[e as usize].param.is_none() && seen.insert(e as usize) {
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
    let compared = |f: &Function, b: Block| match f.block(b).term {
        Terminator::Branch { lhs, .. } => Some(lhs),
        _ => None,
    };
    let own = compared(f, b)?;
    let mut values = entering.iter().map(|&p| compared(f, p));
    let held = values.next()??;
    if !values.all(|v| v == Some(held)) {
        return None;
    }
    if stale || !same_load(f, held, own) {
        let insts = f.block(b).insts.clone();
        for v in insts {
            f.values[v.index()].map_operands(|x| if x == own { held } else { x });
        }
        f.block_mut(b)
            .term
            .map_operands(|x| if x == own { held } else { x });
        return Some(true);
    }
    Some(false)
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
    if sets_x_otherwise(f, b) {
        // The reads of X before the block first puts something else into it read X as it
        // came in (`x_reads.rs`); it leaves X holding what it put there last.
        let code = x_code(f, b);
        read_indices(f, b, &code.reads, &mut state, index, joins);
        return State {
            believed: None,
            real: code.last_write.map_or(Real::Unknown, Real::Set),
            stale: false,
            kept_if_used: None,
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
        Ldxb::InAccumulator(_) => {}
        // The same, but sift's own load stands for that value: it reads X as theirs did,
        // without the deleted `ldxb` changing what X holds.
        Ldxb::Reloaded(_) => {
            let reads = reads();
            read_indices(f, b, &reads, &mut state.clone(), index, joins);
        }
        _ => {
            let reads = reads();
            read_indices(f, b, &reads, &mut state, index, joins);
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
        Ldxb::Folded(offset) => {
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
                if let Some(v) = real_value(f, joins, real, b) {
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

/// Whether libpcap's code for `b` puts into X something other than an `ldxb`: the right
/// operand of a comparison (`jge x`), or of an operation when it is computed (`add x`, also
/// after a constant, `ld #17; mod x`), or an index that is not a header length (`tax`).
fn sets_x_otherwise(f: &Function, b: Block) -> bool {
    let term = match f.block(b).term {
        Terminator::Branch { rhs, .. } => f.const_value(rhs).is_none(),
        _ => false,
    };
    term || f.block(b).insts.iter().any(|&v| match *f.inst(v) {
        Inst::Load { index: Some(x), .. } => header_length_offset(f, x).is_none(),
        _ => writes_x(f, v),
    })
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
