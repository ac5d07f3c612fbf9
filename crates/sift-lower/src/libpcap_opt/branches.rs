//! Branches in libpcap's form, its `jset` peephole, and branches decided whatever the packet.

use sift_ir::{BinOp, Block, CmpOp, Function, Inst, Terminator, Value};

use super::numbering::Numbering;

/// `(x & k) == 0` (and `!=`) becomes `jset #k` when the `and` is the block's last computation
/// and nothing else uses it — libpcap's peephole, after which `jset #0xffffffff` always holds.
/// This is the second loop's, for `and`s whose mask became a constant by folding.
///
/// `reachable` lists the blocks reachable from the entry (in any order).
pub(super) fn jset_peephole(f: &mut Function, numbers: &Numbering, reachable: &[Block]) -> bool {
    let tests = mask_tests(f, numbers, reachable);
    for t in &tests {
        if let Terminator::Branch {
            op,
            lhs,
            rhs,
            then_,
            else_,
        } = &mut f.block_mut(t.block).term
        {
            (*op, *lhs, *rhs) = (CmpOp::Set, t.masked, t.mask);
            if t.equal {
                std::mem::swap(then_, else_);
            }
        }
    }
    !tests.is_empty()
}

/// The same peephole in the first round, on the mask tests libpcap generates (`gen_mcmp`:
/// `and #k; jeq #0`), with the edge facts libpcap gets wrong. Its peephole swaps the branch's
/// successors after the round's edge dominators were computed, so the facts that round uses
/// below each edge are those of the other edge (`src net N/126 and ip6 src net N/126` rejects
/// every packet). Rewrites each such test to `jset #k` on the `and`, with the successors still
/// in their old places, so that facts computed now are the stale ones; [`swap_mask_tests`]
/// then puts the successors right, and [`unmask`] at the end of the round tests the masked
/// value itself (libpcap deleted the `and`). Returns the rewritten blocks and masked values.
pub(super) fn first_round_jset_peephole(
    f: &mut Function,
    numbers: &Numbering,
    reachable: &[Block],
) -> Vec<(Block, Value)> {
    let tests = mask_tests(f, numbers, reachable);
    for t in &tests {
        if let Terminator::Branch {
            op,
            rhs,
            then_,
            else_,
            ..
        } = &mut f.block_mut(t.block).term
        {
            (*op, *rhs) = (CmpOp::Set, t.mask);
            // libpcap's `jeq #0` edges: jt where the masked value is 0.
            if !t.equal {
                std::mem::swap(then_, else_);
            }
        }
    }
    tests.iter().map(|t| (t.block, t.masked)).collect()
}

/// Puts the successors of [`first_round_jset_peephole`]'s tests right.
pub(super) fn swap_mask_tests(f: &mut Function, tests: &[(Block, Value)]) {
    for &(b, _) in tests {
        if let Terminator::Branch { then_, else_, .. } = &mut f.block_mut(b).term {
            std::mem::swap(then_, else_);
        }
    }
}

/// The tests of [`first_round_jset_peephole`] test the masked value, not the `and`.
pub(super) fn unmask(f: &mut Function, tests: &[(Block, Value)]) {
    for &(b, masked) in tests {
        if let Terminator::Branch {
            op: CmpOp::Set,
            lhs,
            ..
        } = &mut f.block_mut(b).term
        {
            *lhs = masked;
        }
    }
}

/// A branch `(masked & mask) == 0` (`equal`) or `!= 0` that libpcap's peephole turns into
/// `jset`.
struct MaskTest {
    block: Block,
    masked: Value,
    mask: Value,
    equal: bool,
}

fn mask_tests(f: &Function, numbers: &Numbering, reachable: &[Block]) -> Vec<MaskTest> {
    zero_tests(f, numbers, reachable, BinOp::And)
        .into_iter()
        .filter(|t| numbers.konst(t.y).is_some() && numbers.konst(t.x).is_none())
        .map(|t| MaskTest {
            block: t.block,
            masked: t.x,
            mask: t.y,
            equal: t.op == CmpOp::Eq,
        })
        .collect()
}

/// A branch `(x op y) == 0` (or `!= 0`, `op` in `eq` and `ne`).
struct ZeroTest {
    block: Block,
    op: CmpOp,
    /// The operation's value.
    tested: Value,
    x: Value,
    y: Value,
}

/// The branches comparing with 0 an `operation` that is their block's last computation and
/// that nothing else uses: the shape of libpcap's `jeq #0` peepholes, which need the
/// accumulator unused on exit.
fn zero_tests(
    f: &Function,
    numbers: &Numbering,
    reachable: &[Block],
    operation: BinOp,
) -> Vec<ZeroTest> {
    let mut tests = Vec::new();
    for &b in reachable {
        let Terminator::Branch {
            op: op @ (CmpOp::Eq | CmpOp::Ne),
            lhs,
            rhs,
            ..
        } = f.block(b).term
        else {
            continue;
        };
        // The constant first: most branches compare with another constant, and the table of
        // known constants is a third the size of the instructions (read at random either way).
        if numbers.konst(rhs) != Some(0) {
            continue;
        }
        let Inst::Binary(found, x, y) = *f.inst(lhs) else {
            continue;
        };
        if found != operation || last_computation(f, b) != Some(lhs) {
            continue;
        }
        tests.push(ZeroTest {
            block: b,
            op,
            tested: lhs,
            x,
            y,
        });
    }
    // Counting uses reads every instruction of the function, reachable or not: only when a
    // branch has the shape.
    if !tests.is_empty() {
        let uses = f.use_counts();
        tests.retain(|t| uses[t.tested.index()] == 1);
    }
    tests
}

/// libpcap tests an equality relation (`len = 60`, `ip[0] = ip[1]`) as `sub x; jeq #0`, and
/// its first round's peephole turns that into `jeq x` (or `jeq #k` when x is the constant k)
/// on the first operand. Until then the branch tests the difference, which no other block
/// tests: that round's edge facts and decisions see `(a - b) == 0`, and only the next round
/// sees `a == b` (so `len != 1000 and ... or len = 60` is not threaded on `len`'s constant in
/// the first round). Called once, at the end of the first round; `reachable` lists the
/// blocks reachable from the entry.
pub(super) fn relation_peephole(
    f: &mut Function,
    numbers: &Numbering,
    reachable: &[Block],
) -> bool {
    let tests = zero_tests(f, numbers, reachable, BinOp::Sub);
    let mut changed = false;
    for t in tests.iter().filter(|t| t.op == CmpOp::Eq) {
        if let Terminator::Branch { lhs, rhs, .. } = &mut f.block_mut(t.block).term {
            (*lhs, *rhs) = (t.x, t.y);
            changed = true;
        }
    }
    changed
}

/// The last instruction of `b` that computes something (constants are operands, not
/// computations, in libpcap's code).
fn last_computation(f: &Function, b: Block) -> Option<Value> {
    f.block(b)
        .insts
        .iter()
        .rev()
        .find(|&&v| !matches!(f.inst(v), Inst::Const(_)))
        .copied()
}

/// The branches decided whatever the packet: constant operands, `jset #0` and
/// `jset #0xffffffff`. Like libpcap, a decided branch keeps its operands (and so its loads) and
/// sends both edges to the decided successor; edges into it are threaded past it later, and an
/// entry block is handled by `skip_undecided_root` (libpcap's `opt_root`).
///
/// `reachable` lists the blocks reachable from the entry (in any order).
pub(super) fn decide_branches(f: &mut Function, numbers: &Numbering, reachable: &[Block]) -> bool {
    set_outcomes(f, &branches_to_decide(f, numbers, reachable))
}

/// Sends both edges of each branch of `decided` (from [`branches_to_decide`]) to the
/// successor of its outcome; returns whether there was any.
pub(super) fn set_outcomes(f: &mut Function, decided: &[(Block, bool)]) -> bool {
    for &(b, holds) in decided {
        if let Terminator::Branch { then_, else_, .. } = &mut f.block_mut(b).term {
            if holds {
                *else_ = then_.clone();
            } else {
                *then_ = else_.clone();
            }
        }
    }
    !decided.is_empty()
}

/// The branches [`decide_branches`] would change, with their outcomes, without changing them.
pub(super) fn branches_to_decide(
    f: &Function,
    numbers: &Numbering,
    reachable: &[Block],
) -> Vec<(Block, bool)> {
    let mut decided = Vec::new();
    for &b in reachable {
        let Terminator::Branch {
            op,
            lhs,
            rhs,
            ref then_,
            ref else_,
        } = f.block(b).term
        else {
            continue;
        };
        if then_ == else_ {
            continue;
        }
        let outcome = match (op, numbers.konst(lhs), numbers.konst(rhs)) {
            (CmpOp::Set, _, Some(0)) => Some(false),
            (CmpOp::Set, _, Some(0xffff_ffff)) => Some(true),
            (_, Some(x), Some(y)) => Some(op.eval(x, y)),
            _ => None,
        };
        if let Some(holds) = outcome {
            decided.push((b, holds));
        }
    }
    decided
}
