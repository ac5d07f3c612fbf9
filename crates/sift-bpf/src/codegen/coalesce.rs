//! Copy coalescing: a block parameter shares its argument's scratch word when that cannot
//! change what any reload sees, and the copy on that edge disappears.
//!
//! Without it every parameter has a word of its own and edges carry chains like `ld M[4];
//! st M[2]; ld M[3]; st M[4]` (after `geneve`, the offsets pass through two or three blocks of
//! parameters before they are read).
//!
//! Values that share a word form a group. Every write into the word is the value of one
//! member (a store, or a copy whose value is its argument's) or garbage (a `protochain`
//! loop). A group is sound when no write stores a value other than `m` while `m` is live, for
//! every member `m`: live means that a path from just after the write reaches a read of `m`
//! (a reload, or a copy with `m` as argument, which an elided copy turns into a read of the
//! word) before any write of `m` itself. Then every read of `m` sees the last write of `m` on
//! its path, or a later write of the same value (an elided copy of `m`, which leaves the word
//! alone). Liveness is decided on the item list's control flow, so the code of one predecessor
//! does not conflict with a value copied on another (the linear order puts them side by side);
//! only writes that fall inside a member's linear interval are examined.

// Keys are the code generator's own values; the one iteration (`range`) is sorted by its
// user: a fast hash.
use foldhash::{HashMap, HashMapExt};

use sift_ir::Value;

use super::select::Item;
use crate::insn::Op;

/// Larger groups are not grown: the check is quadratic in a group's writes.
const MAX_GROUP: usize = 32;

/// Where a value is accessed.
#[derive(Default)]
struct Accesses {
    first: usize,
    last: usize,
    /// Writes into the value's word: position and the value written (`None`: garbage, the
    /// loop of a `protochain` walk).
    writes: Vec<(usize, Option<Value>)>,
    /// Copies reading the value as an argument: position and parameter.
    copied_into: Vec<(usize, Value)>,
    walk: bool,
}

/// The groups of values sharing a word, as a representative per value (values without a
/// representative are alone), and the range of positions each group needs its word for.
pub(super) struct Groups {
    pub(super) rep: HashMap<Value, Value>,
    pub(super) range: HashMap<Value, (usize, usize)>,
}

impl Groups {
    /// The representative of `v`'s group.
    pub(super) fn of(&self, v: Value) -> Value {
        self.rep.get(&v).copied().unwrap_or(v)
    }
}

fn touch(acc: &mut HashMap<Value, Accesses>, v: Value, pos: usize) -> &mut Accesses {
    let a = acc.entry(v).or_insert_with(|| Accesses {
        first: pos,
        ..Accesses::default()
    });
    a.last = pos;
    a
}

/// Forms the groups over items whose slot accesses all survive (stores nobody reloads already
/// dropped).
pub(super) fn coalesce(items: &[Item]) -> Groups {
    let mut acc: HashMap<Value, Accesses> = HashMap::new();
    let mut copies = Vec::new();
    for (pos, item) in items.iter().enumerate() {
        match *item {
            Item::Store(v) | Item::StoreX(v) => touch(&mut acc, v, pos).writes.push((pos, Some(v))),
            Item::LoadA(v) | Item::LoadX(v) => {
                touch(&mut acc, v, pos);
            }
            Item::Walk { value, .. } => {
                let a = touch(&mut acc, value, pos);
                a.writes.push((pos, None));
                a.walk = true;
            }
            Item::Copy { param, arg, .. } => {
                touch(&mut acc, param, pos).writes.push((pos, Some(arg)));
                copies.push((pos, param, arg));
            }
            _ => {}
        }
    }
    for &(pos, param, arg) in &copies {
        if let Some(a) = acc.get_mut(&arg) {
            a.copied_into.push((pos, param));
        }
    }

    let mut flow = Flow::new(items);
    let mut members: HashMap<Value, Vec<Value>> = HashMap::new();
    let mut rep: HashMap<Value, Value> = HashMap::new();
    for &(_, param, arg) in &copies {
        let (Some(p), Some(a)) = (acc.get(&param), acc.get(&arg)) else {
            continue;
        };
        if p.walk || a.walk {
            continue;
        }
        let (gp, ga) = (
            rep.get(&param).copied().unwrap_or(param),
            rep.get(&arg).copied().unwrap_or(arg),
        );
        if gp == ga {
            continue;
        }
        let mut merged = members.get(&gp).cloned().unwrap_or_else(|| vec![gp]);
        merged.extend(members.get(&ga).cloned().unwrap_or_else(|| vec![ga]));
        if merged.len() > MAX_GROUP || !sound(&merged, &acc, &mut flow) {
            continue;
        }
        for &m in &merged {
            rep.insert(m, gp);
        }
        members.remove(&ga);
        members.insert(gp, merged);
    }

    let mut range: HashMap<Value, (usize, usize)> = HashMap::new();
    for (&v, a) in &acc {
        let g = rep.get(&v).copied().unwrap_or(v);
        let (s, e) = (a.first, end_of(a));
        let r = range.entry(g).or_insert((s, e));
        r.0 = r.0.min(s);
        r.1 = r.1.max(e);
    }
    Groups { rep, range }
}

/// The last position a value's word must hold it: its last access or the last copy reading it.
fn end_of(a: &Accesses) -> usize {
    a.copied_into
        .iter()
        .map(|&(pos, _)| pos)
        .fold(a.last, usize::max)
}

/// Whether the values of `group` can share one word (see the module comment).
fn sound(group: &[Value], acc: &HashMap<Value, Accesses>, flow: &mut Flow) -> bool {
    for &m in group {
        let a = &acc[&m];
        let end = end_of(a);
        for &y in group {
            if y == m {
                continue;
            }
            for &(w, src) in &acc[&y].writes {
                if a.first < w && w < end && src != Some(m) && flow.live_after(w, m) {
                    return false;
                }
            }
        }
    }
    true
}

/// The control flow of the item list, for liveness queries.
struct Flow<'i> {
    items: &'i [Item],
    /// Position of each label (`usize::MAX` for none).
    label_at: Vec<usize>,
    memo: HashMap<(usize, Value), bool>,
}

impl<'i> Flow<'i> {
    fn new(items: &'i [Item]) -> Flow<'i> {
        let mut label_at = Vec::new();
        for (pos, item) in items.iter().enumerate() {
            if let Item::Label(l) = *item {
                if l >= label_at.len() {
                    label_at.resize(l + 1, usize::MAX);
                }
                label_at[l] = pos;
            }
        }
        Flow {
            items,
            label_at,
            memo: HashMap::new(),
        }
    }

    fn position(&self, label: usize) -> Option<usize> {
        self.label_at
            .get(label)
            .copied()
            .filter(|&p| p != usize::MAX)
    }

    /// Whether a path from just after position `w` reads `v`'s word before writing it.
    fn live_after(&mut self, w: usize, v: Value) -> bool {
        if let Some(&known) = self.memo.get(&(w, v)) {
            return known;
        }
        let mut seen = vec![false; self.items.len()];
        let mut stack = vec![w + 1];
        let mut live = false;
        'paths: while let Some(start) = stack.pop() {
            let mut pos = start;
            while pos < self.items.len() {
                if seen[pos] {
                    continue 'paths;
                }
                seen[pos] = true;
                match &self.items[pos] {
                    Item::LoadA(u) | Item::LoadX(u) | Item::Copy { arg: u, .. } if *u == v => {
                        live = true;
                        break 'paths;
                    }
                    Item::Store(u) | Item::StoreX(u) | Item::Copy { param: u, .. } if *u == v => {
                        continue 'paths;
                    }
                    Item::Walk { value, .. } if *value == v => continue 'paths,
                    Item::Jump(l) => {
                        stack.extend(self.position(*l));
                        continue 'paths;
                    }
                    Item::Cond { t, f, .. } => {
                        stack.extend(self.position(*t));
                        stack.extend(self.position(*f));
                        continue 'paths;
                    }
                    Item::Insn(i) if matches!(i.decode(), Some(Op::RetK | Op::RetA)) => {
                        continue 'paths;
                    }
                    _ => pos += 1,
                }
            }
        }
        self.memo.insert((w, v), live);
        live
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(param: u32, arg: u32) -> Item {
        Item::Copy {
            param: Value(param),
            arg: Value(arg),
            from_x: false,
        }
    }

    fn label(l: usize) -> Item {
        Item::Label(l)
    }

    fn branch() -> Item {
        Item::Cond {
            code: 0x15,
            k: 0,
            t: 1,
            f: 2,
        }
    }

    fn ret() -> Item {
        Item::Insn(Op::RetK.with_k(0))
    }

    #[test]
    fn parameter_shares_its_arguments_words_on_sibling_paths() {
        // block1 copies v0 into v1, block2 computes v2 and copies it: on each path the word
        // holds v1's value from the copy on. v2's store lies in v1's linear interval, but v1
        // is written again (by block2's copy) before anything reads it there.
        let items = vec![
            Item::Store(Value(0)),
            branch(),
            label(1),
            Item::LoadA(Value(0)),
            copy(1, 0),
            Item::Jump(3),
            label(2),
            Item::Store(Value(2)),
            Item::LoadA(Value(2)),
            copy(1, 2),
            Item::Jump(3),
            label(3),
            Item::LoadX(Value(1)),
            ret(),
        ];
        let g = coalesce(&items);
        assert_eq!(g.of(Value(1)), g.of(Value(0)));
        assert_eq!(g.of(Value(2)), g.of(Value(0)));
        assert_eq!(g.range[&g.of(Value(1))], (0, 12));
    }

    #[test]
    fn argument_read_after_another_edges_copy_keeps_its_word() {
        // v0 is read after the merge, so the copy of v2 into v1 on block2's path would
        // overwrite it: v1 shares with v2, not with v0.
        let items = vec![
            Item::Store(Value(0)),
            branch(),
            label(1),
            copy(1, 0),
            Item::Jump(3),
            label(2),
            Item::Store(Value(2)),
            copy(1, 2),
            Item::Jump(3),
            label(3),
            Item::LoadX(Value(1)),
            Item::LoadA(Value(0)),
            ret(),
        ];
        let g = coalesce(&items);
        assert_ne!(g.of(Value(1)), g.of(Value(0)));
        assert_eq!(g.of(Value(1)), g.of(Value(2)));
    }
}
