//! If-conversion: small programs as straight-line code, with at most a few well-predicted
//! branches.
//!
//! A filter's tests depend on the packet, and on a mix of traffic (truncated packets, IPv4 or
//! not, matching addresses or not) the CPU cannot predict them: each mispredicted branch costs
//! about 15 cycles, several times what the tests themselves cost. Measured on 4,000 generated
//! packets with the branching code of `ip src A and ip dst B and ip proto 6` copied to each of
//! the 64 byte offsets of a cache line: in a new random order each round, 6.2 to 6.6 ns per
//! packet at every offset; replaying one order (which the predictor learns), 2.3 to 5 ns
//! depending only on the offset, that is on how the branches' addresses share the predictor's
//! tables. Without branches, the same filter ran at 1.8 to 1.9 ns (one order) and 2.3 to 2.5
//! ns (random orders) at every offset. `examples/jitloop.rs` shows both orders.
//!
//! So a small program without calls is evaluated on every path at once, as predicated code:
//! each block gets a *reach* predicate (the OR over its incoming edges of the predecessor's reach
//! AND the edge's condition), and each register at a join becomes a `select` over the incoming
//! edges, on a branch that separates them where there is one ([`Taken`]). The result is assembled backwards from the blocks' exits ([`crate::outcome`]): one
//! `select` (a conditional move) per test of a chain. Switch tables of a few keys become one
//! equality per key, larger ones a branch-free lookup in a collision-free hash
//! ([`crate::table`]).
//!
//! **Early exits.** Evaluating everything costs every instruction on every packet, while
//! branching code stops at the first failed test. Where every path still going somewhere other
//! than `ret 0` has passed a *rare* test (equality of a 32-bit or wider field with a constant:
//! an address, a coalesced address pair, a key of a large set), the code branches out with the
//! result so far unless one of those paths holds. That branch almost always leaves, whatever the
//! order of the packets, so it is predicted; on a predictor that has learnt a fixed order it
//! also saves the tail's work, as branching code would.
//!
//! Loads now run on paths that would not have made them, so every load reads a safe address:
//!
//! * `caplen < need(entry)` (the bound of [`crate::bounds`] anticipated at the first
//!   instruction) means the program returns 0 whatever the bytes; so one `select` points the
//!   loads below that bound at the packet or, when it is shorter, at a block of zeros, and the
//!   result is forced to 0 then;
//! * any other load points at the packet only when its own bytes (or the bytes its bounds check
//!   covers) fit below `caplen`, else at the zeros (on the copy for short packets, a load
//!   whose bytes never fit there is the constant 0); a bounds check the aggregation placed
//!   there (return 0 unless `caplen` covers `n` bytes) becomes a guard of its block;
//! * a division by a register divides by 1 instead of 0, and the zero divisor is a guard (the
//!   path returns 0), as in the interpreter.
//!
//! The values computed on paths not taken are never observed: they only feed `select`s and
//! outcomes whose condition is false.

mod early_exit;
mod if_convert;
mod safe_loads;
mod shared_tests;
mod switch;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, Block, InstBuilder, Value};
use cranelift_frontend::FunctionBuilder;
use sift_bytecode::{Cache, Insn, Program, VerifiedProgram};

use crate::membership::as_set;
use crate::outcome::Outcomes;
use crate::ranges::as_runs;
use crate::translate::{exit_with, Plan};
use safe_loads::{long_bounds, ZeroReads, ZEROS, ZEROS_LEN};

/// Largest program (in reachable instructions) evaluated without branches: every instruction
/// runs for every packet, so beyond this the work outweighs the mispredictions saved.
const MAX_INSNS: usize = 64;
/// Most conditional branches, counting each case of a small `switch` and a few for a hashed
/// one (each costs a few instructions of predicate logic).
const MAX_BRANCHES: usize = 16;
/// Largest `switch` tested key by key; larger ones are hashed.
const SMALL_SWITCH: usize = 4;
/// What a small-set `switch` ([`crate::membership`]) counts towards [`MAX_BRANCHES`]: host
/// sets of ten addresses test four fields (source and destination of IPv4 and of ARP), each
/// one vector test of about seven instructions.
const SET_TEST: usize = 2;
/// Fewest instructions after an early exit that make it worth a branch.
const MIN_TAIL: usize = 4;
/// Most early exits in one program: the first one already leaves on almost every packet, and a
/// second one on the few that stay would be taken about as often as not.
const MAX_EXITS: usize = 1;
/// Fewest bounds beyond the entry's that make a long-packet path worth its branch. Measured
/// (`jitloop ... shuffled`, with and without `nolong`): or-chains of IPv4 tests (one bound) and
/// `udp and port 53` (two) run faster without it, host sets and nets with ARP (three) with it.
const MIN_LONG_BOUNDS: usize = 3;

/// Whether the program is small and simple enough: no calls, no large tables.
pub(crate) fn eligible(p: &Program, reachable: &[bool]) -> bool {
    let mut insns = 0;
    let mut branches = 0;
    for (insn, _) in p.code.iter().zip(reachable).filter(|(_, &r)| r) {
        insns += 1;
        match insn {
            Insn::Contains { .. } | Insn::Member { .. } | Insn::Protochain { .. } => return false,
            Insn::Branch { .. } => branches += 1,
            Insn::Switch { table, .. } => {
                let Some(t) = p.tables.get(*table as usize) else {
                    return false;
                };
                if as_set(p, *table).is_some() {
                    // One vector test: a few instructions per four keys, one predicate.
                    branches += SET_TEST;
                    continue;
                }
                let runs = as_runs(&t.entries).map_or(usize::MAX, |runs| runs.len());
                branches += match t.entries.len() {
                    n if n <= SMALL_SWITCH => n,
                    _ if runs <= SMALL_SWITCH => runs,
                    _ => {
                        let mut targets: Vec<u32> = t.entries.iter().map(|e| e.1).collect();
                        targets.sort_unstable();
                        targets.dedup();
                        // About ten instructions, a dependent chain of two loads: host
                        // sets that look up four keys (source and destination of IPv4 and
                        // ARP) measured 6.3 ns here against 2.5 branching in a fixed packet
                        // order, and 9.1 against 13.9 in random orders; they stay branching.
                        3 + targets.len()
                    }
                };
            }
            _ => {}
        }
    }
    insns <= MAX_INSNS && branches <= MAX_BRANCHES
}

/// Whether every packet shorter than the entry bound is rejected by the tests alone, with the
/// loads below that bound reading the block of zeros (as the code points them when the packet
/// is shorter), so the result needs no separate test of the bound.
///
/// Holds when the program reads nothing but bytes at constant offsets (no wire length, no
/// loads at a register's offset) and returns 0 on a packet of `need` zeros: on a shorter
/// packet the code sees those zeros, takes the path the interpreter takes on them, and a load
/// beyond `need` fails its own bounds check (a guard of its block) just as it fails in the
/// interpreter; other guards can only turn a result into 0.
pub(crate) fn short_packets_fail(program: &VerifiedProgram, plan: &Plan<'_>) -> bool {
    let Some(need) = plan.bounds.entry_need else {
        return false;
    };
    let p = plan.program;
    let constant_offsets = p.code.iter().zip(&plan.flow.reachable).all(|(insn, &r)| {
        !r || !matches!(
            insn,
            Insn::WireLen { .. } | Insn::Load { base: Some(_), .. }
        )
    });
    if !constant_offsets || need == 0 || need > ZEROS_LEN as u64 {
        return false;
    }
    let zeros = vec![0u8; need as usize];
    program.run(&mut Cache::new(), &zeros, need as u32) == 0
}

/// A path predicate: statically true, or an `i8` 0/1 value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pred {
    True,
    Value(Value),
}

/// The registers and scratch words along one edge (`None`: not written on that path), and
/// the branches every path along it took.
#[derive(Clone, Debug, PartialEq, Eq)]
struct State {
    regs: [Option<Value>; 16],
    scratch: Vec<Option<Value>>,
    taken: Taken,
}

/// Branches (by instruction, those below 128) that every path along an edge took, per side.
///
/// At a join, a register whose value differs between the incoming edges is a `select` of
/// them, on a condition that tells the edges apart. Each edge's reach predicate does, but it
/// is the AND of every test on the way (a host set's destination key, after its source test,
/// would wait for the whole source lookup). A branch that one edge always passed on one side
/// and the other edge on the other side does too, and is usually decided early (the EtherType
/// test); where the join is not reached, the merged value is never observed either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Taken {
    then_: u128,
    else_: u128,
}

impl Taken {
    /// With branch `i` taken on the `then` side (`holds`) or the other.
    fn with(self, i: usize, holds: bool) -> Taken {
        let bit = 1u128.checked_shl(i as u32).unwrap_or(0);
        match holds {
            true => Taken {
                then_: self.then_ | bit,
                ..self
            },
            false => Taken {
                else_: self.else_ | bit,
                ..self
            },
        }
    }

    /// What paths along either edge all took.
    fn meet(self, other: Taken) -> Taken {
        Taken {
            then_: self.then_ & other.then_,
            else_: self.else_ & other.else_,
        }
    }
}

/// One incoming edge of a block.
#[derive(Clone, Debug)]
struct Edge {
    pred: Pred,
    state: State,
    /// Every path along this edge passed a rare test (see the module docs).
    rare: bool,
}

struct Emitter<'a, 'b, 'p> {
    b: &'a mut FunctionBuilder<'b>,
    plan: &'a Plan<'p>,
    data: Value,
    caplen: Value,
    wire_len: Value,
    zeros: Value,
    /// Base for loads below the entry bound (the packet, or the zeros when it is shorter),
    /// whether the packet reaches the bound, and the bound; `None` when the bound is 0 or does
    /// not fit the zeros.
    entry: Option<(Value, Value, u64)>,
    /// `caplen` is known to be at least `long` (on the long-packet path; else 0) and below
    /// `short` (on the other path; else `u64::MAX`).
    long: u64,
    short: u64,
    /// Incoming edges of each instruction that starts a block.
    incoming: Vec<Vec<Edge>>,
    /// The block being evaluated (its first instruction), and its guards so far.
    block: usize,
    guards: Vec<Value>,
    outcomes: Outcomes,
    /// Bases already checked: (start, checked bytes) -> (fits, start, start or the zeros).
    bases: HashMap<(Value, u64), (Value, Value, Value)>,
    /// Checks that need no guard, and the loads that read zeros where they fail.
    zero_reads: ZeroReads,
    /// Per instruction: reachable instructions from there on that are not `ret`s.
    tail: Vec<usize>,
    /// Per `switch`: the later one that shares its lookup ([`shared_tests`]), and the
    /// conditions made for those later ones so far.
    partners: Vec<Option<shared_tests::Partner>>,
    shared: HashMap<usize, shared_tests::Tests>,
    /// The condition of each branch evaluated so far (not decided at compile time).
    conditions: HashMap<usize, Value>,
    exits_left: usize,
    /// Where results go (batch shape), see [`exit_with`].
    finish: Option<Block>,
    /// Hash tables the code reads; owned by the compiled filter.
    tables: &'a mut Vec<Box<[u32]>>,
}

/// Emits the whole program into the current block of `b`, ending every way out (the early
/// exits and the end) with its result. The caller checked [`eligible`].
///
/// When constant-offset loads have several bounds beyond the entry bound, packets long enough
/// for all of them (nearly all packets, in real traffic) take a path without bounds logic for
/// those loads: one branch, well predicted unless truncated packets are common, instead of a
/// compare and a select per bound, and fewer live registers. Shorter packets take the general
/// path.
pub(crate) fn emit(
    b: &mut FunctionBuilder<'_>,
    plan: &Plan<'_>,
    packet: [Value; 3],
    finish: Option<Block>,
    tables: &mut Vec<Box<[u32]>>,
) {
    let Some(entry_need) = plan.bounds.entry_need else {
        let zero = b.ins().iconst(types::I32, 0);
        return exit_with(b, finish, zero); // every path returns 0
    };
    // Worth a branch (mispredicted on some truncated packets) only when it saves the short
    // path's compare and select for several bounds: with one or two (an or-chain of IPv4
    // tests, `udp and port 53`) the mispredictions cost more than the selects. Loads beyond
    // the longest bound it covers keep their selects on it.
    let bounds = long_bounds(plan, entry_need);
    let long = match bounds.last() {
        Some(&long) if plan.options.long_packet_path && bounds.len() >= MIN_LONG_BOUNDS => long,
        _ => return evaluate(b, plan, packet, None, u64::MAX, finish, tables),
    };
    let (fast, slow) = (b.create_block(), b.create_block());
    let is_long = b
        .ins()
        .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, packet[1], long as i64);
    b.ins().brif(is_long, fast, &[], slow, &[]);
    b.switch_to_block(fast);
    evaluate(b, plan, packet, Some(long), u64::MAX, finish, tables);
    b.switch_to_block(slow);
    evaluate(b, plan, packet, None, long, finish, tables);
}

/// One evaluation of the program ([`emit`]); `long`: `caplen` is known to be at least this;
/// `short`: known to be below this.
#[allow(clippy::too_many_arguments)]
fn evaluate(
    b: &mut FunctionBuilder<'_>,
    plan: &Plan<'_>,
    [data, caplen, wire_len]: [Value; 3],
    long: Option<u64>,
    short: u64,
    finish: Option<Block>,
    tables: &mut Vec<Box<[u32]>>,
) {
    let p = plan.program;
    let need = plan.bounds.entry_need.unwrap_or(0);
    let zeros = b.ins().iconst(types::I64, ZEROS.as_ptr() as usize as i64);
    let entry = (need > 0 && need <= ZEROS_LEN as u64 && long.is_none()).then(|| {
        let fits = b
            .ins()
            .icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, caplen, need as i64);
        (b.ins().select(fits, data, zeros), fits, need)
    });
    let mut tail = vec![0; p.code.len() + 1];
    for i in (0..p.code.len()).rev() {
        let counts = plan.flow.reachable[i] && !matches!(p.code[i], Insn::Return { .. });
        tail[i] = tail[i + 1] + usize::from(counts);
    }
    let mut e = Emitter {
        b,
        plan,
        data,
        caplen,
        wire_len,
        zeros,
        entry,
        long: long.unwrap_or(0),
        short,
        incoming: vec![Vec::new(); p.code.len() + 1],
        block: 0,
        guards: Vec::new(),
        outcomes: Outcomes::new(p.code.len()),
        bases: HashMap::new(),
        zero_reads: ZeroReads::new(plan),
        tail,
        partners: shared_tests::partners(plan),
        shared: HashMap::new(),
        conditions: HashMap::new(),
        exits_left: if plan.options.early_exits {
            MAX_EXITS
        } else {
            0
        },
        finish,
        tables,
    };
    e.incoming[0].push(Edge {
        pred: Pred::True,
        state: State {
            regs: [None; 16],
            scratch: vec![None; usize::from(p.scratch_words)],
            taken: Taken::default(),
        },
        rare: false,
    });
    e.run();
    let fits = e.entry_guard();
    let result = e.outcomes.result(e.b, p.code.len(), fits);
    exit_with(e.b, finish, result);
}

impl Emitter<'_, '_, '_> {
    /// What must hold for a result to be nonzero besides the tests: the entry bound, unless
    /// short packets fail the tests anyway ([`short_packets_fail`]).
    fn entry_guard(&self) -> Option<Value> {
        self.entry
            .filter(|_| !self.plan.short_packets_fail)
            .map(|(_, fits, _)| fits)
    }
}
