//! Block graph to linear code, as libpcap's `icode_to_fcode` lays it out.
//!
//! Blocks are placed from the end of the program backwards in a depth-first postorder that
//! visits the false successor before the true one, so each block lands before everything it
//! jumps to. A branch offset that does not fit the 8-bit `jt`/`jf` fields needs a `ja`
//! trampoline right after the branch; libpcap only learns that while placing, so it marks the
//! block and starts the whole layout again with room for the trampoline. The marks persist
//! across attempts (and a marked block keeps its reserved slot even if a later layout would
//! not need it: the slot then stays all-zero, which reads as `ld #0`).
//!
//! An attempt places the blocks in the same order every time, and a block's distance from the
//! end of the program depends only on the blocks placed before it; so the attempt after a mark
//! repeats the previous one up to the marked block. `mark_long_branches` therefore finds, in
//! one pass, the marks the attempts end with (a chain of a few thousand tests needs hundreds of
//! them, each a whole layout), and the layout then succeeds at once; the retry loop stays for
//! what the pass might miss.

use sift_bpf::{code, Insn};

use crate::graph::Graph;

/// Lays the graph out as a program; marks long branches in the graph as libpcap does.
pub fn linearize(graph: &mut Graph) -> Vec<Insn> {
    let order = graph.postorder(false);
    mark_long_branches(graph, &order);
    layout_with_retries(graph, &order)
}

/// libpcap's loop: lay out, and whenever a branch turns out too long, mark it and start over.
fn layout_with_retries(graph: &mut Graph, order: &[usize]) -> Vec<Insn> {
    loop {
        if let Some(prog) = try_layout(graph, order) {
            return prog;
        }
    }
}

/// Marks, placing the blocks of `order` as [`try_layout`] does, every branch whose offset does
/// not fit 8 bits: the true edge first, and the block placed again after each mark (its own
/// trampolines push its branch away from its targets).
fn mark_long_branches(graph: &mut Graph, order: &[usize]) {
    // Slots from each placed block's first instruction to the end of the program (`None`: not
    // placed yet, which an acyclic graph never jumps to; left to the retries).
    let mut from_end: Vec<Option<usize>> = vec![None; graph.blocks.len()];
    let mut placed = 0;
    for &b in order {
        loop {
            let start = placed + slot_count(graph, b);
            let block = &graph.blocks[b];
            if let (Some(jt), Some(jf)) = (block.jt, block.jf) {
                // The offset `try_layout` computes from the branch to a target.
                let branch = start - block.live_len() - 1;
                let long = |t: usize| from_end[t].is_some_and(|e| branch.wrapping_sub(e) >= 256);
                if !block.long_jt && long(jt) {
                    graph.blocks[b].long_jt = true;
                    continue;
                }
                if !block.long_jf && long(jf) {
                    graph.blocks[b].long_jf = true;
                    continue;
                }
            }
            from_end[b] = Some(start);
            placed = start;
            break;
        }
    }
}

/// One layout attempt; `None` after marking a branch that needs a trampoline.
fn try_layout(graph: &mut Graph, order: &[usize]) -> Option<Vec<Insn>> {
    let len: usize = order.iter().map(|&b| slot_count(graph, b)).sum();
    let mut out = vec![Insn::default(); len];
    let mut offset = vec![0usize; graph.blocks.len()];
    let mut tail = len;
    for &b in order {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::tests::return_block;
    use crate::graph::{Block, Stmt};

    fn marks(graph: &Graph) -> Vec<(bool, bool)> {
        graph
            .blocks
            .iter()
            .map(|b| (b.long_jt, b.long_jf))
            .collect()
    }

    /// On random acyclic graphs whose branches reach up to thousands of instructions, the
    /// one-pass marks are the ones libpcap's retries end with (so the layout is libpcap's),
    /// and the first layout attempt needs no retry.
    #[test]
    fn one_pass_marks_are_those_the_retries_end_with() {
        let template = return_block();
        let mut rng = sift_testgen::Rng::new(0x11ea_71e5);
        let mut retried = 0;
        for _ in 0..400 {
            let n = 3 + rng.index(600);
            let blocks: Vec<Block> = (0..n)
                .map(|i| {
                    if i + 2 >= n {
                        return Block {
                            code: code::RET | code::K,
                            k: i as u32,
                            ..template.clone()
                        };
                    }
                    let mut target = || Some(i + 1 + rng.index(n - i - 1));
                    let (jt, jf) = (target(), target());
                    let live = rng.index(40);
                    Block {
                        stmts: (0..live)
                            .map(|_| Stmt::new(code::LD | code::W | code::ABS, 14))
                            .collect(),
                        code: code::JMP | code::JEQ | code::K,
                        k: i as u32,
                        jt,
                        jf,
                        ..template.clone()
                    }
                })
                .collect();
            let graph = Graph { blocks, root: 0 };
            // libpcap's way alone, without the one-pass marks.
            let order = graph.postorder(false);
            let mut theirs = graph.clone();
            let expected = layout_with_retries(&mut theirs, &order);
            let mut ours = graph.clone();
            mark_long_branches(&mut ours, &order);
            assert_eq!(marks(&ours), marks(&theirs));
            assert_eq!(try_layout(&mut ours, &order), Some(expected));
            retried += usize::from(marks(&theirs).iter().any(|&(t, f)| t || f));
        }
        // The graphs exercise the trampolines.
        assert!(retried > 200, "{retried}");
    }
}
