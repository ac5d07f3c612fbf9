//! The fixed point of the pullup rounds on a closed chain, computed at once.
//!
//! A long `or` chain (`host A or host B or ...`) becomes, after the first rounds, a chain of
//! tests that all lead to one return on success and to the next test on failure, ending in a
//! return: `src == A`, `dst == A`, `src == B`, `dst == B`, .... libpcap's pullups then sort it
//! by value, one sweep per round, the runs of equal values roughly doubling each round: about
//! log2(n) more rounds, each a walk over the whole function. Their result is known in advance:
//!
//! * a pullup moves a test of value `v` up to just after a run of `v` tests, past tests of
//!   other values, so the tests of one value keep their order, and the order in which the
//!   values first appear never changes;
//! * the rounds stop when no pullup applies, which in such a chain means every value's tests
//!   are contiguous.
//!
//! So the chain ends grouped by value, the groups in order of first appearance, each group in
//! its original order. [`group_closed_chains`] writes that order directly, for the chains the
//! rest of the function cannot see into or be seen from (below, "closed"); the rounds then go
//! on for the rest of the function exactly as before and find nothing left to do in them.
//!
//! A chain `c1 .. cm` (m >= 2) is closed when:
//!
//! 1. every `ci` is a two-way branch whose shared edge (the true edge of an `or` chain, the
//!    false edge of an `and` chain) leads to one return block `T`, and whose other edge leads
//!    to `c(i+1)`, for `cm` to a return;
//! 2. `c2 .. cm` are entered only from the block before them; no block entering `c1` shares
//!    `T` along its edge to `c1` (it would continue the chain upwards);
//! 3. no branch outside the chains compares a value that a test of the chain compares;
//! 4. no two tests of the chain are the same comparison of the same operands, and no edge along
//!    the chain is an equality with a constant that held;
//! 5. no block uses a value another block defines (nor has parameters).
//!
//! Then pullups anywhere else never walk into the chain (1, 2: their walks follow edges that
//! share their successor; 3: nothing in it is the value they pull), pullups in the chain never
//! leave it (its exits are returns) nor move its first test (3), threading never skips one of
//! its tests (4: no fact along it decides another of its tests; 3: no fact from outside does),
//! and its order changes no value numbers (5). Those conditions persist: no rule moves the
//! chain's edges except its own pullups, which keep it a chain. So the rest of the function
//! evolves round by round as it would have, and the chain reaches the same fixed point.

use sift_ir::{Block, Function, Terminator};

use super::edges::successors;
use super::numbering::{Numbering, Vn};
use super::runs::Chain;
use super::threading::{edge_fact, is_const_equality};

/// Groups the tests of every closed chain of `f` by value (see the module doc); returns
/// which blocks belong to a chain whose edges moved (empty when none did; see [`is_marked`]).
/// `used_elsewhere` is `threading::used_outside_own_block` for `f`, `rpo` its reachable
/// blocks (in any order); `params_anywhere`: some block has parameters.
pub(super) fn group_closed_chains(
    f: &mut Function,
    numbers: &Numbering,
    used_elsewhere: &[bool],
    rpo: &[Block],
    params_anywhere: bool,
) -> Vec<bool> {
    // Condition 5.
    if params_anywhere || used_elsewhere.iter().any(|&u| u) {
        return Vec::new();
    }
    let view = View::new(f, numbers, rpo);
    let mut chains = Vec::new();
    let mut member = vec![false; f.blocks.len()];
    for kind in [Chain::Or, Chain::And] {
        // Blocks entered along the chain edge of a test sharing their shared return: not heads.
        let mut entered_along = vec![false; f.blocks.len()];
        for &p in rpo {
            if let Some((shared, next)) = view.link(kind, p) {
                if view.link(kind, next).is_some_and(|(s, _)| s == shared) {
                    entered_along[next.index()] = true;
                }
            }
        }
        for &head in rpo.iter().filter(|h| !entered_along[h.index()]) {
            let chain = closed_chain_from(&view, kind, head);
            // A block in two chains (not known to arise) is left to the rounds.
            if let Some(chain) = chain.filter(|c| c.blocks.iter().all(|b| !member[b.index()])) {
                for &c in &chain.blocks {
                    member[c.index()] = true;
                }
                chains.push(chain);
            }
        }
    }
    // Chains already grouped need nothing; they count as outside for the others (a chain
    // kept with fewer others is still closed, see the module doc).
    let mut rank = vec![u32::MAX; numbers.count()];
    chains.retain(|chain| {
        let grouped = !needs_grouping(&view, chain, &mut rank);
        if grouped {
            for &c in &chain.blocks {
                member[c.index()] = false;
            }
        }
        !grouped
    });
    if chains.is_empty() {
        return Vec::new();
    }
    // Condition 3, against the values compared outside the chains kept: a chain dropped
    // counts as outside for the others. Value numbers are below the number of values.
    let mut by_value: Vec<(Vn, u32)> = chains
        .iter()
        .enumerate()
        .flat_map(|(i, chain)| chain.blocks.iter().map(move |&c| (c, i as u32)))
        .filter_map(|(c, i)| Some((view.compared(c)?, i)))
        .collect();
    by_value.sort_unstable();
    let chains_comparing = |v: Vn| {
        let first = by_value.partition_point(|&(w, _)| w < v);
        by_value[first..]
            .iter()
            .take_while(move |&&(w, _)| w == v)
            .map(|&(_, i)| i as usize)
    };
    let mut outside = vec![false; numbers.count()];
    let mut newly_outside: Vec<Vn> = rpo
        .iter()
        .filter(|b| !member[b.index()])
        .filter_map(|&b| view.compared(b))
        .collect();
    let mut kept = vec![true; chains.len()];
    while let Some(v) = newly_outside.pop() {
        if std::mem::replace(&mut outside[v as usize], true) {
            continue;
        }
        for i in chains_comparing(v) {
            if std::mem::replace(&mut kept[i], false) {
                newly_outside.extend(chains[i].blocks.iter().filter_map(|&c| view.compared(c)));
            }
        }
    }
    let mut moved: Vec<bool> = Vec::new();
    let kept: Vec<&ClosedChain> = chains
        .iter()
        .zip(kept)
        .filter(|&(chain, kept)| kept && tests_are_distinct(f, numbers, chain))
        .map(|(chain, _)| chain)
        .collect();
    for chain in kept {
        if group(f, &view, chain, &mut rank) {
            moved.resize(f.blocks.len(), false);
            for &c in &chain.blocks {
                moved[c.index()] = true;
            }
        }
    }
    moved
}

/// Whether `b` is marked in a mask from [`group_closed_chains`].
pub(super) fn is_marked(mask: &[bool], b: Block) -> bool {
    mask.get(b.index()).is_some_and(|&m| m)
}

const NONE: u32 = u32::MAX;

/// What the search for chains reads of each reachable block, gathered in one pass over the
/// blocks (the search reads each block several times; the blocks themselves are large and
/// scattered, these arrays small).
struct View {
    /// Per two-way branch: its true and false successors and the value it compares
    /// (`NONE` elsewhere).
    then_: Vec<u32>,
    else_: Vec<u32>,
    compared: Vec<Vn>,
    returns: Vec<bool>,
    /// How many edges of reachable blocks enter each block.
    entries: Vec<u32>,
}

impl View {
    fn new(f: &Function, numbers: &Numbering, rpo: &[Block]) -> View {
        let n = f.blocks.len();
        let mut view = View {
            then_: vec![NONE; n],
            else_: vec![NONE; n],
            compared: vec![NONE; n],
            returns: vec![false; n],
            entries: vec![0; n],
        };
        for &b in rpo {
            let term = &f.block(b).term;
            match term {
                Terminator::Branch {
                    lhs, then_, else_, ..
                } => {
                    view.then_[b.index()] = then_.block.0;
                    view.else_[b.index()] = else_.block.0;
                    view.compared[b.index()] = numbers.vn(*lhs);
                }
                Terminator::Return(_) | Terminator::ReturnValue(_) => {
                    view.returns[b.index()] = true;
                }
                _ => {}
            }
            for s in successors(term) {
                view.entries[s.index()] += 1;
            }
        }
        view
    }

    fn compared(&self, b: Block) -> Option<Vn> {
        Some(self.compared[b.index()]).filter(|&v| v != NONE)
    }

    /// The successor a `kind` chain shares and the one it continues along, for a branch.
    fn edges(&self, kind: Chain, b: Block) -> Option<(Block, Block)> {
        let (t, e) = (self.then_[b.index()], self.else_[b.index()]);
        let (shared, next) = match kind {
            Chain::Or => (t, e),
            Chain::And => (e, t),
        };
        (t != NONE).then_some((Block(shared), Block(next)))
    }

    /// The block a test of a `kind` chain leads to when the chain goes on, and the return
    /// its shared edge leads to (condition 1, without the next block's part).
    fn link(&self, kind: Chain, b: Block) -> Option<(Block, Block)> {
        let (shared, next) = self.edges(kind, b)?;
        (shared != next && self.returns[shared.index()]).then_some((shared, next))
    }
}

struct ClosedChain {
    kind: Chain,
    blocks: Vec<Block>,
}

/// The closed chain headed by `head` (conditions 1 and 2), if `head` heads one of two or more
/// tests; `head` is not entered along the chain edge of a test sharing its return.
fn closed_chain_from(view: &View, kind: Chain, head: Block) -> Option<ClosedChain> {
    let (shared, mut next) = view.link(kind, head)?;
    let mut blocks = vec![head];
    while let Some((s, after)) = view.link(kind, next) {
        if s != shared || view.entries[next.index()] != 1 {
            break;
        }
        blocks.push(next);
        next = after;
        if blocks.len() > view.entries.len() {
            return None; // a cycle: not a chain
        }
    }
    if blocks.len() < 2 || !view.returns[next.index()] {
        return None;
    }
    Some(ClosedChain { kind, blocks })
}

/// Condition 4. The tests are sorted rather than hashed: chains run to 10^4 tests.
fn tests_are_distinct(f: &Function, numbers: &Numbering, chain: &ClosedChain) -> bool {
    let along_then = chain.kind == Chain::And;
    let mut tests: Vec<(u8, Vn, Vn)> = Vec::with_capacity(chain.blocks.len());
    for &c in &chain.blocks {
        let Some((key, fact)) = edge_fact(f, numbers, c, along_then) else {
            return false;
        };
        if is_const_equality(key, fact) {
            return false;
        }
        tests.push((key.0 as u8, key.1, fact.rhs));
    }
    tests.sort_unstable();
    tests.windows(2).all(|w| w[0] != w[1])
}

fn chain_value(view: &View, b: Block) -> Vn {
    view.compared(b).expect("chain tests branch")
}

/// Whether some value's tests in `chain` are not side by side. `seen` is scratch space
/// indexed by value number, all `u32::MAX`, and left so.
fn needs_grouping(view: &View, chain: &ClosedChain, seen: &mut [u32]) -> bool {
    let mut previous = None;
    let mut scattered = false;
    for &c in &chain.blocks {
        let v = chain_value(view, c);
        if previous != Some(v) {
            scattered |= seen[v as usize] != u32::MAX;
            seen[v as usize] = 0;
            previous = Some(v);
        }
    }
    for &c in &chain.blocks {
        seen[chain_value(view, c) as usize] = u32::MAX;
    }
    scattered
}

/// Puts `chain`'s tests in their final order; returns whether it changed. `rank` is scratch
/// space indexed by value number, all `u32::MAX`, and left so.
fn group(f: &mut Function, view: &View, chain: &ClosedChain, rank: &mut [u32]) -> bool {
    let value = |_: &Function, b: Block| chain_value(view, b);
    // Rank of each value by first appearance, then a stable sort by rank.
    let mut values = 0;
    let mut order: Vec<(u32, Block)> = Vec::with_capacity(chain.blocks.len());
    for &c in &chain.blocks {
        let slot = &mut rank[value(f, c) as usize];
        if *slot == u32::MAX {
            *slot = values;
            values += 1;
        }
        order.push((*slot, c));
    }
    for &c in &chain.blocks {
        rank[value(f, c) as usize] = u32::MAX;
    }
    if order.windows(2).all(|w| w[0].0 <= w[1].0) {
        return false;
    }
    order.sort_by_key(|&(r, _)| r);
    #[cfg(test)]
    GROUPED.with(|g| g.set(g.get() + 1));
    let last = *chain.blocks.last().expect("two or more tests");
    let exit = view.edges(chain.kind, last).expect("a branch").1;
    for (i, &(_, c)) in order.iter().enumerate() {
        let next = order.get(i + 1).map_or(exit, |&(_, n)| n);
        set_next(f, chain.kind, c, next);
    }
    true
}

fn set_next(f: &mut Function, kind: Chain, b: Block, next: Block) {
    if let Terminator::Branch { then_, else_, .. } = &mut f.block_mut(b).term {
        match kind {
            Chain::Or => else_.block = next,
            Chain::And => then_.block = next,
        }
    }
}

#[cfg(test)]
thread_local! {
    static GROUPED: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// How many chains this thread has grouped (tests check that theirs exercise the grouping).
#[cfg(test)]
pub(super) fn chains_grouped() -> usize {
    GROUPED.with(std::cell::Cell::get)
}
