//! A dominator tree built from the root down, for the optimizer's block and edge dominators.
//!
//! libpcap keeps each block's (and each edge's) dominators as a bit set over all blocks (all
//! edges), filled and intersected every pass: time and memory quadratic in the graph whatever
//! its shape, and a row far from the last in memory for every test of one. The sets are the
//! paths to the root of a tree. Here a node is placed below the deepest common dominator of
//! what leads into it (found with pointers 1, 2, 4, ... levels up), once all of that is
//! placed, as libpcap's walk from the root down guarantees; then the tree is numbered in
//! preorder, so that `a` dominates `b` when `b`'s number falls in the range of `a`'s subtree.

/// Marks a node not in the tree.
const NONE: u32 = u32::MAX;

/// A tree over nodes `0..count`, some of them placed.
#[derive(Clone, Debug, Default)]
pub struct DominatorTree {
    /// Per node, its depth (a root's is 0), or [`NONE`].
    depth: Vec<u32>,
    /// `up[k][v]`: the node `2^k` levels above `v`, where there is one.
    up: Vec<Vec<u32>>,
    /// The nodes in the order they were placed (each after its parent).
    placed: Vec<u32>,
    /// Per node, its number in a preorder walk of the tree ([`DominatorTree::number`]).
    preorder: Vec<u32>,
    /// Per node, the number of nodes in its subtree (itself included).
    size: Vec<u32>,
}

impl DominatorTree {
    /// A tree of nodes `0..count`, none placed.
    pub fn new(count: usize) -> DominatorTree {
        DominatorTree {
            depth: vec![NONE; count],
            up: vec![vec![NONE; count]],
            ..DominatorTree::default()
        }
    }

    /// Whether `v` is placed.
    pub fn contains(&self, v: usize) -> bool {
        self.depth[v] != NONE
    }

    /// Places `v` below `parent` (placed), or as a root.
    pub fn place(&mut self, v: usize, parent: Option<usize>) {
        let parent = parent.map_or(v as u32, |p| p as u32);
        self.depth[v] = if parent == v as u32 {
            0
        } else {
            self.depth[parent as usize] + 1
        };
        self.up[0][v] = parent;
        let mut k = 1;
        while (1u32 << k) <= self.depth[v] {
            if self.up.len() == k {
                self.up.push(vec![NONE; self.depth.len()]);
            }
            let half = self.up[k - 1][v];
            self.up[k][v] = self.up[k - 1][half as usize];
            k += 1;
        }
        self.placed.push(v as u32);
    }

    /// `v`'s parent (none for a root).
    pub fn parent(&self, v: usize) -> Option<usize> {
        let p = self.up[0][v] as usize;
        (p != v).then_some(p)
    }

    /// How many nodes lie on the path from `v` to its root (itself included).
    pub fn path_len(&self, v: usize) -> usize {
        self.depth[v] as usize + 1
    }

    /// `v`'s ancestor `levels` above it (at most its depth).
    fn ancestor(&self, mut v: u32, levels: u32) -> u32 {
        let mut k = 0;
        while levels >> k != 0 {
            if levels & (1 << k) != 0 {
                v = self.up[k][v as usize];
            }
            k += 1;
        }
        v
    }

    /// The deepest node above or at both `a` and `b` (both placed), if they share a root.
    pub fn common_dominator(&self, a: usize, b: usize) -> Option<usize> {
        let (da, db) = (self.depth[a], self.depth[b]);
        let (mut a, mut b) = if da > db {
            (self.ancestor(a as u32, da - db), b as u32)
        } else {
            (a as u32, self.ancestor(b as u32, db - da))
        };
        if a == b {
            return Some(a as usize);
        }
        // The highest jumps first: below the common node the two stay apart.
        for k in (0..self.up.len()).rev() {
            let (ua, ub) = (self.up[k][a as usize], self.up[k][b as usize]);
            if ua != NONE && ua != ub {
                (a, b) = (ua, ub);
            }
        }
        let (pa, pb) = (self.up[0][a as usize], self.up[0][b as usize]);
        (pa == pb && pa != a).then_some(pa as usize)
    }

    /// Numbers the placed nodes, for [`DominatorTree::dominates`]: subtree sizes from the
    /// leaves up, then preorder numbers from the roots down, each child taking the next free
    /// range inside its parent's.
    pub fn number(&mut self) {
        let n = self.depth.len();
        self.size = vec![0; n];
        for &v in self.placed.iter().rev() {
            let v = v as usize;
            self.size[v] += 1;
            if let Some(p) = self.parent(v) {
                self.size[p] += self.size[v];
            }
        }
        self.preorder = vec![NONE; n];
        // Per node, the first number not yet given inside its range.
        let mut next = vec![0; n];
        let mut roots = 0;
        for &v in &self.placed {
            let v = v as usize;
            let at = match self.parent(v) {
                Some(p) => &mut next[p],
                None => &mut roots,
            };
            self.preorder[v] = *at;
            *at += self.size[v];
            next[v] = self.preorder[v] + 1;
        }
    }

    /// Whether `a` is `b` or above it (both placed; after [`DominatorTree::number`]).
    pub fn dominates(&self, a: usize, b: usize) -> bool {
        let (pa, pb) = (self.preorder[a], self.preorder[b]);
        pa <= pb && pb < pa + self.size[a]
    }
}
