//! Edge facts and libpcap's `opt_j`: edges sent past the branches they already decide.

use std::collections::HashMap;

use sift_ir::verify::dominators;
use sift_ir::{Block, Function, Terminator};

use super::branches::{libpcap_form, Code};
use super::numbering::{Numbering, Vn};

/// What an edge knows: the comparison it passed through and its outcome.
#[derive(Clone, Copy)]
struct Fact {
    rhs: Vn,
    rhs_is_const: bool,
    holds: bool,
}

type FactKey = (Code, Vn);

/// Facts in force along a walk of the dominator tree, with an undo log.
///
/// libpcap's `fold_edge` takes the earliest fact (nearest the root) that decides a
/// comparison; a long `or` chain piles up thousands of facts about one value (`ethertype !=
/// 0x800` on every false edge), so the facts are indexed by what they can decide rather than
/// scanned: by `(comparison, lhs, rhs)` for an exact match, and per `(comparison, lhs)` for
/// the equalities with a constant that held (which decide every other constant). Each entry
/// carries its position in the log, so the earliest of the two candidates wins as in a scan.
#[derive(Default)]
struct Facts {
    exact: HashMap<(FactKey, Vn), Vec<(usize, bool)>>,
    const_equalities: HashMap<FactKey, Vec<(usize, Vn)>>,
    log: Vec<(FactKey, Fact)>,
}

impl Facts {
    fn push(&mut self, key: FactKey, fact: Fact) {
        let seq = self.log.len();
        self.exact
            .entry((key, fact.rhs))
            .or_default()
            .push((seq, fact.holds));
        if fact.holds && key.0 == Code::Eq && fact.rhs_is_const {
            self.const_equalities
                .entry(key)
                .or_default()
                .push((seq, fact.rhs));
        }
        self.log.push((key, fact));
    }

    fn pop_to(&mut self, len: usize) {
        while self.log.len() > len {
            let (key, fact) = self.log.pop().expect("log entry");
            self.exact.get_mut(&(key, fact.rhs)).and_then(Vec::pop);
            if fact.holds && key.0 == Code::Eq && fact.rhs_is_const {
                self.const_equalities.get_mut(&key).and_then(Vec::pop);
            }
        }
    }

    /// libpcap's `fold_edge`: the outcome of `code(lhs, rhs)` if a fact decides it. A fact
    /// about the same operands gives its outcome; an equality with a constant that held
    /// decides an equality with another constant as false.
    fn decide(&self, code: Code, lhs: Vn, rhs: Vn, rhs_is_const: bool) -> Option<bool> {
        let key = (code, lhs);
        let exact = self.exact.get(&(key, rhs)).and_then(|v| v.first()).copied();
        let equality = if code == Code::Eq && rhs_is_const {
            self.const_equalities
                .get(&key)
                .and_then(|v| v.first())
                .map(|&(seq, fact_rhs)| (seq, fact_rhs == rhs))
        } else {
            None
        };
        match (exact, equality) {
            (Some((a, holds)), Some((b, _))) if a <= b => Some(holds),
            (_, Some((_, holds))) => Some(holds),
            (Some((_, holds)), None) => Some(holds),
            (None, None) => None,
        }
    }
}

/// The fact an edge of `block`'s branch establishes (`then_edge` selects the edge).
fn edge_fact(
    f: &Function,
    numbers: &Numbering,
    block: Block,
    then_edge: bool,
) -> Option<(FactKey, Fact)> {
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
pub(super) fn thread_edges(f: &mut Function, numbers: &Numbering) -> bool {
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
        let is_branch = matches!(f.block(b).term, Terminator::Branch { .. });
        for edge in 0..f.block(b).term.targets().len() {
            let inner = facts.log.len();
            if is_branch {
                if let Some((key, fact)) = edge_fact(f, numbers, b, edge == 0) {
                    facts.push(key, fact);
                }
            }
            changed |= thread_one_edge(f, numbers, &facts, &used_elsewhere, b, edge);
            facts.pop_to(inner);
        }
        stack.push((b, true, mark));
        for &c in children[b.index()].iter().rev() {
            stack.push((c, false, 0));
        }
    }
    changed
}

/// Moves edge number `edge` of `b`'s terminator forward while the block it enters can be
/// skipped.
fn thread_one_edge(
    f: &mut Function,
    numbers: &Numbering,
    facts: &Facts,
    used_elsewhere: &[bool],
    b: Block,
    edge: usize,
) -> bool {
    let mut changed = false;
    // Each step moves the edge strictly forward in an acyclic graph, so this terminates; the
    // bound only guards against a malformed graph.
    for _ in 0..f.blocks.len() {
        let c = f.block(b).term.targets()[edge].block;
        let data = f.block(c);
        if used_elsewhere[c.index()] || !data.params.is_empty() {
            break;
        }
        let next = match &data.term {
            Terminator::Jump(t) => t.clone(),
            Terminator::Branch { then_, else_, .. } if then_ == else_ => then_.clone(),
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
        *f.block_mut(b).term.targets_mut()[edge] = next;
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
