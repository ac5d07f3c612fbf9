//! Register allocation: linear scan over live intervals, with registers a call clobbers.
//!
//! Blocks are numbered in layout order (reverse postorder, a topological order of the acyclic
//! graph): each block gets a position for its entry (where its parameters are defined), one per
//! instruction and one for its terminator. Every use is dominated by its definition and every
//! path visits positions in increasing order, so a value lives at most over `(def, last use]`;
//! greedy colouring of those intervals sorted by start is the allocator.
//!
//! eBPF has two kinds of registers for our purpose: `r6`-`r9` survive helper calls, `r1`-`r5`
//! do not. In the socket filter every packet load is a call in disguise (`LD_ABS`/`LD_IND`
//! clobber `r0`-`r5`), so a value whose interval strictly contains a load position may only live
//! in a surviving register. Values that do not fit go to 4-byte stack slots below the frame
//! pointer, for their whole life.
//!
//! Block arguments are written at the end of the predecessor (or in a stub on the edge), before
//! the parameter's interval starts; this is safe because a value still needed after the edge is
//! live at the successor's entry, where it overlaps the parameter (the argument of the sift
//! bytecode's allocator, which this mirrors).

use sift_ir::{Block, Function, Inst, Value};

use crate::insn::Reg;

/// Where a value lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Loc {
    Reg(Reg),
    /// A 4-byte stack slot at `r10 - 4 * (slot + 1)`.
    Slot(u16),
}

/// The 512-byte eBPF stack holds 128 four-byte slots.
pub(crate) const MAX_SLOTS: u16 = 128;

/// The registers the allocator may hand out.
pub(crate) struct RegisterSet {
    /// Registers that survive the clobbering instructions.
    pub(crate) preserved: Vec<Reg>,
    /// Registers that a clobbering instruction destroys.
    pub(crate) clobbered: Vec<Reg>,
}

/// The result of allocation.
pub(crate) struct Allocation {
    /// Indexed by value: `None` for constants, dead values and values of unreachable blocks.
    pub(crate) locs: Vec<Option<Loc>>,
}

/// More values are live at once than registers and stack slots can hold.
#[derive(Debug)]
pub(crate) struct OutOfSlots;

struct Interval {
    start: u32,
    end: u32,
    value: Value,
    /// Whether a clobbering instruction lies strictly inside the interval.
    crosses_clobber: bool,
}

/// The `(def, last use]` interval of every non-constant value used at least once.
/// `clobbers(inst)` says whether an instruction destroys the clobbered registers.
fn intervals(f: &Function, layout: &[Block], clobbers: &dyn Fn(&Inst) -> bool) -> Vec<Interval> {
    const NONE: u32 = u32::MAX;
    let mut def = vec![NONE; f.values.len()];
    let mut last = vec![NONE; f.values.len()];
    let mut clobber_positions = Vec::new();
    let mut pos = 0u32;
    let mut use_at = |v: Value, pos: u32| {
        if let Some(l) = last.get_mut(v.index()) {
            *l = if *l == NONE { pos } else { (*l).max(pos) };
        }
    };
    for &b in layout {
        let data = f.block(b);
        for &p in &data.params {
            def[p.index()] = pos;
        }
        pos += 1;
        for &v in &data.insts {
            let inst = f.inst(v);
            for o in inst.operands() {
                use_at(o, pos);
            }
            if clobbers(inst) {
                clobber_positions.push(pos);
            }
            def[v.index()] = pos;
            pos += 1;
        }
        for o in data.term.operands() {
            use_at(o, pos);
        }
        pos += 1;
    }
    // clobber_positions is sorted; does any lie in (start, end)?
    let crosses = |start: u32, end: u32| {
        let i = clobber_positions.partition_point(|&p| p <= start);
        clobber_positions.get(i).is_some_and(|&p| p < end)
    };
    let mut out: Vec<Interval> = (0..f.values.len())
        .filter(|&i| def[i] != NONE && last[i] != NONE && last[i] > def[i])
        .filter(|&i| !matches!(f.values[i], Inst::Const(_)))
        .map(|i| Interval {
            start: def[i],
            end: last[i],
            value: Value(i as u32),
            crosses_clobber: crosses(def[i], last[i]),
        })
        .collect();
    out.sort_by_key(|i| (i.start, i.value));
    out
}

/// Allocates registers, then stack slots, for the values of `f` laid out in `layout`.
pub(crate) fn allocate(
    f: &Function,
    layout: &[Block],
    regs: &RegisterSet,
    clobbers: &dyn Fn(&Inst) -> bool,
) -> Result<Allocation, OutOfSlots> {
    let all = intervals(f, layout, clobbers);
    let mut locs: Vec<Option<Loc>> = vec![None; f.values.len()];
    // Registers: (register, may hold a clobber-crossing value).
    let pool: Vec<(Reg, bool)> = regs
        .preserved
        .iter()
        .map(|&r| (r, true))
        .chain(regs.clobbered.iter().map(|&r| (r, false)))
        .collect();
    let mut free = vec![true; pool.len()];
    // (end, interval index, pool index) of intervals holding a register.
    let mut active: Vec<(u32, usize, usize)> = Vec::new();
    let mut colour: Vec<Option<usize>> = vec![None; all.len()];
    for (i, cur) in all.iter().enumerate() {
        active.retain(|&(end, _, r)| {
            if end <= cur.start {
                free[r] = true;
                false
            } else {
                true
            }
        });
        let allowed = |r: usize| pool[r].1 || !cur.crosses_clobber;
        // Non-crossing values prefer clobbered registers, keeping preserved ones for the others.
        let pick = (0..pool.len())
            .filter(|&r| free[r] && allowed(r))
            .min_by_key(|&r| (pool[r].1 != cur.crosses_clobber, r));
        if let Some(r) = pick {
            free[r] = false;
            colour[i] = Some(r);
            active.push((cur.end, i, r));
            continue;
        }
        // Evict the active interval ending last whose register this one may use, if it ends
        // after this one; otherwise this one goes to the stack.
        let victim = (0..active.len())
            .filter(|&k| allowed(active[k].2))
            .max_by_key(|&k| (active[k].0, active[k].1));
        if let Some(k) = victim {
            let (end, j, r) = active[k];
            if end > cur.end {
                colour[j] = None;
                colour[i] = Some(r);
                active[k] = (cur.end, i, r);
            }
        }
    }
    let mut spilled = Vec::new();
    for (iv, c) in all.iter().zip(&colour) {
        match c {
            Some(r) => locs[iv.value.index()] = Some(Loc::Reg(pool[*r].0)),
            None => spilled.push(iv),
        }
    }
    // Stack slots: the same greedy colouring, without limits other than the stack's size.
    let mut slot_free: Vec<bool> = Vec::new();
    let mut slot_active: Vec<(u32, u16)> = Vec::new();
    for iv in spilled {
        slot_active.retain(|&(end, s)| {
            if end <= iv.start {
                slot_free[usize::from(s)] = true;
                false
            } else {
                true
            }
        });
        let s = match slot_free.iter().position(|&f| f) {
            Some(s) => s,
            None => {
                slot_free.push(true);
                slot_free.len() - 1
            }
        };
        let s = u16::try_from(s).map_err(|_| OutOfSlots)?;
        if s >= MAX_SLOTS {
            return Err(OutOfSlots);
        }
        slot_free[usize::from(s)] = false;
        slot_active.push((iv.end, s));
        locs[iv.value.index()] = Some(Loc::Slot(s));
    }
    Ok(Allocation { locs })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sift_ir::parse_function;

    fn alloc(text: &str, preserved: &[u8], clobbered: &[u8]) -> (Function, Allocation) {
        let f = parse_function(text).unwrap();
        let layout = f.reverse_postorder();
        let regs = RegisterSet {
            preserved: preserved.iter().map(|&r| Reg(r)).collect(),
            clobbered: clobbered.iter().map(|&r| Reg(r)).collect(),
        };
        let a = allocate(&f, &layout, &regs, &|i| matches!(i, Inst::Load { .. })).unwrap();
        (f, a)
    }

    const TWO_LOADS: &str = "\
block0:
    v0 = load.b [0]
    v1 = load.b [1]
    v2 = add v0, v1
    v3 = load.b [2]
    v4 = add v2, v3
    ret v4
";

    #[test]
    fn values_live_across_loads_get_preserved_registers() {
        let (_, a) = alloc(TWO_LOADS, &[7], &[2, 3]);
        // v0 lives across the load of v1: only r7 may hold it.
        assert_eq!(a.locs[0], Some(Loc::Reg(Reg(7))));
        // v2 lives across the load of v3, and r7 is free again.
        assert_eq!(a.locs[2], Some(Loc::Reg(Reg(7))));
        // v1 and v3 do not cross a load and prefer clobbered registers.
        assert!(matches!(a.locs[1], Some(Loc::Reg(Reg(2 | 3)))));
        assert!(!a.locs.iter().any(|l| matches!(l, Some(Loc::Slot(_)))));
    }

    #[test]
    fn no_preserved_register_means_the_stack() {
        let (_, a) = alloc(TWO_LOADS, &[], &[2, 3]);
        assert_eq!(a.locs[0], Some(Loc::Slot(0)));
        assert_eq!(a.locs[2], Some(Loc::Slot(0)));
    }

    #[test]
    fn overlapping_values_spill_the_longest() {
        let text = "\
block0:
    v0 = load.b [0]
    v1 = load.b [1]
    v2 = load.b [2]
    v3 = add v1, v2
    v4 = add v3, v0
    ret v4
";
        let (_, a) = alloc(text, &[7, 8], &[]);
        assert_eq!(a.locs[0], Some(Loc::Slot(0)));
        assert!(matches!(a.locs[1], Some(Loc::Reg(_))));
        assert!(matches!(a.locs[2], Some(Loc::Reg(_))));
    }
}
