//! The part of libpcap's optimizer that changes what a filter means.
//!
//! tcpdump always runs libpcap's optimizer (unless `-O`), and that optimizer is not meaning-
//! preserving: it deletes packet loads whose values it no longer needs, so a filter that would
//! reject a truncated packet (a load past the captured bytes rejects) accepts it once optimized.
//! `ip[0] & 0 = 0` matches an empty packet; `ip6 net fe80::/10` loads only the first word of
//! each address; `not ip6 host A or not arp net N` needs no load at all. To be exact, sift
//! reproduces those decisions here, on the IR, before anything else sees it; everything after
//! this module preserves meaning exactly.
//!
//! The rules mirror libpcap 1.10's `optimize.c`:
//!
//! * value numbering: equal loads, constants and operations get the same number, wherever
//!   they are (libpcap hashes `(opcode, operands)` over the whole program);
//! * constant folding with libpcap's identities: `x op 0` for `+ - << >> | ^` is `x`, `x * 0`
//!   and `x & 0` are 0, `0 op x` for `+ | ^` is `x` and for `* / % & << >>` is 0 (even when
//!   `x` is 0: libpcap folds `0 / x` to 0); shifts of constants by 32 or more give 0; a
//!   constant zero divisor and a shift of an unknown value by more than 31 bits are errors;
//! * branches: both sides constant decide the branch; `(x & k) == 0` becomes `jset #k`
//!   (negated), and `jset #0` never holds while `jset #0xffffffff` always holds — even for
//!   `x == 0`, a libpcap quirk reproduced on purpose; a branch whose two edges lead to the
//!   same place is dropped;
//! * edge facts: an edge that went through `x op y` knows its outcome; an edge into a block
//!   testing the same comparison again (same value numbers, same opcode; or an equality with
//!   another constant after an equality held) is sent straight to the decided successor,
//!   provided the skipped block computes nothing used elsewhere (libpcap's `use_conflict`);
//! * dead code: every instruction whose value is unused is deleted, loads included.
//!
//! libpcap disables its optimizer for `protochain`; so does the caller of this module.

use std::collections::HashMap;

use sift_ir::verify::dominators;
use sift_ir::{BinOp, Block, CmpOp, Function, Inst, LoadSize, Target, Terminator, Value};

/// Rounds of the whole pipeline; libpcap iterates to a fixed point too. Each round that changes
/// something removes a branch or an instruction, so this bound is never reached in practice.
const MAX_ROUNDS: usize = 64;

/// Applies libpcap's meaning-changing optimizations to `f` (entry block 0). Errors are the
/// ones libpcap's optimizer reports.
pub(crate) fn apply(f: &mut Function) -> Result<(), String> {
    for _ in 0..MAX_ROUNDS {
        let (numbers, mut changed) = Numbering::compute(f)?;
        changed |= jset_peephole(f, &numbers);
        changed |= decide_branches(f, &numbers);
        changed |= thread_edges(f, &numbers);
        changed |= remove_dead_code(f);
        if !changed {
            break;
        }
    }
    Ok(())
}

/// A value number: equal numbers mean equal values on every packet.
type Vn = u32;

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Key {
    Const(u32),
    Len,
    Load(Option<Vn>, u32, LoadSize),
    Binary(BinOp, Vn, Vn),
    Neg(Vn),
    /// Block parameters are opaque (they arise only in code libpcap does not optimize).
    Param(Value),
}

/// Value numbers and known constants of every value reachable in the function.
struct Numbering {
    vn: Vec<Vn>,
    konst: Vec<Option<u32>>,
}

impl Numbering {
    fn vn(&self, v: Value) -> Vn {
        self.vn[v.index()]
    }

    fn konst(&self, v: Value) -> Option<u32> {
        self.konst[v.index()]
    }

    /// Numbers the values in reverse postorder (operands before uses), folding constants into
    /// the instructions as it goes. Returns whether an instruction was rewritten.
    fn compute(f: &mut Function) -> Result<(Numbering, bool), String> {
        let n = f.values.len();
        let mut this = Numbering {
            vn: vec![Vn::MAX; n],
            konst: vec![None; n],
        };
        let mut table: HashMap<Key, Vn> = HashMap::new();
        let mut changed = false;
        for b in f.reverse_postorder() {
            let data = f.block(b);
            let values: Vec<Value> = data.params.iter().chain(&data.insts).copied().collect();
            for v in values {
                let (inst, alias) = this.fold(&f.values[v.index()])?;
                if inst != f.values[v.index()] {
                    f.values[v.index()] = inst.clone();
                    changed = true;
                }
                if let Some(a) = alias {
                    this.vn[v.index()] = this.vn(a);
                    this.konst[v.index()] = this.konst(a);
                    continue;
                }
                let key = match inst {
                    Inst::Const(k) => {
                        this.konst[v.index()] = Some(k);
                        Key::Const(k)
                    }
                    Inst::WireLen => Key::Len,
                    Inst::Load {
                        index,
                        offset,
                        size,
                    } => Key::Load(index.map(|x| this.vn(x)), offset, size),
                    Inst::Binary(op, a, b) => Key::Binary(op, this.vn(a), this.vn(b)),
                    Inst::Neg(a) => Key::Neg(this.vn(a)),
                    Inst::Param(_) => Key::Param(v),
                };
                let next = table.len() as Vn;
                this.vn[v.index()] = *table.entry(key).or_insert(next);
            }
        }
        Ok((this, changed))
    }

    /// libpcap's folding of one instruction: the instruction to keep, and the operand it is
    /// equal to when it is an identity (`x + 0`).
    fn fold(&self, inst: &Inst) -> Result<(Inst, Option<Value>), String> {
        let folded = match *inst {
            Inst::Load {
                index: Some(x),
                offset,
                size,
            } => match self.konst(x) {
                // `ld [x + k]` with a known `x` becomes `ld [x + k]` computed modulo 2^32.
                Some(k) => Inst::Load {
                    index: None,
                    offset: k.wrapping_add(offset),
                    size,
                },
                None => inst.clone(),
            },
            Inst::Neg(a) => match self.konst(a) {
                Some(k) => Inst::Const(k.wrapping_neg()),
                None => inst.clone(),
            },
            Inst::Binary(op, a, b) => return self.fold_binary(op, a, b),
            _ => inst.clone(),
        };
        Ok((folded, None))
    }

    fn fold_binary(&self, op: BinOp, a: Value, b: Value) -> Result<(Inst, Option<Value>), String> {
        use BinOp::*;
        let unchanged = Ok((Inst::Binary(op, a, b), None));
        match (self.konst(a), self.konst(b)) {
            (Some(x), Some(y)) => match op.apply(x, y) {
                Some(k) => Ok((Inst::Const(k), None)),
                None if op == Div => Err("division by zero".into()),
                None => Err("modulus by zero".into()),
            },
            (None, Some(0)) => match op {
                Add | Sub | Shl | Shr | Or | Xor => Ok((Inst::Binary(op, a, b), Some(a))),
                Mul | And => Ok((Inst::Const(0), None)),
                Div => Err("division by zero".into()),
                Mod => Err("modulus by zero".into()),
            },
            (None, Some(k)) if matches!(op, Shl | Shr) && k > 31 => {
                Err("shift by more than 31 bits".into())
            }
            (Some(0), None) => match op {
                Add | Or | Xor => Ok((Inst::Binary(op, a, b), Some(b))),
                Mul | Div | Mod | And | Shl | Shr => Ok((Inst::Const(0), None)),
                Sub => unchanged,
            },
            _ => unchanged,
        }
    }
}

/// A branch in libpcap's form: `jeq`, `jgt`, `jge` or `jset`, with the edges possibly swapped
/// (`x != y` is `jeq` with the targets exchanged).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Code {
    Eq,
    Gt,
    Ge,
    Set,
}

fn libpcap_form(op: CmpOp) -> (Code, bool) {
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
fn jset_peephole(f: &mut Function, numbers: &Numbering) -> bool {
    let uses = use_counts(f);
    let mut changed = false;
    for b in f.reverse_postorder() {
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
/// `jset #0xffffffff`, and two edges to the same place. They become jumps.
fn decide_branches(f: &mut Function, numbers: &Numbering) -> bool {
    let mut changed = false;
    for b in f.reverse_postorder() {
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
        let outcome = match (op, numbers.konst(lhs), numbers.konst(rhs)) {
            _ if then_ == else_ => Some(true),
            (CmpOp::Set, _, Some(0)) => Some(false),
            (CmpOp::Set, _, Some(0xffff_ffff)) => Some(true),
            (_, Some(x), Some(y)) => Some(op.eval(x, y)),
            _ => None,
        };
        if let Some(taken) = outcome {
            let target = if taken { then_.clone() } else { else_.clone() };
            f.set_term(b, Terminator::Jump(target));
            changed = true;
        }
    }
    changed
}

/// What an edge knows: the comparison it passed through and its outcome.
#[derive(Clone, Copy)]
struct Fact {
    rhs: Vn,
    rhs_is_const: bool,
    holds: bool,
}

type FactKey = (Code, Vn);

/// Facts in force along a walk of the dominator tree, with an undo log.
#[derive(Default)]
struct Facts {
    map: HashMap<FactKey, Vec<Fact>>,
    log: Vec<FactKey>,
}

impl Facts {
    fn push(&mut self, key: FactKey, fact: Fact) {
        self.map.entry(key).or_default().push(fact);
        self.log.push(key);
    }

    fn pop_to(&mut self, len: usize) {
        while self.log.len() > len {
            let key = self.log.pop().expect("log entry");
            self.map.get_mut(&key).and_then(Vec::pop);
        }
    }

    /// libpcap's `fold_edge`: the outcome of `code(lhs, rhs)` if a fact decides it.
    fn decide(&self, code: Code, lhs: Vn, rhs: Vn, rhs_is_const: bool) -> Option<bool> {
        self.map.get(&(code, lhs))?.iter().find_map(|fact| {
            if fact.rhs == rhs {
                Some(fact.holds)
            } else if fact.holds && code == Code::Eq && fact.rhs_is_const && rhs_is_const {
                Some(false)
            } else {
                None
            }
        })
    }
}

/// The fact an edge of `block`'s branch establishes (`then_edge` selects the edge).
fn edge_fact(f: &Function, numbers: &Numbering, block: Block, then_edge: bool) -> Option<(FactKey, Fact)> {
    let Terminator::Branch { op, lhs, rhs, .. } = f.block(block).term else {
        return None;
    };
    let (code, swapped) = libpcap_form(op);
    Some((
        (code, numbers.vn(lhs)),
        Fact {
            rhs: numbers.vn(rhs),
            rhs_is_const: numbers.konst(rhs).is_some(),
            holds: then_edge != swapped,
        },
    ))
}

/// Sends edges past branches their facts decide (libpcap's `opt_j`), walking the dominator
/// tree: the facts in force in a block are those of the single incoming edges of its
/// dominators, the only edges that dominate it in an acyclic graph.
fn thread_edges(f: &mut Function, numbers: &Numbering) -> bool {
    let (idom, rpo) = dominators(f);
    let mut children: Vec<Vec<Block>> = vec![Vec::new(); f.blocks.len()];
    let mut incoming: Vec<Vec<(Block, bool)>> = vec![Vec::new(); f.blocks.len()];
    for &b in &rpo {
        if let Some(d) = idom[b.index()] {
            children[d.index()].push(b);
        }
        let targets = f.block(b).term.targets();
        let is_branch = targets.len() == 2;
        for (i, t) in targets.into_iter().enumerate() {
            incoming[t.block.index()].push((b, is_branch && i == 0));
        }
    }
    let used_elsewhere = used_outside_own_block(f);
    let mut facts = Facts::default();
    let mut changed = false;
    // Iterative depth-first walk: (block, entered?).
    let mut stack = vec![(Function::ENTRY, false, 0usize)];
    while let Some((b, entered, mark)) = stack.pop() {
        if entered {
            facts.pop_to(mark);
            continue;
        }
        let mark = facts.log.len();
        if let [(pred, then_edge)] = incoming[b.index()][..] {
            if let Some((key, fact)) = edge_fact(f, numbers, pred, then_edge) {
                facts.push(key, fact);
            }
        }
        if let Terminator::Branch { .. } = f.block(b).term {
            for then_edge in [true, false] {
                let inner = facts.log.len();
                if let Some((key, fact)) = edge_fact(f, numbers, b, then_edge) {
                    facts.push(key, fact);
                }
                changed |= thread_one_edge(f, numbers, &facts, &used_elsewhere, b, then_edge);
                facts.pop_to(inner);
            }
        }
        stack.push((b, true, mark));
        for &c in children[b.index()].iter().rev() {
            stack.push((c, false, 0));
        }
    }
    changed
}

/// Moves one edge of `b` forward while the block it enters can be skipped.
fn thread_one_edge(
    f: &mut Function,
    numbers: &Numbering,
    facts: &Facts,
    used_elsewhere: &[bool],
    b: Block,
    then_edge: bool,
) -> bool {
    let edge = |f: &Function| -> Target {
        match &f.block(b).term {
            Terminator::Branch { then_, else_, .. } => {
                if then_edge {
                    then_.clone()
                } else {
                    else_.clone()
                }
            }
            _ => unreachable!("threading a branch edge"),
        }
    };
    let mut changed = false;
    // Each step moves the edge strictly forward in an acyclic graph, so this terminates; the
    // bound only guards against a malformed graph.
    for _ in 0..f.blocks.len() {
        let c = edge(f).block;
        let data = f.block(c);
        if used_elsewhere[c.index()] || !data.params.is_empty() {
            break;
        }
        let next = match &data.term {
            Terminator::Jump(t) => t.clone(),
            Terminator::Branch {
                op,
                lhs,
                rhs,
                then_,
                else_,
            } => {
                let (code, swapped) = libpcap_form(*op);
                let rhs_is_const = numbers.konst(*rhs).is_some();
                match facts.decide(code, numbers.vn(*lhs), numbers.vn(*rhs), rhs_is_const) {
                    Some(holds) if holds != swapped => then_.clone(),
                    Some(_) => else_.clone(),
                    None => break,
                }
            }
            _ => break,
        };
        if let Terminator::Branch { then_, else_, .. } = &mut f.block_mut(b).term {
            *(if then_edge { then_ } else { else_ }) = next;
        }
        changed = true;
    }
    changed
}

/// For each block, whether a value it defines is used by another block.
fn used_outside_own_block(f: &Function) -> Vec<bool> {
    let mut home = vec![None; f.values.len()];
    for (i, data) in f.blocks.iter().enumerate() {
        for &v in data.params.iter().chain(&data.insts) {
            home[v.index()] = Some(i);
        }
    }
    let mut out = vec![false; f.blocks.len()];
    for (i, data) in f.blocks.iter().enumerate() {
        let operands = data
            .insts
            .iter()
            .flat_map(|&v| f.inst(v).operands())
            .chain(data.term.operands());
        for v in operands {
            if let Some(h) = home[v.index()] {
                if h != i {
                    out[h] = true;
                }
            }
        }
    }
    out
}

fn use_counts(f: &Function) -> Vec<u32> {
    let mut uses = vec![0; f.values.len()];
    for data in &f.blocks {
        for v in data.insts.iter().flat_map(|&v| f.inst(v).operands()) {
            uses[v.index()] += 1;
        }
        for v in data.term.operands() {
            uses[v.index()] += 1;
        }
    }
    uses
}

/// Deletes every instruction whose value no reachable block uses, loads included (libpcap's
/// dead-store elimination). Returns whether anything was deleted.
fn remove_dead_code(f: &mut Function) -> bool {
    let reachable = f.reverse_postorder();
    let mut live = vec![false; f.values.len()];
    let mut work: Vec<Value> = Vec::new();
    for &b in &reachable {
        work.extend(f.block(b).term.operands());
    }
    while let Some(v) = work.pop() {
        if !std::mem::replace(&mut live[v.index()], true) {
            work.extend(f.inst(v).operands());
        }
    }
    let mut changed = false;
    for b in reachable {
        let insts = &mut f.block_mut(b).insts;
        let before = insts.len();
        insts.retain(|v| live[v.index()]);
        changed |= insts.len() != before;
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_ir::parse_function;

    fn run(text: &str) -> String {
        let mut f = parse_function(text).unwrap();
        apply(&mut f).unwrap();
        crate::reachable_from(&f, Function::ENTRY).to_string()
    }

    #[test]
    fn and_zero_drops_the_load() {
        let out = run("\
block0:
    v0 = load.b [14]
    v1 = const 0
    v2 = and v0, v1
    br eq v2, v1, block1, block2
block1:
    ret 1
block2:
    ret 0
");
        assert!(!out.contains("load"), "{out}");
        assert!(out.contains("jump block1"), "{out}");
    }

    #[test]
    fn jset_all_ones_always_holds() {
        let out = run("\
block0:
    v0 = load.b [14]
    v1 = const 0xffffffff
    v2 = and v0, v1
    v3 = const 0
    br ne v2, v3, block1, block2
block1:
    ret 1
block2:
    ret 0
");
        assert!(!out.contains("load"), "{out}");
        assert!(out.contains("jump block1"), "{out}");
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

    #[test]
    fn errors_match_libpcap() {
        let mut f = parse_function("\
block0:
    v0 = load.b [14]
    v1 = const 40
    v2 = shl v0, v1
    br eq v2, v1, block1, block1
block1:
    ret 0
")
        .unwrap();
        assert_eq!(apply(&mut f).unwrap_err(), "shift by more than 31 bits");
    }
}
