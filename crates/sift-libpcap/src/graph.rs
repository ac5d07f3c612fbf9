//! libpcap's block graph, and its recovery from a linear program.
//!
//! A libpcap block is a list of statements ending in one conditional jump (with a true and a
//! false successor) or in a `ret` (a leaf). libpcap's linearizer writes each reachable block
//! exactly once, as its statements followed by its branch, plus up to two `ja` trampolines
//! right after the branch when a target is more than 255 instructions away. Reading a program
//! back therefore gives libpcap's graph exactly: a block starts at the program's first
//! instruction or at a branch target, and a branch target that is a `ja` stands for the `ja`'s
//! target.
//!
//! Blocks are numbered as libpcap's optimizer numbers them (depth first from the root, true
//! successor before false): the numbering decides the order of edge-dominator bits, of block
//! interning and hence of the output.

use sift_bpf::{code, Insn, Op};

use crate::atoms::{class, mode, AtomSet, MEM_WORDS, N_ATOMS};
use crate::error::OptimizeError;

/// Index of a block in [`Graph::blocks`]; equal to libpcap's block id.
pub type BlockId = usize;

/// One statement. libpcap deletes statements by overwriting their opcode with a NOP marker
/// and keeps them in the list, and several passes look at the deleted ones (the last statement
/// of a block for the branch peepholes is "the last one seen", which may be a deleted one), so
/// the model keeps them too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stmt {
    /// The opcode, or `None` once the optimizer deleted the statement.
    pub code: Option<u16>,
    /// The operand.
    pub k: u32,
}

impl Stmt {
    /// A live statement.
    pub fn new(code: u16, k: u32) -> Stmt {
        Stmt {
            code: Some(code),
            k,
        }
    }

    /// Whether the statement is live and has exactly this opcode.
    pub fn is(&self, c: u16) -> bool {
        self.code == Some(c)
    }
}

/// One block with the per-block state of libpcap's optimizer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// The statements, deleted ones included. Empty is libpcap's null list, which some passes
    /// treat differently from a list of deleted statements.
    pub stmts: Vec<Stmt>,
    /// The branch (a conditional jump) or return opcode.
    pub code: u16,
    /// Its operand.
    pub k: u32,
    /// Successor when the branch is taken; `None` for a return.
    pub jt: Option<BlockId>,
    /// Successor when the branch is not taken; `None` for a return.
    pub jf: Option<BlockId>,
    /// Distance from the leaves (0 for a return), as of the current pass.
    pub level: usize,
    /// Atoms read before being written, here or below, as of the start of the pass.
    pub in_use: AtomSet,
    /// Atoms some successor reads before writing them, as of the start of the pass.
    pub out_use: AtomSet,
    /// Atoms written by the block's statements.
    pub def: AtomSet,
    /// Atoms written before being read.
    pub kill: AtomSet,
    /// Value numbers of the atoms on exit (0 = unknown).
    pub val: [u32; N_ATOMS],
    /// Value number of the branch's operand (the constant, or X on exit).
    pub oval: u32,
    /// The branch opcode as it was when the block was last optimized: the "code" libpcap
    /// attaches to both out-edges (the false edge with a negative sign).
    pub edge_code: u16,
    /// Predecessors, one entry per incoming edge, in libpcap's list order (first = head).
    pub preds: Vec<BlockId>,
    /// Whether the linearizer must put a `ja` trampoline after the branch for the true target.
    pub long_jt: bool,
    /// Same for the false target.
    pub long_jf: bool,
}

impl Block {
    fn new(stmts: Vec<Stmt>, code: u16, k: u32) -> Block {
        Block {
            stmts,
            code,
            k,
            jt: None,
            jf: None,
            level: 0,
            in_use: 0,
            out_use: 0,
            def: 0,
            kill: 0,
            val: [0; N_ATOMS],
            oval: 0,
            edge_code: 0,
            preds: Vec::new(),
            long_jt: false,
            long_jf: false,
        }
    }

    /// Whether the block ends in a `ret`.
    pub fn is_return(&self) -> bool {
        class(self.code) == code::RET
    }

    /// The successors in the order libpcap's depth-first walks visit them (true first).
    pub fn succs(&self) -> [Option<BlockId>; 2] {
        [self.jt, self.jf]
    }

    /// Number of live statements (libpcap's `slength`).
    pub fn live_len(&self) -> usize {
        self.stmts.iter().filter(|s| s.code.is_some()).count()
    }
}

/// A block graph: every block libpcap allocated state for (numbered once, before optimizing;
/// blocks that later become unreachable stay in the array) and the current root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Graph {
    /// The blocks, indexed by id.
    pub blocks: Vec<Block>,
    /// The entry block.
    pub root: BlockId,
}

/// A block as read from the linear program, before numbering.
struct RawBlock {
    stmts: Vec<Stmt>,
    code: u16,
    k: u32,
    /// Instruction indices of the true and false targets (after following trampolines).
    targets: Option<(usize, usize)>,
}

impl Graph {
    /// Recovers libpcap's block graph from a linear program.
    pub fn from_program(prog: &[Insn]) -> Result<Graph, OptimizeError> {
        if prog.is_empty() {
            return Err(OptimizeError::Empty);
        }
        let starts = block_starts(prog)?;
        // Read every block reachable from instruction 0, keyed by its first instruction.
        let mut raw: Vec<(usize, RawBlock)> = Vec::new();
        let mut index_of = std::collections::HashMap::new();
        let mut work = vec![0usize];
        while let Some(start) = work.pop() {
            if index_of.contains_key(&start) {
                continue;
            }
            let block = read_block(prog, start, &starts)?;
            if let Some((t, f)) = block.targets {
                work.push(f);
                work.push(t);
            }
            index_of.insert(start, raw.len());
            raw.push((start, block));
        }
        // Number in libpcap's order: preorder, true successor first.
        let mut id_of = vec![usize::MAX; raw.len()];
        let mut order = Vec::with_capacity(raw.len());
        let mut stack = vec![index_of[&0]];
        while let Some(r) = stack.pop() {
            if id_of[r] != usize::MAX {
                continue;
            }
            id_of[r] = order.len();
            order.push(r);
            if let Some((t, f)) = raw[r].1.targets {
                stack.push(index_of[&f]);
                stack.push(index_of[&t]);
            }
        }
        let blocks = order
            .iter()
            .map(|&r| {
                let rb = &raw[r].1;
                let mut b = Block::new(rb.stmts.clone(), rb.code, rb.k);
                if let Some((t, f)) = rb.targets {
                    b.jt = Some(id_of[index_of[&t]]);
                    b.jf = Some(id_of[index_of[&f]]);
                }
                b
            })
            .collect();
        Ok(Graph { blocks, root: 0 })
    }

    /// Blocks reachable from the root, in depth-first postorder visiting the successors in the
    /// given order (`true_first`: true then false, as libpcap's leveling walk; otherwise false
    /// then true, as its linearizer).
    pub fn postorder(&self, true_first: bool) -> Vec<BlockId> {
        let mut seen = vec![false; self.blocks.len()];
        let mut out = Vec::with_capacity(self.blocks.len());
        // (block, next successor slot to look at)
        let mut stack = vec![(self.root, 0usize)];
        seen[self.root] = true;
        while let Some(top) = stack.last_mut() {
            let (b, slot) = *top;
            let succs = self.blocks[b].succs();
            let ordered = if true_first {
                succs
            } else {
                [succs[1], succs[0]]
            };
            if slot < 2 {
                top.1 += 1;
                if let Some(s) = ordered[slot] {
                    if !seen[s] {
                        seen[s] = true;
                        stack.push((s, 0));
                    }
                }
            } else {
                out.push(b);
                stack.pop();
            }
        }
        out
    }

    /// Which blocks are reachable from the root.
    pub fn reachable(&self) -> Vec<bool> {
        let mut seen = vec![false; self.blocks.len()];
        for b in self.postorder(true) {
            seen[b] = true;
        }
        seen
    }
}

/// Where blocks start: instruction 0 and every branch target.
fn block_starts(prog: &[Insn]) -> Result<Vec<bool>, OptimizeError> {
    let mut starts = vec![false; prog.len()];
    starts[0] = true;
    for (pc, insn) in prog.iter().enumerate() {
        if let Some(Op::Jmp(..)) = insn.decode() {
            starts[resolve_target(prog, pc, insn.jt)?] = true;
            starts[resolve_target(prog, pc, insn.jf)?] = true;
        }
    }
    Ok(starts)
}

/// Reads the block starting at `start`: statements up to a conditional jump or a return.
fn read_block(prog: &[Insn], start: usize, starts: &[bool]) -> Result<RawBlock, OptimizeError> {
    let mut stmts = Vec::new();
    let mut pc = start;
    loop {
        if pc != start && starts.get(pc) == Some(&true) {
            // Straight-line code running into another block: libpcap's code generator emits
            // this only for code it then leaves unoptimized (Geneve's "bare jmp").
            return Err(OptimizeError::FallsThrough { index: pc });
        }
        let Some(&insn) = prog.get(pc) else {
            return Err(OptimizeError::FallsOffEnd {
                index: pc.saturating_sub(1),
            });
        };
        let Some(op) = insn.decode() else {
            return Err(OptimizeError::UnknownOpcode {
                index: pc,
                code: insn.code,
            });
        };
        check_scratch(insn, pc)?;
        match op {
            Op::RetK | Op::RetA => {
                return Ok(RawBlock {
                    stmts,
                    code: insn.code,
                    k: insn.k,
                    targets: None,
                })
            }
            Op::Ja => return Err(OptimizeError::StrayJa { index: pc }),
            Op::Jmp(..) => {
                let t = resolve_target(prog, pc, insn.jt)?;
                let f = resolve_target(prog, pc, insn.jf)?;
                return Ok(RawBlock {
                    stmts,
                    code: insn.code,
                    k: insn.k,
                    targets: Some((t, f)),
                });
            }
            _ => stmts.push(Stmt::new(insn.code, insn.k)),
        }
        pc += 1;
    }
}

/// A `ret x` or scratch access beyond `M[15]` cannot come from libpcap and would index past
/// the model's tables.
fn check_scratch(insn: Insn, pc: usize) -> Result<(), OptimizeError> {
    let c = insn.code;
    if class(c) == code::RET && c & 0x18 == 0x08 {
        return Err(OptimizeError::UnsupportedReturn { index: pc });
    }
    let touches_scratch = matches!(class(c), code::ST | code::STX)
        || (matches!(class(c), code::LD | code::LDX) && mode(c) == code::MEM);
    if touches_scratch && insn.k as usize >= MEM_WORDS {
        return Err(OptimizeError::ScratchOutOfRange {
            index: pc,
            k: insn.k,
        });
    }
    Ok(())
}

/// The instruction a branch at `pc` with offset `off` really leads to: a `ja` there is a
/// long-jump trampoline standing for its own target.
fn resolve_target(prog: &[Insn], pc: usize, off: u8) -> Result<usize, OptimizeError> {
    let mut t = pc + 1 + usize::from(off);
    // Trampolines only ever jump forwards, so this terminates.
    while let Some(insn) = prog.get(t) {
        if insn.decode() != Some(Op::Ja) {
            break;
        }
        let next = u64::try_from(t).unwrap_or(u64::MAX) + 1 + u64::from(insn.k);
        match usize::try_from(next) {
            Ok(n) if n < prog.len() => t = n,
            _ => return Err(OptimizeError::JumpOutOfRange { index: t }),
        }
    }
    if t >= prog.len() {
        return Err(OptimizeError::JumpOutOfRange { index: pc });
    }
    Ok(t)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `rows[dst] &= rows[src]`, for the analyses' references (libpcap's bit sets as rows of
    /// booleans).
    pub(crate) fn intersect_rows(rows: &mut [Vec<bool>], dst: usize, src: usize) {
        let row = rows[src].clone();
        rows[dst].iter_mut().zip(row).for_each(|(x, y)| *x &= y);
    }

    /// A block that returns 0, with every analysis field at its start value: the template the
    /// tests' graphs build their blocks from.
    pub(crate) fn return_block() -> Block {
        let ret = Graph::from_program(&[Insn::stmt(code::RET | code::K, 0)]).unwrap();
        ret.blocks[0].clone()
    }

    /// A random acyclic graph for the analyses' tests: block `i` branches to two later blocks
    /// (mostly near ones, as in chains; sometimes both edges to one block), the last one to
    /// three blocks return.
    pub(crate) fn random_graph(rng: &mut sift_testgen::Rng) -> Graph {
        let template = return_block();
        let n = 2 + rng.index(120);
        let returns = 1 + rng.index(3);
        let blocks = (0..n)
            .map(|i| {
                if i + returns >= n {
                    return template.clone();
                }
                let mut target = || {
                    let near = i + 1 + rng.index(3);
                    let far = i + 1 + rng.index(n - i - 1);
                    Some((if rng.index(4) == 0 { far } else { near }).min(n - 1))
                };
                let (jt, jf) = (target(), target());
                Block {
                    code: code::JMP | code::JEQ | code::K,
                    jt,
                    jf,
                    ..template.clone()
                }
            })
            .collect();
        Graph { blocks, root: 0 }
    }
}
