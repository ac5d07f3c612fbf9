//! Register allocation: linear scan over live intervals of the laid-out function.
//!
//! Blocks are numbered in layout order (reverse postorder, a topological order of the acyclic
//! graph): each block gets a position for its entry (where its parameters are defined), one per
//! instruction, and one for its terminator (where comparison operands and edge arguments are
//! read). Because every use is dominated by its definition and the order is topological, a value
//! is live at most from its definition to its last use in this numbering, so the interval
//! `(def, last use]` is a safe (sometimes pessimistic) lifetime, and interval-graph greedy
//! colouring by start is the whole allocator.
//!
//! Two intervals may share a register when one ends where the other starts: an instruction reads
//! its operands before writing its result. Edge moves write a successor's parameters at the
//! predecessor's terminator, earlier than the parameters' intervals start; this is safe because
//! every value still needed on that edge is live at the successor's entry, where it overlaps the
//! parameters (see `docs/bytecode.md`, "Code generation").
//!
//! Constants get no location: they become immediates (or are materialized into a temporary at
//! the use). When more values are live than there are registers, the interval ending last is
//! spilled to a scratch slot for its whole life.

use sift_ir::{Function, Inst, Value};

use super::moves::Loc;
use crate::insn::{Reg, MAX_SCRATCH};

/// r14 and r15 are reserved as temporaries for spilled operands, materialized constants and
/// breaking move cycles; the allocator hands out the registers below the first temporary.
pub(crate) const TEMP_A: Reg = Reg(14);
pub(crate) const TEMP_B: Reg = Reg(15);

/// Temporaries for the key of a 128-bit `member` call, whose four operands may all be
/// constants or spilled: r12 and r13 join r14 and r15, in functions that make such calls only.
const WIDE_KEY_TEMPS: [Reg; 4] = [TEMP_A, TEMP_B, Reg(13), Reg(12)];

/// The temporaries call operands may need in `f` (the allocator keeps them free).
pub(crate) fn key_temps(f: &Function) -> &'static [Reg] {
    let wide = f
        .values
        .iter()
        .any(|i| matches!(i, Inst::Member { key, .. } if key.len() > 2));
    if wide {
        &WIDE_KEY_TEMPS
    } else {
        &WIDE_KEY_TEMPS[..2]
    }
}

/// The result of allocation: a location for every value that needs one.
pub(crate) struct Allocation {
    /// Indexed by value: `None` for constants, dead values, and values of dropped blocks.
    pub(crate) locs: Vec<Option<Loc>>,
    /// Scratch slots used by spilled values.
    pub(crate) slots: u16,
}

/// Too many values live at once even after spilling to every scratch slot.
#[derive(Debug)]
pub(crate) struct OutOfSlots;

struct Interval {
    start: u32,
    end: u32,
    value: Value,
}

/// Computes the `(def, last use]` interval of every non-constant value used at least once.
fn intervals(f: &Function, layout: &[sift_ir::Block]) -> Vec<Interval> {
    const NONE: u32 = u32::MAX;
    let mut def = vec![NONE; f.values.len()];
    let mut last = vec![NONE; f.values.len()];
    let mut pos = 0u32;
    let use_at = |v: Value, pos: u32, last: &mut Vec<u32>| {
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
            for o in f.inst(v).operands() {
                use_at(o, pos, &mut last);
            }
            def[v.index()] = pos;
            pos += 1;
        }
        for o in data.term.operands() {
            use_at(o, pos, &mut last);
        }
        pos += 1;
    }
    let mut out: Vec<Interval> = (0..f.values.len())
        .filter(|&i| def[i] != NONE && last[i] != NONE && last[i] > def[i])
        .filter(|&i| !matches!(f.values[i], Inst::Const(_)))
        .map(|i| Interval {
            start: def[i],
            end: last[i],
            value: Value(i as u32),
        })
        .collect();
    out.sort_by_key(|i| (i.start, i.value));
    out
}

/// Greedy colouring of intervals sorted by start with `colours` colours; returns the colour of
/// each interval, or `None` for those that did not fit (the ones ending last are evicted).
fn colour(intervals: &[Interval], colours: usize) -> Vec<Option<usize>> {
    let mut result: Vec<Option<usize>> = vec![None; intervals.len()];
    let mut free: Vec<bool> = vec![true; colours];
    // (end, interval index) of the intervals holding a colour.
    let mut active: Vec<(u32, usize)> = Vec::new();
    for (i, cur) in intervals.iter().enumerate() {
        active.retain(|&(end, j)| {
            if end <= cur.start {
                if let Some(c) = result[j] {
                    free[c] = true;
                }
                false
            } else {
                true
            }
        });
        if let Some(c) = free.iter().position(|&f| f) {
            free[c] = false;
            result[i] = Some(c);
            active.push((cur.end, i));
            continue;
        }
        // Evict whichever of the active intervals and this one ends last.
        let Some(k) = (0..active.len()).max_by_key(|&k| (active[k].0, active[k].1)) else {
            continue; // no colours at all
        };
        let (end, j) = active[k];
        if end > cur.end {
            result[i] = result[j].take();
            active[k] = (cur.end, i);
        }
    }
    result
}

/// Allocates registers (and, when needed, scratch slots) for the values of `f` laid out in
/// `layout`, keeping the top `temps` registers free.
pub(crate) fn allocate(
    f: &Function,
    layout: &[sift_ir::Block],
    temps: usize,
) -> Result<Allocation, OutOfSlots> {
    let all = intervals(f, layout);
    let regs = colour(&all, crate::insn::REGISTERS - temps);
    let mut locs: Vec<Option<Loc>> = vec![None; f.values.len()];
    let mut spilled = Vec::new();
    for (iv, r) in all.into_iter().zip(regs) {
        match r {
            Some(r) => locs[iv.value.index()] = Some(Loc::Reg(Reg(r as u8))),
            None => spilled.push(iv),
        }
    }
    let slots = colour(&spilled, usize::from(MAX_SCRATCH));
    let mut used = 0u16;
    for (iv, s) in spilled.iter().zip(slots) {
        let s = s.ok_or(OutOfSlots)? as u16;
        used = used.max(s + 1);
        locs[iv.value.index()] = Some(Loc::Slot(s));
    }
    Ok(Allocation { locs, slots: used })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(start: u32, end: u32, v: u32) -> Interval {
        Interval {
            start,
            end,
            value: Value(v),
        }
    }

    #[test]
    fn touching_intervals_share() {
        let c = colour(&[iv(0, 2, 0), iv(2, 4, 1)], 1);
        assert_eq!(c, vec![Some(0), Some(0)]);
    }

    #[test]
    fn overlapping_intervals_spill_the_longest() {
        let c = colour(&[iv(0, 10, 0), iv(1, 3, 1), iv(2, 4, 2)], 2);
        assert_eq!(c[0], None);
        assert!(c[1].is_some() && c[2].is_some() && c[1] != c[2]);
    }
}
