//! Label resolution: symbolic jumps to offsets, and long jumps.
//!
//! A conditional jump reaches at most 255 instructions ahead. A farther target goes through a
//! `ja` (32-bit offset), placed preferably in an *island*: a point between two pieces of code
//! where control does not fall through (after a `ret` or a taken `ja`), so that one `ja` serves
//! every conditional jump within reach that needs the same target (in a 32-times unrolled
//! `protochain` every iteration jumps to the same far blocks). When the target is a lone
//! `ret`, the island holds a copy of the `ret` instead. Without an island in reach, the
//! trampoline goes right behind the conditional jump.

use super::select::{Item, Label};
use crate::insn::{Insn, Op};

/// Whether the `ja` at `i` only skips labels up to its own target (fall-through).
fn falls_through(items: &[Item], i: usize, target: Label) -> bool {
    items[i + 1..]
        .iter()
        .map_while(|it| match it {
            Item::Label(l) => Some(*l),
            _ => None,
        })
        .any(|l| l == target)
}

/// Where a conditional jump's edge goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    /// Straight to the target.
    Direct,
    /// Through entry `usize` of the island at item index `usize`.
    Island(usize, usize),
    /// Through a trampoline right behind the jump.
    Own,
}

struct Addresses {
    /// Address of each item.
    item: Vec<i64>,
    label: Vec<i64>,
    /// Address of the first entry of each island (by item index; [`NO_ISLAND`] where none).
    island: Vec<i64>,
}

/// No island before this item.
const NO_ISLAND: i64 = i64::MIN;

pub(super) fn resolve(items: &[Item]) -> Vec<Insn> {
    let max_label = items
        .iter()
        .filter_map(|i| match i {
            Item::Label(l) | Item::Jump(l) => Some(*l),
            Item::Cond { t, f, .. } => Some((*t).max(*f)),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    let elided: Vec<bool> = items
        .iter()
        .enumerate()
        .map(|(i, it)| matches!(it, Item::Jump(t) if falls_through(items, i, *t)))
        .collect();
    // A lone `ret` at a label: islands copy it instead of jumping to it.
    let mut lone_ret: Vec<Option<Insn>> = vec![None; max_label + 1];
    for w in items.windows(2) {
        if let [Item::Label(l), Item::Insn(insn)] = w {
            if matches!(insn.decode(), Some(Op::RetK | Op::RetA)) {
                lone_ret[*l] = Some(*insn);
            }
        }
    }
    // Island positions: item indices (labels) that control cannot fall into.
    let mut candidates = Vec::new();
    let mut open = true;
    for (i, it) in items.iter().enumerate() {
        match it {
            Item::Label(_) => {
                if !open && candidates.last().map(|&c| c + 1) != Some(i) {
                    candidates.push(i);
                }
            }
            Item::Insn(insn) => open = !matches!(insn.decode(), Some(Op::RetK | Op::RetA)),
            Item::Jump(_) => open = elided[i],
            Item::Cond { .. } => open = false,
            _ => open = true,
        }
    }
    // Island contents (targets) by item index; per conditional jump, how each edge goes.
    // Dense by item index (a 10^4-case table makes thousands of islands, looked up in the
    // reach loop for every jump): an empty list is no island.
    let mut islands: Vec<Vec<Label>> = vec![Vec::new(); items.len()];
    // Per label, the islands holding an entry for it, in item order, with the entry: a
    // shared island holds hundreds of entries, too many to search for every jump.
    let mut holding: Vec<Vec<(usize, usize)>> = vec![Vec::new(); max_label + 1];
    // Per label, where its `holding` entries at or after the current jump's first island begin.
    // That island only moves forward from one jump to the next, and entries are only added at
    // or after it, so the position only moves forward too (within one sweep).
    let mut held_from = vec![0usize; max_label + 1];
    let mut own = vec![(false, false); items.len()];
    let mut via: Vec<(Via, Via)> = vec![(Via::Direct, Via::Direct); items.len()];
    let addr = loop {
        let addr = addresses(items, &elided, &own, &islands, max_label);
        let mut changed = false;
        held_from.fill(0);
        let base = |c: usize| match addr.island[c] {
            NO_ISLAND => addr.item[c],
            at => at,
        };
        // The islands after the jump and within its reach are `candidates[first..last]` (a
        // contiguous run: the candidates are in address order); both ends only move forward
        // from one jump to the next.
        let (mut first, mut in_reach) = (0, 0);
        for (i, it) in items.iter().enumerate() {
            let Item::Cond { t, f, .. } = it else {
                continue;
            };
            while first < candidates.len() && candidates[first] <= i {
                first += 1;
            }
            while in_reach < candidates.len() && base(candidates[in_reach]) <= addr.item[i] + 256 {
                in_reach += 1;
            }
            let last = in_reach.max(first);
            let reach = |to: i64| (0..=255).contains(&(to - addr.item[i] - 1));
            // Most edges go straight to their target: decided here, the rest by `far`.
            let near = |l: Label, own_set: bool| -> Option<Via> {
                if own_set {
                    Some(Via::Own)
                } else if reach(addr.label[l]) {
                    Some(Via::Direct)
                } else {
                    None
                }
            };
            let mut far = |l: Label, own_set: &mut bool| -> Via {
                // Islands after the jump, before the target, within reach: reuse an entry,
                // else add one to the farthest.
                let before_target = |c: usize| addr.item[c] < addr.label[l];
                // Reuse the first island in reach that has an entry for the target.
                if first < last {
                    let (lo, hi) = (candidates[first], candidates[last - 1]);
                    let held = &holding[l];
                    let from = &mut held_from[l];
                    while held.get(*from).is_some_and(|&(c, _)| c < lo) {
                        *from += 1;
                    }
                    for &(c, k) in held[*from..].iter().take_while(|&&(c, _)| c <= hi) {
                        if before_target(c) && reach(base(c) + k as i64) {
                            return Via::Island(c, k);
                        }
                    }
                }
                // Else the farthest candidate in reach that has room for one more entry.
                let farthest = candidates[first..last]
                    .iter()
                    .rev()
                    .copied()
                    .find(|&c| before_target(c) && reach(base(c) + islands[c].len() as i64));
                changed = true;
                match farthest {
                    Some(c) => {
                        let e = &mut islands[c];
                        e.push(l);
                        let k = e.len() - 1;
                        let held = &mut holding[l];
                        let at = held.partition_point(|&(d, _)| d <= c);
                        held.insert(at, (c, k));
                        Via::Island(c, k)
                    }
                    None => {
                        *own_set = true;
                        Via::Own
                    }
                }
            };
            let (mut own_t, mut own_f) = own[i];
            let vt = near(*t, own_t).unwrap_or_else(|| far(*t, &mut own_t));
            let vf = near(*f, own_f).unwrap_or_else(|| far(*f, &mut own_f));
            own[i] = (own_t, own_f);
            via[i] = (vt, vf);
        }
        if !changed {
            break addr;
        }
    };
    let mut out = Vec::new();
    for (i, it) in items.iter().enumerate() {
        if !islands[i].is_empty() {
            for (k, &l) in islands[i].iter().enumerate() {
                let at = addr.island[i] + k as i64;
                out.push(match lone_ret[l] {
                    Some(ret) => ret,
                    None => Op::Ja.with_k((addr.label[l] - at - 1) as u32),
                });
            }
        }
        match it {
            Item::Insn(insn) => out.push(*insn),
            Item::Label(_) => {}
            Item::Jump(_) if elided[i] => {}
            Item::Jump(t) => {
                out.push(Op::Ja.with_k((addr.label[*t] - addr.item[i] - 1) as u32));
            }
            Item::Cond { code, k, t, f } => {
                let c = addr.item[i];
                let mut next_tramp = c + 1;
                let mut trampolines = Vec::new();
                let mut offset = |l: Label, v: Via| -> u8 {
                    match v {
                        Via::Direct => (addr.label[l] - c - 1) as u8,
                        Via::Island(isl, k) => (addr.island[isl] + k as i64 - c - 1) as u8,
                        Via::Own => {
                            let at = next_tramp;
                            next_tramp += 1;
                            trampolines.push(match lone_ret[l] {
                                Some(ret) => ret,
                                None => Op::Ja.with_k((addr.label[l] - at - 1) as u32),
                            });
                            (at - c - 1) as u8
                        }
                    }
                };
                let jt = offset(*t, via[i].0);
                let jf = offset(*f, via[i].1);
                out.push(Insn::jump(*code, *k, jt, jf));
                out.extend(trampolines);
            }
            // The allocator rewrote every slot access; should one survive, a non-final `ja`
            // past the end makes validation fail instead of producing wrong code.
            Item::Store(_)
            | Item::StoreX(_)
            | Item::LoadA(_)
            | Item::LoadX(_)
            | Item::Copy { .. }
            | Item::Walk { .. } => {
                debug_assert!(false, "unallocated slot access");
                out.push(Op::Ja.with_k(u32::MAX));
            }
        }
    }
    out
}

fn addresses(
    items: &[Item],
    elided: &[bool],
    own: &[(bool, bool)],
    islands: &[Vec<Label>],
    max_label: usize,
) -> Addresses {
    let mut item = Vec::with_capacity(items.len());
    let mut label = vec![0i64; max_label + 1];
    let mut island = vec![NO_ISLAND; items.len()];
    let mut pc: i64 = 0;
    for (i, it) in items.iter().enumerate() {
        if !islands[i].is_empty() {
            island[i] = pc;
            pc += islands[i].len() as i64;
        }
        item.push(pc);
        pc += match it {
            Item::Label(l) => {
                label[*l] = pc;
                0
            }
            Item::Jump(_) if elided[i] => 0,
            Item::Cond { .. } => 1 + i64::from(own[i].0) + i64::from(own[i].1),
            _ => 1,
        };
    }
    Addresses {
        item,
        label,
        island,
    }
}
