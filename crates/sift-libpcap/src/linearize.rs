//! Block graph to linear code, as libpcap's `icode_to_fcode` lays it out.
//!
//! Blocks are placed from the end of the program backwards in a depth-first postorder that
//! visits the false successor before the true one, so each block lands before everything it
//! jumps to. A branch offset that does not fit the 8-bit `jt`/`jf` fields needs a `ja`
//! trampoline right after the branch; libpcap only learns that while placing, so it marks the
//! block and starts the whole layout again with room for the trampoline. The marks persist
//! across attempts (and a marked block keeps its reserved slot even if a later layout would
//! not need it: the slot then stays all-zero, which reads as `ld #0`).

use sift_bpf::{code, Insn};

use crate::graph::Graph;

/// Lays the graph out as a program; marks long branches in the graph as libpcap does.
pub fn linearize(graph: &mut Graph) -> Vec<Insn> {
    loop {
        if let Some(prog) = try_layout(graph) {
            return prog;
        }
    }
}

/// One layout attempt; `None` after marking a branch that needs a trampoline.
fn try_layout(graph: &mut Graph) -> Option<Vec<Insn>> {
    let order = graph.postorder(false);
    let len: usize = order.iter().map(|&b| slot_count(graph, b)).sum();
    let mut out = vec![Insn::default(); len];
    let mut offset = vec![0usize; graph.blocks.len()];
    let mut tail = len;
    for &b in &order {
        tail -= slot_count(graph, b);
        offset[b] = tail;
        let block = &graph.blocks[b];
        let mut dst = tail;
        for s in &block.stmts {
            if let Some(c) = s.code {
                out[dst] = Insn::stmt(c, s.k);
                dst += 1;
            }
        }
        out[dst] = Insn::stmt(block.code, block.k);
        let (Some(jt), Some(jf)) = (block.jt, block.jf) else {
            continue;
        };
        // Offsets are relative to the branch; the trampolines follow it.
        let mut extra = 0u8;
        let off_t = offset[jt].wrapping_sub(dst + 1);
        if off_t >= 256 {
            if !block.long_jt {
                graph.blocks[b].long_jt = true;
                return None;
            }
            out[dst].jt = extra;
            extra += 1;
            out[dst + usize::from(extra)] = trampoline(off_t, extra);
        } else {
            out[dst].jt = off_t as u8;
        }
        let off_f = offset[jf].wrapping_sub(dst + 1);
        if off_f >= 256 {
            if !block.long_jf {
                graph.blocks[b].long_jf = true;
                return None;
            }
            out[dst].jf = extra;
            extra += 1;
            out[dst + usize::from(extra)] = trampoline(off_f, extra);
        } else {
            out[dst].jf = off_f as u8;
        }
    }
    Some(out)
}

/// Instructions a block occupies: live statements, the branch, reserved trampolines.
fn slot_count(graph: &Graph, b: usize) -> usize {
    let block = &graph.blocks[b];
    block.live_len() + 1 + usize::from(block.long_jt) + usize::from(block.long_jf)
}

/// The `ja` at `extra` slots after a branch that reaches the branch's target `off` + 1 ahead.
fn trampoline(off: usize, extra: u8) -> Insn {
    Insn::stmt(
        code::JMP | code::JA,
        off.wrapping_sub(usize::from(extra)) as u32,
    )
}
