//! Branches in libpcap's form, its `jset` peephole, and branches decided whatever the packet.

use sift_ir::{BinOp, Block, CmpOp, Function, Inst, Terminator, Value};

use super::numbering::Numbering;

/// A branch in libpcap's form: `jeq`, `jgt`, `jge` or `jset`, with the edges possibly swapped
/// (`x != y` is `jeq` with the targets exchanged).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Code {
    Eq,
    Gt,
    Ge,
    Set,
}

pub(super) fn libpcap_form(op: CmpOp) -> (Code, bool) {
    match op {
        CmpOp::Eq => (Code::Eq, false),
        CmpOp::Ne => (Code::Eq, true),
        CmpOp::Gt => (Code::Gt, false),
        CmpOp::Le => (Code::Gt, true),
        CmpOp::Ge => (Code::Ge, false),
        CmpOp::Lt => (Code::Ge, true),
        CmpOp::Set => (Code::Set, false),
    }
}

/// `(x & k) == 0` (and `!=`) becomes `jset #k` when the `and` is the block's last computation
/// and nothing else uses it — libpcap's peephole, after which `jset #0xffffffff` always holds.
///
/// `reachable` lists the blocks reachable from the entry (in any order).
pub(super) fn jset_peephole(f: &mut Function, numbers: &Numbering, reachable: &[Block]) -> bool {
    let uses = use_counts(f);
    let mut changed = false;
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
        let Inst::Binary(BinOp::And, x, mask) = *f.inst(lhs) else {
            continue;
        };
        let last_computation = f
            .block(b)
            .insts
            .iter()
            .rev()
            .find(|&&v| !matches!(f.inst(v), Inst::Const(_)));
        if numbers.konst(rhs) != Some(0)
            || numbers.konst(mask).is_none()
            || numbers.konst(x).is_some()
            || last_computation != Some(&lhs)
            || uses[lhs.index()] != 1
        {
            continue;
        }
        if let Terminator::Branch {
            op: new_op,
            lhs: new_lhs,
            rhs: new_rhs,
            then_,
            else_,
        } = &mut f.block_mut(b).term
        {
            *new_op = CmpOp::Set;
            *new_lhs = x;
            *new_rhs = mask;
            if op == CmpOp::Eq {
                std::mem::swap(then_, else_);
            }
            changed = true;
        }
    }
    changed
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

fn use_counts(f: &Function) -> Vec<u32> {
    let mut uses = vec![0; f.values.len()];
    for data in &f.blocks {
        let mut count = |v: Value| uses[v.index()] += 1;
        for &v in &data.insts {
            f.inst(v).for_each_operand(&mut count);
        }
        data.term.for_each_operand(count);
    }
    uses
}
