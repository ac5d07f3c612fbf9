//! Lifting classic BPF into sift's IR, so that imported programs run through the same optimizer
//! and engines as compiled expressions.
//!
//! The machine state — `A`, `X` and the 16 scratch words — becomes SSA values: each basic block
//! of the program (split at jump targets and after jumps) becomes an IR block, and where several
//! paths meet, every state word that is live and differs between the incoming paths becomes a
//! block parameter. Forward jumps make the graph acyclic, as the IR requires.
//!
//! Instruction by instruction: loads become `Inst::Load` (with `index` = `X` for `[x + k]`),
//! `ldx msh` becomes `((P[k] & 0xf) << 2)`, `ld len` becomes `WireLen`, ALU operations become
//! `Binary`/`Neg` with the constant materialised, jumps become `Branch` (or `Jump` when both
//! offsets agree), `ret #k` becomes `Return(k)` and `ret a` `ReturnValue`. The IR's semantics
//! match `bpf_filter`'s: an out-of-bounds load or a division by zero rejects the packet.
//!
//! A `protochain` loop (the only backward jumps validation lets through, see
//! [`crate::protochain`]) becomes one [`Inst::Protochain`] taking `A` and `X` and giving `A`;
//! validation has checked that nothing reads the loop's `X` or scratch word afterwards and that
//! control enters the loop only at its first instruction, so the loop is one block of the
//! lifted program and the graph stays acyclic. The IR's walk rejects a packet whose chain is a
//! cycle, where `bpf_filter` would loop forever.
//! `lsh #k`/`rsh #k` with `k >= 32` (only in the libpcap dialect) shift by `k % 32`, as the
//! interpreter does.

use sift_ir::{BinOp, Block, CmpOp, Function, Inst, LoadSize, Target, Terminator, Value};

use crate::insn::{AluOp, JmpOp, Op, Src};
use crate::validate::ValidProgram;

/// State words: `A`, `X`, `M[0]` .. `M[15]`.
const A: usize = 0;
const X: usize = 1;
const SLOTS: usize = 18;

fn mem(k: u32) -> usize {
    2 + (k & 15) as usize
}

/// Slots read before being written, and slots written, by one instruction.
fn uses_defs(op: Op, k: u32) -> (u32, u32) {
    let bit = |s: usize| 1u32 << s;
    match op {
        Op::LdAbs(_) | Op::LdLen | Op::LdImm => (0, bit(A)),
        Op::LdInd(_) => (bit(X), bit(A)),
        Op::LdMem => (bit(mem(k)), bit(A)),
        Op::LdxImm | Op::LdxLen | Op::LdxMsh => (0, bit(X)),
        Op::LdxMem => (bit(mem(k)), bit(X)),
        Op::St => (bit(A), bit(mem(k))),
        Op::Stx => (bit(X), bit(mem(k))),
        Op::Alu(_, Src::K) | Op::Neg => (bit(A), bit(A)),
        Op::Alu(_, Src::X) => (bit(A) | bit(X), bit(A)),
        Op::Jmp(_, Src::K) | Op::RetA => (bit(A), 0),
        Op::Jmp(_, Src::X) => (bit(A) | bit(X), 0),
        Op::Ja | Op::RetK => (0, 0),
        Op::Tax => (bit(A), bit(X)),
        Op::Txa => (bit(X), bit(A)),
    }
}

fn bin_op(op: AluOp) -> BinOp {
    match op {
        AluOp::Add => BinOp::Add,
        AluOp::Sub => BinOp::Sub,
        AluOp::Mul => BinOp::Mul,
        AluOp::Div => BinOp::Div,
        AluOp::Mod => BinOp::Mod,
        AluOp::And => BinOp::And,
        AluOp::Or => BinOp::Or,
        AluOp::Xor => BinOp::Xor,
        AluOp::Lsh => BinOp::Shl,
        AluOp::Rsh => BinOp::Shr,
    }
}

fn cmp_op(op: JmpOp) -> CmpOp {
    match op {
        JmpOp::Jeq => CmpOp::Eq,
        JmpOp::Jgt => CmpOp::Gt,
        JmpOp::Jge => CmpOp::Ge,
        JmpOp::Jset => CmpOp::Set,
    }
}

/// A basic block of the program: instructions `start..end`.
struct BpfBlock {
    start: usize,
    end: usize,
    succs: Vec<usize>,
}

/// Splits the program into basic blocks; returns the blocks and, per instruction, the index of
/// the block it starts (if any).
fn basic_blocks(prog: &ValidProgram) -> (Vec<BpfBlock>, Vec<Option<usize>>) {
    let n = prog.len();
    let mut leader = vec![false; n];
    leader[0] = true;
    for l in prog.loops() {
        leader[l.head] = true;
        leader[l.end] = true;
    }
    let in_loop = |i: usize| prog.loops().iter().any(|l| l.contains(i));
    for (i, op) in prog.ops().iter().enumerate() {
        // A loop is one block: its inner jumps start no block.
        if in_loop(i) {
            continue;
        }
        if let Some((t, f)) = prog.jump_targets(i) {
            leader[t] = true;
            leader[f] = true;
        }
        if op.is_terminator() && i + 1 < n {
            leader[i + 1] = true;
        }
    }
    let starts: Vec<usize> = (0..n).filter(|&i| leader[i]).collect();
    let mut block_at = vec![None; n];
    for (b, &s) in starts.iter().enumerate() {
        block_at[s] = Some(b);
    }
    let blocks = starts
        .iter()
        .enumerate()
        .map(|(b, &start)| {
            let end = starts.get(b + 1).copied().unwrap_or(n);
            let last = end - 1;
            let succ_insns = match prog.jump_targets(last) {
                _ if prog.loop_at(start).is_some() => vec![end],
                Some((t, f)) if t == f => vec![t],
                Some((t, f)) => vec![t, f],
                None if matches!(prog.ops()[last], Op::RetK | Op::RetA) => vec![],
                None => vec![end],
            };
            let succs = succ_insns.iter().filter_map(|&i| block_at[i]).collect();
            BpfBlock { start, end, succs }
        })
        .collect();
    (blocks, block_at)
}

/// Lifts a valid program into an IR function that computes the same return value on every
/// packet (the function passes `sift_ir::verify`).
pub fn lift(prog: &ValidProgram) -> Function {
    let (blocks, block_at) = basic_blocks(prog);
    let nb = blocks.len();
    let insns = prog.insns();
    let ops = prog.ops();

    // Which blocks are reachable, and their predecessors (blocks only jump forward).
    let mut reachable = vec![false; nb];
    reachable[0] = true;
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); nb];
    for b in 0..nb {
        if reachable[b] {
            for &s in &blocks[b].succs {
                reachable[s] = true;
                preds[s].push(b);
            }
        }
    }

    // Liveness of state words at block entries (one backward pass: the graph is acyclic and
    // successors have higher indices).
    let mut live_in = vec![0u32; nb];
    for b in (0..nb).rev() {
        let mut live: u32 = blocks[b].succs.iter().fold(0, |acc, &s| acc | live_in[s]);
        if prog.loop_at(blocks[b].start).is_some() {
            live_in[b] = live | 1 << A | 1 << X;
            continue;
        }
        for i in (blocks[b].start..blocks[b].end).rev() {
            let (uses, defs) = uses_defs(ops[i], insns[i].k);
            live = (live & !defs) | uses;
        }
        live_in[b] = live;
    }

    let mut f = Function::new();
    let mut ir_block: Vec<Option<Block>> = vec![None; nb];
    let mut bpf_block_of: Vec<usize> = Vec::new();
    for b in 0..nb {
        if reachable[b] {
            ir_block[b] = Some(f.create_block());
            bpf_block_of.push(b);
        }
    }
    let entry = Function::ENTRY;
    let zero = f.iconst(entry, 0);
    let mut out_state: Vec<[Value; SLOTS]> = vec![[zero; SLOTS]; nb];
    let mut param_slots: Vec<Vec<usize>> = vec![Vec::new(); nb];

    for b in 0..nb {
        let Some(blk) = ir_block[b] else { continue };
        let mut state = match preds[b].as_slice() {
            [] => [zero; SLOTS],
            [p] => out_state[*p],
            many => {
                let mut state = out_state[many[0]];
                for slot in 0..SLOTS {
                    if live_in[b] & (1 << slot) == 0 {
                        // Dead here: any dominating value will do; never read.
                        state[slot] = zero;
                        continue;
                    }
                    let first = out_state[many[0]][slot];
                    if many.iter().any(|&p| out_state[p][slot] != first) {
                        state[slot] = f.add_param(blk);
                        param_slots[b].push(slot);
                    }
                }
                state
            }
        };
        let term = lift_block(
            &mut f, blk, &blocks[b], prog, &mut state, &ir_block, &block_at,
        );
        f.set_term(blk, term);
        out_state[b] = state;
    }

    // Edge arguments, now that every block's parameters are known.
    for b in 0..nb {
        let Some(blk) = ir_block[b] else { continue };
        let state = out_state[b];
        let mut term = std::mem::take(&mut f.block_mut(blk).term);
        for t in term.targets_mut() {
            let succ = bpf_block_of[t.block.index()];
            t.args = param_slots[succ].iter().map(|&s| state[s]).collect();
        }
        f.set_term(blk, term);
    }
    f
}

/// Translates the instructions of one block, updating `state`; returns its terminator (with
/// edge arguments still empty).
fn lift_block(
    f: &mut Function,
    blk: Block,
    block: &BpfBlock,
    prog: &ValidProgram,
    state: &mut [Value; SLOTS],
    ir_block: &[Option<Block>],
    block_at: &[Option<usize>],
) -> Terminator {
    // Jump targets and fall-through successors of a reachable block start reachable blocks.
    let target_of = |i: usize| -> Target {
        let b = block_at[i].and_then(|b| ir_block[b]);
        Target::from(b.expect("successors of reachable blocks are lifted"))
    };
    if let Some(l) = prog.loop_at(block.start) {
        state[A] = f.push(
            blk,
            Inst::Protochain {
                chain: l.chain,
                base: l.base,
                proto: state[A],
                offset: state[X],
                target: l.target,
            },
        );
        // Validation checked that neither is read before being written again.
        let garbage = f.iconst(blk, 0);
        state[X] = garbage;
        state[mem(l.scratch)] = garbage;
        return Terminator::Jump(target_of(l.end));
    }
    for i in block.start..block.end {
        let insn = prog.insns()[i];
        let k = insn.k;
        match prog.ops()[i] {
            Op::LdAbs(s) => {
                state[A] = f.push(
                    blk,
                    Inst::Load {
                        index: None,
                        offset: k,
                        size: s.load_size(),
                    },
                )
            }
            Op::LdInd(s) => {
                state[A] = f.push(
                    blk,
                    Inst::Load {
                        index: Some(state[X]),
                        offset: k,
                        size: s.load_size(),
                    },
                )
            }
            Op::LdLen => state[A] = f.push(blk, Inst::WireLen),
            Op::LdxLen => state[X] = f.push(blk, Inst::WireLen),
            Op::LdImm => state[A] = f.iconst(blk, k),
            Op::LdxImm => state[X] = f.iconst(blk, k),
            Op::LdMem => state[A] = state[mem(k)],
            Op::LdxMem => state[X] = state[mem(k)],
            Op::St => state[mem(k)] = state[A],
            Op::Stx => state[mem(k)] = state[X],
            Op::LdxMsh => {
                let byte = f.push(
                    blk,
                    Inst::Load {
                        index: None,
                        offset: k,
                        size: LoadSize::Byte,
                    },
                );
                let mask = f.iconst(blk, 0xf);
                let low = f.push(blk, Inst::Binary(BinOp::And, byte, mask));
                let two = f.iconst(blk, 2);
                state[X] = f.push(blk, Inst::Binary(BinOp::Shl, low, two));
            }
            Op::Alu(op, src) => {
                let rhs = match src {
                    Src::X => state[X],
                    // bpf_filter's `A <<= k` shifts by k % 32 on the machines libpcap runs on.
                    Src::K if matches!(op, AluOp::Lsh | AluOp::Rsh) => f.iconst(blk, k & 31),
                    Src::K => f.iconst(blk, k),
                };
                state[A] = f.push(blk, Inst::Binary(bin_op(op), state[A], rhs));
            }
            Op::Neg => state[A] = f.push(blk, Inst::Neg(state[A])),
            Op::Tax => state[X] = state[A],
            Op::Txa => state[A] = state[X],
            Op::RetK => return Terminator::Return(k),
            Op::RetA => return Terminator::ReturnValue(state[A]),
            Op::Ja => return Terminator::Jump(target_of(i + 1 + k as usize)),
            Op::Jmp(cond, src) => {
                let (t, e) = prog.jump_targets(i).unwrap_or((i + 1, i + 1));
                if t == e {
                    return Terminator::Jump(target_of(t));
                }
                let rhs = match src {
                    Src::X => state[X],
                    Src::K => f.iconst(blk, k),
                };
                return Terminator::Branch {
                    op: cmp_op(cond),
                    lhs: state[A],
                    rhs,
                    then_: target_of(t),
                    else_: target_of(e),
                };
            }
        }
    }
    Terminator::Jump(target_of(block.end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::asm::assemble;
    use crate::interp;
    use crate::validate::{validate, Dialect};
    use sift_ir::{verify, Cache, Interpreter};

    fn check(text: &str, packets: &[&[u8]]) -> Function {
        let p = validate(&assemble(text).unwrap(), Dialect::Libpcap).unwrap();
        let f = lift(&p);
        verify(&f).unwrap_or_else(|e| panic!("{e}\n{f}"));
        let i = Interpreter::new(f.clone()).unwrap();
        for pkt in packets {
            let want = interp::run(&p, pkt, pkt.len() as u32 + 3);
            let got = i.run(&mut Cache::new(), pkt, pkt.len() as u32 + 3);
            assert_eq!(got, want, "{text} on {pkt:?}\n{f}");
        }
        f
    }

    #[test]
    fn merges_become_parameters() {
        // A differs between the paths into `join`, X does not, M[1] is dead.
        let text = "\
            ldx #7\n\
            ldb [0]\n\
            jeq #1, one, other\n\
            one: ld #100\n\
            ja join\n\
            other: ld #200\n\
            join: add x\n\
            ret a\n";
        let f = check(text, &[&[1], &[2], &[]]);
        let join = f
            .blocks
            .iter()
            .find(|b| matches!(b.term, Terminator::ReturnValue(_)))
            .unwrap();
        assert_eq!(join.params.len(), 1, "{f}");
    }

    #[test]
    fn scratch_index_and_msh() {
        let text = "\
            ldxb 4*([0]&0xf)\n\
            stx M[3]\n\
            ldh [x + 2]\n\
            st M[0]\n\
            ldx M[3]\n\
            ld M[0]\n\
            jgt x, big, small\n\
            big: ret a\n\
            small: ld len\n\
            ret a\n";
        let mut pkt = vec![0x41u8, 0, 0, 0, 0, 0, 0x12, 0x34];
        check(text, &[&pkt, &pkt[..5], &[]]);
        pkt[0] = 0x40;
        check(text, &[&pkt]);
    }

    #[test]
    fn unreachable_code_and_shared_targets() {
        let text = "\
            ldb [0]\n\
            jset #1, t, t\n\
            ret #5\n\
            t: div #3\n\
            lsh #35\n\
            ret a\n";
        let f = check(text, &[&[9], &[0xff], &[]]);
        assert_eq!(f.reverse_postorder().len(), f.blocks.len());
    }
}
