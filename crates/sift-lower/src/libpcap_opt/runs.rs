//! Runs of a pullup chain: consecutive blocks that test the same value, remembered so that a
//! pullup skips a run in one step instead of walking it block by block.
//!
//! libpcap's pullups walk down a chain past every block testing the chain's value, then past
//! every block testing something else, to the next test of the value. In a long `or` chain the
//! sweeps sort the tests by value (`src` tests first, then `dst` tests), so the runs double in
//! length every round and those walks become quadratic in the chain. A run's blocks share the
//! value and the shared successor, so one record per run answers "where does the run from `x`
//! end" at once; the pullup still checks every block the walk lands on exactly as before.
//!
//! A record stays true while its blocks keep their edges. A pullup changes edges in a few known
//! ways (a test appended to the end of a run, a test taken from the head of a run, a run's last
//! block pointed elsewhere), which are applied to the records in place; any other change to a
//! block drops the record holding it, and the next question about it walks the run again.

use sift_ir::{Block, Function, Target, Terminator};

use super::numbering::Vn;

/// Which chain a pullup walks.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Chain {
    /// Down the false edges; every test shares the true successor.
    Or,
    /// Down the true edges; every test shares the false successor.
    And,
}

impl Chain {
    /// The successor a chain shares (`Or`: the true one) and the one it continues along.
    pub(super) fn edges(self, edges: &BranchEdges, b: Block) -> Option<(Block, Block)> {
        let (then_, else_) = edges.of(b)?;
        Some(match self {
            Chain::Or => (then_, else_),
            Chain::And => (else_, then_),
        })
    }
}

/// The true and false successors of the branches a sweep reads, in one compact array: the
/// blocks themselves are large and, on long chains, scattered, and a sweep reads each block
/// several times. A sweep moves edges here and writes them back when it ends.
pub(super) struct BranchEdges {
    then_else: Vec<(Block, Block)>,
    /// Blocks whose edges moved here, to write back (a block may appear more than once).
    moved: Vec<Block>,
}

/// Not a branch (or not read).
const NOT_BRANCH: Block = Block(u32::MAX);

impl BranchEdges {
    /// A table for a function of `blocks` blocks, with no branch in it yet.
    pub(super) fn new(blocks: usize) -> BranchEdges {
        BranchEdges {
            then_else: vec![(NOT_BRANCH, NOT_BRANCH); blocks],
            moved: Vec::new(),
        }
    }

    /// Enters branch `b`'s edges as the function has them.
    pub(super) fn insert(&mut self, b: Block, then_: Block, else_: Block) {
        self.then_else[b.index()] = (then_, else_);
    }

    /// `b`'s true and false successors, if it is a branch.
    pub(super) fn of(&self, b: Block) -> Option<(Block, Block)> {
        Some(self.then_else[b.index()]).filter(|&(t, _)| t != NOT_BRANCH)
    }

    /// Sends `b`'s true (`then_edge`) or false edge to `to`; `b` is a branch.
    pub(super) fn set(&mut self, b: Block, then_edge: bool, to: Block) {
        let (then_, else_) = &mut self.then_else[b.index()];
        debug_assert!(*then_ != NOT_BRANCH, "{b} is a branch");
        *if then_edge { then_ } else { else_ } = to;
        self.moved.push(b);
    }

    /// Writes the edges moved here into `f`.
    pub(super) fn write_back(self, f: &mut Function) {
        for b in self.moved {
            let (to_then, to_else) = self.then_else[b.index()];
            if let Terminator::Branch { then_, else_, .. } = &mut f.block_mut(b).term {
                if then_.block != to_then {
                    *then_ = Target::from(to_then);
                }
                if else_.block != to_else {
                    *else_ = Target::from(to_else);
                }
            }
        }
    }
}

const NO_RECORD: u32 = u32::MAX;

/// One run: `head` .. `last` along the chain edges, then `end`, the first block that does not
/// continue it. Positions grow along the run (a block put in front gets a smaller one).
struct Record {
    alive: bool,
    head: Block,
    last: Block,
    end: Block,
    /// How many blocks the run holds (merges move the smaller run).
    len: u32,
    /// The largest position whose block was entered in the dominator tree no later than the
    /// block before it; from any position at or after it, entry times increase to `last`.
    last_descent: i64,
}

/// Where the run starting at a block ends (the block after `last` does not continue it).
pub(super) struct Suffix {
    pub(super) last: Block,
    /// Dominator-tree entry times increase from the block to `last`, so the whole suffix lies
    /// in an interval when its two ends do.
    pub(super) increasing: bool,
}

/// The run records of one chain kind during one sweep.
pub(super) struct Runs<'a> {
    chain: Chain,
    compared: &'a [Option<Vn>],
    enter: &'a [u32],
    record_of: Vec<u32>,
    position: Vec<i64>,
    records: Vec<Record>,
    /// Scratch space for [`Runs::rebuild`]'s walk (a sweep rebuilds 10^5 runs on long chains).
    path: Vec<Block>,
}

impl<'a> Runs<'a> {
    pub(super) fn new(chain: Chain, compared: &'a [Option<Vn>], enter: &'a [u32]) -> Runs<'a> {
        let n = compared.len();
        Runs {
            chain,
            compared,
            enter,
            record_of: vec![NO_RECORD; n],
            position: vec![0; n],
            records: Vec::new(),
            path: Vec::new(),
        }
    }

    /// Whether `y`, the chain successor of `u`, continues `u`'s run: a test of the same value
    /// sharing the same successor.
    fn continues(&self, edges: &BranchEdges, u: Block, y: Block) -> bool {
        let (Some((su, _)), Some((sy, _))) =
            (self.chain.edges(edges, u), self.chain.edges(edges, y))
        else {
            return false;
        };
        su == sy
            && self.compared[u.index()].is_some()
            && self.compared[u.index()] == self.compared[y.index()]
    }

    /// The live record holding `x`, checked against the edges of its last block.
    fn record(&mut self, edges: &BranchEdges, x: Block) -> Option<u32> {
        let r = self.record_of[x.index()];
        let rec = self.records.get(r as usize).filter(|rec| rec.alive)?;
        let (last, end) = (rec.last, rec.end);
        let ends_there = self.chain.edges(edges, last).map(|(_, next)| next) == Some(end);
        if ends_there && !self.continues(edges, last, end) {
            Some(r)
        } else {
            self.records[r as usize].alive = false;
            None
        }
    }

    /// Whether entering `b` after `a` in the dominator tree keeps entry times increasing.
    fn increasing(&self, a: Block, b: Block) -> bool {
        self.enter[a.index()] < self.enter[b.index()]
    }

    /// The run from branch `x`: its last block and the block after it.
    pub(super) fn suffix(&mut self, edges: &BranchEdges, x: Block) -> Suffix {
        let r = match self.record(edges, x) {
            Some(r) => r,
            None => self.rebuild(edges, x),
        };
        let rec = &self.records[r as usize];
        let suffix = Suffix {
            last: rec.last,
            increasing: self.position[x.index()] >= rec.last_descent,
        };
        #[cfg(test)]
        self.check(edges, x, &suffix, rec.end);
        suffix
    }

    /// Tests check every answer against a walk of the run.
    #[cfg(test)]
    fn check(&self, edges: &BranchEdges, x: Block, suffix: &Suffix, end: Block) {
        let (mut u, mut increasing) = (x, true);
        loop {
            let (_, y) = self.chain.edges(edges, u).expect("a run's blocks branch");
            if !self.continues(edges, u, y) {
                assert_eq!((suffix.last, end), (u, y), "run from {x}");
                break;
            }
            increasing &= self.increasing(u, y);
            u = y;
        }
        assert!(
            increasing || !suffix.increasing,
            "run from {x} said increasing"
        );
    }

    /// Walks the run from `x` until it ends or reaches the head of a live record, and records
    /// the blocks walked (in front of that record, or as a new one).
    fn rebuild(&mut self, edges: &BranchEdges, x: Block) -> u32 {
        let mut path = std::mem::take(&mut self.path);
        path.clear();
        path.push(x);
        let mut u = x;
        // Every step goes forward in an acyclic graph; the bound guards a malformed one.
        let attach = loop {
            let Some((_, y)) = self.chain.edges(edges, u) else {
                break None;
            };
            if !self.continues(edges, u, y) || path.len() > self.compared.len() {
                break None;
            }
            if let Some(r) = self.record(edges, y) {
                if self.records[r as usize].head == y {
                    break Some(r);
                }
                // `y` is reached from two runs; neither record can describe both.
                self.records[r as usize].alive = false;
            }
            path.push(y);
            u = y;
        };
        let r = match attach {
            Some(r) => r,
            None => {
                let last = *path.last().expect("path holds x");
                let end = self.chain.edges(edges, last).map_or(last, |(_, next)| next);
                self.records.push(Record {
                    alive: true,
                    head: last,
                    last,
                    end,
                    len: 1,
                    last_descent: i64::MIN,
                });
                let r = (self.records.len() - 1) as u32;
                self.record_of[last.index()] = r;
                self.position[last.index()] = 0;
                path.pop();
                r
            }
        };
        for &p in path.iter().rev() {
            self.prepend(r, p);
        }
        self.path = path;
        r
    }

    fn prepend(&mut self, r: u32, p: Block) {
        let head = self.records[r as usize].head;
        let pos = self.position[head.index()] - 1;
        self.position[p.index()] = pos;
        self.record_of[p.index()] = r;
        let increasing = self.increasing(p, head);
        let rec = &mut self.records[r as usize];
        rec.head = p;
        rec.len += 1;
        if !increasing {
            rec.last_descent = rec.last_descent.max(pos + 1);
        }
    }

    /// Forgets the record holding `x` (its edges changed in a way not described below).
    pub(super) fn changed(&mut self, x: Block) {
        if let Some(rec) = self.records.get_mut(self.record_of[x.index()] as usize) {
            rec.alive = false;
        }
    }

    /// `pull`, which headed its run (followed by `after_pull`), was moved elsewhere.
    pub(super) fn take_head(&mut self, pull: Block, after_pull: Block) {
        let r = self.record_of[pull.index()];
        self.record_of[pull.index()] = NO_RECORD;
        let Some(rec) = self.records.get_mut(r as usize).filter(|rec| rec.alive) else {
            return;
        };
        if rec.head == pull && rec.last != pull && self.record_of[after_pull.index()] == r {
            rec.head = after_pull;
            rec.len -= 1;
        } else {
            rec.alive = false;
        }
    }

    /// `owner`, the last block of its run, now leads to `pull`, which continues the run.
    pub(super) fn append(&mut self, edges: &BranchEdges, owner: Block, pull: Block) {
        let r = self.record_of[owner.index()];
        let Some(rec) = self.records.get(r as usize).filter(|rec| rec.alive) else {
            return;
        };
        let (_, end) = self.chain.edges(edges, pull).expect("pull is a branch");
        let leads_to_pull = self.chain.edges(edges, owner).map(|(_, next)| next) == Some(pull);
        // A block entered along two runs' chain edges belongs to neither record.
        let pull_taken = self
            .records
            .get(self.record_of[pull.index()] as usize)
            .is_some_and(|rec| rec.alive);
        if rec.last != owner
            || !leads_to_pull
            || pull_taken
            || !self.continues(edges, owner, pull)
            || self.continues(edges, pull, end)
        {
            self.records[r as usize].alive = false;
            return;
        }
        self.push_last(r, pull, end);
    }

    /// Puts `y` after the last block of record `r`; `end` follows it.
    fn push_last(&mut self, r: u32, y: Block, end: Block) {
        let owner = self.records[r as usize].last;
        let pos = self.position[owner.index()] + 1;
        self.position[y.index()] = pos;
        self.record_of[y.index()] = r;
        let descends = !self.increasing(owner, y);
        let rec = &mut self.records[r as usize];
        rec.last = y;
        rec.end = end;
        rec.len += 1;
        if descends {
            rec.last_descent = pos;
        }
    }

    /// `owner`, the last block of its run, now continues to `next` instead.
    pub(super) fn redirect_last(&mut self, edges: &BranchEdges, owner: Block, next: Block) {
        let r = self.record_of[owner.index()];
        let Some(rec) = self.records.get(r as usize).filter(|rec| rec.alive) else {
            return;
        };
        if rec.last != owner {
            self.records[r as usize].alive = false;
        } else if !self.continues(edges, owner, next) {
            self.records[r as usize].end = next;
        } else {
            self.merge(edges, r, next);
        }
    }

    /// The last block of record `r` now leads to `next`, which continues its run: the two runs
    /// become one, moving the blocks of the shorter (so a block moves O(log n) times).
    fn merge(&mut self, edges: &BranchEdges, r: u32, next: Block) {
        let Some(lower) = self.record(edges, next).filter(|&l| l != r) else {
            self.records[r as usize].alive = false;
            return;
        };
        if self.records[lower as usize].head != next {
            self.records[r as usize].alive = false;
            self.records[lower as usize].alive = false;
            return;
        }
        let members = |this: &Self, rec: u32| {
            let (head, len) = (
                this.records[rec as usize].head,
                this.records[rec as usize].len,
            );
            let mut out = Vec::with_capacity(len as usize);
            let mut u = head;
            for _ in 0..len {
                out.push(u);
                u = this.chain.edges(edges, u).map_or(u, |(_, n)| n);
            }
            out
        };
        if self.records[r as usize].len <= self.records[lower as usize].len {
            for &p in members(self, r).iter().rev() {
                self.prepend(lower, p);
            }
            self.records[r as usize].alive = false;
        } else {
            let moved = members(self, lower);
            let end = self.records[lower as usize].end;
            self.records[lower as usize].alive = false;
            for (i, &y) in moved.iter().enumerate() {
                let after = moved.get(i + 1).copied().unwrap_or(end);
                self.push_last(r, y, after);
            }
        }
    }
}
