//! Jump threading and block merging.
//!
//! * A test whose targets are all the same edge is a jump; a `switch` without cases is a jump to
//!   its default, and one with a single case is an `eq` test.
//! * An edge to a block that computes nothing, has no parameters and only jumps on goes straight
//!   to that jump's target (its arguments are defined in blocks dominating the skipped block,
//!   hence available where the edge starts). A jump to a block that only returns a constant
//!   becomes that return.
//! * A block ending in a jump to a block with no other incoming edge absorbs it (its parameters
//!   become the jump's arguments).
//!
//! Unreachable blocks are removed at the end.

use sift_ir::{CmpOp, Function, Inst, Terminator};

use crate::cfg::Analysis;
use crate::rewrite::Replacements;

/// Longest chain of jump-only blocks followed from one edge (chains are acyclic; the bound only
/// keeps a run linear).
const MAX_FORWARD: usize = 64;

/// Runs the pass; returns the number of rewrites.
pub fn run(f: &mut Function) -> usize {
    run_with(f, &mut Analysis::new())
}

/// [`run`], with the control-flow facts kept between passes.
pub fn run_with(f: &mut Function, analysis: &mut Analysis) -> usize {
    analysis.remove_unreachable(f);
    let mut changes = 0;
    let cfg = analysis.take(f);
    // Successors first, and each terminator simplified after its edges are forwarded: a test
    // whose arms both reach one block through empty blocks becomes a jump, which the blocks
    // before it then skip in the same run. (In reverse postorder, a chain of such tests took one
    // optimizer round per link.)
    for &b in cfg.rpo.iter().rev() {
        let mut term = std::mem::take(&mut f.block_mut(b).term);
        for t in crate::cfg::targets_mut(&mut term) {
            let mut hops = 0;
            while hops < MAX_FORWARD {
                let s = f.block(t.block);
                if t.block == b || !s.insts.is_empty() || !s.params.is_empty() {
                    break;
                }
                match &s.term {
                    Terminator::Jump(n) => {
                        *t = n.clone();
                        hops += 1;
                    }
                    _ => break,
                }
            }
            changes += usize::from(hops > 0);
        }
        let (mut term, c) = simplify_terminator(f, b, term);
        changes += c;
        if let Terminator::Jump(t) = &term {
            let s = f.block(t.block);
            if let (Terminator::Return(k), true) = (&s.term, s.insts.is_empty()) {
                term = Terminator::Return(*k);
                changes += 1;
            }
        }
        f.block_mut(b).term = term;
    }
    if changes == 0 {
        // Nothing moved: the facts taken above still hold.
        analysis.restore(cfg);
    }
    let merged = merge_blocks(f, analysis);
    analysis.remove_unreachable(f);
    changes + merged
}

fn simplify_terminator(
    f: &mut Function,
    b: sift_ir::Block,
    term: Terminator,
) -> (Terminator, usize) {
    match term {
        Terminator::Branch { then_, else_, .. } if then_ == else_ => (Terminator::Jump(then_), 1),
        Terminator::Switch {
            value,
            mut cases,
            default,
        } => {
            if cases.iter().all(|(_, t)| *t == default) {
                return (Terminator::Jump(default), 1);
            }
            if cases.len() == 1 {
                let (k, then_) = cases.pop().expect("one case");
                let rhs = f.push(b, Inst::Const(k));
                return (
                    Terminator::Branch {
                        op: CmpOp::Eq,
                        lhs: value,
                        rhs,
                        then_,
                        else_: default,
                    },
                    1,
                );
            }
            (
                Terminator::Switch {
                    value,
                    cases,
                    default,
                },
                0,
            )
        }
        other => (other, 0),
    }
}

/// Merges each block ending in a jump with its target when it is the target's only predecessor.
fn merge_blocks(f: &mut Function, analysis: &mut Analysis) -> usize {
    let cfg = analysis.take(f);
    let incoming = &cfg.incoming;
    let mut repl = Replacements::new(f);
    let mut absorbed = vec![false; f.blocks.len()];
    let mut merged = 0;
    for &b in &cfg.rpo {
        if absorbed[b.index()] {
            continue;
        }
        while let Terminator::Jump(t) = &f.block(b).term {
            let s = t.block;
            if s == b || s == Function::ENTRY || incoming[s.index()] != 1 {
                break;
            }
            let args = t.args.clone();
            let params = std::mem::take(&mut f.block_mut(s).params);
            for (p, a) in params.into_iter().zip(args) {
                repl.replace(p, a);
            }
            let mut insts = std::mem::take(&mut f.block_mut(s).insts);
            let term = std::mem::replace(&mut f.block_mut(s).term, Terminator::Return(0));
            f.block_mut(b).insts.append(&mut insts);
            f.block_mut(b).term = term;
            absorbed[s.index()] = true;
            merged += 1;
        }
    }
    repl.apply(f);
    if merged == 0 {
        analysis.restore(cfg);
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::assert_same_semantics;
    use sift_ir::parse_function;

    fn threaded(text: &str) -> Function {
        let mut f = parse_function(text).unwrap();
        let orig = f.clone();
        run(&mut f);
        sift_ir::verify(&f).unwrap_or_else(|e| panic!("{e}\n{f}"));
        assert_same_semantics(&orig, &f);
        f
    }

    #[test]
    fn empty_jump_blocks_are_bypassed() {
        let f = threaded(
            "block0:\n v0 = load.b [0]\n v1 = const 1\n br eq v0, v1, block1, block2\nblock1:\n jump block3\nblock2:\n v2 = load.b [1]\n br eq v2, v1, block1, block4\nblock3:\n ret 7\nblock4:\n ret 0\n",
        );
        assert!(!f.to_string().contains("jump"), "{f}");
    }

    #[test]
    fn same_targets_and_chains_merge() {
        let f = threaded(
            "block0:\n v0 = load.b [0]\n v1 = const 1\n br eq v0, v1, block1, block1\nblock1:\n v2 = load.b [1]\n jump block2(v2)\nblock2(v3):\n ret v3\n",
        );
        assert_eq!(f.blocks.len(), 1, "{f}");
    }

    #[test]
    fn one_case_switch_is_a_test() {
        let f = threaded(
            "block0:\n v0 = load.b [0]\n switch v0, default block2, 5: block1\nblock1:\n ret 1\nblock2:\n ret 0\n",
        );
        assert!(f.to_string().contains("br eq"), "{f}");
    }
}
