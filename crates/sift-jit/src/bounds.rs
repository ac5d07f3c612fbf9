//! Bounds-check aggregation (DPF): one length check covers many loads, without changing the
//! result on any truncated packet.
//!
//! The interpreter checks every load and rejects the packet (returns 0) at the first one that
//! does not fit. Hoisting a check for a later load is exact only if failing it would have
//! rejected the packet anyway. **Anticipation** gives that guarantee: `need(i)` is the largest
//! `n` such that *every* path from instruction `i` either loads a byte at or beyond `n` or
//! returns 0. Then `caplen < need(i)` implies the run from `i` returns 0, whatever the packet's
//! bytes: on the path it takes, either some load does not fit or it ends in `ret 0`. So the
//! translation may return 0 as soon as `caplen < need(i)` and afterwards read, unchecked, every
//! byte below `need(i)`. Computed backwards (forward-only edges: one pass in reverse order):
//!
//! * `ret 0`: ⊤ (any bound: the path rejects anyway); `ret k`, `ret rS`: 0;
//! * a branch or switch: the minimum over its targets (it must hold on every path);
//! * a load of `w` bytes at `k`: `max(k + w, need(next))`; anything else: `need(next)`.
//!
//! Loads at a register plus a constant are handled the same way, with a bound per *definition*
//! of the base register (so `ld.h [r0+14]` and a later `ld.h [r0+16]` share one check of
//! `r0 + 18`): the key is the instruction that wrote the base, which dominates the check.
//!
//! A forward pass then places the checks: at each load, if the bound already checked on every
//! path to it (the minimum over predecessors) does not cover the load, check `need` there.

use std::collections::HashMap;

use sift_bytecode::{Insn, Operand, Program};

use crate::flow::{Flow, MULTI};

/// Key of the constant-offset loads (offsets from the start of the packet).
const ABSOLUTE: u32 = u32::MAX;

/// What the translation does before a load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Guard {
    /// Already covered by a check on every path here: load without checking.
    Covered,
    /// Return 0 unless `base + n <= caplen` (base 0 for constant offsets); then load unchecked.
    Check(u64),
    /// Every path from here returns 0: return 0 now.
    Reject,
}

/// A bound per key: `None` is ⊤ (every bound holds: the paths return 0), absent keys are 0.
type Need = Option<Vec<(u32, u64)>>;

fn get(map: &[(u32, u64)], key: u32) -> u64 {
    map.iter().find(|e| e.0 == key).map_or(0, |e| e.1)
}

fn raise(map: &mut Vec<(u32, u64)>, key: u32, n: u64) {
    match map.iter_mut().find(|e| e.0 == key) {
        Some(e) => e.1 = e.1.max(n),
        None => map.push((key, n)),
    }
}

/// Pointwise minimum (absent keys are 0, so only common keys survive).
fn meet(a: &[(u32, u64)], b: &[(u32, u64)]) -> Vec<(u32, u64)> {
    a.iter()
        .filter_map(|&(k, x)| b.iter().find(|e| e.0 == k).map(|e| (k, x.min(e.1))))
        .collect()
}

fn meet_need(a: &Need, b: &Need) -> Need {
    match (a, b) {
        (None, x) | (x, None) => x.clone(),
        (Some(a), Some(b)) => Some(meet(a, b)),
    }
}

/// The key and end (offset + width, relative to the key) of a load, if it has a key.
fn load_key(p: &Program, flow: &Flow, i: usize) -> Option<(Option<u32>, u64)> {
    let Insn::Load {
        width,
        base,
        offset,
        ..
    } = p.code[i]
    else {
        return None;
    };
    let end = u64::from(offset) + u64::from(width.bytes());
    let key = match base {
        None => Some(ABSOLUTE),
        Some(_) => {
            let d = flow.use_defs[i][0];
            (d < MULTI).then_some(d)
        }
    };
    Some((key, end))
}

/// Per instruction: the guard before each load, and, for constant-offset loads, the absolute
/// bound known to hold right after the guard (what load coalescing may rely on).
pub(crate) struct Bounds {
    pub guard: Vec<Guard>,
    pub covered: Vec<u64>,
    /// The instruction is reached (a `Reject` guard cuts off the rest of its block, and blocks
    /// only reached from there).
    pub live: Vec<bool>,
    /// `need` at the first instruction for constant offsets: a packet shorter than this is
    /// rejected whatever its bytes. `None`: every path returns 0.
    pub entry_need: Option<u64>,
}

impl Bounds {
    /// With `aggregate` off, every load is checked on its own (the baseline for measurement).
    pub(crate) fn new(p: &Program, flow: &Flow, aggregate: bool) -> Bounds {
        let n = p.code.len();
        let need = anticipate(p, flow);
        let mut bounds = Bounds {
            guard: vec![Guard::Covered; n],
            covered: vec![0; n],
            live: flow.reachable.clone(),
            entry_need: need
                .first()
                .map_or(Some(0), |n| n.as_ref().map(|map| get(map, ABSOLUTE))),
        };
        if !aggregate {
            for i in 0..n {
                if let Some((_, end)) = load_key(p, flow, i) {
                    bounds.guard[i] = Guard::Check(end);
                    bounds.covered[i] = end;
                }
            }
            return bounds;
        }
        bounds.place(p, flow, &need);
        bounds
    }

    // Instruction indices address several parallel arrays here.
    #[allow(clippy::needless_range_loop)]
    fn place(&mut self, p: &Program, flow: &Flow, need: &[Need]) {
        let n = p.code.len();
        let mut entry: HashMap<u32, Vec<(u32, u64)>> = HashMap::new();
        entry.insert(0, Vec::new());
        let mut known: Vec<(u32, u64)> = Vec::new();
        let mut dead = true;
        let mut succ = Vec::new();
        for i in 0..n {
            if flow.block_start[i] {
                match entry.remove(&(i as u32)) {
                    Some(state) => {
                        known = state;
                        dead = false;
                    }
                    None => dead = true,
                }
            }
            if dead || !flow.reachable[i] {
                self.live[i] = false;
                continue;
            }
            if let Some((key, end)) = load_key(p, flow, i) {
                let have = key.map_or(0, |k| get(&known, k));
                if have >= end {
                    self.guard[i] = Guard::Covered;
                } else {
                    match (&need[i], key) {
                        (None, _) => {
                            self.guard[i] = Guard::Reject;
                            dead = true; // the rest of this block is never reached
                            continue;
                        }
                        (Some(map), Some(k)) => {
                            let bound = get(map, k).max(end);
                            self.guard[i] = Guard::Check(bound);
                            raise(&mut known, k, bound);
                        }
                        (Some(_), None) => self.guard[i] = Guard::Check(end),
                    }
                }
                if key == Some(ABSOLUTE) {
                    self.covered[i] = get(&known, ABSOLUTE);
                }
            }
            let insn = &p.code[i];
            flow.successors.of(p, i, &mut succ);
            for &s in &succ {
                if !insn.is_terminator() && !flow.block_start[s as usize] {
                    continue;
                }
                match entry.get_mut(&s) {
                    None => {
                        entry.insert(s, known.clone());
                    }
                    Some(state) => *state = meet(state, &known),
                }
            }
        }
    }
}

/// `need(i)` for every instruction, backwards.
fn anticipate(p: &Program, flow: &Flow) -> Vec<Need> {
    let n = p.code.len();
    let mut need: Vec<Need> = vec![Some(Vec::new()); n];
    let mut succ = Vec::new();
    for i in (0..n).rev() {
        let insn = &p.code[i];
        let mut here: Need = match *insn {
            Insn::Return {
                value: Operand::Imm(0),
            } => None,
            Insn::Return { .. } => Some(Vec::new()),
            _ => {
                flow.successors.of(p, i, &mut succ);
                let mut acc: Need = None;
                for &s in &succ {
                    acc = meet_need(&acc, &need[s as usize]);
                }
                acc
            }
        };
        if let Some(map) = &mut here {
            // The value written here does not exist before this instruction.
            if insn.def().is_some() {
                map.retain(|e| e.0 != i as u32);
            }
            if let Some((Some(key), end)) = load_key(p, flow, i) {
                raise(map, key, end);
            }
        }
        need[i] = here;
    }
    need
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(text: &str) -> Bounds {
        let p = sift_bytecode::verify(sift_bytecode::assemble(text).unwrap())
            .unwrap()
            .into_program();
        let f = Flow::new(&p);
        Bounds::new(&p, &f, true)
    }

    #[test]
    fn an_and_chain_is_checked_once() {
        let b = bounds(
            "ld.h r0, [12]\n jeq r0, 2048, L2, L6\nL2:\n ld.w r0, [26]\n jeq r0, 1, L4, L6\nL4:\n ld.w r0, [30]\n jeq r0, 2, L7, L6\nL6:\n ret 0\nL7:\n ret 96\n",
        );
        assert_eq!(b.guard[0], Guard::Check(34));
        assert_eq!(b.guard[2], Guard::Covered);
        assert_eq!(b.guard[4], Guard::Covered);
    }

    #[test]
    fn an_accepting_alternative_limits_the_check() {
        // `ip or (byte 40 = 1)`: a packet of 20 bytes that is IP must still be accepted.
        let b = bounds(
            "ld.h r0, [12]\n jeq r0, 2048, L5, L2\nL2:\n ld.b r0, [40]\n jeq r0, 1, L5, L4\nL4:\n ret 0\nL5:\n ret 96\n",
        );
        assert_eq!(b.guard[0], Guard::Check(14));
        assert_eq!(b.guard[2], Guard::Check(41));
    }

    #[test]
    fn indexed_loads_share_a_check_per_base() {
        let b = bounds(
            "ld.b r0, [14]\n and r0, r0, 15\n shl r0, r0, 2\n ld.h r1, [r0+14]\n jeq r1, 20, L5, L7\nL5:\n ld.h r1, [r0+16]\n jeq r1, 30, L8, L7\nL7:\n ret 0\nL8:\n ret 1\n",
        );
        assert_eq!(b.guard[0], Guard::Check(15));
        assert_eq!(b.guard[3], Guard::Check(18));
        assert_eq!(b.guard[5], Guard::Covered);
    }

    #[test]
    fn a_path_that_always_rejects_returns_at_once() {
        let b = bounds("ld.b r0, [3]\n jeq r0, 1, L2, L3\nL2:\n ret 0\nL3:\n ret 0\n");
        assert_eq!(b.guard[0], Guard::Reject);
    }
}
