//! libpcap's block graph: blocks of straight-line statements, each ending in one conditional
//! jump or a return, and how to rebuild it from a linear program.

use std::collections::BTreeMap;
use std::fmt;

use sift_bpf::{code, Insn};

/// A block's index in [`Graph::blocks`].
pub type BlockId = usize;

/// How a block ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Exit {
    /// A conditional jump (`code` is the whole opcode, `BPF_JMP | op | src`).
    Branch {
        code: u16,
        k: u32,
        jt: BlockId,
        jf: BlockId,
    },
    /// `ret #k`.
    Return(u32),
    /// Anything else a linear program's block can end in: another kind of return (`ret a`),
    /// a jump out of the program, or running off its end. gencode never produces one (outside
    /// `protochain`), so it is kept as the instruction only to be reported.
    Other(Insn),
}

impl Exit {
    /// The successors, `jt` first.
    pub fn successors(&self) -> Vec<BlockId> {
        match *self {
            Exit::Branch { jt, jf, .. } => vec![jt, jf],
            Exit::Return(_) | Exit::Other(_) => vec![],
        }
    }

    /// The exit without its successors, for comparing two blocks' own code.
    pub fn shape(&self) -> Exit {
        match *self {
            Exit::Branch { code, k, .. } => Exit::Branch {
                code,
                k,
                jt: 0,
                jf: 0,
            },
            other => other,
        }
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Exit::Branch { code, k, jt, jf } => {
                let text = sift_bpf::disasm::image(Insn::jump(code, k, 0, 0), 0);
                // `image` numbers the targets from instruction 0; name the blocks instead.
                let head = text.split(" jt ").next().unwrap_or(&text);
                write!(
                    f,
                    "{} -> b{jt} / b{jf}",
                    head.trim_start_matches("(000) ").trim_end()
                )
            }
            Exit::Return(k) => write!(f, "ret #{k}"),
            Exit::Other(insn) => write!(f, "{}", statement_text(insn)),
        }
    }
}

/// One instruction as `tcpdump -d` prints it, without the index.
pub fn statement_text(insn: Insn) -> String {
    let text = sift_bpf::disasm::image(insn, 0);
    text.trim_start_matches("(000) ").trim_end().to_string()
}

/// One block: its statements (no jumps) and its exit.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct BlockCode {
    pub stmts: Vec<Insn>,
    pub exit: Option<Exit>,
}

/// A block graph. Blocks are referred to by index; which one is the entry is the caller's to
/// say (see [`crate::same_graph`]).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Graph {
    pub blocks: Vec<BlockCode>,
}

impl Graph {
    /// A linear program with this graph, from block `entry`: the blocks reachable from it in
    /// reverse postorder (every jump forward), each its statements and its exit, a branch
    /// followed by two `ja` trampolines to its targets (so that no offset has to fit in 8 bits).
    /// For a consumer that rebuilds the graph from it (as `sift_libpcap` does, numbering the
    /// blocks by the graph, not the layout, and reading a branch to a `ja` as a branch to the
    /// `ja`'s target); not libpcap's own layout. `None` when a block has no exit or an exit
    /// other than a branch or `ret #k`, or when the graph has a cycle.
    pub fn to_linear(&self, entry: BlockId) -> Option<Vec<Insn>> {
        let order = self.reverse_postorder(entry)?;
        let exit_len = |b: &BlockCode| match b.exit {
            Some(Exit::Branch { .. }) => 3,
            _ => 1,
        };
        let mut start = vec![usize::MAX; self.blocks.len()];
        let mut at = 0;
        for &b in &order {
            start[b] = at;
            at += self.blocks[b].stmts.len() + exit_len(&self.blocks[b]);
        }
        let mut out = Vec::with_capacity(at);
        for &b in &order {
            let block = &self.blocks[b];
            out.extend_from_slice(&block.stmts);
            match block.exit? {
                Exit::Branch { code, k, jt, jf } => {
                    out.push(Insn::jump(code, k, 0, 1));
                    for to in [jt, jf] {
                        let from = out.len() + 1;
                        let offset = u32::try_from(start[to].checked_sub(from)?).ok()?;
                        out.push(Insn::stmt(code::JMP | code::JA, offset));
                    }
                }
                Exit::Return(k) => out.push(Insn::stmt(code::RET | code::K, k)),
                Exit::Other(_) => return None,
            }
        }
        Some(out)
    }

    /// The statements and exits of the blocks reachable from `entry`: the size of the program
    /// libpcap would emit for it, without long jumps.
    pub fn instructions_from(&self, entry: BlockId) -> Option<usize> {
        let order = self.reverse_postorder(entry)?;
        Some(order.iter().map(|&b| self.blocks[b].stmts.len() + 1).sum())
    }

    /// The blocks reachable from `entry`, each before its successors; `None` on a cycle or a
    /// successor out of range.
    fn reverse_postorder(&self, entry: BlockId) -> Option<Vec<BlockId>> {
        const NEW: u8 = 0;
        const OPEN: u8 = 1;
        const DONE: u8 = 2;
        let mut state = vec![NEW; self.blocks.len()];
        let mut post = Vec::new();
        let mut stack = vec![(entry, 0usize)];
        *state.get_mut(entry)? = OPEN;
        while let Some((b, next)) = stack.last_mut() {
            let b = *b;
            let succs = match self.blocks[b].exit {
                Some(Exit::Branch { jt, jf, .. }) => [Some(jt), Some(jf)],
                _ => [None, None],
            };
            match succs.get(*next).copied().flatten() {
                Some(s) => {
                    *next += 1;
                    match *state.get(s)? {
                        NEW => {
                            state[s] = OPEN;
                            stack.push((s, 0));
                        }
                        OPEN => return None,
                        _ => {}
                    }
                }
                None => {
                    state[b] = DONE;
                    post.push(b);
                    stack.pop();
                }
            }
        }
        post.reverse();
        Some(post)
    }
}

impl fmt::Display for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.blocks.iter().enumerate() {
            writeln!(f, "b{i}:")?;
            for s in &b.stmts {
                writeln!(f, "    {}", statement_text(*s))?;
            }
            match &b.exit {
                Some(e) => writeln!(f, "    {e}")?,
                None => writeln!(f, "    (no exit)")?,
            }
        }
        Ok(())
    }
}

fn is_ja(insn: Insn) -> bool {
    insn.code == code::JMP | code::JA
}

fn is_conditional_jump(insn: Insn) -> bool {
    insn.code & 7 == code::JMP && !is_ja(insn)
}

/// Where control goes from instruction `at`: through any `ja`s (libpcap emits `ja` only after
/// a conditional jump whose offset does not fit in 8 bits, as a trampoline, so it is not a
/// block of its own). `None` outside the program or on a `ja` loop.
fn resolve(insns: &[Insn], mut at: usize) -> Option<usize> {
    for _ in 0..=insns.len() {
        let insn = insns.get(at)?;
        if !is_ja(*insn) {
            return Some(at);
        }
        at = at.checked_add(1)?.checked_add(insn.k as usize)?;
    }
    None
}

/// Rebuilds libpcap's block graph from its linear program (`bpf_program`): a block starts at
/// the entry and at every jump target and runs up to and including its conditional jump or
/// return; each block of libpcap's graph appears once in its output, so the blocks found are
/// exactly libpcap's. The entry is block 0; blocks are numbered in program order.
pub fn from_linear(insns: &[Insn]) -> Graph {
    // Leaders (block starts) in program order, found by walking from the entry.
    let mut ids: BTreeMap<usize, BlockId> = BTreeMap::new();
    let mut work = Vec::new();
    let mut reached = std::collections::BTreeSet::new();
    if let Some(start) = resolve(insns, 0) {
        work.push(start);
    }
    let mut ends: BTreeMap<usize, (Vec<Insn>, ExitAt)> = BTreeMap::new();
    while let Some(start) = work.pop() {
        if !reached.insert(start) {
            continue;
        }
        let (stmts, exit) = scan(insns, start);
        if let ExitAt::Branch { jt, jf, .. } = exit {
            work.extend([jt, jf].into_iter().flatten());
        }
        ends.insert(start, (stmts, exit));
    }
    for (n, start) in reached.iter().enumerate() {
        ids.insert(*start, n);
    }
    let mut graph = Graph::default();
    for (start, (stmts, exit)) in ends {
        debug_assert_eq!(ids[&start], graph.blocks.len());
        let exit = match exit {
            ExitAt::Branch {
                insn,
                jt: Some(jt),
                jf: Some(jf),
            } => Exit::Branch {
                code: insn.code,
                k: insn.k,
                jt: ids[&jt],
                jf: ids[&jf],
            },
            ExitAt::Branch { insn, .. } => Exit::Other(insn),
            ExitAt::Return(insn) if insn.code == code::RET | code::K => Exit::Return(insn.k),
            ExitAt::Return(insn) => Exit::Other(insn),
            ExitAt::End => Exit::Other(Insn::default()),
        };
        graph.blocks.push(BlockCode {
            stmts,
            exit: Some(exit),
        });
    }
    graph
}

/// How a scanned block ends, with its successors as instruction indices.
enum ExitAt {
    Branch {
        insn: Insn,
        jt: Option<usize>,
        jf: Option<usize>,
    },
    Return(Insn),
    End,
}

/// The statements from `start` up to the block's end, and the end.
fn scan(insns: &[Insn], start: usize) -> (Vec<Insn>, ExitAt) {
    let mut stmts = Vec::new();
    let mut at = Some(start);
    while let Some(i) = at {
        let insn = insns[i];
        if is_conditional_jump(insn) {
            let next = i + 1;
            return (
                stmts,
                ExitAt::Branch {
                    insn,
                    jt: resolve(insns, next + usize::from(insn.jt)),
                    jf: resolve(insns, next + usize::from(insn.jf)),
                },
            );
        }
        if insn.code & 7 == code::RET {
            return (stmts, ExitAt::Return(insn));
        }
        stmts.push(insn);
        at = resolve(insns, i + 1);
    }
    (stmts, ExitAt::End)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LDH: u16 = code::LD | code::H | code::ABS;
    const JEQ: u16 = code::JMP | code::JEQ | code::K;
    const RET: u16 = code::RET | code::K;

    /// Blocks start at the entry and at jump targets; a `ja` after a jump (libpcap's
    /// trampoline for long offsets) is followed, not made a block.
    #[test]
    fn blocks_of_a_linear_program() {
        let insns = [
            Insn::stmt(LDH, 12),
            Insn::jump(JEQ, 0x800, 0, 1), // jt: the `ja` below, jf: instruction 3
            Insn::stmt(code::JMP | code::JA, 2),
            Insn::stmt(LDH, 20),
            Insn::jump(JEQ, 6, 0, 1),
            Insn::stmt(RET, 262_144),
            Insn::stmt(RET, 0),
        ];
        let g = from_linear(&insns);
        let exits: Vec<Exit> = g.blocks.iter().map(|b| b.exit.unwrap()).collect();
        assert_eq!(
            exits,
            [
                Exit::Branch {
                    code: JEQ,
                    k: 0x800,
                    jt: 2,
                    jf: 1
                },
                Exit::Branch {
                    code: JEQ,
                    k: 6,
                    jt: 2,
                    jf: 3
                },
                Exit::Return(262_144),
                Exit::Return(0),
            ]
        );
        assert_eq!(g.blocks[1].stmts, [Insn::stmt(LDH, 20)]);
    }

    /// A jump out of the program or running off its end is reported, not a panic.
    #[test]
    fn malformed_programs_are_blocks_too() {
        let g = from_linear(&[Insn::stmt(LDH, 12), Insn::jump(JEQ, 1, 9, 9)]);
        assert!(matches!(g.blocks[0].exit, Some(Exit::Other(_))));
        let g = from_linear(&[Insn::stmt(LDH, 12)]);
        assert!(matches!(g.blocks[0].exit, Some(Exit::Other(_))));
        assert!(from_linear(&[]).blocks.is_empty());
    }
}
