//! The terminators threading walks through, in one dense array.
//!
//! Threading walks 10^5 blocks per round on long chains, several steps per edge, and each
//! step read a block, its parameters and three value numbers scattered over the numbering's
//! tables: mostly cache misses. A block's entry here holds what a step needs (successors,
//! libpcap's form of the test, its operands' numbers and the test's numbers as the facts
//! index them) in 32 bytes, filled the first time a walk meets the block.

use sift_ir::{Block, Function, Terminator};

use super::fact_ids::{FactIds, NO_ID};
use super::numbering::{Numbering, Vn};
use super::threading::Test;
use sift_bpf::JmpOp;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Not read yet.
    Unseen,
    Branch,
    Jump,
    /// A switch or a return: threading never steps through it.
    Other,
}

/// One block's terminator as threading sees it.
#[derive(Clone, Copy)]
struct Entry {
    kind: Kind,
    /// Whether the block has parameters (a walk never passes it).
    params: bool,
    /// A branch whose two edges are the same target.
    one_place: bool,
    /// Successor blocks: `then`, `else` (a jump's target first).
    succ: [u32; 2],
    test: Test,
    /// The test's numbers (see [`FactIds`]).
    exact: u32,
    equality: u32,
}

const UNSEEN: Entry = Entry {
    kind: Kind::Unseen,
    params: false,
    one_place: false,
    succ: [0; 2],
    test: Test {
        code: JmpOp::Jeq,
        swapped: false,
        lhs: 0,
        rhs: 0,
        rhs_is_const: false,
    },
    exact: NO_ID,
    equality: NO_ID,
};

pub(super) struct Terms<'a> {
    numbers: &'a Numbering,
    ids: &'a mut FactIds,
    entries: Vec<Entry>,
}

/// The tests a [`Terms`] read, kept into the next round while the numbering and the
/// comparisons' numbers are (see [`Terms::resume`]).
pub(super) struct KnownTests(Vec<Entry>);

impl KnownTests {
    /// Block `b` became block `new_of[b]`.
    pub(super) fn renumber(&mut self, new_of: &[u32]) {
        self.0 = super::renumber::moved(&self.0, new_of);
    }
}

/// A branch's test as the facts see it: its numbers and its right operand.
#[derive(Clone, Copy)]
pub(super) struct TestIds {
    pub(super) exact: u32,
    /// `NO_ID` unless the test is an equality with a constant.
    pub(super) equality: u32,
    pub(super) rhs: Vn,
}

/// What an edge of a branch knows: its test's numbers and the test's outcome.
#[derive(Clone, Copy)]
pub(super) struct EdgeFact {
    pub(super) exact: u32,
    /// `NO_ID` unless the edge says an equality with a constant held.
    pub(super) equality: u32,
    pub(super) rhs: Vn,
    pub(super) holds: bool,
}

/// A branch's or a jump's successor blocks.
#[derive(Clone, Copy)]
pub(super) struct ArrayEdges([u32; 2], usize);

impl ArrayEdges {
    pub(super) fn len(&self) -> usize {
        self.1
    }
}

impl std::ops::Index<usize> for ArrayEdges {
    type Output = u32;
    fn index(&self, i: usize) -> &u32 {
        &self.0[..self.1][i]
    }
}

/// Where a step goes: the block, and which edge of the block stepped through leads there.
pub(super) type Step = (Block, usize);

/// A block of a run of equality tests: the test's equality number and constant, and where a
/// walk goes when the test does not hold (the edge and its target).
#[derive(Clone, Copy)]
pub(super) struct Member {
    pub(super) equality: u32,
    pub(super) rhs: Vn,
    pub(super) false_edge: usize,
    pub(super) next: Block,
}

impl<'a> Terms<'a> {
    pub(super) fn new(f: &Function, numbers: &'a Numbering, ids: &'a mut FactIds) -> Self {
        Terms {
            numbers,
            ids,
            entries: vec![UNSEEN; f.blocks.len()],
        }
    }

    /// A snapshot that reads each block's edges afresh but takes its test from `known`, the
    /// tests a snapshot of an earlier round read with the same `numbers` and `ids`: in the
    /// first loop a branch's comparison and operands never change (its edges do), so neither
    /// do its test and that test's numbers, and the lookups of 10^5 value and comparison
    /// numbers are not made again.
    pub(super) fn resume(
        f: &Function,
        numbers: &'a Numbering,
        ids: &'a mut FactIds,
        known: Option<KnownTests>,
    ) -> Self {
        let Some(KnownTests(mut entries)) = known else {
            return Terms::new(f, numbers, ids);
        };
        entries.resize(f.blocks.len(), UNSEEN);
        for e in &mut entries {
            e.kind = Kind::Unseen;
        }
        Terms {
            numbers,
            ids,
            entries,
        }
    }

    /// The tests read so far, for [`Terms::resume`].
    pub(super) fn into_known(self) -> KnownTests {
        KnownTests(self.entries)
    }

    /// The numbers given to the comparisons read so far.
    pub(super) fn ids(&self) -> &FactIds {
        self.ids
    }

    /// `b`'s entry; walks ask several times per block, so the check is inlined and the first
    /// reading is not.
    #[inline]
    fn entry(&mut self, f: &Function, b: Block) -> Entry {
        let e = self.entries[b.index()];
        if e.kind != Kind::Unseen {
            return e;
        }
        self.read(f, b)
    }

    #[inline(never)]
    fn read(&mut self, f: &Function, b: Block) -> Entry {
        let data = f.block(b);
        // What an earlier reading of this block found (`exact` is set for every branch read).
        let known = self.entries[b.index()];
        let mut e = Entry {
            kind: Kind::Other,
            params: !data.params.is_empty(),
            ..UNSEEN
        };
        match &data.term {
            Terminator::Jump(t) => {
                e.kind = Kind::Jump;
                e.succ = [t.block.0, t.block.0];
            }
            Terminator::Branch {
                op,
                lhs,
                rhs,
                then_,
                else_,
            } => {
                e.kind = Kind::Branch;
                e.one_place = then_ == else_;
                e.succ = [then_.block.0, else_.block.0];
                if known.exact == NO_ID {
                    let t = Test::new(self.numbers, *op, *lhs, *rhs);
                    e.test = t;
                    e.exact = self.ids.exact(t.code, t.lhs, t.rhs);
                    if t.code == JmpOp::Jeq && t.rhs_is_const {
                        e.equality = self.ids.equality(t.code, t.lhs);
                    }
                } else {
                    #[cfg(test)]
                    assert_eq!(
                        known.test,
                        Test::new(self.numbers, *op, *lhs, *rhs),
                        "the test of {b} kept"
                    );
                    (e.test, e.exact, e.equality) = (known.test, known.exact, known.equality);
                }
            }
            _ => {}
        }
        self.entries[b.index()] = e;
        e
    }

    /// `b`'s successors as they were when the walk began at `b`, when it is a branch or a
    /// jump (else `None`: read the terminator), and whether it is a branch.
    pub(super) fn edges(&mut self, f: &Function, b: Block) -> (Option<ArrayEdges>, bool) {
        let e = self.entry(f, b);
        match e.kind {
            Kind::Branch => (Some(ArrayEdges(e.succ, 2)), true),
            Kind::Jump => (Some(ArrayEdges(e.succ, 1)), false),
            _ => (None, false),
        }
    }

    /// The fact an edge of branch `b` establishes (`then_edge` selects the edge), as
    /// `threading::edge_fact` gives it, by number.
    pub(super) fn edge_fact(
        &mut self,
        f: &Function,
        b: Block,
        then_edge: bool,
    ) -> Option<EdgeFact> {
        let e = self.entry(f, b);
        if e.kind != Kind::Branch {
            return None;
        }
        let holds = then_edge != e.test.swapped;
        Some(EdgeFact {
            exact: e.exact,
            equality: if holds { e.equality } else { NO_ID },
            rhs: e.test.rhs,
            holds,
        })
    }

    /// Where a walk entering `c` goes next when `c` may be skipped: it computes nothing used
    /// elsewhere (libpcap's `use_conflict`, `used_elsewhere`), has no parameters and leads to
    /// one place, or `decide` (given the test's numbers) decides its test. `None` when `c`
    /// stays.
    pub(super) fn step(
        &mut self,
        f: &Function,
        used_elsewhere: &[bool],
        c: Block,
        decide: impl Fn(TestIds) -> Option<bool>,
    ) -> Option<Step> {
        let e = self.entry(f, c);
        if e.params || used_elsewhere[c.index()] {
            return None;
        }
        let edge = match e.kind {
            Kind::Jump => 0,
            Kind::Branch if e.one_place => 0,
            Kind::Branch => {
                let holds = decide(TestIds {
                    exact: e.exact,
                    equality: e.equality,
                    rhs: e.test.rhs,
                })?;
                usize::from(holds == e.test.swapped)
            }
            _ => return None,
        };
        Some((Block(e.succ[edge]), edge))
    }

    /// `c` as a member of a run of equality tests ([`super::equality_runs`]): a block a walk
    /// may pass (no parameters, nothing used elsewhere) that branches to two places on an
    /// equality with a constant.
    pub(super) fn equality_member(
        &mut self,
        f: &Function,
        used_elsewhere: &[bool],
        c: Block,
    ) -> Option<Member> {
        let e = self.entry(f, c);
        if e.params
            || used_elsewhere[c.index()]
            || e.kind != Kind::Branch
            || e.one_place
            || e.equality == NO_ID
        {
            return None;
        }
        // The edge `step` takes when the test does not hold.
        let false_edge = usize::from(!e.test.swapped);
        Some(Member {
            equality: e.equality,
            rhs: e.test.rhs,
            false_edge,
            next: Block(e.succ[false_edge]),
        })
    }

    /// An edge of `b` moved: the entry follows `f`.
    pub(super) fn moved(&mut self, f: &Function, b: Block) {
        self.entries[b.index()].kind = Kind::Unseen;
        self.entry(f, b);
    }
}
