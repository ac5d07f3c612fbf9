//! Lookup-table formation (BPF+ §6.3): chains of equality tests against constants become
//! `switch` terminators, which back ends lower to linear, binary-search or hashed dispatch.
//!
//! A chain starts at any block whose test is `x == k` (or a `switch` whose cases all go to one
//! edge) and continues through the "not equal" edge into blocks that
//!
//! * compute nothing and have no parameters (so testing them in another order cannot reject a
//!   packet or read an undefined value: each tested value is defined in a block dominating the
//!   chain's start or in the start itself),
//! * are entered only by that edge (no other path observes the intermediate blocks), and
//! * test some value for equality with a constant, sending "equal" to the same edge (block and
//!   arguments) as the chain's start.
//!
//! Such a chain is a disjunction of side-effect-free equalities with one exit, so the tests may be
//! regrouped by value (the BPF+ paper's reordering of empty nodes): one `switch` per tested value,
//! in order of first appearance, each falling through to the next, the last to the chain's final
//! "not equal" edge. Repeated keys of one value are dropped (the first test already failed).
//! Groups smaller than the table threshold stay tests. `host A or host B or …` becomes a switch
//! on the source address and one on the destination address; `port 22 or port 80 or …` one per
//! port field.

use sift_ir::{CmpOp, Function, Inst, Target, Terminator, Value};

use crate::cfg::Analysis;
use crate::hash::{FastMap, FastSet};

/// One element of a chain: the value tested, the keys, the exit on equality, the continuation.
pub(crate) struct Link<'f> {
    pub(crate) value: Value,
    pub(crate) keys: Keys<'f>,
    pub(crate) exit: &'f Target,
    pub(crate) next: &'f Target,
}

/// The keys of a link, read from its terminator (a list per test was most of the pass's
/// time on long chains).
#[derive(Clone, Copy)]
pub(crate) enum Keys<'f> {
    One(u32),
    Cases(&'f [(u32, Target)]),
}

impl<'f> Keys<'f> {
    fn len(self) -> usize {
        match self {
            Keys::One(_) => 1,
            Keys::Cases(cases) => cases.len(),
        }
    }

    fn iter(self) -> impl Iterator<Item = u32> + 'f {
        let (one, cases) = match self {
            Keys::One(k) => (Some(k), &[][..]),
            Keys::Cases(cases) => (None, cases),
        };
        one.into_iter().chain(cases.iter().map(|(k, _)| *k))
    }
}

/// `term` as a link: a test of equality with a constant, or a `switch` whose cases share an edge.
pub(crate) fn link<'f>(f: &Function, term: &'f Terminator) -> Option<Link<'f>> {
    match term {
        Terminator::Branch {
            op: CmpOp::Eq,
            lhs,
            rhs,
            then_,
            else_,
        } => {
            let k = f.const_value(*rhs)?;
            Some(Link {
                value: *lhs,
                keys: Keys::One(k),
                exit: then_,
                next: else_,
            })
        }
        Terminator::Branch {
            op: CmpOp::Ne,
            lhs,
            rhs,
            then_,
            else_,
        } => {
            let k = f.const_value(*rhs)?;
            Some(Link {
                value: *lhs,
                keys: Keys::One(k),
                exit: else_,
                next: then_,
            })
        }
        Terminator::Switch {
            value,
            cases,
            default,
        } => {
            let exit = &cases.first()?.1;
            if cases.iter().any(|(_, t)| t != exit) {
                return None;
            }
            Some(Link {
                value: *value,
                keys: Keys::Cases(cases),
                exit,
                next: default,
            })
        }
        _ => None,
    }
}

/// Runs the pass with tables of at least `min_keys` keys; returns the number of switches built.
pub fn run(f: &mut Function, min_keys: usize) -> usize {
    run_with(f, min_keys, &mut Analysis::new())
}

/// [`run`], with the control-flow facts kept between passes.
pub fn run_with(f: &mut Function, min_keys: usize, analysis: &mut Analysis) -> usize {
    analysis.remove_unreachable(f);
    let cfg = analysis.take(f);
    let incoming = &cfg.incoming;
    let mut consumed = vec![false; f.blocks.len()];
    let mut built = 0;
    for &head in &cfg.rpo {
        if consumed[head.index()] {
            continue;
        }
        let Some(first) = link(f, &f.block(head).term) else {
            continue;
        };
        // Collect the chain.
        let mut blocks = vec![head];
        let mut links = vec![first];
        loop {
            let last = links.last().expect("chain has a start");
            let s = last.next.block;
            let data = f.block(s);
            if s == head
                || consumed[s.index()]
                || incoming[s.index()] != 1
                || !data.insts.is_empty()
                || !data.params.is_empty()
            {
                break;
            }
            match link(f, &data.term) {
                Some(l) if l.exit == links[0].exit => {
                    blocks.push(s);
                    links.push(l);
                }
                _ => break,
            }
        }
        // The values tested, in order of first appearance, and each link's among them. A chain
        // testing each value once has nothing to regroup, whatever its keys (after the chains
        // become tables, each link is a table on a value of its own).
        let mut order: Vec<Value> = Vec::new();
        let mut group_of: FastMap<Value, usize> = FastMap::default();
        let link_groups: Vec<usize> = links
            .iter()
            .map(|l| {
                *group_of.entry(l.value).or_insert_with(|| {
                    order.push(l.value);
                    order.len() - 1
                })
            })
            .collect();
        let regroups = order.len() < links.len();
        // The keys of each value, repeated keys dropped.
        let mut groups: Vec<Vec<u32>> = vec![Vec::new(); order.len()];
        if regroups {
            // Sized once rather than rehashed as a long chain fills it.
            let mut seen: FastSet<(Value, u32)> = FastSet::default();
            seen.reserve(links.iter().map(|l| l.keys.len()).sum());
            for (l, &g) in links.iter().zip(&link_groups) {
                for k in l.keys.iter() {
                    if seen.insert((l.value, k)) {
                        groups[g].push(k);
                    }
                }
            }
        }
        let forms_table = groups.iter().any(|keys| keys.len() >= min_keys);
        if !forms_table || !regroups {
            for &b in &blocks[1..] {
                consumed[b.index()] = true;
            }
            continue;
        }
        let exit = links[0].exit.clone();
        let fall = links.last().expect("nonempty").next.clone();
        // Emit: one node per table, one per key of small groups, reusing the chain's blocks.
        let mut nodes: Vec<(Value, Vec<u32>)> = Vec::new();
        for (v, keys) in order.iter().zip(groups) {
            if keys.len() >= min_keys {
                nodes.push((*v, keys));
            } else {
                nodes.extend(keys.iter().map(|&k| (*v, vec![k])));
            }
        }
        debug_assert!(nodes.len() <= blocks.len());
        let mut consts: FastMap<u32, Value> = FastMap::default();
        for (i, (value, keys)) in nodes.iter().enumerate() {
            let b = blocks[i];
            let next = match blocks.get(i + 1) {
                Some(&n) if i + 1 < nodes.len() => Target::from(n),
                _ => fall.clone(),
            };
            let term = if keys.len() >= min_keys {
                built += 1;
                Terminator::Switch {
                    value: *value,
                    cases: keys.iter().map(|&k| (k, exit.clone())).collect(),
                    default: next,
                }
            } else {
                let k = keys[0];
                let rhs = *consts
                    .entry(k)
                    .or_insert_with(|| f.push(Function::ENTRY, Inst::Const(k)));
                Terminator::Branch {
                    op: CmpOp::Eq,
                    lhs: *value,
                    rhs,
                    then_: exit.clone(),
                    else_: next,
                }
            };
            f.set_term(b, term);
        }
        for &b in &blocks {
            consumed[b.index()] = true;
        }
    }
    // Constants for small groups were appended to the entry block, which dominates every use.
    if built == 0 {
        analysis.restore(cfg);
    }
    analysis.remove_unreachable(f);
    built
}

/// Used by tests: the blocks of `f` that end in a switch.
#[cfg(test)]
pub(crate) fn switches(f: &Function) -> Vec<sift_ir::Block> {
    (0..f.blocks.len() as u32)
        .map(sift_ir::Block)
        .filter(|&b| matches!(f.block(b).term, Terminator::Switch { .. }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::assert_same_semantics;
    use sift_ir::parse_function;

    fn tabled(text: &str) -> Function {
        let mut f = parse_function(text).unwrap();
        let orig = f.clone();
        run(&mut f, 3);
        sift_ir::verify(&f).unwrap_or_else(|e| panic!("{e}\n{f}"));
        assert_same_semantics(&orig, &f);
        f
    }

    /// BPF+ §6.3: `ip src host A or B or C` after redundancy elimination.
    #[test]
    fn paper_example_becomes_one_table() {
        let f = tabled(
            "block0:
    v0 = const 0x800
    v1 = const 1
    v2 = const 2
    v3 = const 3
    v4 = load.h [0]
    br eq v4, v0, block1, block4
block1:
    v5 = load.b [2]
    br eq v5, v1, block5, block2
block2:
    br eq v5, v2, block5, block3
block3:
    br eq v5, v3, block5, block4
block4:
    ret 0
block5:
    ret 1
",
        );
        assert_eq!(switches(&f).len(), 1, "{f}");
        assert!(f.to_string().contains("switch v5, default block"), "{f}");
    }

    /// `host A or host B or host C`: source and destination tests alternate; regrouped.
    #[test]
    fn alternating_values_regroup() {
        let f = tabled(
            "block0:
    v0 = const 1
    v1 = const 2
    v2 = const 3
    v3 = load.b [0]
    v4 = load.b [1]
    br eq v3, v0, block7, block1
block1:
    br eq v4, v0, block7, block2
block2:
    br eq v3, v1, block7, block3
block3:
    br eq v4, v1, block7, block4
block4:
    br eq v3, v2, block7, block5
block5:
    br eq v4, v2, block7, block6
block6:
    ret 0
block7:
    ret 1
",
        );
        assert_eq!(switches(&f).len(), 2, "{f}");
    }

    #[test]
    fn blocks_that_compute_end_the_chain() {
        let f = tabled(
            "block0:
    v0 = const 1
    v1 = const 2
    v2 = const 3
    v3 = load.b [0]
    br eq v3, v0, block4, block1
block1:
    v4 = load.b [9]
    br eq v3, v1, block4, block2
block2:
    br eq v3, v2, block4, block3
block3:
    ret 0
block4:
    ret 1
",
        );
        assert!(switches(&f).is_empty(), "{f}");
    }
}
