//! The part of libpcap's optimizer that changes what a filter means.
//!
//! tcpdump always runs libpcap's optimizer (unless `-O`), and that optimizer is not meaning-
//! preserving: it deletes packet loads whose values it no longer needs, so a filter that would
//! reject a truncated packet (a load past the captured bytes rejects) accepts it once optimized.
//! `ip[0] & 0 = 0` matches an empty packet; `ip6 net fe80::/10` loads only the first word of
//! each address; `not ip6 host A or not arp net N` needs no load at all. To be exact, sift
//! reproduces those decisions before anything else sees the IR; everything after preserves
//! meaning exactly. Filters up to a few hundred instructions take libpcap's own algorithm,
//! statement by statement (`crate::statement_model`); this module emulates it on the IR, in
//! time linear in a long chain, for the larger ones (and `byte N & V`, whose statements the IR
//! does not determine).
//!
//! The rules mirror libpcap 1.10's `optimize.c`:
//!
//! * value numbering: equal loads, constants and operations get the same number, wherever
//!   they are (libpcap hashes `(opcode, operands)` over the whole program);
//! * constant folding with libpcap's identities: `x op 0` for `+ - << >> | ^` is `x`, `x * 0`
//!   and `x & 0` are 0, `0 op x` for `+ | ^` is `x` and for `* / % & << >>` is 0 (even when
//!   `x` is 0: libpcap folds `0 / x` to 0); shifts of constants by 32 or more give 0; a
//!   constant zero divisor and a shift of an unknown value by more than 31 bits are errors
//!   (`x * 0` and `x & 0` are known only from the next pass on, so they count as unknown; a
//!   divisor that folding finds to be 0 under an unknown dividend, in the next pass, if its
//!   block is still reached then);
//! * branches: both sides constant decide the branch; `(x & k) == 0` becomes `jset #k`
//!   (negated), and `jset #0` never holds while `jset #0xffffffff` always holds — even for
//!   `x == 0`, a libpcap quirk reproduced on purpose; a decided branch keeps its operands and
//!   sends both edges to one successor;
//! * edge facts: an edge that went through `x op y` knows its outcome; an edge into a block
//!   testing the same comparison again (same value numbers, same opcode; or an equality with
//!   another constant after an equality held), or into a block whose two edges lead to one
//!   place, is sent straight to the successor, provided the skipped block computes nothing
//!   used elsewhere (libpcap's `use_conflict`); blocks nearest the returns are threaded
//!   first, so a walk follows the edges below it as already moved;
//! * or/and pullups: a later test of the value a chain of `or`s (`and`s) started with moves up
//!   next to the first (`pullup.rs`);
//! * dead code: every instruction whose value is unused is deleted, loads included;
//! * equal blocks: blocks that are the same code with the same successors become one
//!   (`interning.rs`, libpcap's `intern_blocks`);
//! * the root: undecided blocks at the entry are skipped, and nothing runs when they lead to a
//!   return (libpcap's `opt_root`); the statements of the blocks skipped after the entry are
//!   lost, and with them the accumulator value the next block relied on;
//! * the index register: a block's `ldxb` that lost its only load through it to a fold (one
//!   that decided the block's branch, the load at an offset from the header length or with
//!   another path into the block below leaving something else in X, or a zero on the load's
//!   left) is deleted while libpcap still believes X holds it, so the blocks
//!   below read X unset (`unset_index.rs`; where such a path joins one that loaded the header
//!   length, as X each path left; so does an `ldxb` whose load libpcap found in the
//!   accumulator, after a block put something else into X); one that libpcap keeps because
//!   the blocks below
//!   read X instead of loading it keeps its byte load, which rejects short packets.
//!
//! Which rule runs in which of libpcap's two loops matters; see [`apply`]. libpcap disables its
//! optimizer for `protochain` and `geneve`; so does the caller of this module.
//!
//! libpcap's loops take time quadratic in a long `or` chain (its pullups walk runs of tests of
//! one value; the chain needs about log2(n) rounds to sort them). The result here is libpcap's,
//! computed faster: chains that nothing else sees into are put straight into the order the
//! pullup rounds would end with (`grouping.rs`), which saves the log2(n) rounds of sorting
//! them; pullups skip whole runs (`runs.rs`); the first loop numbers the values once when no
//! block uses another's values (`numbering_stays`), and then has no dead code to look for
//! after its first round, nor has the second loop's first round when nothing folds (it starts
//! from that numbering, `Numbering::folds_nothing`); a round after one that only pulled tests
//! up reuses what pullups cannot change and skips the threading when a linear check proves it
//! would move nothing (`thread_check.rs`, its groups of tests kept between such rounds); every
//! round finds the blocks laid out in reverse postorder (`renumber.rs`), so that its walks
//! read memory in order instead of following moved edges all over it, and takes that order
//! for its dominators instead of searching the graph again. A round that decides no
//! branch computes its edge facts only for threading, leaving out the chains it has just regrouped
//! (as pullups do); threading visits the blocks in a walk of the dominator tree that keeps
//! the facts in force in tables indexed by the comparisons' dense numbers (`fact_ids.rs`),
//! and the facts and the walks read the terminators once, into a compact snapshot
//! (`terms.rs`; the tests in it, with their numbers, stay for the next round while the
//! numbering does); a long walk passes a run of equality tests on one value,
//! which an equality with another constant decides false, in one step (`equality_runs.rs`).
//! [`reference_mode`] turns the shortcuts off; `pullup_equivalence.rs` compares the two on
//! generated chains and random IR, and tests assert every reused numbering, skipped dead-code
//! pass, late facts and skipped threading against the work it skips.

mod branches;
mod dead_code;
mod edges;
mod equality_runs;
mod fact_ids;
mod fast_hash;
mod grouping;
mod header_length;
mod interning;
mod numbering;
mod pullup;
#[cfg(test)]
mod pullup_equivalence;
mod renumber;
mod runs;
mod terms;
mod thread_check;
mod threading;
mod unset_index;
mod x_paths;
mod x_reads;

use sift_ir::verify::{dominators, dominators_in_order};
use sift_ir::{Block, Function, Inst, Target, Terminator, Value};

use branches::{
    branches_to_decide, decide_branches, first_round_jset_peephole, jset_peephole,
    relation_peephole, set_outcomes, swap_mask_tests, unmask,
};
use dead_code::remove_dead_code;
use fact_ids::FactIds;
use grouping::group_closed_chains;
use header_length::{header_length_loads, HeaderLength};
use interning::merge_equal_blocks;
use numbering::{Numbering, Vn};
use pullup::{pullups, DomIntervals, Levels};
use terms::{KnownTests, Terms};
use thread_check::{nothing_to_thread, TestGroups};
#[cfg(test)]
use threading::thread_edges;
use threading::{thread_edges_with, used_outside_own_block, FactsInForce};
use unset_index::{read_stale_index, writes_x_anywhere, FirstLoop};

/// Rounds of the whole pipeline; libpcap iterates to a fixed point too. Each round that changes
/// something removes a branch or an instruction, so this bound is never reached in practice.
const MAX_ROUNDS: usize = 64;

/// Applies libpcap's meaning-changing optimizations to `f` (entry block 0). Errors are the
/// ones libpcap's optimizer reports.
///
/// libpcap optimizes in two loops, and which rule runs in which loop matters: the first moves
/// branches but does not rewrite statements (so `ether[6:2]`, an indexed load with a constant
/// index, is not yet the same value as the absolute load `[6]`, and `x & 0` is not yet 0); the
/// second folds statements but no longer moves branches (a branch it decides keeps its
/// operands, and with them its loads).
///
/// `laid_out`: `f`'s blocks are numbered in its reverse postorder, every one reachable (as
/// lowering's cut leaves them), which saves the first round a walk of the graph.
pub(crate) fn apply(f: &mut Function, laid_out: bool) -> Result<(), OptimizerError> {
    let shortcuts = !reference_mode();
    // The index computations (`ldxb`) each block holds before any is deleted (every block is
    // reachable here: lowering cut the others off).
    let indexed = f
        .values
        .iter()
        .any(|inst| matches!(inst, Inst::Load { index: Some(_), .. }));
    let mut header_lengths = indexed.then(|| header_length_loads(f));
    let x_written = indexed && writes_x_anywhere(f);
    // The numbering carried into the next round, when a fresh one would give the same
    // classes (see `numbering_stays`).
    let mut carried: Option<Numbering> = None;
    // Whether the last round only pulled tests up: pullups move edges within the reachable
    // blocks, so the reachable set and the instructions stay, and this round's decided
    // branches and dead code would come out the same.
    let mut only_pulled = false;
    let mut cross_block_uses: Option<Vec<bool>> = None;
    // The threading check's groups of tests, while the numbering is carried and rounds only
    // pull tests up (nothing they depend on changes).
    let mut test_groups: Option<TestGroups> = None;
    // The comparisons' numbers and the tests threading read, kept with the numbering.
    let mut known_tests: Option<(FactIds, KnownTests)> = None;
    // No rule adds or removes block parameters.
    let params_anywhere = f.blocks.iter().any(|b| !b.params.is_empty());
    // How many blocks, numbered from 0 on, are the reverse postorder, when they are: as laying
    // them out leaves them until an edge moves.
    let mut in_order = laid_out.then_some(f.blocks.len());
    for round in 0..MAX_ROUNDS {
        let mut changed = false;
        // What libpcap computes at the start of a round, before it decides branches and moves
        // edges, and uses throughout: levels, dominators and the facts edges carry. The
        // dominators come with the reachable blocks in reverse postorder.
        let (idom, dom_rpo) = match in_order.take() {
            Some(n) => dominators_in_order(f, (0..n as u32).map(Block).collect()),
            None => dominators(f),
        };
        #[cfg(test)]
        assert_eq!(dom_rpo, f.reverse_postorder(), "blocks laid out in order");
        let dom = DomIntervals::children_latest_first(&idom, &dom_rpo);
        // The reachable blocks, in reverse postorder until an edge moves; the rules given it
        // only need the set, except numbering, which runs first.
        let mut rpo = dom_rpo.clone();
        let numbering_carried = carried.is_some();
        let numbers = match carried.take() {
            Some(numbers) => {
                #[cfg(test)]
                assert_same_numbering(f, &numbers, Phase::MoveBranches)?;
                numbers
            }
            None => {
                test_groups = None;
                Numbering::compute(f, Phase::MoveBranches, &rpo)?.0
            }
        };
        if !only_pulled {
            test_groups = None;
        }
        let mut mask_tests = if round == 0 {
            first_round_jset_peephole(f, &numbers, &rpo)
        } else {
            Vec::new()
        };
        let levels = Levels::new(f, &rpo);
        // The facts edges carry at the round's start, which threading uses. When this round
        // decides no branch (never, after a round that only pulled tests up) they are the
        // facts after the decisions, and wait until threading is known to be needed; the
        // first round's mask tests need the facts from before their successors swap.
        let to_decide = if only_pulled {
            Vec::new()
        } else {
            branches_to_decide(f, &numbers, &rpo)
        };
        // The comparisons' numbers, shared by every table of facts this round.
        let (mut ids, mut known) = match known_tests.take() {
            Some((ids, known)) if numbering_carried => (ids, Some(known)),
            _ => (FactIds::default(), None),
        };
        let facts_at_start = (!to_decide.is_empty() || !shortcuts || !mask_tests.is_empty())
            .then(|| FactsInForce::new(f, &numbers, &mut ids, &dom, &dom_rpo, &[]));
        // Tests check the facts computed later against these.
        #[cfg(test)]
        let facts_check = facts_at_start
            .is_none()
            .then(|| FactsInForce::new(f, &numbers, &mut ids, &dom, &dom_rpo, &[]));
        swap_mask_tests(f, &mask_tests);
        changed |= !mask_tests.is_empty();
        if only_pulled {
            #[cfg(test)]
            assert_round_would_change_nothing(f)?;
        } else {
            if set_outcomes(f, &to_decide) {
                changed = true;
                rpo = f.reverse_postorder();
            }
            // With the numbering carried, no block uses another's values: an instruction is
            // live when its own block's terminator needs it, and in this loop neither
            // instructions nor operands change and the reachable blocks only lose members,
            // so the last removal (which every round does or skips for this reason) stands.
            let removed = if numbering_carried {
                #[cfg(test)]
                assert!(
                    !remove_dead_code(&mut f.clone(), &rpo),
                    "dead code under a carried numbering"
                );
                false
            } else {
                remove_dead_code(f, &rpo)
            };
            changed |= removed;
            if removed || !shortcuts {
                cross_block_uses = None;
            }
        }
        let used = cross_block_uses.get_or_insert_with(|| used_outside_own_block(f));
        // Closed chains go straight to the order the pullup rounds would end with. This
        // round's threading and pullups skip their blocks: neither would change them, and what
        // the structures from the round's start say about them is out of date.
        let regrouped = if shortcuts {
            group_closed_chains(f, &numbers, used, &rpo, params_anywhere)
        } else {
            Vec::new()
        };
        // After a round that only pulled tests up, the threading usually finds nothing; when
        // that is certain it is skipped.
        let skip_threading = shortcuts && only_pulled && {
            let tests =
                test_groups.get_or_insert_with(|| TestGroups::new(f, &numbers, used, &dom_rpo));
            nothing_to_thread(f, tests, used, &dom_rpo, &dom)
        };
        #[cfg(test)]
        let before_threading = f.clone();
        let threaded = !skip_threading && {
            // Facts computed now, after the grouping, answer as those at the start for every
            // block threading walks from (see `FactsInForce::new`); they read the terminators
            // into the snapshot threading reads next.
            let mut terms = Terms::resume(f, &numbers, &mut ids, known.take());
            let facts = facts_at_start.unwrap_or_else(|| {
                FactsInForce::with_terms(f, &mut terms, &dom, &dom_rpo, &regrouped)
            });
            let moved = thread_edges_with(f, &mut terms, used, &facts, &regrouped);
            known = Some(terms.into_known());
            moved
        };
        #[cfg(test)]
        if let (Some(facts), false) = (&facts_check, skip_threading) {
            let mut copy = before_threading;
            thread_edges(&mut copy, &numbers, &mut ids, used, facts, &regrouped);
            assert!(copy == *f, "facts computed late thread differently");
        }
        #[cfg(test)]
        if skip_threading {
            let facts = FactsInForce::new(f, &numbers, &mut ids, &dom, &dom_rpo, &regrouped);
            assert_threading_moves_nothing(f, &numbers, &mut ids, used, &facts, &regrouped);
        }
        let pulled = pullups(f, &numbers, &dom, &levels, &regrouped, params_anywhere);
        // The first round's peepholes change branches' operands, which leaves the `sub`s
        // and `and`s they tested dead: the next round numbers afresh and removes them.
        let mut operands_rewritten = false;
        if round == 0 {
            // They read the reachable blocks, which laying the blocks out finds (in order).
            let reachable = if shortcuts {
                // The first round's threading moved edges all over the layout lowering left.
                let (new_of, reachable) = lay_out(
                    f,
                    true,
                    &mut cross_block_uses,
                    &mut test_groups,
                    &mut header_lengths,
                    known.as_mut(),
                );
                for (b, _) in &mut mask_tests {
                    *b = Block(new_of[b.index()]);
                }
                // Nothing below moves an edge (unmasking rewrites operands only).
                in_order = Some(reachable);
                (0..reachable as u32).map(Block).collect()
            } else {
                f.reverse_postorder()
            };
            unmask(f, &mask_tests);
            operands_rewritten =
                relation_peephole(f, &numbers, &reachable) || !mask_tests.is_empty();
            changed |= operands_rewritten;
        }
        // The numbering holds into the next round, or into the second loop (laying the blocks
        // out anew below moves no value).
        let used = cross_block_uses.as_ref().expect("computed this round");
        if shortcuts && numbering_stays(used) && !operands_rewritten {
            carried = Some(numbers);
            known_tests = known.map(|known| (ids, known));
        }
        if !(changed || threaded || pulled) {
            break;
        }
        only_pulled = shortcuts && !changed && !threaded;
        // Lay the blocks out in the order the next round's walks take (the first round did
        // before its peepholes).
        if shortcuts && round > 0 {
            let (_, reachable) = lay_out(
                f,
                false,
                &mut cross_block_uses,
                &mut test_groups,
                &mut header_lengths,
                known_tests.as_mut().map(|(_, known)| known),
            );
            in_order = Some(reachable);
        }
    }
    // The unset-X model needs some of the edges as the first loop leaves them.
    let first_loop = header_lengths
        .as_ref()
        .map_or_else(FirstLoop::default, |before| {
            FirstLoop::record(f, before, x_written)
        });
    // The reachable blocks in reverse postorder once the second loop reached its fixed point
    // (its last dead-code removal, over the blocks reachable now, removed nothing; the last
    // round changed nothing, so its order stands).
    let mut settled: Option<Vec<Block>> = None;
    for _ in 0..MAX_ROUNDS {
        let mut rpo = f.reverse_postorder();
        // The first loop's last numbering, when folding would change no instruction: the
        // second loop's first numbering is then the same classes (long chains have nothing
        // to fold, and numbering them is some 8% of this module's time).
        let reused = carried
            .take()
            .filter(|numbers| numbers.folds_nothing(f, &rpo));
        let reusing = reused.is_some();
        let (numbers, mut changed) = match reused {
            Some(numbers) => {
                #[cfg(test)]
                assert_same_numbering(f, &numbers, Phase::FoldStatements)?;
                (numbers, false)
            }
            None => Numbering::compute(f, Phase::FoldStatements, &rpo)?,
        };
        // The peephole keeps each branch's successors, so the reachable blocks stay.
        let peephole = jset_peephole(f, &numbers, &rpo);
        changed |= peephole;
        if decide_branches(f, &numbers, &rpo) {
            changed = true;
            rpo = f.reverse_postorder();
        }
        // With the first loop's numbering nothing folded and no block uses another's values,
        // and the first loop left no dead code: only the peephole, which tests the operands
        // of an `and` instead of the `and`, can make an instruction dead (a decided branch
        // keeps its operands).
        if reusing && !peephole {
            #[cfg(test)]
            assert!(
                !remove_dead_code(&mut f.clone(), &rpo),
                "dead code under a reused numbering"
            );
        } else {
            changed |= remove_dead_code(f, &rpo);
        }
        if !changed {
            settled = Some(rpo);
            break;
        }
    }
    let was_settled = settled.is_some();
    let rpo = settled.unwrap_or_else(|| f.reverse_postorder());
    // No rule of the second loop makes a block use a value of another: folding drops an
    // operand or puts in its place an operand of that operand's instruction, the peephole
    // tests the operands of an instruction of the branch's block, dead code only removes
    // uses. So when no block did at the end of the first loop, none does now.
    let skipped_by_root = root_chain(f).map_or_else(Vec::new, |(skipped, _)| skipped);
    let index = header_lengths
        .map(|before| read_stale_index(f, &before, &rpo, &skipped_by_root, &first_loop, x_written));
    let stale_index = index.as_ref().is_some_and(|i| i.changed);
    let used = match cross_block_uses {
        Some(used) if shortcuts && numbering_stays(&used) && !stale_index => used,
        _ => used_outside_own_block(f),
    };
    #[cfg(test)]
    assert!(used == used_outside_own_block(f), "cross-block uses kept");
    merge_equal_blocks(f, &rpo, &used);
    if skip_undecided_root(f) || !was_settled || stale_index {
        remove_dead_code(f, &f.reverse_postorder());
    }
    if let Some(index) = index {
        keep_index_loads(f, &index.kept);
    }
    Ok(())
}

/// Lays the blocks of `f` out in reverse postorder (`renumber.rs`) and moves what the rounds
/// keep per block along; returns the new number of each old block and how many are reachable.
/// `scattered`: see [`renumber::in_reverse_postorder`].
fn lay_out(
    f: &mut Function,
    scattered: bool,
    cross_block_uses: &mut Option<Vec<bool>>,
    test_groups: &mut Option<TestGroups>,
    header_lengths: &mut Option<Vec<Option<HeaderLength>>>,
    known_tests: Option<&mut KnownTests>,
) -> (Vec<u32>, usize) {
    let (new_of, reachable) = renumber::in_reverse_postorder(f, scattered);
    if let Some(known) = known_tests {
        known.renumber(&new_of);
    }
    if let Some(used) = cross_block_uses {
        *used = renumber::moved(used, &new_of);
    }
    if let Some(tests) = test_groups {
        tests.renumber(&new_of);
    }
    if let Some(loads) = header_lengths {
        *loads = renumber::moved(loads, &new_of);
    }
    (new_of, reachable)
}

/// Puts back the byte loads of the `ldxb`s libpcap keeps for the blocks below
/// ([`unset_index::Index::kept`]): dead in the filter's meaning, they still reject a packet
/// too short for them. Not where the block now returns (then `opt_root` runs nothing) or is
/// no longer reached.
fn keep_index_loads(f: &mut Function, kept: &[(Block, u32)]) {
    if kept.is_empty() {
        return;
    }
    let reached = f.reverse_postorder();
    for &(b, offset) in kept {
        let returns = matches!(
            f.block(b).term,
            Terminator::Return(_) | Terminator::ReturnValue(_)
        );
        if returns || !reached.contains(&b) {
            continue;
        }
        f.push(
            b,
            Inst::Load {
                index: None,
                offset,
                size: sift_ir::LoadSize::Byte,
            },
        );
    }
}

/// Whether the first loop's numbering, computed once, is the one every later round of that
/// loop would compute (up to renaming the numbers, which only ever meet in equality tests).
///
/// In that loop instructions are never rewritten, only deleted, and the reachable blocks only
/// lose members: threading sends edges to blocks that were reachable, pullups reorder
/// reachable blocks. A value's number depends only on its instruction and, recursively, its
/// operands' numbers, so it stays, provided numbering always sees an operand before its use.
/// Within a block it does (instructions are in order); across blocks it is what reverse
/// postorder gives when the defining block dominates the use, which moved edges could undo.
/// When no block uses a value defined in another (`used_elsewhere` all false, and deleting
/// dead code only removes uses), that case cannot arise.
fn numbering_stays(used_elsewhere: &[bool]) -> bool {
    !used_elsewhere.iter().any(|&u| u)
}

/// Tests check every carried numbering against a fresh one of `phase`: the same classes of
/// reachable values, the same constants, and no instruction folded.
#[cfg(test)]
fn assert_same_numbering(
    f: &Function,
    carried: &Numbering,
    phase: Phase,
) -> Result<(), OptimizerError> {
    use std::collections::HashMap;
    let rpo = f.reverse_postorder();
    let mut copy = f.clone();
    let (fresh, folded) = Numbering::compute(&mut copy, phase, &rpo)?;
    assert!(!folded, "a carried numbering where an instruction folds");
    let (mut to_fresh, mut to_carried) = (HashMap::new(), HashMap::new());
    for b in rpo {
        let data = f.block(b);
        for &v in data.params.iter().chain(&data.insts) {
            let (a, c) = (fresh.vn(v), carried.vn(v));
            assert_eq!(
                *to_fresh.entry(c).or_insert(a),
                a,
                "carried numbering splits {v}"
            );
            assert_eq!(
                *to_carried.entry(a).or_insert(c),
                c,
                "carried numbering merges {v}"
            );
            assert_eq!(fresh.konst(v), carried.konst(v), "constant of {v}");
        }
    }
    Ok(())
}

/// Tests check that a round reusing the last numbering skips nothing: numbering afresh, no
/// branch is newly decided and no instruction is dead.
#[cfg(test)]
fn assert_round_would_change_nothing(f: &mut Function) -> Result<(), OptimizerError> {
    let rpo = f.reverse_postorder();
    let (numbers, _) = Numbering::compute(f, Phase::MoveBranches, &rpo)?;
    assert!(
        !decide_branches(f, &numbers, &rpo),
        "a kept round decides a branch"
    );
    assert!(!remove_dead_code(f, &rpo), "a kept round removes dead code");
    Ok(())
}

/// Tests check every skipped threading against the threading itself.
#[cfg(test)]
fn assert_threading_moves_nothing(
    f: &Function,
    numbers: &Numbering,
    ids: &mut FactIds,
    used: &[bool],
    facts: &FactsInForce,
    regrouped: &[bool],
) {
    let mut copy = f.clone();
    let moved = thread_edges(&mut copy, numbers, ids, used, facts, regrouped);
    assert!(!moved, "threading was skipped but moves an edge");
}

#[cfg(test)]
thread_local! {
    static REFERENCE_MODE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the optimizer runs without its shortcuts (pullups walking block by block, every
/// round computed afresh): the plain algorithm, which tests compare the shortcuts with.
#[cfg(test)]
fn reference_mode() -> bool {
    REFERENCE_MODE.with(std::cell::Cell::get)
}

#[cfg(not(test))]
fn reference_mode() -> bool {
    false
}

/// Runs `run` in [`reference_mode`].
#[cfg(test)]
fn with_reference_mode<T>(run: impl FnOnce() -> T) -> T {
    REFERENCE_MODE.with(|r| r.set(true));
    let out = run();
    REFERENCE_MODE.with(|r| r.set(false));
    out
}

/// libpcap's `opt_root`: the entry block and the blocks after it that branch to one place
/// whatever the outcome are skipped; the entry's own statements move to the first real block,
/// those of the skipped blocks after it are lost, and if the first real block returns, no
/// statement runs at all (a filter has no side effects). Returns whether the entry changed.
///
/// Losing those statements loses what they left in the accumulator: when every block entering
/// the first real block ends with its accumulator holding the value that block loads first,
/// libpcap has removed that load (the value is already there), and once the skipped blocks'
/// statements are gone the block reads what the entry's statements left instead: the entry's
/// compared value (see [`accumulator_lost`]).
fn skip_undecided_root(f: &mut Function) -> bool {
    let Some((skipped_after_entry, target)) = root_chain(f) else {
        return false;
    };
    let final_term = f.block(target.block).term.clone();
    if !skipped_after_entry.is_empty() && !matches!(final_term, Terminator::Return(_)) {
        accumulator_lost(f, target.block);
    }
    let term = &mut f.block_mut(Function::ENTRY).term;
    match final_term {
        ret @ (Terminator::Return(_) | Terminator::ReturnValue(_)) => *term = ret,
        _ => {
            for t in term.targets_mut() {
                *t = target.clone();
            }
        }
    }
    true
}

/// The blocks `opt_root` skips after the entry, each branching to one place whatever the
/// outcome, and the edge it takes from the last; `None` when the entry itself is undecided.
fn root_chain(f: &Function) -> Option<(Vec<Block>, Target)> {
    let mut target = match &f.block(Function::ENTRY).term {
        Terminator::Branch { then_, else_, .. } if then_ == else_ => then_.clone(),
        Terminator::Jump(t) => t.clone(),
        _ => return None,
    };
    let mut skipped = Vec::new();
    // Bounded by the number of blocks: every step goes forward in an acyclic graph.
    for _ in 0..f.blocks.len() {
        let block = target.block;
        match &f.block(block).term {
            Terminator::Branch { then_, else_, .. } if then_ == else_ => target = then_.clone(),
            Terminator::Jump(t) if f.block(block).params.is_empty() => target = t.clone(),
            _ => break,
        }
        skipped.push(block);
    }
    Some((skipped, target))
}

/// The loads `opt_root` loses from `root`, the first real block, when blocks were skipped
/// between it and the entry. libpcap keeps a value's number in the accumulator from block to
/// block (every branch compares the accumulator, so a block ends holding its compared value),
/// a block inherits it when all the blocks entering it agree, and a block whose first
/// statement loads the value it inherits loses that load. In `root` the value was left by a
/// skipped block, whose statements are gone: `root` computes with the entry's compared value
/// instead, the last thing the entry's statements (which `opt_root` keeps) put there. The
/// blocks after it that inherit from it alone read what it really left, and so on.
fn accumulator_lost(f: &mut Function, root: Block) {
    let Terminator::Branch {
        lhs: entry_value, ..
    } = f.block(Function::ENTRY).term
    else {
        return;
    };
    let rpo = f.reverse_postorder();
    let Ok((numbers, _)) = Numbering::compute(&mut f.clone(), Phase::FoldStatements, &rpo) else {
        return;
    };
    // What each block leaves in the accumulator as libpcap numbers it (its compared value
    // before any rewriting here), and the blocks entering each block.
    let believed: Vec<Option<Vn>> = (0..f.blocks.len())
        .map(|b| edges::compared(f, Block(b as u32)).map(|v| numbers.vn(v)))
        .collect();
    let entering = edges::Entering::new(f, &rpo);
    // The first statement that writes the accumulator, when it is an absolute load or the
    // wire length (`ld #pktlen`, which libpcap numbers and drops alike): the first
    // instruction that is not a constant (constants are immediates in libpcap's statements).
    let first_load = |f: &Function, b: Block| {
        let first = *f
            .block(b)
            .insts
            .iter()
            .find(|&&v| !matches!(f.inst(v), Inst::Const(_)))?;
        matches!(
            f.inst(first),
            Inst::Load { index: None, .. } | Inst::WireLen
        )
        .then_some(first)
    };
    // The value really in the accumulator where a block starts, for the blocks that lose
    // their first load.
    let mut really_there: Vec<Option<Value>> = vec![None; f.blocks.len()];
    really_there[root.index()] = Some(entry_value);
    let root_inherits = |b: Block| {
        let mut from = entering.of_block(b).iter().map(|p| believed[p.index()]);
        let first = from.next().flatten();
        first.filter(|_| from.all(|vn| vn == first))
    };
    let start = rpo.iter().position(|&b| b == root).unwrap_or(rpo.len());
    for &b in &rpo[start..] {
        let Some(there) = really_there[b.index()] else {
            continue;
        };
        let Some(load) = first_load(f, b) else {
            continue;
        };
        if b == root && root_inherits(b) != Some(numbers.vn(load)) {
            continue;
        }
        edges::replace_in_block(f, b, load, there);
        // The blocks entered from this block alone that lose their first load read what it
        // really leaves.
        let (Some(left), Some(vn)) = (edges::compared(f, b), believed[b.index()]) else {
            continue;
        };
        for s in edges::successors(&f.block(b).term).collect::<Vec<_>>() {
            if entering.of_block(s) == [b] && first_load(f, s).is_some_and(|l| numbers.vn(l) == vn)
            {
                really_there[s.index()] = Some(left);
            }
        }
    }
}

/// An error libpcap's optimizer reports (and so `tcpdump` without `-O`): a constant it folds
/// would divide by zero or shift past the word. The messages are libpcap's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptimizerError {
    DivisionByZero,
    ModulusByZero,
    /// A shift of a value by a constant of 32 or more.
    ShiftTooFar,
}

impl std::fmt::Display for OptimizerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            OptimizerError::DivisionByZero => "division by zero",
            OptimizerError::ModulusByZero => "modulus by zero",
            OptimizerError::ShiftTooFar => "shift by more than 31 bits",
        })
    }
}

impl std::error::Error for OptimizerError {}

/// libpcap's two optimizer loops.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Value numbering without folding; branches are decided and edges threaded.
    MoveBranches,
    /// Constants folded into the statements; branches decided in place.
    FoldStatements,
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_ir::parse_function;

    fn run(text: &str) -> String {
        let mut f = parse_function(text).unwrap();
        apply(&mut f, false).unwrap();
        crate::reachable_from(f, Function::ENTRY).0.to_string()
    }

    /// The guard of `ip[1] & K != 0`: an IPv4 ethertype test that must stay.
    const GUARD: &str = "\
block0:
    v0 = load.h [12]
    v1 = const 0x800
    br eq v0, v1, block1, block2
block2:
    ret 0
";

    #[test]
    fn and_zero_drops_the_load() {
        let out = run(&format!(
            "{GUARD}\
block1:
    v2 = load.b [15]
    v3 = const 0
    v4 = and v2, v3
    br eq v4, v3, block3, block2
block3:
    ret 1
"
        ));
        assert!(!out.contains("[15]"), "{out}");
    }

    /// In a relation (`ip[1] & 0xffffffff != 0`) the `and` is folded into a `jset` only after
    /// branches stopped moving, so the branch stays (deciding nothing) and keeps its load: a
    /// packet too short for it is rejected.
    #[test]
    fn jset_all_ones_always_holds_but_keeps_its_load() {
        let out = run(&format!(
            "{GUARD}\
block1:
    v2 = load.b [15]
    v3 = const 0xffffffff
    v4 = and v2, v3
    v5 = const 0
    v6 = sub v4, v5
    v7 = const 0
    br eq v6, v7, block2, block3
block3:
    ret 1
"
        ));
        assert!(out.contains("load.b [15]"), "{out}");
        assert!(out.contains("br set v2, v3, block3, block3"), "{out}");
    }

    /// An equality relation compares the operands' difference with 0 until the first round
    /// ends, so that round does not decide `len = 60` on the edge where `len = 1000` held. It
    /// moves the other edge of that test past the always-false block, so both of its edges
    /// lead to `len = 60`, and so do block 1's: the load in block 1 goes. Deciding `len = 60`
    /// in the first round instead would keep block 1 and its load.
    #[test]
    fn equality_relation_compares_its_operands_only_after_the_first_round() {
        let out = run("\
block0:
    v0 = load.b [14]
    v1 = const 69
    br eq v0, v1, block1, block3
block1:
    v12 = load.b [20]
    v13 = const 6
    br eq v12, v13, block6, block3
block6:
    v2 = len
    v3 = const 1000
    v4 = sub v2, v3
    v5 = const 0
    br eq v4, v5, block3, block2
block2:
    v6 = const 1
    v7 = const 0
    br eq v6, v7, block4, block3
block3:
    v8 = len
    v9 = const 60
    v10 = sub v8, v9
    v11 = const 0
    br eq v10, v11, block4, block5
block4:
    ret 1
block5:
    ret 0
");
        assert!(!out.contains("[20]"), "{out}");
        assert!(out.contains("load.b [14]"), "{out}");
        assert!(out.contains("br eq v10, v11"), "{out}");
    }

    /// libpcap's peephole for `tcp[k]`: a constant index added to the header length becomes
    /// part of the load's offset (wrapping), but only when the constant is the `add`'s first
    /// operand (libpcap's accumulator: `ld #k; add x`).
    #[test]
    fn constant_index_folds_into_the_offset() {
        let load = |add: &str| {
            run(&format!(
                "\
block0:
    v0 = load.b [14]
    v1 = const 15
    v2 = and v0, v1
    v3 = const 2
    v4 = shl v2, v3
    v5 = const 0xfffffff1
    v6 = {add}
    v7 = load.h [v6+14]
    v8 = const 0
    br ge v7, v8, block1, block2
block1:
    ret 1
block2:
    ret 0
"
            ))
        };
        let folded = load("add v5, v4");
        assert!(folded.contains("load.h [v4+4294967295]"), "{folded}");
        let kept = load("add v4, v5");
        assert!(kept.contains("load.h [v6+14]"), "{kept}");
    }

    /// libpcap's first round turns each `and #k; jeq #0` into `jset #k` with its successors
    /// swapped after that round's edge facts were taken, so below the first test the second
    /// one is decided the wrong way: `ip6 src net 2001:db8::/126 and ip6[6] = 6 and ip6 src net
    /// 2001:db8::/126` rejects every packet in libpcap 1.10 (`tcpdump -d` says so).
    #[test]
    fn first_round_mask_tests_use_the_other_edges_facts() {
        let out = run("\
block0:
    v0 = load.w [20]
    v1 = const 0xfffffffc
    v2 = and v0, v1
    v3 = const 0
    br eq v2, v3, block1, block4
block1:
    v4 = load.b [6]
    v5 = const 6
    v6 = const 0
    v7 = sub v4, v5
    br eq v7, v6, block2, block4
block2:
    v8 = load.w [20]
    v9 = const 0xfffffffc
    v10 = and v8, v9
    v11 = const 0
    br eq v10, v11, block3, block4
block3:
    ret 1
block4:
    ret 0
");
        assert_eq!(out, "block0:\n    ret 0\n");
    }

    /// When the entry block decides nothing and leads to a return, nothing runs.
    #[test]
    fn undecided_root_leading_to_a_return_runs_nothing() {
        let out = run("\
block0:
    v0 = load.b [14]
    v1 = const 0xffffffff
    br set v0, v1, block1, block2
block1:
    ret 1
block2:
    ret 0
");
        assert_eq!(out, "block0:\n    ret 1\n");
    }

    /// `text` lowered for `linktype`, libpcap's optimizer applied by the emulation (not the
    /// statement model, which lowering prefers for filters this small).
    fn lower_text(text: &str, linktype: u32) -> Result<Function, crate::LowerError> {
        let expr = sift_syntax::parse(text).expect("parses");
        crate::statement_model::emulation_only(|| {
            crate::lower(expr.as_ref(), &crate::Options::new(linktype, 262_144))
        })
    }

    /// [`lower_text`] as IR text.
    fn lowered(text: &str, linktype: u32) -> String {
        lower_text(text, linktype).expect("lowers").to_string()
    }

    /// [`lower_text`], ready to run on packets.
    /// The bytes a string of hexadecimal digits spells.
    fn bytes(hex: &str) -> Vec<u8> {
        (0..hex.len() / 2)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex"))
            .collect()
    }

    fn interpreted(text: &str, linktype: u32) -> sift_ir::Interpreter {
        sift_ir::Interpreter::new(lower_text(text, linktype).expect("lowers")).expect("verifies")
    }

    /// The lowered filter's verdict on a packet given in hex, with its wire length.
    fn verdict(text: &str, linktype: u32, hex: &str, wire_len: u32) -> u32 {
        interpreted(text, linktype).run(&mut sift_ir::Cache::new(), &bytes(hex), wire_len)
    }

    /// `udp[22:2] & 0 = 17` folds to a decided branch that keeps only its `ldxb`; libpcap
    /// deletes that as a dead store but still believes X holds it, so the port tests after it
    /// skip their own `ldxb` and read X unset, 0 (libpcap 1.10: `ldh [x + 0]`, `ldh [x + 2]`
    /// with nothing setting X). `tests/libpcap_x_register.rs` checks such filters.
    #[test]
    fn a_deleted_index_load_leaves_x_unset_below() {
        let out = lowered("udp[22:2] & 0 = 17 or udp port 22", 228);
        assert!(!out.contains("load.b [0]") && !out.contains("shl"), "{out}");
        assert!(out.contains("+0]") && out.contains("+2]"), "{out}");
        // Also where the block below compares with a computed right side (`>= len`, whose
        // `tax` comes after the left side's load): libpcap 1.10 reads `ldh [x + 2]`, X unset.
        let out = lowered("udp[22:2] & 0 = 17 or udp[2:2] >= len", 228);
        assert!(!out.contains("load.b [0]") && out.contains("+2]"), "{out}");
        // Not where a block between puts something else into X: libpcap's `ld #0x11; mod x`
        // for `17 % ...` does, and the port tests below load their own `ldxb` again.
        // On the soak's packet, a UDP datagram to port 4321 with a 24-byte IPv4 header, libpcap
        // 1.10 accepts: it reads the port at the header length, not at X unset.
        let text = "not icmp || ip and udp[0x86dd] & 0 != 430573177 and -17 % 21 ^ ip[3:2] << 15 \
                    <= 255 and ip[6:2] & 0x1fff != 0 or port 4321";
        let hex = "00000002460000329a900000011106d2c0a80102c0a8010294040000ffff10e1001a\
                   0000b230e845b63e1c4f2169d4e17e4b091d2004";
        assert_eq!(verdict(text, 108, hex, 54), 262_144);
        // Without the fold the index is loaded as the filter means.
        let out = lowered("udp[22:2] & 1 = 17 or udp port 22", 228);
        assert!(out.contains("load.b [0]"), "{out}");
        // Nor when an operation comes between the load and the zero: libpcap keeps the `ldxb`.
        for text in [
            "-udp[22:2] * 0 = 17 or udp port 22",
            "(udp[22:2] + 1) & 0 = 17 or udp port 22",
        ] {
            let out = lowered(text, 228);
            assert!(out.contains("load.b [0]"), "{text}: {out}");
        }
    }

    /// The address tests join the TCP path, whose `tcp[14:4] & 0` lost its `ldxb` (X unset),
    /// and the UDP path, which loaded the header length; libpcap believes both left the same
    /// `ldxb` and deletes the port test's own, so on TCP it reads the ports at X = 0, the
    /// IPv4 header's first words (libpcap 1.10: `ldh [x + 14]` with no `ldxb` before it, and
    /// it accepts this TCP packet from port 80).
    #[test]
    fn a_join_reads_x_as_each_path_left_it() {
        let text = "(tcp[14:4] & 0 <= 2 or udp portrange 1256-2633) \
                    and not (net 192.168.0.0/16 || port 80)";
        let hex = "00000000000200000000000108004500002800000000400600000a0000010a000002\
                   005012340000000000000000500200000000000000";
        let packet = bytes(hex);
        let filter = interpreted(text, 1);
        assert_eq!(filter.run(&mut sift_ir::Cache::new(), &packet, 54), 262_144);
        // A UDP datagram from port 80 is rejected: on that path X holds the header length.
        let mut udp = packet.clone();
        udp[23] = 17;
        udp[36..38].copy_from_slice(&1300u16.to_be_bytes());
        assert_eq!(filter.run(&mut sift_ir::Cache::new(), &udp, 54), 0);
    }

    /// Below a decided `tcp[22:4] & 0` test that lost its `ldxb`, the payload load at a
    /// computed offset puts the offset into X (`tax`), but its inner load `tcp[12:1]` and the
    /// `add x` of the header length come first and read X unset: libpcap 1.10 reads `ldb [x +
    /// 26]`, `add x` and then `ld [x + 14]` with X = 0, so this packet, with "GET " at bytes
    /// 34-37 and 0x50 at byte 26, matches although it has no payload.
    #[test]
    fn reads_before_a_computed_offset_read_x_as_entered() {
        let text = "tcp[22:4] & 0 = 5 or tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420";
        let hex = "0000000000020000000000010800450000280000000040060000500000010a000002\
                   474554200000000000000000500200000000000000";
        let mut packet = bytes(hex);
        let filter = interpreted(text, 1);
        assert_eq!(filter.run(&mut sift_ir::Cache::new(), &packet, 54), 262_144);
        // With 0x0a at byte 26 the offset is 0: the IPv4 header's first word is not "GET ".
        packet[26] = 0x0a;
        assert_eq!(filter.run(&mut sift_ir::Cache::new(), &packet, 54), 0);
    }

    /// On LOOP the entry's tests are decided (`tcp[20] & 80 >= 6 and udp[7:1] == 53` and the
    /// `icmp` product, which folds to 0 but keeps its `ldxb` for the blocks below), so
    /// `opt_root` skips them and loses their statements, that `ldxb` with them: libpcap 1.10
    /// reads the last test's `tcp[13:4]` at `[x + 17]` with X unset.
    #[test]
    fn an_index_load_opt_root_skips_is_lost() {
        let text = "tcp[20] & 80 >= 6 and udp[7:1] == 53 or 1 << 8 >> 23 & icmp[20:4] * \
                    icmp[7] - 0x2 | 4 != 4 or tcp[13:4] ^ 0x86dd << 14 != 31";
        let out = lowered(text, 108);
        assert!(!out.contains("shl") && out.contains("+17]"), "{out}");
        // Also when a load at a computed offset follows that `ldxb` in the skipped block
        // (`ip[k + vrrp[12:4]:1]`): libpcap 1.10 reads the TCP flags at `[x + 13]`, X unset.
        let text = "ip[370904851 + vrrp[12:4]:1] & 0 == 93940035 || ip6 proto \\udp or \
                    tcp[tcpflags] & (tcp-syn|tcp-fin) != 0 and tcp";
        let out = lowered(text, 228);
        assert!(!out.contains("shl") && out.contains("+13]"), "{out}");
    }

    /// The address tests join the SCTP port path, which loaded the header length, and the
    /// other protocols, which never did; libpcap's beliefs about X differ there, but below,
    /// `tcp[20] & 0 = 69` loses its `ldxb` and the `tcp[20:1]` load after it reads X as each
    /// path left it: unset for TCP (libpcap 1.10: `ldb [x + 36]` with no `ldxb`), so on
    /// LINUX_SLL it compares the TCP source port's first byte, 4 here.
    #[test]
    fn a_join_of_different_beliefs_reads_x_as_each_path_left_it() {
        let text = "sctp portrange 7641-9851 || src or dst net 192.168.0.0/16 or \
                    tcp[20] & 0 = 69 or tcp[20:1] >= 4";
        let hex = "00000001000600000000000000000800450000280000000040060000\
                   0a0000010a000002040012340000000000000000500200000000000000";
        assert_eq!(verdict(text, 113, hex, 57), 262_144);
    }

    /// A decided `tcp[20:4] & 0` test loses its `ldxb` and the port load below reads X unset;
    /// with a zero libpcap computes (`0 * 7`) it folds a pass later and keeps the `ldxb`
    /// (libpcap 1.10 on LINUX_SLL: `ldxb 4*([16]&0xf)` in the decided block, then `ldh [x +
    /// 16]`), and the load reads the header length.
    #[test]
    fn a_computed_zero_on_the_right_keeps_the_index_load() {
        let out = lowered("(tcp[20:4] & 0 > 69 or tcp[0:2] >= len)", 113);
        assert!(!out.contains("shl"), "{out}");
        let out = lowered("(tcp[20:4] & 0 * 7 > 69 or tcp[0:2] >= len)", 113);
        assert!(out.contains("shl"), "{out}");
        // Unless libpcap already believes X holds it (`0 / tcp[1]` lost its `ldxb` above):
        // then it is a no-op and the port below reads X unset (libpcap 1.10 on NULL: `ldh [x
        // + 4]` with no `ldxb` in the program).
        let text = "not (0 / tcp[1] < 0 or (tcp[2:2] & 0 * 7 <= 0 and not tcp src portrange \
                    22-8080))";
        let out = lowered(text, 0);
        assert!(!out.contains("shl"), "{out}");
    }

    /// A decided `udp[0:2] & 0` test (the load at offset 0 from the header length) keeps its
    /// `ldxb` when the block both its edges reach is entered from it alone, but loses it when
    /// another path enters that block too, leaving something else in X (`udp[2:2] != 8080`):
    /// libpcap 1.10 then reads `ldh [x + 16]` with no `ldxb` in the program, X unset, and on
    /// this packet (IPv4 total length 63 at bytes 16-17, UDP destination port 65535) compares
    /// 63, not the port, with the wire length 77, and rejects.
    #[test]
    fn a_decided_load_at_the_header_length_loses_its_index_load_at_a_join() {
        let out = lowered("(udp[0:2] & 0 <= 0) and udp[2:2] >= len", 1);
        assert!(out.contains("shl"), "{out}");
        // Nor when the other path leaves the same header length (its load at offset 0 too).
        let out = lowered(
            "(udp[0:2] & 0 <= 0 or udp[0:2] != 8080) and udp[2:2] >= 5",
            1,
        );
        assert!(out.contains("shl"), "{out}");
        // Nor when the other paths write no X (`src net N`, or a check that only a constant
        // index makes look like one: `ip[1]` on LINUX_SLL2), or only the header length
        // (`0 & sctp[7]`): libpcap 1.10 keeps the `ldxb` in all three.
        for (text, linktype) in [
            (
                "(udp[0:2] & 0 = 2 and src net 10.0.0.0/24) or udp src portrange 80-8080",
                108,
            ),
            (
                "(tcp[0:2] & icmptype = 0 or 0 & sctp[7] > 0) and not tcp src and dst port 80",
                228,
            ),
            (
                "(icmp[0:4] & 0 = 69 and ip[1] > 6) or icmp[0:2] >= len",
                276,
            ),
        ] {
            let out = lowered(text, linktype);
            assert!(out.contains("shl"), "{text}: {out}");
        }
        let text = "(udp[0:2] & 0 <= 0 or udp[2:2] != 8080) and udp[2:2] >= len";
        let out = lowered(text, 1);
        assert!(!out.contains("shl"), "{out}");
        let hex = "001122334401001122334403080045b8003f491e00000011fe19c0a80102ac10050417c1ffff\
                   002b0000b03c491dd00377f7d2aabc2171119885fa0323673bd67ee2a054bea5a806ba6a3b060e";
        assert_eq!(verdict(text, 1, hex, 77), 0);
    }

    /// An arithmetic load at offset 0 (`tcp[0:2]`, gencode's `ld #0; ... add x; tax`) whose
    /// load the block above compared (`src port 123`) is found in the accumulator a pass late:
    /// libpcap 1.10 deletes all of `tcp[0:2] <= 53`'s statements (nothing below uses what they
    /// leave, and they leave A and X as they came) and tests the source port still in A, though
    /// X holds the packet length there (`tcp[0:2] = len` put it there). It accepts this TCP
    /// segment from port 21; reading the port at X would reject it.
    #[test]
    fn an_arithmetic_load_is_found_in_the_accumulator_a_pass_late() {
        let text = "(tcp[2:2] > 80 or tcp[0:2] = len) or (src port 123 or tcp[0:2] <= 53)";
        let hex = "0001000100080011223344010000080046b8005c473840008006e3ffc0a801010a000002\
                   0101010000150016ace2866a691b8c7b500457d3000000001355821ab4b4c65fde7f3096089c\
                   500e2f87fe3cbd77fc254903364be71c08b0db664a2617581fe267e9693b2efa1582";
        assert_eq!(verdict(text, 113, hex, 108), 262_144);
        // Lowering itself takes the statement model for a filter this small: the same verdict.
        let expr = sift_syntax::parse(text).expect("parses");
        let f = crate::lower(expr.as_ref(), &crate::Options::new(113, 262_144)).expect("lowers");
        let model = sift_ir::Interpreter::new(f).expect("verifies");
        assert_eq!(
            model.run(&mut sift_ir::Cache::new(), &bytes(hex), 108),
            262_144
        );
    }

    /// A decided `tcp[0:2] & icmptype` test keeps its `ldxb` only if a block below relies on
    /// it; the one below that would, `0 / tcp[7] < 6`, is entered from the other protocols too
    /// and lost its own `ldxb` to its zero on the left, so `tcp[2:2]` under it reads X as libpcap
    /// left it on the TCP path: unset (libpcap 1.10: no `ldxb` in the program, `ldh [x + 16]`),
    /// the IPv4 total length here, 68 < 1234, and libpcap accepts.
    #[test]
    fn a_folded_index_load_nothing_relies_on_is_lost() {
        let text = "(not not (tcp[0:2] & icmptype != 69 and not ip[8] > 32) or (0 / tcp[7] < 6 \
                    and tcp[2:2] < 1234))";
        let hex = "05dc22334402ffffffffffff0800450100449f74000040060f93c0a801030a0000011f90ffffe637\
                   2d3640c1e3c780bf622700000000020405b40103030304020101de7b601f6ba5e6fcb65c716ca50de4de";
        assert_eq!(verdict(text, 1, hex, 82), 262_144);
        // A zero libpcap computes (`0 * 7`) folds a pass later, when the read below already
        // relies on the `ldxb`: libpcap 1.10 keeps it (`ldxb 4*([16]&0xf)` in the decided
        // block) and the TCP flags below are read at the header length on that path.
        let text = "(tcp[2:1] & 0 * 7 = 2 and (tcp[((tcp[12:1] & 0xf0) >> 2):4] = 0x47455420 \
                    or udp dst portrange 123-8080)) or ((0 & udp[13] > 6 and ip[9] = 32) or \
                    tcp[13] & 18 != 0)";
        let out = lowered(text, 113);
        assert!(out.contains("shl"), "{out}");
    }

    /// `-0 * udp[14:2]` loses its `ldxb` to the zero on its left, and the rest of that block
    /// puts nothing else into X: `ip[5]` has a constant index (`ld #5; tax`, an absolute load
    /// once folded) and `0 | ip[5]` is `txa` after the zero. libpcap 1.10 has no `ldxb` in the
    /// program and reads the UDP source port at `[x + 0]`, X unset; with `0 - ip[5]` (a `sub x`)
    /// it loads the header length again.
    #[test]
    fn a_constant_index_and_an_or_after_a_zero_leave_x_alone() {
        for text in [
            "-0 * udp[14:2] | ip[5] > 80 && udp[0:2] != 6",
            "-0 * udp[14:2] + ip[5] > 80 && udp[0:2] != 6",
        ] {
            let out = lowered(text, 228);
            assert!(!out.contains("shl"), "{text}: {out}");
        }
        let out = lowered("-0 * udp[14:2] - ip[5] > 80 && udp[0:2] != 6", 228);
        assert!(out.contains("shl"), "{out}");
    }

    /// `tcp[0:2] < len` leaves the source port in the accumulator and the wire length in X
    /// (`ld #pktlen; tax` for `jge x`); the source port tests of the port range use the
    /// accumulator, and libpcap deletes their loads with their `ldxb`, still believing X
    /// holds the header length, so the destination port's `ldxb` is a no-op and libpcap 1.10
    /// reads `ldh [x + 16]` at the wire length plus 16. Here (wire length 22) that is the TCP
    /// sequence number's first bytes, 0, so it accepts a packet to port 3000, in the range.
    #[test]
    fn a_load_found_in_the_accumulator_takes_its_index_load_with_it() {
        let text = "tcp[0:2] < len and not tcp portrange 2393-5351";
        let hex = "00000000000200000000000108004500002e00000000400600000a0000010a000002\
                   00140bb800000000000000005002000000000000000000000000";
        let packet = bytes(hex);
        let filter = interpreted(text, 1);
        assert_eq!(filter.run(&mut sift_ir::Cache::new(), &packet, 22), 262_144);
        // At wire length 60 the port's load falls past the captured bytes.
        assert_eq!(filter.run(&mut sift_ir::Cache::new(), &packet, 60), 0);
    }

    /// After `tcp[2:2] < len` (a load at an offset from the header length) the destination
    /// port test finds its load in the accumulator, but libpcap keeps its `ldxb` (`ldxb
    /// 4*([20]&0xf); jeq #0x7b` in libpcap 1.10 on LINUX_SLL2), so the source port below is read
    /// at the header length, not at the wire length the `jge x` left in X: this packet from
    /// port 1234 matches.
    #[test]
    fn an_accumulator_load_after_one_at_an_offset_keeps_its_index_load() {
        let text = "(tcp[2:2] < len and ((tcp dst port 123 or tcp port 1234) or (udp dst port \
                    20 and tcp[7] = 6)))";
        let hex =
            "080000000000000200010206fd4923cca9f7000045b80044190e40008006f6e9e00000010a000003\
                   04d200509fc3af6f424fa48180115c6800000000020405b401030307040201019da9feb93bf3f796\
                   50d3b2a2ba4ac0ba";
        assert_eq!(verdict(text, 276, hex, 88), 262_144);
    }

    /// The source port test finds its load in the accumulator (`sctp[0:2] < len` compared
    /// it), but in libpcap's first loop the decided `0 / icmp[1] > 0` still entered it too, so
    /// libpcap keeps its `ldxb` (libpcap 1.10: `ldxb 4*([0]&0xf); jeq #0x16; ldh [x + 2]`):
    /// the destination port is read at the header length, not at the wire length.
    #[test]
    fn an_accumulator_load_joined_in_the_first_loop_keeps_its_index_load() {
        // SCTP from port 5 to port 22, 32 bytes captured of 100: libpcap 1.10 accepts.
        let text = "((sctp[0:2] < len or 0 / icmp[1] > 0) and not not port 22)";
        let hex = "4500002000000000408400000a0000010a000002000500160000000000000000";
        assert_eq!(verdict(text, 101, hex, 100), 262_144);
    }

    /// `udp[0:2] = 80` finds its load in the accumulator, but as arithmetic its `add x` reads
    /// the `ldxb` it follows, so libpcap keeps that (libpcap 1.10: `ldxb 4*([0]&0xf); jeq
    /// #0x50; ldh [x + 2]`) and reads the destination port at the header length: this UDP
    /// datagram to port 5, 28 bytes captured of 100, matches.
    #[test]
    fn an_arithmetic_load_in_the_accumulator_keeps_its_index_load() {
        let text = "udp[0:2] < len and not (udp[0:2] = 80) and udp dst port 5";
        let hex = "4500002000000000401100000a0000010a000002000a0005000c0000";
        assert_eq!(verdict(text, 101, hex, 100), 262_144);
    }

    /// `(0 / ether[1:1]) & -tcp[12:1] != 2` folds to a decided test whose `ldxb` libpcap keeps
    /// (the zero takes `-tcp[12:1]`, not the load; `ether[1:1]` is indexed by a constant on
    /// LINUX_SLL2, not by the header length), and the port tests below read X instead of
    /// loading it. libpcap 1.10 starts with `ldxb 4*([20]&0xf)`, which rejects a packet shorter
    /// than 21 bytes before any test: the byte load stays, and the ports are read at the real
    /// header length, not at an unset X.
    #[test]
    fn an_index_load_the_blocks_below_rely_on_stays() {
        let out = lowered("(0 / ether[1:1]) & -tcp[12:1] != 2 and tcp port 123", 276);
        let entry = out.split("block1:").next().expect("entry block");
        assert!(entry.contains("load.b [20]"), "{out}");
        assert!(out.contains("shl"), "{out}");
        // A 12-byte packet: rejected by the byte load, as libpcap's program does.
        let f = interpreted(
            "(0 / ether[1:1]) & -tcp[12:1] != 2 and not tcp port 123",
            276,
        );
        assert_eq!(f.run(&mut sift_ir::Cache::new(), &[0x08; 12], 60), 0);
    }

    /// On a raw IPv4 link the entry's test (`ld #0; jeq #0`) is decided and skipped, and so is
    /// the first address test once both its edges reach one block: that block's load of the
    /// source address, which libpcap dropped because the accumulator held it, goes with the
    /// skipped test's statements, and the block masks the entry's constant 0 instead (libpcap
    /// 1.10: `ld #0x0; and #0xffffff00; jeq #0xa000000`). The blocks entered from it alone
    /// inherit the loss.
    #[test]
    fn skipped_root_statements_take_the_accumulator_with_them() {
        let out = lowered(
            "ip src host 10.0.0.4 and ip src net 10.0.0.0/24 or 10.0.0.0/24",
            228,
        );
        assert!(!out.contains("load"), "{out}");
        assert!(out.contains("const 0xffffff00"), "{out}");
        // libpcap: `ld #0x0; jeq #0x86dd ...; jeq #0x800 ...`: both EtherType tests compare 0.
        let out = lowered(
            "ether[7:1] & 0 = 13 or ether[12:2] = 0x8100 and ip6 or ip6 || udp",
            1,
        );
        assert!(!out.contains("load.h [12]"), "{out}");
        assert!(
            out.contains("br eq v3, v13,") && out.contains("br eq v3, v17,"),
            "{out}"
        );
        // The wire length too (`ld #pktlen` is numbered and dropped like a load): libpcap 1.10
        // compiles this on raw IP to `ldb [0]; and #0xf0; jgt #0x64`.
        let out = lowered(
            "tcp and udp or (len = 64 or len <= 100) and len <= 100",
            101,
        );
        assert!(!out.contains(" = len"), "{out}");
        assert!(out.contains("const 240"), "{out}");
    }

    /// A pullup reads the first listed predecessor's edges as they are now: after the or
    /// pullup at `udp port 8080`'s source test moves its predecessors' edges to the destination
    /// test, the and pullup at the same block starts from the first predecessor's false edge,
    /// the accepting return, and moves nothing (found by a soak: sift pulled `dst >= 123` up
    /// to the predecessors' false edges, so a destination port of 1234 was no longer
    /// accepted by the first range).
    #[test]
    fn pullups_start_from_the_edges_as_an_earlier_pullup_left_them() {
        let filter = interpreted(
            "udp dst portrange 379-2006 or (udp port 8080 and udp dst portrange 123-8080)",
            228,
        );
        // IPv4 (20-byte header) and UDP from port 80 to port 1234.
        let mut packet = vec![0u8; 28];
        packet[0] = 0x45;
        packet[9] = 17;
        packet[20..22].copy_from_slice(&80u16.to_be_bytes());
        packet[22..24].copy_from_slice(&1234u16.to_be_bytes());
        let mut cache = sift_ir::Cache::new();
        assert_eq!(filter.run(&mut cache, &packet, 28), 262_144);
        packet[22..24].copy_from_slice(&100u16.to_be_bytes());
        assert_eq!(filter.run(&mut cache, &packet, 28), 0);
    }

    #[test]
    fn repeated_test_is_threaded_and_dead_branch_drops_its_load() {
        // ether[12:2] == 0x800 tested twice: the second test is decided on both edges, and the
        // block testing ether[20] leads to the same place either way.
        let out = run("\
block0:
    v0 = load.h [12]
    v1 = const 0x800
    br eq v0, v1, block1, block3
block1:
    v2 = load.b [20]
    v3 = const 6
    br eq v2, v3, block2, block2
block2:
    v4 = load.h [12]
    v5 = const 0x800
    br eq v4, v5, block4, block3
block3:
    ret 0
block4:
    ret 1
");
        assert_eq!(out.matches("load").count(), 1, "{out}");
    }

    /// `tcp[16:2] % 21 % 3` divides by `21 % 3`, which libpcap's second loop folds to 0 (its
    /// code for `%` is right-nested). A zero found in one pass fails in the next, so only where
    /// the block is still reached then: after `ip ||` it is, after `sctp and -17 * 53 < 031 ||`
    /// (decided in the same pass) it is not (libpcap 1.10 compiles that one).
    #[test]
    fn a_zero_divisor_fails_a_pass_after_it_is_found() {
        let lower = |text: &str| lower_text(text, 1);
        assert!(lower("ip || rarp net 10 and tcp[16:2] % 21 % 3 = 69").is_err());
        assert!(lower("sctp and -17 * 53 < 031 || rarp and tcp[16:2] % 21 % 3 = 69").is_ok());
        // A block that stays reached fails in the next pass.
        assert!(lower("tcp[0] % (1 - 1) = 0").is_err());
    }

    #[test]
    fn errors_match_libpcap() {
        let mut f = parse_function(
            "\
block0:
    v0 = load.b [14]
    v1 = const 40
    v2 = shl v0, v1
    br eq v2, v1, block1, block1
block1:
    ret 0
",
        )
        .unwrap();
        assert_eq!(
            apply(&mut f, false).unwrap_err(),
            OptimizerError::ShiftTooFar
        );
        // Also for a value libpcap knows to be 0 only a pass later (`len * 0` is `mul #0`
        // first): libpcap 1.10 reports the shift, sift used to shift the 0.
        for text in [
            "len * icmp-echoreply >> 31 ^ 2608671479 > 8",
            "link[4:4] * 0 << 0 - 13 != 3261824118",
            "(ip[2] * 0) * len << 0 - 1 = 0",
        ] {
            let err = lower_text(text, 1).expect_err(text);
            assert!(
                err.to_string().contains("shift by more than 31 bits"),
                "{text}: {err}"
            );
        }
        // Not for a zero on the left, which libpcap turns into `ld #0` at once.
        assert!(lower_text("0 * len >> 31 ^ 33 > 8", 1).is_ok());
        // Nor for a zero dividend over such a zero divisor: `mod x` becomes `ld #0` before X
        // is known (libpcap 1.10 accepts every packet), unlike a dividend that is not zero.
        assert!(lower_text("00 % ip[7:2] & 80 >> 28 < 0xff", 228).is_ok());
        let err = lower_text("5 % (ip[7:2] & 0) < 0xff", 228).expect_err("modulus by zero");
        assert!(err.to_string().contains("modulus by zero"), "{err}");
    }
}
