//! Edge dominators (libpcap's `find_edom`), stored as sparse bit sets.
//!
//! libpcap gives every edge a bit set over all edges, filled and then intersected every pass:
//! time and memory quadratic in the size of the graph, whatever its shape (11 MB in each of
//! the 140 passes over `len > 0 and (host A or ...)` with 395 hosts, 4,743 blocks). Here a block stores the set every edge into it shares,
//! as its nonzero words only, and an edge's set is its source block's plus itself: the work
//! and memory follow the sets' sizes, which is the depth of the edge in the dominator tree.
//! Members come out in ascending order, as libpcap's word-by-word scan finds them: the order
//! in which the jump optimizer tries the dominators is part of its result.

use crate::flow::edge_id;
use crate::graph::{BlockId, Graph};

/// A set's words: (index, nonzero bits), by ascending index.
type Word = (u32, u32);

/// Edge dominators of one pass: an edge `e` out of block `b` is dominated by `e` itself and by
/// the edges every path from the root to `b` takes.
#[derive(Clone, Debug, Default)]
pub struct EdgeDominators {
    n_blocks: usize,
    /// Per block, the range of `words` holding the edges every path to it takes; `None` for
    /// a block no reachable block leads to.
    entry: Vec<Option<(u32, u32)>>,
    /// The sets' words, each set a contiguous run.
    words: Vec<Word>,
    /// Per edge, whether it led to a block with a branch: only such an edge can dominate
    /// another edge out of a branch.
    into_branch: Vec<bool>,
}

impl EdgeDominators {
    /// The edge dominators of `g`'s reachable blocks (`levels`, leaves first).
    pub fn new(g: &Graph, levels: &[Vec<BlockId>]) -> EdgeDominators {
        let n = g.blocks.len();
        let mut d = EdgeDominators {
            n_blocks: n,
            entry: vec![None; n],
            words: Vec::new(),
            into_branch: vec![false; 2 * n],
        };
        d.entry[g.root] = Some((0, 0));
        // From the root down, every predecessor comes before its successors: a block's set is
        // complete when its turn comes, and each edge narrows its target's set.
        for level in levels.iter().rev() {
            for &b in level {
                let Some(at_b) = d.entry[b] else { continue };
                for (taken, succ) in [(true, g.blocks[b].jt), (false, g.blocks[b].jf)] {
                    let Some(s) = succ else { continue };
                    let e = edge_id(n, b, taken);
                    d.into_branch[e] = !g.blocks[s].is_return();
                    let start = d.words.len() as u32;
                    match d.entry[s] {
                        None => d.push_with(at_b, e),
                        Some(at_s) => d.push_intersection(at_s, at_b, e),
                    }
                    d.entry[s] = Some((start, d.words.len() as u32));
                }
            }
        }
        d
    }

    /// Appends set `set` plus edge `e`.
    fn push_with(&mut self, (start, end): (u32, u32), e: usize) {
        let own = ((e / 32) as u32, 1u32 << (e % 32));
        let mut placed = false;
        for i in start as usize..end as usize {
            let (w, bits) = self.words[i];
            if !placed && own.0 <= w {
                placed = true;
                if own.0 == w {
                    self.words.push((w, bits | own.1));
                    continue;
                }
                self.words.push(own);
            }
            self.words.push((w, bits));
        }
        if !placed {
            self.words.push(own);
        }
    }

    /// Appends `a ∩ (b ∪ {e})`.
    fn push_intersection(&mut self, (a_start, a_end): (u32, u32), b: (u32, u32), e: usize) {
        let (mut j, b_end) = (b.0 as usize, b.1 as usize);
        for i in a_start as usize..a_end as usize {
            let (w, bits) = self.words[i];
            while j < b_end && self.words[j].0 < w {
                j += 1;
            }
            let mut other = if j < b_end && self.words[j].0 == w {
                self.words[j].1
            } else {
                0
            };
            if e / 32 == w as usize {
                other |= 1 << (e % 32);
            }
            if bits & other != 0 {
                self.words.push((w, bits & other));
            }
        }
    }

    /// Whether edge `d` can dominate an edge out of a block with a branch other than itself.
    pub fn may_dominate_branches(&self, d: usize) -> bool {
        self.into_branch.get(d).copied().unwrap_or(false)
    }

    /// Whether edge `d` dominates edge `e` (or is `e`).
    pub fn dominates(&self, d: usize, e: usize) -> bool {
        if d == e {
            return true;
        }
        let Some((start, end)) = self.entry[e % self.n_blocks] else {
            return false;
        };
        let set = &self.words[start as usize..end as usize];
        set.binary_search_by_key(&((d / 32) as u32), |&(w, _)| w)
            .is_ok_and(|i| set[i].1 & (1 << (d % 32)) != 0)
    }

    /// How many edges dominate edge `e` (itself included).
    pub fn count(&self, e: usize) -> usize {
        let Some((start, end)) = self.entry[e % self.n_blocks] else {
            return 0;
        };
        let set = &self.words[start as usize..end as usize];
        1 + set
            .iter()
            .map(|&(_, bits)| bits.count_ones() as usize)
            .sum::<usize>()
    }

    /// The edges dominating edge `e` (itself included), ascending, into `out` (cleared first);
    /// nothing when `e`'s source is not reachable.
    pub fn dominators_of(&self, e: usize, out: &mut Vec<usize>) {
        out.clear();
        let Some((start, end)) = self.entry[e % self.n_blocks] else {
            return;
        };
        let mut own = Some(e);
        for &(w, mut bits) in &self.words[start as usize..end as usize] {
            let base = w as usize * 32;
            if let Some(x) = own.filter(|&x| x < base) {
                out.push(x);
                own = None;
            }
            if own.is_some_and(|x| x < base + 32) {
                bits |= 1 << (e % 32);
                own = None;
            }
            while bits != 0 {
                out.push(base + bits.trailing_zeros() as usize);
                bits &= bits - 1;
            }
        }
        out.extend(own);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bitset::BitMatrix;
    use crate::flow::find_levels;
    use crate::graph::Block;
    use sift_bpf::{code, Insn};

    /// libpcap's `find_edom` as it is written: a full bit set per edge.
    fn reference(g: &Graph, levels: &[Vec<BlockId>]) -> BitMatrix {
        let n = g.blocks.len();
        let mut edom = BitMatrix::new(2 * n, 2 * n);
        edom.fill();
        edom.clear_row(edge_id(n, g.root, true));
        edom.clear_row(edge_id(n, g.root, false));
        for level in levels.iter().rev() {
            for &b in level {
                for (taken, succ) in [(true, g.blocks[b].jt), (false, g.blocks[b].jf)] {
                    let e = edge_id(n, b, taken);
                    edom.insert(e, e);
                    if let Some(s) = succ {
                        edom.intersect(edge_id(n, s, true), e);
                        edom.intersect(edge_id(n, s, false), e);
                    }
                }
            }
        }
        edom
    }

    /// Random acyclic graphs: block `i` branches to two later blocks (mostly near ones, as in
    /// chains; sometimes both edges to one block), the last blocks return.
    fn random_graph(rng: &mut sift_testgen::Rng) -> Graph {
        let ret = Graph::from_program(&[Insn::stmt(code::RET | code::K, 0)]).unwrap();
        let template = ret.blocks[0].clone();
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

    /// Every reachable edge's set is the reference's row, in ascending order, on chains and
    /// random graphs past several words of edges.
    #[test]
    fn sets_are_libpcaps() {
        let mut rng = sift_testgen::Rng::new(0xed0e_d0e5);
        let mut members = Vec::new();
        for _ in 0..300 {
            let mut g = random_graph(&mut rng);
            let levels = find_levels(&mut g);
            let want = reference(&g, &levels);
            let got = EdgeDominators::new(&g, &levels);
            let n = g.blocks.len();
            for &b in levels.iter().flatten() {
                for taken in [true, false] {
                    let e = edge_id(n, b, taken);
                    got.dominators_of(e, &mut members);
                    let expected: Vec<usize> =
                        (0..2 * n).filter(|&d| want.contains(e, d)).collect();
                    assert_eq!(members, expected, "edge {e} of {n} blocks");
                }
            }
        }
    }
}
