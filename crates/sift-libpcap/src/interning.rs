//! Merging equal blocks (libpcap's `intern_blocks`), the last step before the root fix-up.
//!
//! libpcap works in rounds: it marks the blocks reachable from the root, links every marked
//! block to the highest-numbered marked block with the same live statements, branch, operand
//! and successors, points every edge into a linked block at its link, and starts over until a
//! round moves no edge. Each round merges one more level of a chain of equal blocks, so a
//! chain of `n` tests takes about `n` rounds over all blocks, which was a third of the model's
//! time on an `or` chain of 100 hosts.
//!
//! [`intern_blocks`] plays the same rounds but only looks at what a round changed: the classes
//! of equal blocks are kept in a table, and a round looks only at the classes that gained a
//! member in the last one (a block whose edges moved). The reachable blocks are kept by
//! counting each block's in-edges from reachable blocks (the graph has no cycles, and merging
//! keeps it so: a block's equal has the same successors, so it is never its ancestor).

use foldhash::{HashMap, HashMapExt};

use crate::graph::{BlockId, Graph};

/// What libpcap's `eq_blk` compares: the branch, its operand and targets, and the live
/// statements (numbered).
type BlockKey = (u16, u32, Option<BlockId>, Option<BlockId>, u32);

/// Merges equal blocks as libpcap's `intern_blocks` does; every block's edges end as libpcap
/// leaves them, unreachable blocks' included.
pub fn intern_blocks(g: &mut Graph) {
    let n = g.blocks.len();
    let stmts = numbered_statements(g);
    let key = |g: &Graph, i: BlockId| -> BlockKey {
        let b = &g.blocks[i];
        (b.code, b.k, b.jt, b.jf, stmts[i])
    };
    let root = g.root;
    let mut live = g.reachable();
    // In-edges from reachable blocks: counted exactly, listed lazily (an entry whose edge has
    // since moved, or whose block is no longer reachable, is skipped when read).
    let mut in_degree = vec![0u32; n];
    let mut preds: Vec<Vec<(BlockId, bool)>> = vec![Vec::new(); n];
    let mut classes: HashMap<BlockKey, Vec<BlockId>> = HashMap::new();
    let mut class_of: Vec<Option<BlockKey>> = vec![None; n];
    for i in (0..n).filter(|&i| live[i]) {
        for (taken, s) in successors(g, i) {
            in_degree[s] += 1;
            preds[s].push((i, taken));
        }
        let k = key(g, i);
        classes.entry(k).or_default().push(i);
        class_of[i] = Some(k);
    }
    let mut pending: Vec<BlockKey> = classes
        .iter()
        .filter(|(_, members)| members.len() > 1)
        .map(|(k, _)| *k)
        .collect();
    // Where each merged block's edges went (libpcap's `link` of the round that merged it).
    let mut forward: Vec<Option<BlockId>> = vec![None; n];
    while !pending.is_empty() {
        // This round's links, from the classes as the round starts.
        pending.sort_unstable();
        pending.dedup();
        let mut merged: Vec<(BlockId, BlockId)> = Vec::new();
        for k in pending.drain(..) {
            let Some(members) = classes.get(&k).filter(|m| m.len() > 1) else {
                continue;
            };
            let max = *members.iter().max().expect("two members");
            merged.extend(members.iter().filter(|&&m| m != max).map(|&m| (m, max)));
        }
        let mut moved: Vec<BlockId> = Vec::new();
        for &(m, max) in &merged {
            // Only the root is ever merged twice (it has no in-edge to lose); what libpcap
            // moved into it went to its first link.
            forward[m].get_or_insert(max);
            for (p, taken) in std::mem::take(&mut preds[m]) {
                if !live[p] || edge(g, p, taken) != Some(m) {
                    continue;
                }
                set_edge(g, p, taken, max);
                in_degree[m] -= 1;
                in_degree[max] += 1;
                preds[max].push((p, taken));
                moved.push(p);
            }
        }
        // A round that moves no reachable edge leaves the reachable graph as it is: libpcap
        // stops there, or after one more round that changes only unreachable blocks' edges.
        if moved.is_empty() {
            break;
        }
        // The merged blocks lost every in-edge; they, and what only they reached, are gone.
        let mut dying: Vec<BlockId> = merged.iter().map(|&(m, _)| m).collect();
        while let Some(d) = dying.pop() {
            if d == root || !live[d] || in_degree[d] > 0 {
                continue;
            }
            live[d] = false;
            leave_class(&mut classes, &mut class_of, d);
            for (_, s) in successors(g, d) {
                in_degree[s] -= 1;
                dying.push(s);
            }
        }
        // Blocks whose edges moved may now equal others.
        for p in moved {
            let k = key(g, p);
            if !live[p] || class_of[p] == Some(k) {
                continue;
            }
            leave_class(&mut classes, &mut class_of, p);
            classes.entry(k).or_default().push(p);
            class_of[p] = Some(k);
            pending.push(k);
        }
    }
    // libpcap moves unreachable blocks' edges too, in every round: to the end of the links.
    let follow = |mut b: BlockId| {
        while let Some(next) = forward[b] {
            b = next;
        }
        b
    };
    for b in &mut g.blocks {
        if b.jt.is_some() {
            b.jt = b.jt.map(follow);
            b.jf = b.jf.map(follow);
        }
    }
}

/// Each block's live statements as a number, equal for equal lists (merging only moves edges,
/// so this is done once).
fn numbered_statements(g: &Graph) -> Vec<u32> {
    let mut lists: HashMap<Vec<(u16, u32)>, u32> = HashMap::new();
    g.blocks
        .iter()
        .map(|b| {
            let live = b
                .stmts
                .iter()
                .filter_map(|s| s.code.map(|code| (code, s.k)))
                .collect();
            let next = lists.len() as u32;
            *lists.entry(live).or_insert(next)
        })
        .collect()
}

fn leave_class(
    classes: &mut HashMap<BlockKey, Vec<BlockId>>,
    class_of: &mut [Option<BlockKey>],
    b: BlockId,
) {
    let Some(k) = class_of[b].take() else {
        return;
    };
    let members = classes.get_mut(&k).expect("a block's class is listed");
    let at = members.iter().position(|&m| m == b).expect("listed");
    members.swap_remove(at);
}

/// A branch's edges, taken edge first (none for a return).
fn successors(g: &Graph, b: BlockId) -> impl Iterator<Item = (bool, BlockId)> {
    let block = &g.blocks[b];
    [(true, block.jt), (false, block.jf)]
        .into_iter()
        .filter_map(|(taken, s)| s.map(|s| (taken, s)))
}

fn edge(g: &Graph, b: BlockId, taken: bool) -> Option<BlockId> {
    let block = &g.blocks[b];
    if taken {
        block.jt
    } else {
        block.jf
    }
}

fn set_edge(g: &mut Graph, b: BlockId, taken: bool, to: BlockId) {
    let block = &mut g.blocks[b];
    if taken {
        block.jt = Some(to);
    } else {
        block.jf = Some(to);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_bpf::{code, Insn};
    use sift_testgen::Rng;

    /// libpcap's rounds as it writes them: every round compares every reachable block.
    /// Returns the number of rounds that moved an edge.
    fn intern_blocks_by_rounds(g: &mut Graph) -> usize {
        let n = g.blocks.len();
        let stmts = numbered_statements(g);
        for round in 0.. {
            let live = g.reachable();
            let mut link: Vec<Option<BlockId>> = vec![None; n];
            let mut nearest: HashMap<BlockKey, BlockId> = HashMap::new();
            for i in (0..n).rev().filter(|&i| live[i]) {
                let b = &g.blocks[i];
                let key = (b.code, b.k, b.jt, b.jf, stmts[i]);
                if let Some(&j) = nearest.get(&key) {
                    link[i] = Some(link[j].unwrap_or(j));
                }
                nearest.insert(key, i);
            }
            let mut stable = true;
            for b in &mut g.blocks {
                if b.jt.is_none() {
                    continue;
                }
                for succ in [&mut b.jt, &mut b.jf] {
                    if let Some(l) = succ.and_then(|s| link[s]) {
                        stable = false;
                        *succ = Some(l);
                    }
                }
            }
            if stable {
                return round;
            }
        }
        unreachable!("every round that moves an edge merges a block")
    }

    /// A random loop-free program of few distinct tests whose branches go to a later test or
    /// to one of a tail of repeated returns, so that many blocks are equal, and become equal
    /// as their successors merge.
    fn program(rng: &mut Rng) -> Vec<Insn> {
        const TAIL: [u32; 5] = [0, 1, 0, 1, 0];
        let tests = 1 + rng.index(40);
        let mut prog: Vec<Insn> = (0..tests)
            .map(|i| {
                let mut target = || {
                    let to_tail = tests - 1 - i;
                    if rng.chance(1, 2) {
                        (to_tail + rng.index(TAIL.len())) as u8
                    } else {
                        rng.index(to_tail + 1) as u8
                    }
                };
                let (jt, jf) = (target(), target());
                let k = u32::from(rng.chance(1, 8));
                Insn::jump(code::JMP | code::JEQ | code::K, k, jt, jf)
            })
            .collect();
        if rng.chance(1, 2) {
            prog.insert(0, Insn::stmt(code::LD | code::B | code::ABS, 0));
        }
        prog.extend(TAIL.map(|k| Insn::stmt(code::RET | code::K, k)));
        prog
    }

    #[test]
    fn the_same_edges_as_libpcap_s_rounds() {
        let mut rng = Rng::new(0x1a7e);
        let (mut merged, mut cascades) = (0, 0);
        for _ in 0..20_000 {
            let Ok(g) = Graph::from_program(&program(&mut rng)) else {
                continue;
            };
            let (mut fast, mut rounds) = (g.clone(), g.clone());
            intern_blocks(&mut fast);
            cascades += usize::from(intern_blocks_by_rounds(&mut rounds) > 1);
            let edges = |g: &Graph| -> Vec<_> { g.blocks.iter().map(|b| (b.jt, b.jf)).collect() };
            assert_eq!(edges(&fast), edges(&rounds));
            merged += usize::from(edges(&fast) != edges(&g));
        }
        // The programs must exercise the merging, and merges that make more blocks equal.
        assert!(merged > 10_000, "only {merged} programs merged blocks");
        assert!(
            cascades > 1_000,
            "only {cascades} programs merged in several rounds"
        );
    }
}
