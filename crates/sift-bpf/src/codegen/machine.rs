//! Clean-up and layout of the machine code, on basic blocks of classic BPF ("pieces": straight
//! instructions and one exit) after scratch allocation:
//!
//! 0. **dead register writes** ([`super::deadregs`]): loads into `A` or `X` nobody reads;
//!    then **forwarding** ([`super::forward`]): `st M[k]` reloaded by a nearby `ldx M[k]`
//!    becomes `tax`;
//! 1. **jump threading**: an edge to an empty piece that only jumps goes to that jump's target;
//!    a `ja` to a lone `ret` becomes the `ret`; a conditional jump whose two targets are the
//!    same piece becomes a `ja`;
//! 2. **tail merging**: pieces with the same instructions and the same exit (after their
//!    successors were merged) become one, whatever registers they were reached with: the same
//!    code does the same thing from the same state, so no path's effect changes (this is where
//!    `port 21 or 80` shares the IPv6 and IPv4 tests of the second port); a piece differing
//!    from another only in a target that the other's wire-length test would reach on its paths
//!    takes that test too ([`super::unthread`]);
//! 3. **cross-jumping** ([`super::suffix`]): pieces that end with the same instructions and the
//!    same exit share that suffix;
//! 4. **layout**: a topological order (classic BPF only jumps forward) that puts the target of
//!    an unconditional jump right behind it whenever its other predecessors are placed, so the
//!    `ja` disappears; otherwise depth first, to keep conditional jumps short.
//!
//! The pieces come back as items, for [`super::layout::resolve`] to turn labels into offsets.

// Keys are the code generator's own pieces, looked up but never iterated: a fast hash.
use foldhash::HashMap;
use foldhash::HashMapExt;
use std::hash::{Hash, Hasher};

use super::select::Item;
use crate::insn::{Insn, Op};

/// How a piece ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Exit {
    /// The last instruction is a `ret`.
    Return,
    /// `ja` to a piece.
    Jump(usize),
    /// A conditional jump to two pieces.
    Cond {
        code: u16,
        k: u32,
        t: usize,
        f: usize,
    },
}

/// Tail merging looks up every conditional piece by its exit: three words instead of the
/// derived five fields.
impl Hash for Exit {
    fn hash<H: Hasher>(&self, h: &mut H) {
        match *self {
            Exit::Return => h.write_u64(0),
            Exit::Jump(t) => {
                h.write_u64(1);
                h.write_usize(t);
            }
            Exit::Cond { code, k, t, f } => {
                h.write_u64(2 | u64::from(code) << 16 | u64::from(k) << 32);
                h.write_usize(t);
                h.write_usize(f);
            }
        }
    }
}

impl Exit {
    pub(super) fn successors(self) -> impl Iterator<Item = usize> {
        let (a, b) = match self {
            Exit::Return => (None, None),
            Exit::Jump(t) => (Some(t), None),
            Exit::Cond { t, f, .. } => (Some(t), Some(f)),
        };
        a.into_iter().chain(b)
    }

    /// The `i`th of [`Exit::successors`], for walks that resume a piece's successors where
    /// they left off.
    fn successor(self, i: usize) -> Option<usize> {
        match (self, i) {
            (Exit::Jump(t), 0) | (Exit::Cond { t, .. }, 0) => Some(t),
            (Exit::Cond { f, .. }, 1) => Some(f),
            _ => None,
        }
    }

    /// The jump a conditional exit ends with, decoded (`None` for other exits).
    pub(super) fn test(self) -> Option<Op> {
        let Exit::Cond { code, k, .. } = self else {
            return None;
        };
        Insn {
            code,
            jt: 0,
            jf: 0,
            k,
        }
        .decode()
    }

    fn map(self, m: impl Fn(usize) -> usize) -> Exit {
        match self {
            Exit::Return => Exit::Return,
            Exit::Jump(t) => Exit::Jump(m(t)),
            Exit::Cond { code, k, t, f } => Exit::Cond {
                code,
                k,
                t: m(t),
                f: m(f),
            },
        }
    }
}

#[derive(Clone, Debug)]
pub(super) struct Piece {
    pub(super) insns: Vec<Insn>,
    pub(super) exit: Exit,
}

/// Splits allocated items into pieces (piece 0 is the entry). Code after a `ret` or a jump
/// that no label reaches is dropped; a piece running into a label jumps to it.
fn pieces(items: &[Item]) -> Vec<Piece> {
    let (mut max_label, mut labels) = (0, 0);
    for it in items {
        max_label = max_label.max(match it {
            Item::Label(l) => {
                labels += 1;
                *l
            }
            Item::Jump(l) => *l,
            Item::Cond { t, f, .. } => (*t).max(*f),
            _ => continue,
        });
    }
    // Exits name labels until every label's piece is known. Every piece but the first starts
    // at a label.
    let mut out: Vec<Piece> = Vec::with_capacity(labels + 1);
    let mut piece_of = vec![usize::MAX; max_label + 1];
    // The instructions of the piece being built (its number is `out.len()`), and whether a
    // label names it; `None` after a `ret` or a jump, until the next label.
    let mut current: Option<(Vec<Insn>, bool)> = Some((Vec::new(), false));
    for it in items {
        let exit = match it {
            Item::Label(l) => {
                if let Some((insns, _)) = current.take().filter(|(insns, _)| !insns.is_empty()) {
                    out.push(Piece {
                        insns,
                        exit: Exit::Jump(*l),
                    });
                }
                current = Some((Vec::new(), true));
                piece_of[*l] = out.len();
                continue;
            }
            Item::Insn(insn) => {
                let Some((insns, _)) = &mut current else {
                    continue;
                };
                insns.push(*insn);
                if !matches!(insn.decode(), Some(Op::RetK | Op::RetA)) {
                    continue;
                }
                Exit::Return
            }
            Item::Jump(l) => Exit::Jump(*l),
            Item::Cond { code, k, t, f } => Exit::Cond {
                code: *code,
                k: *k,
                t: *t,
                f: *f,
            },
            // Allocation replaced these; a leftover is a bug that validation will report.
            Item::Store(_)
            | Item::StoreX(_)
            | Item::LoadA(_)
            | Item::LoadX(_)
            | Item::Copy { .. }
            | Item::Walk { .. } => {
                debug_assert!(false, "unallocated slot access");
                continue;
            }
        };
        if let Some((insns, _)) = current.take() {
            out.push(Piece { insns, exit });
        }
    }
    // A program that runs off its end: make it invalid rather than wrong (cannot happen: every
    // block ends in a terminator).
    if let Some((insns, labeled)) = current {
        if !insns.is_empty() || labeled {
            out.push(Piece {
                insns,
                exit: Exit::Jump(usize::MAX),
            });
        }
    }
    for piece in &mut out {
        piece.exit = piece
            .exit
            .map(|l| piece_of.get(l).copied().unwrap_or(usize::MAX));
    }
    out
}

/// Jump threading and tail merging, successors first (`successors_first`: [`postorder`] of
/// `pieces`). Returns the representative of each piece (`usize::MAX` for a dangling target,
/// which validation then refuses).
fn merge(pieces: &mut [Piece], successors_first: &[usize]) -> Vec<usize> {
    const NONE: usize = usize::MAX;
    let n = pieces.len();
    let mut rep = vec![NONE; n];
    // Each distinct instruction list gets a number once, so that the tables below are keyed by
    // small copies instead of clones of the lists (long chains have 10^5 pieces). The tables
    // grow as they fill: sized for every piece, they spread the few thousand keys of a long
    // chain over megabytes, a cache miss per probe.
    let mut code_ids: HashMap<Vec<Insn>, u32> = HashMap::new();
    let mut code_of = vec![u32::MAX; n];
    let mut seen: HashMap<(u32, Exit), usize> = HashMap::new();
    // Conditional pieces by instructions, jump and constant: candidates for un-threading. A
    // twin whose exit reaches no length test cannot lend its exit (`may_take`), so those that
    // can are also listed on their own: in long chains the others are thousands.
    // `by_test` holds the first and last twin of each test, the others follow through
    // `next_twin` in listing order (one list each would be an allocation per test, and most
    // tests of a long chain have one piece).
    let mut by_test: HashMap<(u32, u16, u32), (usize, usize)> = HashMap::new();
    let mut next_twin = vec![NONE; n];
    let mut lenders: HashMap<(u32, u16, u32), Vec<usize>> = HashMap::new();
    // When each representative was listed in `by_test`.
    let (mut listed_at, mut next_listing) = (vec![0usize; n], 0);
    // Per representative of a conditional piece: the pieces merged into it, itself included,
    // as a list threaded through `next_member` (most have only themselves).
    let (mut first_member, mut next_member) = (vec![NONE; n], vec![NONE; n]);
    let lengths = super::unthread::intervals(pieces, successors_first);
    for &p in successors_first {
        let mut exit = pieces[p].exit.map(|s| rep.get(s).copied().unwrap_or(NONE));
        if let Exit::Cond { t, f, .. } = exit {
            if t == f {
                exit = Exit::Jump(t);
            }
        }
        if let Exit::Jump(t) = exit {
            if t != NONE && is_lone_return(&pieces[t]) {
                let ret = pieces[t].insns[0];
                pieces[p].insns.push(ret);
                exit = Exit::Return;
            }
        }
        let next_id = code_ids.len() as u32;
        let code = match code_ids.get(pieces[p].insns.as_slice()) {
            Some(&id) => id,
            None => {
                code_ids.insert(pieces[p].insns.clone(), next_id);
                next_id
            }
        };
        code_of[p] = code;
        if let Exit::Cond { code: jump, k, .. } = exit {
            let key = (code, exit);
            let test = (code, jump, k);
            if !seen.contains_key(&key) {
                use super::unthread::{may_take, reaches_len_test};
                // This piece takes a twin's length test, or a twin (with every piece merged
                // into it, on their own paths) takes this one's.
                let ours = lenders.get(&test).and_then(|twins| {
                    twins
                        .iter()
                        .map(|&q| pieces[q].exit)
                        .find(|&twin| may_take(pieces, lengths[p], p, exit, twin))
                });
                let theirs = || {
                    let &(first, _) = by_test.get(&test)?;
                    let mut twins = std::iter::successors(Some(first), |&q| {
                        Some(next_twin[q]).filter(|&q| q != NONE)
                    });
                    twins.find(|&q| {
                        let mut m = first_member[q];
                        while m != NONE {
                            if !may_take(pieces, lengths[m], m, pieces[q].exit, exit) {
                                return false;
                            }
                            m = next_member[m];
                        }
                        true
                    })
                };
                if let Some(twin) = ours {
                    exit = twin;
                } else if let Some(q) = reaches_len_test(pieces, exit).then(theirs).flatten() {
                    seen.remove(&(code_of[q], pieces[q].exit));
                    pieces[q].exit = exit;
                    seen.insert(key, q);
                    // It lends this exit from now on (it reaches a length test); twins are
                    // tried in the order they were listed, as in `by_test`.
                    let lending = lenders.entry(test).or_default();
                    if let Err(at) = lending.binary_search_by_key(&listed_at[q], |&l| listed_at[l])
                    {
                        lending.insert(at, q);
                    }
                }
            }
        }
        pieces[p].exit = exit;
        rep[p] = match exit {
            Exit::Jump(t) if pieces[p].insns.is_empty() => t,
            _ => *seen.entry((code, exit)).or_insert(p),
        };
        if let (Exit::Cond { code: jump, k, .. }, true) = (exit, rep[p] < n) {
            next_member[p] = std::mem::replace(&mut first_member[rep[p]], p);
            if rep[p] == p {
                let test = (code, jump, k);
                listed_at[p] = next_listing;
                next_listing += 1;
                if super::unthread::reaches_len_test(pieces, exit) {
                    lenders.entry(test).or_default().push(p);
                }
                by_test
                    .entry(test)
                    .and_modify(|(_, last)| next_twin[std::mem::replace(last, p)] = p)
                    .or_insert((p, p));
            }
        }
    }
    rep
}

fn is_lone_return(p: &Piece) -> bool {
    p.exit == Exit::Return && p.insns.len() == 1
}

/// Pieces reachable from the entry, every piece after all its successors.
fn postorder(pieces: &[Piece]) -> Vec<usize> {
    postorder_from(pieces, 0)
}

/// A topological order of the pieces reachable from `entry` (`reachable`, in any order) that
/// lets unconditional jumps fall through when it can.
fn order(pieces: &[Piece], entry: usize, reachable: &[usize]) -> Vec<usize> {
    let mut preds = vec![0usize; pieces.len()];
    for &p in reachable {
        for s in pieces[p].exit.successors() {
            if s < pieces.len() {
                preds[s] += 1;
            }
        }
    }
    let mut placed = vec![false; pieces.len()];
    let mut out = Vec::with_capacity(reachable.len());
    let mut ready = vec![entry];
    let mut next: Option<usize> = None;
    loop {
        let p = match next.take() {
            Some(p) => p,
            None => match ready.pop() {
                Some(p) if placed[p] => continue,
                Some(p) => p,
                None => break,
            },
        };
        placed[p] = true;
        out.push(p);
        let exit = pieces[p].exit;
        // Conditional successors are pushed not-taken last, so it tends to follow directly.
        for s in exit.successors() {
            if s >= pieces.len() {
                continue;
            }
            preds[s] -= 1;
            if preds[s] == 0 {
                match exit {
                    Exit::Jump(_) => next = Some(s),
                    _ => ready.push(s),
                }
            }
        }
    }
    out
}

fn postorder_from(pieces: &[Piece], entry: usize) -> Vec<usize> {
    let mut visited = vec![false; pieces.len()];
    let mut out = Vec::with_capacity(pieces.len());
    let mut stack = vec![(entry, 0usize)];
    if entry >= pieces.len() {
        return out;
    }
    visited[entry] = true;
    while let Some((p, i)) = stack.last_mut() {
        let next = pieces[*p].exit.successor(*i);
        *i += 1;
        match next {
            Some(s) if s < pieces.len() && !visited[s] => {
                visited[s] = true;
                stack.push((s, 0));
            }
            Some(_) => {}
            None => {
                out.push(*p);
                stack.pop();
            }
        }
    }
    out
}

/// Threads, merges and lays out allocated items; labels of the result are piece numbers.
pub(super) fn optimize(items: &[Item]) -> Vec<Item> {
    let mut pieces = pieces(items);
    if pieces.is_empty() {
        return Vec::new();
    }
    let successors_first = postorder(&pieces);
    super::deadregs::remove(&mut pieces, &successors_first);
    super::forward::forward(&mut pieces, &successors_first);
    // Neither pass above changes how pieces leave, so the order stands.
    let rep = merge(&mut pieces, &successors_first);
    let entry = rep[0];
    let mut live = postorder_from(&pieces, entry);
    let before = pieces.len();
    super::suffix::share(&mut pieces, &live);
    // A cut suffix is reached through the pieces it was cut from, and leaves as they did: the
    // same pieces stay reachable, and the shared suffixes added are too.
    live.extend(before..pieces.len());
    debug_assert_eq!(
        {
            let mut l = live.clone();
            l.sort_unstable();
            l
        },
        {
            let mut l = postorder_from(&pieces, entry);
            l.sort_unstable();
            l
        }
    );
    let order = order(&pieces, entry, &live);
    // A label and an exit around each piece's instructions.
    let mut out = Vec::with_capacity(order.iter().map(|&p| pieces[p].insns.len() + 2).sum());
    for p in order {
        out.push(Item::Label(p));
        out.extend(pieces[p].insns.iter().map(|&i| Item::Insn(i)));
        match pieces[p].exit {
            Exit::Return => {}
            Exit::Jump(t) => out.push(Item::Jump(t)),
            Exit::Cond { code, k, t, f } => out.push(Item::Cond { code, k, t, f }),
        }
    }
    out
}
