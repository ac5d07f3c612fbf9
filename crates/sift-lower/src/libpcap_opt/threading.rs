//! Edge facts and libpcap's `opt_j`: edges sent past the branches they already decide.

use sift_ir::{Block, Function, Target, Terminator, Value};

use super::branches::{libpcap_form, Code};
use super::edges::{edge as edge_at, edge_count, edge_mut, successors};
use super::fast_hash::WordMap;
use super::numbering::{Numbering, Vn};

/// What an edge knows: the comparison it passed through and its outcome.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct Fact {
    pub(super) rhs: Vn,
    pub(super) rhs_is_const: bool,
    pub(super) holds: bool,
}

pub(super) type FactKey = (Code, Vn);

/// Facts in force along a walk of the dominator tree, with an undo log.
///
/// libpcap's `fold_edge` takes the earliest fact (nearest the root) that decides a
/// comparison; a long `or` chain piles up thousands of facts about one value (`ethertype !=
/// 0x800` on every false edge), so the facts are indexed by what they can decide rather than
/// scanned: by `(comparison, lhs, rhs)` for an exact match, and per `(comparison, lhs)` for
/// the equalities with a constant that held (which decide every other constant). Each entry
/// carries its position in the log, so the earliest of the two candidates wins as in a scan.
#[derive(Default)]
struct Facts {
    /// The earliest fact in force about each `(comparison, lhs, rhs)`: position and outcome.
    /// Facts leave in the reverse order they came, so the earliest stays until it leaves.
    exact: WordMap<(FactKey, Vn), (usize, bool)>,
    /// The earliest equality with a constant that held, per `(comparison, lhs)`: position
    /// and constant.
    const_equalities: WordMap<FactKey, (usize, Vn)>,
    log: Vec<Entry>,
    /// A number for the stack up to each position, the same for the same facts in the same
    /// order (hash-consed): a block deeper in the tree re-establishes the fact of the edge its
    /// dominator was threading, and shortcuts made there must hold for it. Computed only as
    /// far as shortcuts ask (rounds that move nothing make none).
    ids: Vec<u32>,
    interned: WordMap<(u32, FactKey, Fact), u32>,
}

struct Entry {
    key: FactKey,
    fact: Fact,
    /// Whether this fact is the earliest of its kind in `exact` / `const_equalities`.
    first_exact: bool,
    first_equality: bool,
}

pub(super) fn is_const_equality(key: FactKey, fact: Fact) -> bool {
    fact.holds && key.0 == Code::Eq && fact.rhs_is_const
}

impl Facts {
    fn push(&mut self, key: FactKey, fact: Fact) {
        use std::collections::hash_map::Entry::Vacant;
        let seq = self.log.len();
        let first_exact = match self.exact.entry((key, fact.rhs)) {
            Vacant(slot) => {
                slot.insert((seq, fact.holds));
                true
            }
            _ => false,
        };
        let first_equality = is_const_equality(key, fact)
            && match self.const_equalities.entry(key) {
                Vacant(slot) => {
                    slot.insert((seq, fact.rhs));
                    true
                }
                _ => false,
            };
        self.log.push(Entry {
            key,
            fact,
            first_exact,
            first_equality,
        });
    }

    fn pop_to(&mut self, len: usize) {
        self.ids.truncate(len);
        while self.log.len() > len {
            let entry = self.log.pop().expect("log entry");
            if entry.first_exact {
                self.exact.remove(&(entry.key, entry.fact.rhs));
            }
            if entry.first_equality {
                self.const_equalities.remove(&entry.key);
            }
        }
    }

    /// libpcap's `fold_edge`: the outcome of `code(lhs, rhs)` if a fact decides it, with the
    /// position of that fact. A fact about the same operands gives its outcome; an equality
    /// with a constant that held decides an equality with another constant as false.
    fn decide(&self, code: Code, lhs: Vn, rhs: Vn, rhs_is_const: bool) -> Option<(bool, usize)> {
        let key = (code, lhs);
        let exact = self
            .exact
            .get(&(key, rhs))
            .map(|&(seq, holds)| (seq, holds));
        let equality = if code == Code::Eq && rhs_is_const {
            self.const_equalities
                .get(&key)
                .map(|&(seq, fact_rhs)| (seq, fact_rhs == rhs))
        } else {
            None
        };
        match (exact, equality) {
            (Some((a, holds)), Some((b, _))) if a <= b => Some((holds, a)),
            (_, Some((b, holds))) => Some((holds, b)),
            (Some((a, holds)), None) => Some((holds, a)),
            (None, None) => None,
        }
    }

    /// Whether the facts in the first `depth` positions are the ones that were there when
    /// `id` was the id at position `depth - 1`.
    fn same_prefix(&mut self, depth: usize, id: u32) -> bool {
        depth == 0 || (depth <= self.log.len() && self.id_at(depth) == id)
    }

    fn id_at(&mut self, depth: usize) -> u32 {
        while self.ids.len() < depth {
            let Entry { key, fact, .. } = self.log[self.ids.len()];
            let parent = self.ids.last().copied().unwrap_or(0);
            let next = self.interned.len() as u32 + 1;
            let id = *self.interned.entry((parent, key, fact)).or_insert(next);
            self.ids.push(id);
        }
        if depth == 0 {
            0
        } else {
            self.ids[depth - 1]
        }
    }
}

/// The fact an edge of `block`'s branch establishes (`then_edge` selects the edge).
pub(super) fn edge_fact(
    f: &Function,
    numbers: &Numbering,
    block: Block,
    then_edge: bool,
) -> Option<(FactKey, Fact)> {
    let Terminator::Branch { op, lhs, rhs, .. } = f.block(block).term else {
        return None;
    };
    let (code, swapped) = libpcap_form(op);
    Some((
        (code, numbers.vn(lhs)),
        Fact {
            rhs: numbers.vn(rhs),
            rhs_is_const: numbers.konst(rhs).is_some(),
            holds: then_edge != swapped,
        },
    ))
}

/// Sends edges past branches their facts decide (libpcap's `opt_j`), walking the dominator
/// tree: the facts in force in a block are those of the single incoming edges of its
/// dominators, the only edges that dominate it in an acyclic graph.
///
/// `used_elsewhere` is [`used_outside_own_block`] for `f`. Returns whether an edge moved, and
/// the dominator tree of `f` as it was on entry (still exact when nothing moved).
pub(super) fn thread_edges(
    f: &mut Function,
    numbers: &Numbering,
    used_elsewhere: &[bool],
    (idom, rpo): (Vec<Option<Block>>, Vec<Block>),
) -> (bool, Vec<Option<Block>>) {
    let tree = DomTree::new(&idom, &rpo);
    let incoming = single_incoming(f, &rpo);
    let mut walk = Walk {
        used_elsewhere,
        visit_time: preorder(&tree, f.blocks.len()),
        now: 0,
        shortcuts: vec![None; f.blocks.len()],
    };
    let mut facts = Facts::default();
    let mut changed = false;
    // Iterative depth-first walk: (block, entered?).
    let mut stack = vec![(Function::ENTRY, false, 0usize)];
    while let Some((b, entered, mark)) = stack.pop() {
        if entered {
            facts.pop_to(mark);
            continue;
        }
        walk.now = walk.visit_time[b.index()];
        let mark = facts.log.len();
        if let Incoming::One(pred, then_edge) = incoming[b.index()] {
            if let Some((key, fact)) = edge_fact(f, numbers, pred, then_edge) {
                facts.push(key, fact);
            }
        }
        let is_branch = matches!(f.block(b).term, Terminator::Branch { .. });
        for edge in 0..edge_count(&f.block(b).term) {
            let inner = facts.log.len();
            if is_branch {
                if let Some((key, fact)) = edge_fact(f, numbers, b, edge == 0) {
                    facts.push(key, fact);
                }
            }
            changed |= walk.thread_one_edge(f, numbers, &mut facts, b, edge);
            facts.pop_to(inner);
        }
        stack.push((b, true, mark));
        for &c in tree.children(b).iter().rev() {
            stack.push((c, false, 0));
        }
    }
    (changed, idom)
}

/// The single edge entering each reachable block, if there is exactly one (with whether it is
/// the true edge of a two-way branch): the edges whose facts hold in the block's subtree.
pub(super) fn single_incoming(f: &Function, rpo: &[Block]) -> Vec<Incoming> {
    let mut incoming: Vec<Incoming> = vec![Incoming::None; f.blocks.len()];
    for &b in rpo {
        let term = &f.block(b).term;
        let is_branch = edge_count(term) == 2;
        for (i, s) in successors(term).enumerate() {
            let slot = &mut incoming[s.index()];
            *slot = match slot {
                Incoming::None => Incoming::One(b, is_branch && i == 0),
                _ => Incoming::Many,
            };
        }
    }
    incoming
}

/// The order [`thread_edges`] visits the dominator tree in (children in order, depth first):
/// a block's edges change only while it is visited, so a walk's result stays true until the
/// first block it read is visited.
fn preorder(tree: &DomTree, n: usize) -> Vec<u32> {
    let mut time = vec![u32::MAX; n];
    let mut clock = 0;
    let mut stack = vec![Function::ENTRY];
    while let Some(b) = stack.pop() {
        time[b.index()] = clock;
        clock += 1;
        stack.extend(tree.children(b).iter().rev());
    }
    time
}

#[derive(Clone, Copy)]
pub(super) enum Incoming {
    None,
    One(Block, bool),
    Many,
}

/// The dominator tree's children lists, in reverse postorder, in one array.
struct DomTree {
    start: Vec<u32>,
    children: Vec<Block>,
}

impl DomTree {
    fn new(idom: &[Option<Block>], rpo: &[Block]) -> DomTree {
        let mut start = vec![0u32; idom.len() + 1];
        for &b in rpo {
            if let Some(d) = idom[b.index()] {
                start[d.index() + 1] += 1;
            }
        }
        for i in 1..start.len() {
            start[i] += start[i - 1];
        }
        let mut fill = start.clone();
        let mut children = vec![Function::ENTRY; start[idom.len()] as usize];
        for &b in rpo {
            if let Some(d) = idom[b.index()] {
                children[fill[d.index()] as usize] = b;
                fill[d.index()] += 1;
            }
        }
        DomTree { start, children }
    }

    fn children(&self, b: Block) -> &[Block] {
        &self.children[self.start[b.index()] as usize..self.start[b.index() + 1] as usize]
    }
}

/// Where a walk that entered a block ended, and while that stays true.
///
/// Long `or` chains make thousands of edges walk the same long run of decided blocks (libpcap
/// takes time quadratic in the chain there). A walk's result holds for any later walk entering
/// one of its blocks as long as (1) the facts it used are still in force, in the same
/// positions (facts only pile up deeper in the dominator tree, and a fact decides a test the
/// same way however many facts follow it), and (2) none of the blocks it read has had its
/// edges moved since (they move only while their block is visited, at a known time).
#[derive(Clone)]
struct Shortcut {
    to: Target,
    /// How many facts (from the bottom of the stack) the walk used, and the id of the last.
    depth: usize,
    id: u32,
    /// The earliest visit, after the walk, of a block it read.
    expires: u32,
}

struct Walk<'a> {
    used_elsewhere: &'a [bool],
    visit_time: Vec<u32>,
    now: u32,
    shortcuts: Vec<Option<Shortcut>>,
}

impl Walk<'_> {
    /// The visit time of `b` if it lies in the future (its edges may still move).
    fn future_visit(&self, b: Block) -> u32 {
        let t = self.visit_time[b.index()];
        if t > self.now {
            t
        } else {
            u32::MAX
        }
    }

    /// One step from skippable block `c`: the target it leads to and the position of the
    /// fact used (`None` if no fact was needed); `None` if `c` cannot be skipped.
    fn step(
        &self,
        f: &Function,
        numbers: &Numbering,
        facts: &Facts,
        c: Block,
    ) -> Option<(Target, Option<usize>)> {
        let data = f.block(c);
        if self.used_elsewhere[c.index()] || !data.params.is_empty() {
            return None;
        }
        match &data.term {
            Terminator::Jump(t) => Some((t.clone(), None)),
            Terminator::Branch { then_, else_, .. } if then_ == else_ => {
                Some((then_.clone(), None))
            }
            Terminator::Branch {
                op,
                lhs,
                rhs,
                then_,
                else_,
            } => {
                let (code, swapped) = libpcap_form(*op);
                let rhs_is_const = numbers.konst(*rhs).is_some();
                let (holds, used) =
                    facts.decide(code, numbers.vn(*lhs), numbers.vn(*rhs), rhs_is_const)?;
                let next = if holds != swapped { then_ } else { else_ };
                Some((next.clone(), Some(used)))
            }
            _ => None,
        }
    }

    /// Moves edge number `edge` of `b`'s terminator forward while the block it enters can be
    /// skipped, exactly as a step-by-step walk would, taking shortcuts that still hold and
    /// leaving one at every block it stepped through.
    fn thread_one_edge(
        &mut self,
        f: &mut Function,
        numbers: &Numbering,
        facts: &mut Facts,
        b: Block,
        edge: usize,
    ) -> bool {
        let start = edge_at(&f.block(b).term, edge)
            .expect("edge exists")
            .clone();
        let mut at = start.clone();
        // The blocks stepped through, each with the facts depth its step needed and the
        // expiry of what it read (a shortcut taken counts as one step).
        let mut path: Vec<(Block, usize, u32)> = Vec::new();
        // Each step moves strictly forward in an acyclic graph, so this terminates; the bound
        // only guards against a malformed graph.
        for _ in 0..f.blocks.len() {
            let c = at.block;
            let valid = self.shortcuts[c.index()]
                .as_ref()
                .filter(|s| s.expires > self.now && facts.same_prefix(s.depth, s.id));
            if let Some(s) = valid {
                path.push((c, s.depth, s.expires));
                at = s.to.clone();
                continue;
            }
            let Some((next, used)) = self.step(f, numbers, facts, c) else {
                break;
            };
            path.push((c, used.map_or(0, |p| p + 1), self.future_visit(c)));
            at = next;
        }
        // The block the walk stopped at was read too: its edges moving could make it skippable.
        let mut expires = self.future_visit(at.block);
        let mut depth = 0;
        for &(c, d, e) in path.iter().rev() {
            depth = depth.max(d);
            expires = expires.min(e);
            self.shortcuts[c.index()] = Some(Shortcut {
                to: at.clone(),
                depth,
                id: facts.id_at(depth),
                expires,
            });
        }
        if at == start {
            return false;
        }
        *edge_mut(&mut f.block_mut(b).term, edge).expect("edge exists") = at;
        true
    }
}

/// For each block, whether a value it defines is used by another block (reachable or not, as
/// libpcap's `use_conflict` sees every block). Only instructions and branch operands count, so
/// this changes only when dead code goes.
pub(super) fn used_outside_own_block(f: &Function) -> Vec<bool> {
    const NOWHERE: u32 = u32::MAX;
    let mut home = vec![NOWHERE; f.values.len()];
    for (i, data) in f.blocks.iter().enumerate() {
        for &v in data.params.iter().chain(&data.insts) {
            home[v.index()] = i as u32;
        }
    }
    let mut out = vec![false; f.blocks.len()];
    for (i, data) in f.blocks.iter().enumerate() {
        let mut note = |v: Value| {
            let h = home[v.index()];
            if h != NOWHERE && h as usize != i {
                out[h as usize] = true;
            }
        };
        for &v in &data.insts {
            f.inst(v).for_each_operand(&mut note);
        }
        data.term.for_each_operand(note);
    }
    out
}
