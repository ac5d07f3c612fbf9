//! Label resolution: symbolic jumps to offsets, with `ja` trampolines for conditional jumps
//! that cannot reach their target in 8 bits.

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
    // Per conditional jump: whether its true / false target needs a trampoline. Only ever set,
    // so the loop ends (at the latest when every target has one).
    let mut far = vec![(false, false); items.len()];
    let (addr, label_addr) = loop {
        let mut addr = Vec::with_capacity(items.len());
        let mut label_addr = vec![0i64; max_label + 1];
        let mut pc: i64 = 0;
        for (i, it) in items.iter().enumerate() {
            addr.push(pc);
            pc += match it {
                Item::Label(l) => {
                    label_addr[*l] = pc;
                    0
                }
                Item::Jump(_) if elided[i] => 0,
                Item::Cond { .. } => 1 + i64::from(far[i].0) + i64::from(far[i].1),
                _ => 1,
            };
        }
        let mut changed = false;
        for (i, it) in items.iter().enumerate() {
            if let Item::Cond { t, f, .. } = it {
                let reach = |l: &Label| (0..=255).contains(&(label_addr[*l] - addr[i] - 1));
                if !far[i].0 && !reach(t) {
                    far[i].0 = true;
                    changed = true;
                }
                if !far[i].1 && !reach(f) {
                    far[i].1 = true;
                    changed = true;
                }
            }
        }
        if !changed {
            break (addr, label_addr);
        }
    };
    let mut out = Vec::new();
    for (i, it) in items.iter().enumerate() {
        match it {
            Item::Insn(insn) => out.push(*insn),
            Item::Label(_) => {}
            Item::Jump(_) if elided[i] => {}
            Item::Jump(t) => out.push(Op::Ja.with_k((label_addr[*t] - addr[i] - 1) as u32)),
            Item::Cond { code, k, t, f } => {
                let c = addr[i];
                let mut next_tramp = c + 1;
                let mut trampolines = Vec::new();
                let mut offset = |l: &Label, is_far: bool| -> u8 {
                    if is_far {
                        let at = next_tramp;
                        next_tramp += 1;
                        trampolines.push(Op::Ja.with_k((label_addr[*l] - at - 1) as u32));
                        (at - c - 1) as u8
                    } else {
                        (label_addr[*l] - c - 1) as u8
                    }
                };
                let jt = offset(t, far[i].0);
                let jf = offset(f, far[i].1);
                out.push(Insn::jump(*code, *k, jt, jf));
                out.extend(trampolines);
            }
            // The allocator rewrote every slot access; should one survive, a non-final `ja`
            // past the end makes validation fail instead of producing wrong code.
            Item::Store(_) | Item::StoreX(_) | Item::LoadA(_) | Item::LoadX(_) => {
                debug_assert!(false, "unallocated slot access");
                out.push(Op::Ja.with_k(u32::MAX));
            }
        }
    }
    out
}
