//! X along the paths of the unset-X model (`unset_index.rs`): what libpcap believes the index
//! register holds and what it holds, as each block leaves it, merged where paths join; where the
//! paths leave different known values, a [`Join`] that becomes a block parameter with X per
//! edge when a load reads it.

use sift_ir::{BinOp, Block, Function, Inst, LoadSize, Value};

use super::header_length::header_length_offset;

/// X as a block leaves it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Real {
    /// Nothing set X on any path.
    Unset,
    Set(Value),
    /// The header length at a byte offset, from an `ldxb` libpcap keeps in a block whose own
    /// loads a fold took (`Ldxb::Folded` in `unset_index.rs`): computed there anew when a load
    /// reads it.
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
pub(super) struct Join {
    pub(super) block: Block,
    /// Each entering block and X as it leaves it.
    pub(super) edges: Vec<(Block, Real)>,
    /// The byte offset of the header length X holds on every edge, if it does.
    pub(super) header_length: Option<u32>,
    pub(super) param: Option<Value>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) struct State {
    /// The offset of the `ldxb` libpcap believes X holds.
    pub(super) believed: Option<u32>,
    pub(super) real: Real,
    /// Whether `real` differs from what `believed` says (a lost `ldxb` since).
    pub(super) stale: bool,
    /// The block whose `ldxb` that is, when a fold took its own loads and libpcap keeps it
    /// only if a block below relies on it (see [`Index::kept`](super::unset_index::Index::kept)).
    pub(super) kept_if_used: Option<Block>,
}

impl State {
    /// X where the filter starts: nothing set it, and libpcap believes nothing of it.
    pub(super) const ENTRY: State = State {
        believed: None,
        real: Real::Unset,
        stale: false,
        kept_if_used: None,
    };
}

/// The state `b` is entered with, from what each block entering it left: a [`Join`] when
/// they left different values in X, each known.
pub(super) fn entered(
    f: &Function,
    b: Block,
    from: &[Block],
    states: &[State],
    joins: &mut Vec<Join>,
) -> State {
    let Some(&first) = states.first() else {
        return State::ENTRY;
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
        let mut lengths = states.iter().map(|s| header_length_held(f, joins, s.real));
        let first = lengths.next().flatten();
        let header_length = first.filter(|_| lengths.all(|l| l == first));
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
pub(super) fn header_length_held(f: &Function, joins: &[Join], real: Real) -> Option<u32> {
    match real {
        Real::Set(v) => header_length_offset(f, v),
        Real::Joined(j) => joins[j as usize].header_length,
        Real::HeaderLength { offset, .. } => Some(offset),
        Real::Unset | Real::Unknown => None,
    }
}

/// The value X holds as `real` says, defined where block `at` can use it: a constant 0 put
/// into `at` for an unset X, a join's parameter (added now, with its edges' arguments, when it
/// is first asked for). The blocks whose header length it computes go into `assumed`.
pub(super) fn real_value(
    f: &mut Function,
    joins: &mut [Join],
    real: Real,
    at: Block,
    assumed: &mut Vec<Block>,
) -> Option<Value> {
    match real {
        Real::Unset => {
            let zero = Value(f.values.len() as u32);
            f.values.push(Inst::Const(0));
            f.block_mut(at).insts.insert(0, zero);
            Some(zero)
        }
        Real::Set(v) => Some(v),
        Real::HeaderLength { offset, block } => {
            assumed.push(block);
            let byte = f.push(
                block,
                Inst::Load {
                    index: None,
                    offset,
                    size: LoadSize::Byte,
                },
            );
            let fifteen = f.iconst(block, 15);
            let nibble = f.push(block, Inst::Binary(BinOp::And, byte, fifteen));
            let two = f.iconst(block, 2);
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
                    let arg = real_value(f, joins, r, from, assumed).expect("every edge is known");
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
