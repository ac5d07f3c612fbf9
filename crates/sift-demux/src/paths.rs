//! Decomposing a filter into accepting paths, each a conjunction of canonical atoms.
//!
//! A packet follows exactly one path through the (acyclic) graph, so a filter accepts a packet
//! iff the packet satisfies the condition of one of its accepting paths, and at most one such
//! condition holds. In this IR a path's condition is more than its branch outcomes: every load
//! executed on it must be in bounds and every divisor non-zero, or the whole filter returns 0
//! (classic BPF's semantics) — including loads whose value is never compared. Those requirements
//! become [`Atom::Defined`] and [`Atom::MinCapLen`] atoms. Since a conjunction is pure, its atoms
//! can then be sorted, merged with other filters' and evaluated in any order.
//!
//! Branches whose outcome is already implied by the atoms collected so far (a second test of
//! the same field) follow only the feasible side, which keeps libpcap-style filters (which test
//! the link type again in each primitive) from multiplying their paths.

use std::collections::BTreeSet;
use std::sync::Arc;

use sift_ir::{Block, Function, Inst, Target, Terminator};

use crate::canon::{Atom, Cond, Expr, Rel, Unusable};

/// The condition under which a filter accepts along one path: every atom holds.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Conjunction {
    /// Sorted and without duplicates.
    pub(crate) atoms: Vec<Atom>,
}

/// Bounds on the work spent decomposing one filter.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    /// Accepting paths; a filter with more is run as a whole instead.
    pub(crate) max_paths: usize,
    /// Blocks visited over all paths (rejecting ones included).
    pub(crate) max_steps: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_paths: 64,
            max_steps: 20_000,
        }
    }
}

/// Why a filter is not decomposed into atoms (it is then run whole, in priority order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotDecomposed {
    /// More accepting paths than the limit.
    TooManyPaths,
    /// The graph is too large to walk within the limit.
    TooManySteps,
    /// A value is computed by an expression too large to canonicalise.
    ExpressionTooLarge,
    /// A path reads more distinct values than a shape's extractor has registers.
    TooManyValues,
    /// The filter calls a coprocessor (payload search, set lookup), which atoms do not express.
    CoprocessorCall,
    /// The filter walks a header chain (`protochain`), a loop atoms do not express.
    HeaderWalk,
}

/// One pending edge of the depth-first walk.
struct Pending {
    block: Block,
    args: Vec<Arc<Expr>>,
    atoms_len: usize,
    required_len: usize,
    /// The atoms the edge adds to the path, each with the free constant it compares with.
    edge: Vec<(Atom, Origin)>,
}

/// The free constant (a value number) an atom compares its field with, if any.
type Origin = Option<u32>;

/// How a decomposition depends on the filter's *free* constants: constants used only as an
/// operand of branches (the addresses and ports of a connection filter). Another filter with
/// the same graph and other values for some free constants decomposes into the same paths
/// with those values in place of the old (`templates`), provided no changed constant is
/// *pinned* and each comparison it makes stays undecided by the field's width:
///
/// * a free constant's only influence on the walk is through the comparisons it is an
///   operand of (`decide`): whether the field's width decides it, and whether an atom on the
///   path about the same field decides it. A comparison the width left undecided stays so
///   under a new value iff [`crate::canon::decided_by_bits`] says so (recorded in `compares`);
///   one with another atom about the same field on its path, or between two constants, pins
///   every free constant involved;
/// * the atoms it produces carry it as their right-hand side (`origins`), and a path's atoms
///   are sorted by relation and field before constants, so with no two atoms about one field
///   on a path (each such pair pins its constants) replacing the value keeps the order.
#[derive(Clone, Debug, Default)]
pub(crate) struct Trace {
    /// Per value: a constant used only as a branch operand.
    pub(crate) free: Vec<bool>,
    /// Per value: a free constant whose value the decomposition depends on beyond its atoms.
    pub(crate) pinned: Vec<bool>,
    /// `(constant, rel, bits)`: a free constant made an atom `field rel constant` whose field
    /// has these possible bits.
    pub(crate) compares: Vec<(u32, Rel, u32)>,
    /// Per accepting path, per atom: the free constant that is its right-hand side.
    pub(crate) origins: Vec<Vec<Origin>>,
}

impl Trace {
    fn new(f: &Function) -> Trace {
        let mut free: Vec<bool> = f
            .values
            .iter()
            .map(|i| matches!(i, Inst::Const(_)))
            .collect();
        let mut other_use = |v: sift_ir::Value| {
            if let Some(x) = free.get_mut(v.index()) {
                *x = false;
            }
        };
        for inst in &f.values {
            inst.for_each_operand(&mut other_use);
        }
        for b in &f.blocks {
            match &b.term {
                // Branch operands are the one use a free constant may have; edge arguments
                // are other uses.
                Terminator::Branch { then_, else_, .. } => then_
                    .args
                    .iter()
                    .chain(&else_.args)
                    .for_each(|&a| other_use(a)),
                term => term.for_each_operand(&mut other_use),
            }
        }
        Trace {
            pinned: vec![false; free.len()],
            free,
            compares: Vec::new(),
            origins: Vec::new(),
        }
    }

    fn pin(&mut self, origin: Origin) {
        if let Some(v) = origin {
            self.pinned[v as usize] = true;
        }
    }

    /// The free constant among a branch's operands (both pinned when both are).
    fn origin(&mut self, lhs: sift_ir::Value, rhs: sift_ir::Value) -> Origin {
        let free = |v: sift_ir::Value| self.free[v.index()].then_some(v.0);
        match (free(lhs), free(rhs)) {
            (Some(a), Some(b)) => {
                self.pin(Some(a));
                self.pin(Some(b));
                None
            }
            (a, b) => a.or(b),
        }
    }
}

/// The accepting paths of `f` (which must have passed `sift_ir::verify`).
pub(crate) fn decompose(f: &Function, limits: Limits) -> Result<Vec<Conjunction>, NotDecomposed> {
    decompose_traced(f, limits).map(|(paths, _)| paths)
}

/// [`decompose`], and how its result depends on the filter's free constants.
pub(crate) fn decompose_traced(
    f: &Function,
    limits: Limits,
) -> Result<(Vec<Conjunction>, Trace), NotDecomposed> {
    let mut trace = Trace::new(f);
    let mut env: Vec<Option<Arc<Expr>>> = vec![None; f.values.len()];
    let mut atoms: Vec<Atom> = Vec::new();
    let mut origins: Vec<Origin> = Vec::new();
    // Expressions executed on the path that can fail (loads, divisions).
    let mut required: Vec<Arc<Expr>> = Vec::new();
    let mut out = Vec::new();
    let mut steps = 0usize;
    let mut stack = vec![Pending {
        block: Function::ENTRY,
        args: Vec::new(),
        atoms_len: 0,
        required_len: 0,
        edge: Vec::new(),
    }];
    'paths: while let Some(p) = stack.pop() {
        steps += 1;
        if steps > limits.max_steps {
            return Err(NotDecomposed::TooManySteps);
        }
        atoms.truncate(p.atoms_len);
        origins.truncate(p.atoms_len);
        required.truncate(p.required_len);
        for (a, o) in p.edge {
            atoms.push(a);
            origins.push(o);
        }
        let data = f.block(p.block);
        for (param, arg) in data.params.iter().zip(p.args) {
            env[param.index()] = Some(arg);
        }
        for &v in &data.insts {
            let value = |x: sift_ir::Value| {
                env[x.index()]
                    .clone()
                    .expect("verified: defined before use")
            };
            let e = match f.values[v.index()] {
                Inst::Contains { .. } | Inst::Member { .. } => {
                    return Err(NotDecomposed::CoprocessorCall)
                }
                Inst::Protochain { .. } => return Err(NotDecomposed::HeaderWalk),
                Inst::Const(k) => Arc::new(Expr::Const(k)),
                Inst::WireLen => Arc::new(Expr::WireLen),
                Inst::Load {
                    index,
                    offset,
                    size,
                } => match Expr::load(index.map(value), offset, size) {
                    Ok(e) => {
                        required.push(e.clone());
                        e
                    }
                    Err(Unusable::AlwaysFails) => continue 'paths,
                    Err(Unusable::TooLarge) => return Err(NotDecomposed::ExpressionTooLarge),
                },
                Inst::Binary(op, a, b) => match Expr::binary(op, value(a), value(b)) {
                    Ok(e) => {
                        if op.can_fail() && e.constant().is_none() {
                            required.push(e.clone());
                        }
                        e
                    }
                    Err(Unusable::AlwaysFails) => continue 'paths,
                    Err(Unusable::TooLarge) => return Err(NotDecomposed::ExpressionTooLarge),
                },
                Inst::Neg(a) => match Expr::neg(value(a)) {
                    Ok(e) => e,
                    Err(Unusable::AlwaysFails) => continue 'paths,
                    Err(Unusable::TooLarge) => return Err(NotDecomposed::ExpressionTooLarge),
                },
                Inst::Param(_) => unreachable!("verified: parameters are not instructions"),
            };
            env[v.index()] = Some(e);
        }
        let value = |x: sift_ir::Value| {
            env[x.index()]
                .clone()
                .expect("verified: defined before use")
        };
        let here = (atoms.len(), required.len());
        let follow = |t: &Target, edge: Vec<(Atom, Origin)>, stack: &mut Vec<Pending>| {
            stack.push(Pending {
                block: t.block,
                args: t.args.iter().map(|&a| value(a)).collect(),
                atoms_len: here.0,
                required_len: here.1,
                edge,
            });
        };
        match &data.term {
            Terminator::Return(0) => {}
            Terminator::Return(_) => {
                out.push(finish(&atoms, &origins, &required, &mut trace));
            }
            Terminator::ReturnValue(v) => {
                let mut seen = |j: usize| trace.pin(origins[j]);
                match decide(
                    &atoms,
                    Rel::Ne,
                    value(*v),
                    Arc::new(Expr::Const(0)),
                    &mut seen,
                ) {
                    Cond::Decided(false) => {}
                    Cond::Decided(true) => {
                        out.push(finish(&atoms, &origins, &required, &mut trace))
                    }
                    Cond::Atom(a) => {
                        atoms.push(a);
                        origins.push(None);
                        out.push(finish(&atoms, &origins, &required, &mut trace));
                    }
                }
            }
            Terminator::Jump(t) => follow(t, Vec::new(), &mut stack),
            Terminator::Branch {
                op,
                lhs,
                rhs,
                then_,
                else_,
            } => {
                let rel = Rel::from_ir(*op);
                let origin = trace.origin(*lhs, *rhs);
                let mut interacted = false;
                let mut seen = |j: usize| {
                    trace.pin(origins[j]);
                    interacted = true;
                };
                let cond = decide(&atoms, rel, value(*lhs), value(*rhs), &mut seen);
                if interacted {
                    trace.pin(origin);
                }
                match cond {
                    Cond::Decided(outcome) => {
                        trace.pin(origin);
                        follow(if outcome { then_ } else { else_ }, Vec::new(), &mut stack)
                    }
                    Cond::Atom(a) => {
                        if let (Some(c), Atom::Cmp { rel, lhs, .. }) = (origin, &a) {
                            trace.compares.push((c, *rel, lhs.possible_bits()));
                        }
                        let negated = negate(&a);
                        // Else pushed first so the then side (usually the accepting one) runs first.
                        follow(else_, vec![(negated, origin)], &mut stack);
                        follow(then_, vec![(a, origin)], &mut stack);
                    }
                }
            }
            Terminator::Switch {
                value: key,
                cases,
                default,
            } => {
                let key = value(*key);
                let mut default_atoms = Vec::new();
                let mut default_feasible = true;
                for (k, t) in cases.iter().rev() {
                    let mut seen = |j: usize| trace.pin(origins[j]);
                    let k = Arc::new(Expr::Const(*k));
                    match decide(&atoms, Rel::Eq, key.clone(), k, &mut seen) {
                        Cond::Decided(false) => {}
                        Cond::Decided(true) => {
                            follow(t, Vec::new(), &mut stack);
                            default_feasible = false;
                        }
                        Cond::Atom(a) => {
                            default_atoms.push((negate(&a), None));
                            follow(t, vec![(a, None)], &mut stack);
                        }
                    }
                }
                if default_feasible {
                    follow(default, default_atoms, &mut stack);
                }
            }
            Terminator::Unset => unreachable!("verified: terminators are set"),
        }
        if out.len() > limits.max_paths {
            return Err(NotDecomposed::TooManyPaths);
        }
    }
    let (paths, path_origins) = out.into_iter().unzip();
    trace.origins = path_origins;
    Ok((paths, trace))
}

/// The negation of an atom produced by a branch (branch atoms are always comparisons).
fn negate(a: &Atom) -> Atom {
    match a {
        Atom::Cmp { rel, lhs, rhs } => Atom::Cmp {
            rel: rel.negate(),
            lhs: lhs.clone(),
            rhs: rhs.clone(),
        },
        other => unreachable!("branches produce comparisons, not {other:?}"),
    }
}

/// Canonicalises `lhs rel rhs` and decides it from the atoms already on the path when a
/// previous test fixed the field's value (`x == k`) or excluded it (`x != k`). Calls `seen`
/// with the position of every path atom about the same field it looks at.
fn decide(
    path: &[Atom],
    rel: Rel,
    lhs: Arc<Expr>,
    rhs: Arc<Expr>,
    seen: &mut impl FnMut(usize),
) -> Cond {
    let cond = Atom::compare(rel, lhs, rhs);
    let Cond::Atom(Atom::Cmp { rel, lhs, rhs }) = &cond else {
        return cond;
    };
    let Some(k) = rhs.constant() else {
        // Same comparison of two fields seen before: implied or contradicted.
        for (j, a) in path.iter().enumerate() {
            if let Atom::Cmp {
                rel: r,
                lhs: l,
                rhs: x,
            } = a
            {
                if l == lhs {
                    seen(j);
                }
                if l == lhs && x == rhs {
                    if r == rel {
                        return Cond::Decided(true);
                    }
                    if *r == rel.negate() {
                        return Cond::Decided(false);
                    }
                }
            }
        }
        return cond;
    };
    for (j, a) in path.iter().enumerate() {
        let Atom::Cmp {
            rel: r,
            lhs: l,
            rhs: x,
        } = a
        else {
            continue;
        };
        if l != lhs {
            continue;
        }
        seen(j);
        let Some(c) = x.constant() else { continue };
        match r {
            Rel::Eq => return Cond::Decided(rel.eval(c, k)),
            Rel::Ne if c == k && *rel == Rel::Eq => return Cond::Decided(false),
            Rel::Ne if c == k && *rel == Rel::Ne => return Cond::Decided(true),
            _ if r == rel && c == k => return Cond::Decided(true),
            _ if *r == rel.negate() && c == k => return Cond::Decided(false),
            _ => {}
        }
    }
    cond
}

/// The conjunction of an accepting path: its comparisons plus the evaluation requirements no
/// comparison already implies, sorted; with each atom's origin (`origins`: the path's).
fn finish(
    atoms: &[Atom],
    origins: &[Origin],
    required: &[Arc<Expr>],
    trace: &mut Trace,
) -> (Conjunction, Vec<Origin>) {
    // Everything a comparison reads must evaluate for the comparison to hold.
    let mut covered: BTreeSet<Arc<Expr>> = BTreeSet::new();
    for a in atoms {
        if let Atom::Cmp { lhs, rhs, .. } = a {
            lhs.for_each(&mut |e| {
                covered.insert(e.clone());
            });
            rhs.for_each(&mut |e| {
                covered.insert(e.clone());
            });
        }
    }
    // Requirements that are subexpressions of other requirements are implied by them.
    let mut extra: BTreeSet<Arc<Expr>> = required
        .iter()
        .filter(|e| !covered.contains(*e))
        .cloned()
        .collect();
    let nested: Vec<Arc<Expr>> = extra
        .iter()
        .flat_map(|e| {
            let mut inner = Vec::new();
            e.for_each(&mut |s| {
                if !Arc::ptr_eq(s, e) {
                    inner.push(s.clone());
                }
            });
            inner
        })
        .collect();
    for n in nested {
        extra.remove(&n);
    }
    // A fixed-offset load is in bounds iff enough bytes were captured; the longest one covers
    // the others, wherever it appears.
    let fixed_end = |e: &Arc<Expr>| match **e {
        Expr::Load {
            index: None,
            offset,
            bytes,
        } => Some(offset + u32::from(bytes)),
        _ => None,
    };
    let covered_end = covered.iter().filter_map(fixed_end).max().unwrap_or(0);
    let mut out: Vec<(Atom, Origin)> = atoms.iter().cloned().zip(origins.iter().copied()).collect();
    let mut needed_end = 0;
    for e in extra {
        match fixed_end(&e) {
            Some(end) => needed_end = needed_end.max(end),
            None => out.push((Atom::Defined(e), None)),
        }
    }
    if needed_end > covered_end {
        out.push((Atom::MinCapLen(needed_end), None));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            // One atom stands for both: their constants' values must not part them.
            trace.pin(later.1);
            trace.pin(kept.1);
        }
        same
    });
    let (atoms, origins) = out.into_iter().unzip();
    (Conjunction { atoms }, origins)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_ir::parse_function;

    fn paths(text: &str) -> Vec<Conjunction> {
        decompose(&parse_function(text).unwrap(), Limits::default()).unwrap()
    }

    #[test]
    fn unused_loads_become_requirements() {
        // The load at 40 is never compared, but out of bounds it rejects the packet.
        let p = paths("block0:\n v0 = load.b [40]\n v1 = load.h [12]\n v2 = const 0x800\n br eq v1, v2, block1, block2\nblock1:\n ret 1\nblock2:\n ret 0\n");
        assert_eq!(p.len(), 1);
        assert!(
            p[0].atoms.contains(&Atom::MinCapLen(41)),
            "{:?}",
            p[0].atoms
        );
    }

    #[test]
    fn implied_branches_do_not_multiply_paths() {
        // The second test of the same field is decided by the first.
        let text = "block0:\n v0 = load.h [12]\n v1 = const 0x800\n br eq v0, v1, block1, block3\n\
                    block1:\n v2 = load.h [12]\n v3 = const 0x800\n br eq v2, v3, block2, block3\n\
                    block2:\n ret 1\nblock3:\n v4 = load.h [12]\n v5 = const 0x86dd\n br eq v4, v5, block2, block4\n\
                    block4:\n ret 0\n";
        let p = paths(text);
        assert_eq!(p.len(), 2);
        assert!(p.iter().all(|c| c.atoms.len() == 1 || c.atoms.len() == 2));
    }

    #[test]
    fn returned_values_accept_when_non_zero() {
        let p = paths("block0:\n v0 = load.b [0]\n ret v0\n");
        assert_eq!(p.len(), 1);
        assert!(matches!(&p[0].atoms[..], [Atom::Cmp { rel: Rel::Ne, .. }]));
    }

    #[test]
    fn switch_default_excludes_every_case() {
        let p = paths("block0:\n v0 = load.b [0]\n switch v0, default block2, 1: block1, 2: block1\nblock1:\n ret 0\nblock2:\n ret 1\n");
        assert_eq!(p.len(), 1);
        assert_eq!(
            p[0].atoms
                .iter()
                .filter(|a| matches!(a, Atom::Cmp { rel: Rel::Ne, .. }))
                .count(),
            2
        );
    }

    #[test]
    fn exponential_expressions_are_refused() {
        // v(i+1) = v(i) * v(i): a tree of 2^40 nodes from 40 instructions.
        let mut text = String::from("block0:\n v0 = load.b [0]\n");
        for i in 0..40 {
            text += &format!(" v{} = mul v{i}, v{i}\n", i + 1);
        }
        text +=
            " v41 = const 7\n br eq v40, v41, block1, block2\nblock1:\n ret 1\nblock2:\n ret 0\n";
        let r = decompose(&parse_function(&text).unwrap(), Limits::default());
        assert_eq!(r, Err(NotDecomposed::ExpressionTooLarge));
    }
}
