//! Runs of equality tests on one value, which a threading walk passes in one step.
//!
//! In `(src host A and dst port 1) or (src host B and dst port 2) or ...`, once a term's
//! source matched and its port did not, libpcap threads the edge past every later term: each
//! later `src == X` is decided false by the equality `src == A` in force. Those tests lie one
//! after another along their false edges (threading moved them there), so each term's walk
//! stepped through all the later ones: quadratic in the chain. A run here is such a sequence:
//! blocks a walk may pass that test the same value (one equality number) against constants,
//! each the false successor of the one before. One record per run answers where a walk
//! leaves the run and which constants it tests.
//!
//! Passing the whole run is what stepping would do when the equality deciding the run's tests
//! is `x == c0` (the earliest in force at the walk's start, else the one on its own edge) and
//! `c0` is none of the run's constants. `fold_edge` takes the earliest fact that decides a
//! test: `x == c0` decides `x == c` false, and an earlier fact about `x == c` itself either
//! says it failed (false too) or that it held, which would be an equality in force earlier
//! than `x == c0` (one fact per block, on its single incoming edge), so `c0` would be `c`.
//! Otherwise the walk steps as before.
//!
//! A record is made when a walk first meets its blocks. Threading visits every block after
//! its successors and only moves the edges of the block it visits, so the blocks below the
//! walk (all a record holds) keep their edges until the end of the pass.

use sift_ir::{Block, Function};

use super::fast_hash::WordMap;
use super::numbering::Vn;
use super::terms::{Member, Step, Terms};

#[derive(Clone, Copy)]
enum Slot {
    Unseen,
    /// Not a block of any run.
    Outside,
    /// Position `pos` of run `run`, counted from the run's last block.
    In {
        run: u32,
        pos: u32,
    },
}

struct Run {
    equality: u32,
    /// How many blocks the run holds; positions count from its last block.
    len: u32,
    /// The last block's false edge and its target, where a walk leaves the run.
    exit: (Block, usize, Block),
}

/// The runs one threading pass has met.
pub(super) struct EqualityRuns {
    slots: Vec<Slot>,
    runs: Vec<Run>,
    /// Per run and constant, the constant's lowest position in the run: the run from
    /// position `p` tests it when that is at most `p`.
    lowest: WordMap<(u32, Vn), u32>,
    path: Vec<(Block, Member)>,
}

impl EqualityRuns {
    pub(super) fn new(f: &Function) -> EqualityRuns {
        EqualityRuns {
            slots: vec![Slot::Unseen; f.blocks.len()],
            runs: Vec::new(),
            lowest: WordMap::default(),
            path: Vec::new(),
        }
    }

    /// Where a walk at `at` goes after passing the run starting there, when the deciding
    /// equality of the run's value (`equality`, given the run's equality number) has a
    /// constant the run does not test: the last block stepped through, its edge and the
    /// target, as [`Terms::step`] gives them one at a time.
    pub(super) fn pass(
        &mut self,
        f: &Function,
        terms: &mut Terms,
        used_elsewhere: &[bool],
        at: Block,
        equality: impl Fn(u32) -> Option<Vn>,
    ) -> Option<(Block, Step)> {
        let (id, pos) = self.locate(f, terms, used_elsewhere, at)?;
        let run = &self.runs[id as usize];
        let c0 = equality(run.equality)?;
        if self.lowest.get(&(id, c0)).is_some_and(|&p| p <= pos) {
            return None;
        }
        #[cfg(test)]
        PASSED.with(|p| p.set(p.get() + 1));
        let (last, edge, next) = run.exit;
        Some((last, (next, edge)))
    }

    /// The run and position of `at`, recording the run (or extending the one below it) the
    /// first time a walk meets it.
    fn locate(
        &mut self,
        f: &Function,
        terms: &mut Terms,
        used_elsewhere: &[bool],
        at: Block,
    ) -> Option<(u32, u32)> {
        match self.slots[at.index()] {
            Slot::In { run, pos } => return Some((run, pos)),
            Slot::Outside => return None,
            Slot::Unseen => {}
        }
        let Some(first) = terms.equality_member(f, used_elsewhere, at) else {
            self.slots[at.index()] = Slot::Outside;
            return None;
        };
        // Down the false edges through the blocks not met yet.
        self.path.clear();
        self.path.push((at, first));
        let mut next = first.next;
        let below = loop {
            match self.slots[next.index()] {
                // (A path as long as the function would be a cycle: not a run.)
                Slot::Unseen if self.path.len() == self.slots.len() => break None,
                Slot::Unseen => match terms.equality_member(f, used_elsewhere, next) {
                    Some(m) if m.equality == first.equality => {
                        self.path.push((next, m));
                        next = m.next;
                    }
                    Some(_) => break None,
                    None => {
                        self.slots[next.index()] = Slot::Outside;
                        break None;
                    }
                },
                // The top of a run of the same value: this path goes in front of it.
                Slot::In { run, pos }
                    if self.runs[run as usize].equality == first.equality
                        && pos + 1 == self.runs[run as usize].len =>
                {
                    break Some(run);
                }
                _ => break None,
            }
        };
        let run = below.unwrap_or_else(|| {
            let &(last, m) = self.path.last().expect("the path holds `at`");
            self.runs.push(Run {
                equality: first.equality,
                len: 0,
                exit: (last, m.false_edge, next),
            });
            (self.runs.len() - 1) as u32
        });
        let record = &mut self.runs[run as usize];
        for &(b, m) in self.path.iter().rev() {
            let pos = record.len;
            record.len += 1;
            self.lowest.entry((run, m.rhs)).or_insert(pos);
            self.slots[b.index()] = Slot::In { run, pos };
        }
        Some((run, record.len - 1))
    }
}

#[cfg(test)]
thread_local! {
    static PASSED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many runs this thread's walks have passed whole (tests check that theirs do).
#[cfg(test)]
pub(super) fn runs_passed() -> usize {
    PASSED.with(std::cell::Cell::get)
}
