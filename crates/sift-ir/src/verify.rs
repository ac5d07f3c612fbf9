//! The IR verifier: checks every structural invariant and lists every violation.
//!
//! Invariants:
//! 1. there is an entry block, and every block has a terminator;
//! 2. every edge targets an existing block and passes one argument per block parameter;
//! 3. every value is defined exactly once, by an instruction in one block's list or as one
//!    block's parameter, and `Inst::Param(b)` appears only among `b`'s parameters;
//! 4. the graph is acyclic (filters terminate);
//! 5. every use is dominated by its definition: earlier in the same block, or in a block that
//!    dominates the user (for unreachable blocks, only same-block definitions count);
//! 6. every coprocessor call names an existing pattern or set and passes as many key words as
//!    the set's width needs.

use std::fmt;

pub use crate::dominance::{dominators, dominators_in_order, DominatorTree};
use crate::function::{Block, Function, Inst, Target, Terminator, Value};

/// One broken invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub block: Option<Block>,
    pub message: String,
}

/// Every violation found in a function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    pub violations: Vec<Violation>,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "IR verification failed:")?;
        for v in &self.violations {
            match v.block {
                Some(b) => writeln!(f, "  {b}: {}", v.message)?,
                None => writeln!(f, "  {}", v.message)?,
            }
        }
        Ok(())
    }
}

impl std::error::Error for VerifyError {}

fn has_cycle(f: &Function) -> bool {
    // Kahn's algorithm over all blocks.
    let n = f.blocks.len();
    let mut indegree = vec![0usize; n];
    for b in &f.blocks {
        for s in b.term.successors() {
            if s.index() < n {
                indegree[s.index()] += 1;
            }
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut seen = 0;
    while let Some(i) = ready.pop() {
        seen += 1;
        for s in f.blocks[i].term.successors() {
            let j = s.index();
            if j < n {
                indegree[j] -= 1;
                if indegree[j] == 0 {
                    ready.push(j);
                }
            }
        }
    }
    seen != n
}

/// Checks the invariants listed in the module documentation.
pub fn verify(f: &Function) -> Result<(), VerifyError> {
    let mut violations = Vec::new();
    let mut fail =
        |block: Option<Block>, message: String| violations.push(Violation { block, message });
    if f.blocks.is_empty() {
        fail(None, "function has no entry block".into());
        return Err(VerifyError { violations });
    }
    let nblocks = f.blocks.len();
    // Definitions: where each value is defined (block, position; params at position 0), as
    // two words (`NOWHERE`: not defined): long chains have 10^6 values, and an `Option` of a
    // block and a `usize` took three times the memory to fill and read at random.
    const NOWHERE: (u32, u32) = (u32::MAX, u32::MAX);
    let mut def: Vec<(u32, u32)> = vec![NOWHERE; f.values.len()];
    let define = |def: &mut Vec<(u32, u32)>, v: Value, b: Block, pos: usize| {
        std::mem::replace(&mut def[v.index()], (b.0, pos as u32)) != NOWHERE
    };
    for (bi, data) in f.blocks.iter().enumerate() {
        let b = Block(bi as u32);
        for &p in &data.params {
            if p.index() >= f.values.len() {
                fail(Some(b), format!("parameter {p} does not exist"));
                continue;
            }
            if f.values[p.index()] != Inst::Param(b) {
                fail(
                    Some(b),
                    format!("parameter {p} is not defined as a parameter of {b}"),
                );
            }
            if define(&mut def, p, b, 0) {
                fail(Some(b), format!("{p} is defined twice"));
            }
        }
        for (i, &v) in data.insts.iter().enumerate() {
            if v.index() >= f.values.len() {
                fail(Some(b), format!("instruction {v} does not exist"));
                continue;
            }
            if matches!(f.values[v.index()], Inst::Param(_)) {
                fail(
                    Some(b),
                    format!("{v} is a parameter listed as an instruction"),
                );
            }
            if define(&mut def, v, b, i + 1) {
                fail(Some(b), format!("{v} is defined twice"));
            }
            if let Some(message) = check_call(f, &f.values[v.index()]) {
                fail(Some(b), format!("{v}: {message}"));
            }
        }
        match &data.term {
            Terminator::Unset => fail(Some(b), "block has no terminator".into()),
            term => {
                if let Terminator::Switch { cases, .. } = term {
                    let mut keys: Vec<u32> = cases.iter().map(|(k, _)| *k).collect();
                    keys.sort_unstable();
                    if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
                        fail(Some(b), format!("switch lists key {} twice", w[0]));
                    }
                }
                term.for_each_target(|t: &Target| {
                    if t.block.index() >= nblocks {
                        fail(Some(b), format!("jump to missing {}", t.block));
                    } else if t.args.len() != f.block(t.block).params.len() {
                        fail(
                            Some(b),
                            format!(
                                "{} takes {} arguments, edge passes {}",
                                t.block,
                                f.block(t.block).params.len(),
                                t.args.len()
                            ),
                        );
                    }
                });
            }
        }
    }
    if has_cycle(f) {
        fail(None, "the control-flow graph has a cycle".into());
        return Err(VerifyError { violations });
    }
    // Reachable blocks are the ones with a place in the tree.
    let tree = DominatorTree::new(&dominators(f).0);
    let reachable: Vec<bool> = (0..nblocks)
        .map(|b| b == 0 || tree.dominates(Function::ENTRY, Block(b as u32)))
        .collect();
    let dominates = |a: Block, b: Block| tree.dominates(a, b);
    // `what` is only formatted when a use is reported: verification runs on every compile.
    let mut check_use = |user: Block, pos: usize, v: Value, what: &dyn fmt::Display| {
        let ok = match def.get(v.index()).copied() {
            None | Some(NOWHERE) => false,
            Some((db, dpos)) if db == user.0 => (dpos as usize) < pos,
            Some((db, _)) => reachable[user.index()] && dominates(Block(db), user),
        };
        if !ok {
            fail(
                Some(user),
                format!("{what} uses {v}, which does not dominate it"),
            );
        }
    };
    for (bi, data) in f.blocks.iter().enumerate() {
        let b = Block(bi as u32);
        for (i, &v) in data.insts.iter().enumerate() {
            if let Some(inst) = f.values.get(v.index()) {
                inst.for_each_operand(|op| check_use(b, i + 1, op, &v));
            }
        }
        let end = data.insts.len() + 1;
        data.term
            .for_each_operand(|op| check_use(b, end, op, &"the terminator"));
    }
    if violations.is_empty() {
        Ok(())
    } else {
        Err(VerifyError { violations })
    }
}

/// Whether a coprocessor call names an existing table entry with the right number of key words.
fn check_call(f: &Function, inst: &Inst) -> Option<String> {
    match inst {
        Inst::Contains { set, pattern, .. } => match f.patterns.get(*set as usize) {
            None => Some(format!("pattern set p{set} does not exist")),
            Some(s) if *pattern as usize >= s.len() => {
                Some(format!("pattern p{set}.{pattern} does not exist"))
            }
            Some(_) => None,
        },
        Inst::Member { set, key } => match f.sets.get(*set as usize) {
            None => Some(format!("set s{set} does not exist")),
            Some(s) if key.len() != s.width().words() => Some(format!(
                "set s{set} takes {} key words, the call passes {}",
                s.width().words(),
                key.len()
            )),
            Some(_) => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_function;

    /// Immediate dominators on a graph with joins, including a join of blocks at different
    /// depths (block4's predecessors are block1 and block2).
    #[test]
    fn dominators_of_joins() {
        let f = crate::parse_function(
            "block0:\n v0 = load.b [0]\n br eq v0, v0, block1, block2\nblock1:\n br eq v0, v0, block3, block4\nblock2:\n br eq v0, v0, block4, block5\nblock3:\n jump block5\nblock4:\n jump block5\nblock5:\n br eq v0, v0, block6, block7\nblock6:\n ret 1\nblock7:\n ret 0\n",
        )
        .unwrap();
        let (idom, rpo) = dominators(&f);
        let b = |i: u32| Some(Block(i));
        assert_eq!(idom, vec![None, b(0), b(0), b(1), b(0), b(0), b(5), b(5)]);
        assert_eq!(rpo.len(), 8);
        assert_eq!(rpo[0], Block(0));
    }

    #[test]
    fn accepts_well_formed() {
        let f = parse_function(
            "block0:\n v0 = load.b [0]\n br eq v0, v0, block1(v0), block2\nblock1(v1):\n ret 1\nblock2:\n ret 0\n",
        )
        .unwrap();
        verify(&f).unwrap();
    }

    #[test]
    fn reports_every_violation() {
        // block1 uses v1 defined in block2, which does not dominate it; block2 passes a wrong
        // argument count; block3 has no terminator.
        let f = parse_function(
            "block0:\n v0 = const 1\n br eq v0, v0, block1, block2\nblock1:\n v2 = add v1, v0\n ret 1\nblock2:\n v1 = const 2\n jump block3(v1)\nblock3:\n",
        )
        .unwrap();
        let e = verify(&f).unwrap_err();
        assert_eq!(e.violations.len(), 3, "{e}");
    }

    #[test]
    fn rejects_cycles() {
        let f = parse_function("block0:\n jump block1\nblock1:\n jump block0\n").unwrap();
        assert!(verify(&f).is_err());
    }
}
