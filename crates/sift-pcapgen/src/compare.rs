//! Whether two block graphs are the same program: the same blocks, statement for statement,
//! connected the same way.

use std::collections::HashMap;
use std::fmt;

use sift_bpf::Insn;

use crate::graph::{statement_text, BlockId, Exit, Graph};

/// The first difference [`same_graph`] found, at blocks `a_block` of the first graph and
/// `b_block` of the second, reached by the same path from the entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    pub a_block: BlockId,
    pub b_block: BlockId,
    pub kind: MismatchKind,
}

/// What differs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MismatchKind {
    /// Statement `index` differs (`None`: that block has fewer statements).
    Statement {
        index: usize,
        a: Option<Insn>,
        b: Option<Insn>,
    },
    /// The statements agree but the jumps or returns do not (successors not compared).
    Exit { a: Option<Exit>, b: Option<Exit> },
    /// The graphs' shapes differ: one of the two blocks was already reached by another path
    /// paired with a different block (the block it was paired with is given), so one graph
    /// shares a block where the other has two.
    Shape {
        a_paired_with: Option<BlockId>,
        b_paired_with: Option<BlockId>,
    },
    /// An entry or successor is not a block of its graph.
    Dangling,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, b) = (self.a_block, self.b_block);
        let text = |s: Option<Insn>| s.map_or("(none)".to_string(), statement_text);
        let exit = |e: &Option<Exit>| e.map_or("(none)".to_string(), |e| e.shape().to_string());
        match &self.kind {
            MismatchKind::Statement { index, a: x, b: y } => write!(
                f,
                "block a{a}/b{b}, statement {index}: `{}` vs `{}`",
                text(*x),
                text(*y)
            ),
            MismatchKind::Exit { a: x, b: y } => {
                write!(f, "block a{a}/b{b}, exit: `{}` vs `{}`", exit(x), exit(y))
            }
            MismatchKind::Shape {
                a_paired_with,
                b_paired_with,
            } => write!(
                f,
                "block a{a}/b{b}: shape differs (a{a} already paired with {a_paired_with:?}, \
                 b{b} with {b_paired_with:?})"
            ),
            MismatchKind::Dangling => write!(f, "block a{a}/b{b}: not a block"),
        }
    }
}

/// Walks `a` from `a_root` and `b` from `b_root` in step (depth first, `jt` before `jf`),
/// pairing blocks, and reports the first pair whose statements or exits differ, or where one
/// graph reaches a block again that the other reaches as a new one.
pub fn same_graph(a: &Graph, a_root: BlockId, b: &Graph, b_root: BlockId) -> Result<(), Mismatch> {
    let mut a_to_b: HashMap<BlockId, BlockId> = HashMap::new();
    let mut b_to_a: HashMap<BlockId, BlockId> = HashMap::new();
    let mut work = vec![(a_root, b_root)];
    while let Some((x, y)) = work.pop() {
        let mismatch = |kind| Mismatch {
            a_block: x,
            b_block: y,
            kind,
        };
        match (a_to_b.get(&x), b_to_a.get(&y)) {
            (Some(&y2), Some(&x2)) if y2 == y && x2 == x => continue,
            (None, None) => {}
            (p, q) => {
                return Err(mismatch(MismatchKind::Shape {
                    a_paired_with: p.copied(),
                    b_paired_with: q.copied(),
                }))
            }
        }
        a_to_b.insert(x, y);
        b_to_a.insert(y, x);
        let (Some(bx), Some(by)) = (a.blocks.get(x), b.blocks.get(y)) else {
            return Err(mismatch(MismatchKind::Dangling));
        };
        let n = bx.stmts.len().max(by.stmts.len());
        for i in 0..n {
            let (s, t) = (bx.stmts.get(i).copied(), by.stmts.get(i).copied());
            if s != t {
                return Err(mismatch(MismatchKind::Statement {
                    index: i,
                    a: s,
                    b: t,
                }));
            }
        }
        let (ex, ey) = (bx.exit, by.exit);
        if ex.map(|e| e.shape()) != ey.map(|e| e.shape()) {
            return Err(mismatch(MismatchKind::Exit { a: ex, b: ey }));
        }
        if let (Some(ex), Some(ey)) = (ex, ey) {
            // Pushed in reverse so that `jt` is walked first.
            for (s, t) in ex.successors().into_iter().zip(ey.successors()).rev() {
                work.push((s, t));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::BlockCode;
    use sift_bpf::code;

    fn branch(k: u32, jt: BlockId, jf: BlockId) -> BlockCode {
        BlockCode {
            stmts: vec![Insn::stmt(code::LD | code::B | code::ABS, 0)],
            exit: Some(Exit::Branch {
                code: code::JMP | code::JEQ | code::K,
                k,
                jt,
                jf,
            }),
        }
    }

    fn ret(k: u32) -> BlockCode {
        BlockCode {
            stmts: vec![],
            exit: Some(Exit::Return(k)),
        }
    }

    #[test]
    fn numbering_does_not_matter_but_sharing_does() {
        let a = Graph {
            blocks: vec![branch(1, 1, 2), ret(1), ret(0)],
        };
        let b = Graph {
            blocks: vec![ret(0), ret(1), branch(1, 1, 0)],
        };
        assert_eq!(same_graph(&a, 0, &b, 2), Ok(()));
        // Both edges to one `ret 0` where the other graph has two.
        let c = Graph {
            blocks: vec![branch(1, 1, 2), branch(2, 3, 3), ret(1), ret(0)],
        };
        let d = Graph {
            blocks: vec![branch(1, 1, 2), branch(2, 3, 4), ret(1), ret(0), ret(0)],
        };
        let m = same_graph(&c, 0, &d, 0).unwrap_err();
        assert!(matches!(m.kind, MismatchKind::Shape { .. }), "{m}");
        let e = Graph {
            blocks: vec![branch(7, 1, 2), ret(1), ret(0)],
        };
        let m = same_graph(&a, 0, &e, 0).unwrap_err();
        assert!(matches!(m.kind, MismatchKind::Exit { .. }), "{m}");
    }
}
