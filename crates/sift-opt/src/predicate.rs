//! Redundant predicate elimination (BPF+ §6.1): predicate assertion propagation over edge
//! dominators and static predicate prediction.
//!
//! Every edge leaving a comparison asserts its outcome (`x == 5` on the true edge, `x != 5` on
//! the false edge; `switch` edges assert `x == key` or `x` is none of the keys). An edge
//! dominates a block when every path to the block takes it. In an acyclic graph the edges that
//! dominate block `B` are those dominating its immediate dominator, plus `B`'s incoming edge when
//! it has exactly one. So walking the dominator tree, pushing the single incoming edge's
//! assertion on entry and popping it on exit, keeps exactly the assertions that hold on every path
//! to the current block (the `assertion(E)` sets of the paper) in a scoped [`Facts`] base.
//!
//! With those facts, for each block `P`:
//!
//! * if they decide `P`'s own test, the test becomes a jump;
//! * for each edge `P -> S` (facts of `P` plus the edge's assertion), while `S` is a block with
//!   no instructions and no parameters whose test (or jump) the facts decide, the edge is moved to
//!   `S`'s chosen successor ("static predicate prediction"). Skipping `S` is safe because it
//!   computes nothing (no load can reject there, no value defined there is used later) and the
//!   values its test and outgoing arguments read are defined in blocks dominating `S`, hence
//!   dominating `P` or in `P` itself.
//!
//! Moving edges never changes which packets reach a block that stays reachable (it only removes
//! skipped blocks from some paths), so facts computed before a move stay true after it and the
//! pass can finish its walk on the original dominator tree. It does not duplicate blocks, so a
//! test inside a block that also loads is only decided for all paths at once.
//!
//! The work is bounded: at most [`hop_budget`] block skips per run, each a constant-time query,
//! so a run is linear in the function. The pipeline repeats it with value numbering to a fixed
//! point under a round limit.

use sift_ir::{CmpOp, Function, Target, Terminator, Value};

use crate::cfg::{Analysis, Visit};
use crate::facts::Facts;
use crate::range;

/// An edge's assertion.
#[derive(Clone, Debug)]
enum Assertion {
    Const(Value, CmpOp, u32, bool),
    Pair(Value, CmpOp, Value, bool),
    /// A switch default edge: the value is none of these keys.
    NoneOf(Value, Vec<u32>),
}

/// Block skips allowed per run: a multiple of the function size.
pub fn hop_budget(f: &Function) -> usize {
    16 * f.blocks.len() + 1024
}

/// Runs the pass; returns the number of edges moved or tests removed.
pub fn run(f: &mut Function) -> usize {
    run_with(f, &mut Analysis::new())
}

/// [`run`], with the control-flow facts kept between passes.
pub fn run_with(f: &mut Function, analysis: &mut Analysis) -> usize {
    analysis.remove_unreachable(f);
    let cfg = analysis.take(f);
    let ranges = range::compute_over(f, &cfg.rpo);
    // The assertion entering each block through its only incoming edge, from the terminators
    // as they are before this run changes any of them.
    let mut entry: Vec<Option<Assertion>> = vec![None; f.blocks.len()];
    // The inequalities `x != k` the walk may record: at most one per test, and one per key of
    // a `switch` (on its default edge).
    let mut inequalities = 0;
    // How many tests read each value (deciding a test turns it into a jump, so this stays an
    // upper bound through the run).
    let mut tested = vec![0u32; f.values.len()];
    for &p in &cfg.rpo {
        let term = &f.block(p).term;
        for_each_compared(term, |v| tested[v.index()] += 1);
        for (i, t) in crate::cfg::targets(term).enumerate() {
            if cfg.incoming[t.block.index()] == 1 {
                entry[t.block.index()] = edge_assertion(f, term, i);
            }
        }
        inequalities += match term {
            Terminator::Branch { .. } => 1,
            Terminator::Switch { cases, .. } => cases.len(),
            _ => 0,
        };
    }
    let mut facts = Facts::new(&ranges);
    facts.reserve_ne(inequalities);
    let mut marks: Vec<usize> = Vec::new();
    let mut budget = hop_budget(f);
    let mut changes = 0;
    // The edges of the current block that move, and where to.
    let mut moved: Vec<(usize, Target)> = Vec::new();
    // The dominator tree's depth-first walk read backwards: a depth-first walk that takes each
    // block's children last first, where an `Exit` event enters the block and an `Enter` event
    // leaves it. A block's edges move when it is left: by then the blocks it dominates (in a
    // chain of tests, the rest of the chain) have moved theirs, and a walk through a skipped
    // block takes that block's moved edge instead of stepping again through what it skipped.
    // Front to back, each edge of a chain stepped through the rest of it: quadratic, and cut
    // short by the budget.
    for &visit in cfg.dom_walk().iter().rev() {
        let b = match visit {
            Visit::Exit(b) => {
                marks.push(facts.mark());
                if let Some(a) = &entry[b.index()] {
                    assume(&mut facts, a, &tested);
                }
                if let Some(t) = decide(f, &facts, &f.block(b).term).cloned() {
                    f.set_term(b, Terminator::Jump(t));
                    changes += 1;
                }
                continue;
            }
            Visit::Enter(b) => b,
        };
        let term = &f.block(b).term;
        // Whether `b`'s edges make assertions. A test the walk decided on entering `b` is a
        // jump now, whose edge no longer asserts what its target was entered with.
        let edges_assert = !matches!(term, Terminator::Jump(_));
        moved.clear();
        for (i, start) in crate::cfg::targets(term).enumerate() {
            let m = facts.mark();
            // A successor entered only through this edge, with the assertion this edge still
            // makes, had its test tried with exactly these facts when the walk entered it (its
            // immediate dominator is `b`). Had they decided it, it would be a jump now; so
            // deciding it again here, the first step, cannot succeed. (In a chain of tests this
            // was every other assertion and decision of the pass.)
            let mut tried_on_entry = cfg.incoming[start.block.index()] == 1
                && entry[start.block.index()].is_some() == edges_assert;
            // The edge's assertion is only needed to decide a skipped block's test: most edges
            // lead to a block that computes or returns, where nothing is decided.
            let mut assumed = false;
            let mut t = start;
            while budget > 0 {
                let s = f.block(t.block);
                if !s.insts.is_empty() || !s.params.is_empty() || t.block == b {
                    break;
                }
                let next = match &s.term {
                    Terminator::Jump(n) => n,
                    Terminator::Branch { .. } | Terminator::Switch { .. } if tried_on_entry => {
                        break
                    }
                    other @ (Terminator::Branch { .. } | Terminator::Switch { .. }) => {
                        if !assumed {
                            assumed = true;
                            if let Some(a) = edge_assertion(f, term, i) {
                                assume(&mut facts, &a, &tested);
                            }
                        }
                        match decide(f, &facts, other) {
                            Some(n) => n,
                            None => break,
                        }
                    }
                    _ => break,
                };
                budget -= 1;
                t = next;
                tried_on_entry = false;
            }
            if assumed {
                facts.undo_to(m);
            }
            if t != start {
                moved.push((i, t.clone()));
                changes += 1;
            }
        }
        if !moved.is_empty() {
            let mut next = moved.drain(..).peekable();
            for (i, slot) in crate::cfg::targets_mut(&mut f.block_mut(b).term).enumerate() {
                if let Some((_, t)) = next.next_if(|(j, _)| *j == i) {
                    *slot = t;
                }
            }
        }
        if let Some(m) = marks.pop() {
            facts.undo_to(m);
        }
    }
    if changes == 0 {
        analysis.restore(cfg);
    }
    analysis.remove_unreachable(f);
    changes
}

/// Calls `visit` with each value `term` compares (not its edges' arguments).
fn for_each_compared(term: &Terminator, mut visit: impl FnMut(Value)) {
    match term {
        Terminator::Branch { lhs, rhs, .. } => {
            visit(*lhs);
            visit(*rhs);
        }
        Terminator::Switch { value, .. } => visit(*value),
        _ => {}
    }
}

/// Whether a test other than the one making assertion `a` reads one of its values.
fn observable(a: &Assertion, tested: &[u32]) -> bool {
    match a {
        Assertion::Const(x, ..) | Assertion::NoneOf(x, _) => tested[x.index()] > 1,
        Assertion::Pair(x, _, y, _) => tested[x.index()] > 1 || tested[y.index()] > 1,
    }
}

/// The assertion that holds on the `i`th edge of `term`.
fn edge_assertion(f: &Function, term: &Terminator, i: usize) -> Option<Assertion> {
    match term {
        Terminator::Branch { op, lhs, rhs, .. } => {
            let outcome = i == 0;
            Some(match (f.const_value(*lhs), f.const_value(*rhs)) {
                (_, Some(k)) => Assertion::Const(*lhs, *op, k, outcome),
                (Some(k), None) => Assertion::Const(*rhs, crate::facts::mirror_op(*op), k, outcome),
                (None, None) => Assertion::Pair(*lhs, *op, *rhs, outcome),
            })
        }
        Terminator::Switch { value, cases, .. } => Some(match cases.get(i) {
            Some((k, _)) => Assertion::Const(*value, CmpOp::Eq, *k, true),
            None => Assertion::NoneOf(*value, cases.iter().map(|(k, _)| *k).collect()),
        }),
        _ => None,
    }
}

/// Adds assertion `a` to `facts`, unless no test but the one making it reads its values (`tested`:
/// how many tests read each value): facts are only ever asked about the values tests compare,
/// so it could not decide anything. (A lookup table's default edge asserts a thousand
/// inequalities about a value nothing else tests.)
fn assume(facts: &mut Facts, a: &Assertion, tested: &[u32]) {
    if !observable(a, tested) {
        return;
    }
    match a {
        Assertion::Const(x, op, k, outcome) => facts.assume_const(*x, *op, *k, *outcome),
        Assertion::Pair(a, op, b, outcome) => facts.assume_pair(*a, *op, *b, *outcome),
        Assertion::NoneOf(x, keys) => {
            for &k in keys {
                facts.assume_const(*x, CmpOp::Eq, k, false);
            }
        }
    }
}

/// Switches with more keys than this are only decided on a known-constant value (checking every
/// key against the facts would make long chains quadratic).
const SWITCH_SCAN_LIMIT: usize = 64;

/// The target `term` must take given `facts`, if they decide it.
fn decide<'t>(f: &Function, facts: &Facts, term: &'t Terminator) -> Option<&'t Target> {
    match term {
        Terminator::Branch {
            op,
            lhs,
            rhs,
            then_,
            else_,
        } => {
            let outcome = match (f.const_value(*lhs), f.const_value(*rhs)) {
                (_, Some(k)) => facts.decide_const(*lhs, *op, k),
                (Some(k), None) => facts.decide_const(*rhs, crate::facts::mirror_op(*op), k),
                (None, None) => facts.decide_pair(*lhs, *op, *rhs),
            }?;
            Some(if outcome { then_ } else { else_ })
        }
        Terminator::Switch {
            value,
            cases,
            default,
        } => {
            for (k, t) in cases.iter() {
                if facts.decide_const(*value, CmpOp::Eq, *k) == Some(true) {
                    return Some(t);
                }
                if cases.len() > SWITCH_SCAN_LIMIT {
                    break;
                }
            }
            if cases.len() <= SWITCH_SCAN_LIMIT
                && cases
                    .iter()
                    .all(|(k, _)| facts.decide_const(*value, CmpOp::Eq, *k) == Some(false))
            {
                return Some(default);
            }
            None
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::assert_same_semantics;
    use sift_ir::parse_function;

    fn eliminated(text: &str) -> Function {
        let mut f = parse_function(text).unwrap();
        let orig = f.clone();
        crate::gvn::run(&mut f);
        run(&mut f);
        sift_ir::verify(&f).unwrap_or_else(|e| panic!("{e}\n{f}"));
        assert_same_semantics(&orig, &f);
        f
    }

    /// BPF+ Figure 2: `(src host X and dst host Y) or (src host Y and dst host X)`. After
    /// `dst host Y` fails, the source is known to be X, so `src host Y` is skipped.
    #[test]
    fn paper_figure_two() {
        let f = eliminated(
            "block0:
    v0 = load.w [26]
    v1 = const 10
    br eq v0, v1, block1, block2
block1:
    v2 = load.w [30]
    v3 = const 20
    br eq v2, v3, block5, block2
block2:
    v4 = load.w [26]
    v5 = const 20
    br eq v4, v5, block3, block4
block3:
    v6 = load.w [30]
    v7 = const 10
    br eq v6, v7, block5, block4
block4:
    ret 0
block5:
    ret 1
",
        );
        // block1's false edge now goes straight to the reject.
        let b1 = f.block(sift_ir::Block(1));
        if let Terminator::Branch { else_, .. } = &b1.term {
            assert_eq!(f.block(else_.block).term, Terminator::Return(0), "{f}");
        } else {
            panic!("{f}");
        }
    }

    /// `tcp port 80`-style redundancy: the ethertype test repeated after a disjunction.
    #[test]
    fn repeated_ethertype_tests_are_skipped() {
        let f = eliminated(
            "block0:
    v0 = load.h [12]
    v1 = const 0x800
    br eq v0, v1, block1, block2
block1:
    v2 = load.b [23]
    v3 = const 6
    br eq v2, v3, block5, block2
block2:
    v4 = load.h [12]
    v5 = const 0x800
    br eq v4, v5, block3, block4
block3:
    v6 = load.b [23]
    v7 = const 17
    br eq v6, v7, block5, block4
block4:
    ret 0
block5:
    ret 1
",
        );
        // Only one ethertype test remains; the non-IPv4 path rejects at once.
        assert_eq!(f.to_string().matches("0x800").count(), 1, "{f}");
        assert_eq!(f.to_string().matches("br ").count(), 3, "{f}");
    }

    /// A chain of `ip and tcp and port k` terms whose operands are all computed up front: an
    /// IPv4 packet that is not TCP, failing any term, is rejected, and each term's "not TCP"
    /// edge goes straight to the reject in one run. Walked front to back, each of those edges
    /// stepped through every later term (quadratic, and the budget ran out at this length).
    #[test]
    fn every_edge_of_a_long_chain_moves_in_one_run() {
        const TERMS: usize = 300;
        let mut text = String::from(
            "block0:\n    v0 = load.h [12]\n    v1 = load.b [23]\n    v2 = load.h [36]\n    \
             v3 = const 0x800\n    v4 = const 6\n",
        );
        for i in 0..TERMS {
            text += &format!("    v{} = const {}\n", 5 + i, 1000 + i);
        }
        text += "    jump block1\n";
        let (reject, accept) = (3 * TERMS + 1, 3 * TERMS + 2);
        for i in 0..TERMS {
            let (ether, proto, port, next) = (3 * i + 1, 3 * i + 2, 3 * i + 3, 3 * i + 4);
            let next = if i + 1 == TERMS { reject } else { next };
            text += &format!(
                "block{ether}:\n    br eq v0, v3, block{proto}, block{next}\n\
                 block{proto}:\n    br eq v1, v4, block{port}, block{next}\n\
                 block{port}:\n    br eq v2, v{}, block{accept}, block{next}\n",
                5 + i
            );
        }
        text += &format!("block{reject}:\n    ret 0\nblock{accept}:\n    ret 1\n");
        let mut f = parse_function(&text).unwrap();
        let orig = f.clone();
        run(&mut f);
        sift_ir::verify(&f).unwrap_or_else(|e| panic!("{e}\n{f}"));
        assert_same_semantics(&orig, &f);
        // What each test compares with, for the reachable blocks.
        let compared = |b: sift_ir::Block| match &f.block(b).term {
            Terminator::Branch { rhs, .. } => f.const_value(*rhs),
            _ => None,
        };
        let is_port = |k: Option<u32>| k.is_some_and(|k| (1000..1000 + TERMS as u32).contains(&k));
        let mut ports = 0;
        for b in f.reverse_postorder() {
            let Terminator::Branch { else_, .. } = &f.block(b).term else {
                continue;
            };
            let next = compared(else_.block);
            match compared(b) {
                // Not TCP: rejected at once.
                Some(6) => assert_eq!(f.block(else_.block).term, Terminator::Return(0), "{f}"),
                // Another port: straight to the next port test.
                k if is_port(k) => {
                    ports += 1;
                    let last = k == Some(999 + TERMS as u32);
                    assert!(last || is_port(next), "{b:?} goes on to {next:?}\n{f}");
                }
                _ => {}
            }
        }
        assert_eq!(ports, TERMS);
    }

    #[test]
    fn ranges_and_masks_decide() {
        let f = eliminated(
            "block0:
    v0 = load.h [20]
    v1 = const 0x1fff
    br set v0, v1, block3, block1
block1:
    v2 = const 0x100
    br set v0, v2, block3, block2
block2:
    ret 1
block3:
    ret 0
",
        );
        assert_eq!(f.to_string().matches("br ").count(), 1, "{f}");
    }
}
