//! Data flow over a verified program: blocks, liveness, reaching definitions, and the two facts
//! the translation's byte-order and coalescing decisions rest on.
//!
//! The bytecode is a register machine, so "the value loaded at instruction 7" is not a name the
//! program uses: instruction 12 reads `r0`, and which write of `r0` it sees depends on the path.
//! Because every edge goes forward, one pass in index order computes, for every read, the
//! definition reaching it: a single instruction index, or [`MULTI`] when paths disagree. A
//! definition whose register is *live* where paths with different definitions meet "escapes":
//! its value flows into a merge the translation cannot see through.
//!
//! **Native byte order** (NetVM): a half-word or word load whose value only feeds `jeq`/`jne`/
//! `jset` against constants or small-set `switch`es ([`crate::membership`]), or an `and` with
//! a constant whose result does the same, can be
//! loaded in the machine's byte order and compared with the byte-swapped constant, swapped once
//! at compile time instead of once per packet. [`Flow::native_order`] marks those definitions.
//! Loads that meet at a merge (a host set's destination, loaded at offset 30 on the IPv4 path
//! and at 38 on the ARP path, then tested as one set) form a web: the merged value keeps native
//! order when every load of the web has the same width and every read of any of them keeps it.

use sift_bytecode::insn::MAX_USES;
use sift_bytecode::{AluOp, Cond, Insn, Operand, Program, Width};

use crate::membership::as_set;
use std::collections::HashMap;

/// A register read on a path where different instructions wrote it.
pub(crate) const MULTI: u32 = u32::MAX - 1;
/// A register not written on some path (never read: the verifier forbids it).
pub(crate) const UNDEFINED: u32 = u32::MAX;

/// The successors of every instruction, each target of a table once: a host set's table has
/// thousands of keys and one or two targets, and the passes over every edge (liveness,
/// reaching definitions, bounds) would otherwise visit each target once per key.
pub(crate) struct Successors {
    /// Per table, its distinct targets.
    table_targets: Vec<Vec<u32>>,
}

impl Successors {
    pub(crate) fn new(p: &Program) -> Successors {
        let table_targets = p
            .tables
            .iter()
            .map(|t| {
                let mut targets: Vec<u32> = t.entries.iter().map(|&(_, target)| target).collect();
                targets.sort_unstable();
                targets.dedup();
                targets
            })
            .collect();
        Successors { table_targets }
    }

    /// Successors of instruction `i` (in the order: next, branch targets, switch default,
    /// table).
    pub(crate) fn of(&self, p: &Program, i: usize, out: &mut Vec<u32>) {
        out.clear();
        match p.code[i] {
            Insn::Jump { target } => out.push(target),
            Insn::Branch { then_, else_, .. } => out.extend([then_, else_]),
            Insn::Switch { table, default, .. } => {
                out.push(default);
                // The verifier guarantees the table exists; an absent one adds no edges.
                if let Some(targets) = self.table_targets.get(table as usize) {
                    out.extend(targets);
                }
            }
            Insn::Return { .. } => {}
            _ => out.push(i as u32 + 1),
        }
    }
}

/// Everything the later stages need to know about the program's data flow.
pub(crate) struct Flow {
    /// Reachable from the entry in the program's control-flow graph.
    pub reachable: Vec<bool>,
    /// First instruction of a basic block (the entry, or the target of a jump, branch or table).
    pub block_start: Vec<bool>,
    /// Number of distinct control-flow edges entering each instruction from reachable code.
    pub preds: Vec<u32>,
    /// For each instruction, the definition reaching each register it reads, in
    /// [`Insn::uses`] order (`UNDEFINED` in unused slots).
    pub use_defs: Vec<[u32; MAX_USES]>,
    /// Per definition (instruction index): how many reads see exactly this definition.
    pub use_count: Vec<u32>,
    /// Per definition: some read sees it merged with other definitions.
    pub escaped: Vec<bool>,
    /// Per definition: the value may be kept in native byte order, with this many bytes.
    pub native_order: Vec<Option<Width>>,
    /// Per read that sees [`MULTI`]: a definition of the web of definitions merged there
    /// (`UNDEFINED` for other reads), in [`Insn::uses`] order.
    pub merged_from: Vec<[u32; MAX_USES]>,
    /// Per definition: its web's representative (union-find parent links; see [`Flow::web`]).
    webs: Vec<u32>,
    pub successors: Successors,
}

impl Flow {
    pub(crate) fn new(p: &Program) -> Flow {
        let n = p.code.len();
        let successors = Successors::new(p);
        let mut succ = Vec::new();
        let mut block_start = vec![false; n];
        let mut reachable = vec![false; n];
        let mut preds = vec![0u32; n];
        block_start[0] = true;
        reachable[0] = true;
        for i in 0..n {
            successors.of(p, i, &mut succ);
            succ.sort_unstable();
            succ.dedup();
            let falls_through = !p.code[i].is_terminator();
            for &s in &succ {
                let s = s as usize;
                if !falls_through {
                    block_start[s] = true;
                }
                if reachable[i] {
                    reachable[s] = true;
                    preds[s] += 1;
                }
            }
        }
        // A fall-through into an instruction that is also a jump target starts a block too
        // (already marked by the jump); nothing more to do.

        let live_in = liveness(p, &successors);
        let mut flow = Flow {
            reachable,
            block_start,
            preds,
            use_defs: vec![[UNDEFINED; MAX_USES]; n],
            use_count: vec![0; n],
            escaped: vec![false; n],
            native_order: vec![None; n],
            merged_from: vec![[UNDEFINED; MAX_USES]; n],
            webs: (0..n as u32).collect(),
            successors,
        };
        flow.reaching_definitions(p, &live_in);
        flow.byte_order(p);
        flow
    }

    /// One forward pass in index order (every predecessor precedes its successor).
    fn reaching_definitions(&mut self, p: &Program, live_in: &[u16]) {
        let n = p.code.len();
        // Per register: the definition reaching here (or `MULTI`), and one definition of the
        // web merged into a `MULTI`.
        type State = ([u32; 16], [u32; 16]);
        let mut entry: HashMap<u32, State> = HashMap::new();
        entry.insert(0, ([UNDEFINED; 16], [UNDEFINED; 16]));
        let (mut cur, mut cur_web) = ([UNDEFINED; 16], [UNDEFINED; 16]);
        let mut succ = Vec::new();
        for i in 0..n {
            if self.block_start[i] {
                match entry.remove(&(i as u32)) {
                    Some(state) => (cur, cur_web) = state,
                    None => continue,
                }
            } else if !self.reachable[i] {
                continue;
            }
            let insn = &p.code[i];
            for (slot, r) in insn.uses().enumerate() {
                let def = cur[r.index() & 15];
                self.use_defs[i][slot] = def;
                if def < MULTI {
                    self.use_count[def as usize] += 1;
                } else if def == MULTI {
                    self.merged_from[i][slot] = cur_web[r.index() & 15];
                }
            }
            if let Some(r) = insn.def() {
                cur[r.index() & 15] = i as u32;
                cur_web[r.index() & 15] = i as u32;
            }
            self.successors.of(p, i, &mut succ);
            for &s in &succ {
                if !insn.is_terminator() && !self.block_start[s as usize] {
                    continue; // straight-line: `cur` carries on
                }
                let live = live_in[s as usize];
                match entry.get_mut(&s) {
                    None => {
                        entry.insert(s, (cur, cur_web));
                    }
                    Some((state, state_web)) => {
                        for r in 0..16 {
                            let (a, b) = (state[r], cur[r]);
                            if a == b && a != MULTI {
                                continue;
                            }
                            state[r] = MULTI;
                            if live & (1 << r) == 0 {
                                continue;
                            }
                            for d in [a, b] {
                                if d < MULTI {
                                    self.escaped[d as usize] = true;
                                }
                            }
                            // Live, so written on every path here (the verifier checks it).
                            let (x, y) = (state_web[r], cur_web[r]);
                            debug_assert!(x < MULTI && y < MULTI, "r{r} live but unwritten");
                            self.join_webs(x, y);
                        }
                    }
                }
            }
        }
    }

    /// The representative of definition `d`'s web.
    pub(crate) fn web(&self, mut d: u32) -> u32 {
        while self.webs[d as usize] != d {
            d = self.webs[d as usize];
        }
        d
    }

    fn join_webs(&mut self, a: u32, b: u32) {
        let (a, b) = (self.web(a), self.web(b));
        // The earlier definition represents the web, so links point backwards and a chain of
        // merges cannot form a cycle.
        let (keep, link) = if a < b { (a, b) } else { (b, a) };
        self.webs[link as usize] = keep;
    }

    /// The native width of what read slot `slot` of instruction `i` sees, if any.
    pub(crate) fn native_read(&self, i: usize, slot: usize) -> Option<Width> {
        let d = match self.use_defs[i][slot] {
            MULTI => self.merged_from[i][slot],
            d => d,
        };
        (d < MULTI).then(|| self.native_order[d as usize]).flatten()
    }

    /// Marks the definitions that may stay in native byte order (see the module docs).
    fn byte_order(&mut self, p: &Program) {
        let n = p.code.len();
        // Candidates, forward: half-word and word loads, and `and`s with a constant of them.
        let mut width: Vec<Option<Width>> = vec![None; n];
        for i in 0..n {
            width[i] = match p.code[i] {
                Insn::Load {
                    width: w @ (Width::Half | Width::Word),
                    ..
                } => Some(w),
                Insn::Alu {
                    op: AluOp::And,
                    rhs: Operand::Imm(_),
                    ..
                } => {
                    let src = self.use_defs[i][0];
                    (src < MULTI).then(|| width[src as usize]).flatten()
                }
                _ => None,
            };
        }
        // Disqualifying reads, backward (an `and`'s verdict is known before its source's).
        let mut bad = vec![false; n];
        for j in (0..n).rev() {
            if !self.reachable[j] {
                continue;
            }
            let insn = &p.code[j];
            let keeps_order = match *insn {
                Insn::Branch {
                    cond: Cond::Eq | Cond::Ne | Cond::Set,
                    rhs: Operand::Imm(_),
                    ..
                } => true,
                Insn::Alu {
                    op: AluOp::And,
                    rhs: Operand::Imm(_),
                    ..
                } => width[j].is_some() && !bad[j] && !self.escaped[j],
                // Tested as a set (`crate::membership`), whose keys are swapped too.
                Insn::Switch { table, .. } => as_set(p, table).is_some(),
                _ => false,
            };
            for slot in 0..insn.uses().count() {
                if slot == 0 && keeps_order {
                    continue;
                }
                match self.use_defs[j][slot] {
                    d if d < MULTI => bad[d as usize] = true,
                    MULTI => bad[self.web(self.merged_from[j][slot]) as usize] = true,
                    _ => {}
                }
            }
        }
        // Webs: native when every definition in them is a load of one width that no read
        // disqualifies (`bad` of the representative: a read of the merged value did).
        let mut web_width: Vec<Option<Option<Width>>> = vec![None; n];
        for i in (0..n).filter(|&i| self.escaped[i] && self.reachable[i]) {
            let root = self.web(i as u32) as usize;
            let own = match p.code[i] {
                Insn::Load { .. } if !bad[i] => width[i],
                _ => None,
            };
            web_width[root] = match web_width[root] {
                None => Some(own),
                Some(w) if w == own => Some(w),
                Some(_) => Some(None),
            };
        }
        for i in (0..n).filter(|&i| self.escaped[i] && self.reachable[i]) {
            let root = self.web(i as u32) as usize;
            if !bad[root] {
                self.native_order[i] = web_width[root].flatten();
            }
        }
        // Forward: an `and` stays native only if its source does.
        for i in 0..n {
            let source_native = match p.code[i] {
                Insn::Alu { .. } => {
                    let src = self.use_defs[i][0];
                    src < MULTI && self.native_order[src as usize].is_some()
                }
                _ => true,
            };
            if width[i].is_some()
                && source_native
                && !bad[i]
                && !self.escaped[i]
                && self.reachable[i]
            {
                self.native_order[i] = width[i];
            }
        }
    }
}

/// Registers live on entry to each instruction (bit `r` for `r{r}`), one backward pass.
fn liveness(p: &Program, successors: &Successors) -> Vec<u16> {
    let n = p.code.len();
    let mut live_in = vec![0u16; n];
    let mut succ = Vec::new();
    for i in (0..n).rev() {
        successors.of(p, i, &mut succ);
        let mut live = succ.iter().fold(0u16, |acc, &s| acc | live_in[s as usize]);
        let insn = &p.code[i];
        if let Some(r) = insn.def() {
            live &= !(1 << (r.index() & 15));
        }
        for r in insn.uses() {
            live |= 1 << (r.index() & 15);
        }
        live_in[i] = live;
    }
    live_in
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(text: &str) -> (Program, Flow) {
        let p = sift_bytecode::verify(sift_bytecode::assemble(text).unwrap())
            .unwrap()
            .into_program();
        let f = Flow::new(&p);
        (p, f)
    }

    #[test]
    fn loads_compared_with_constants_keep_native_order() {
        let (_, f) = flow(
            "ld.h r0, [12]\n jeq r0, 2048, L2, L3\nL2:\n ld.w r1, [26]\n and r2, r1, 255\n jne r2, 1, L3, L4\nL3:\n ret 0\nL4:\n ret 1\n",
        );
        assert_eq!(f.native_order[0], Some(Width::Half));
        assert_eq!(f.native_order[2], Some(Width::Word));
        assert_eq!(f.native_order[3], Some(Width::Word));
    }

    /// r2, loaded at 16 or at 18, is live where the paths meet.
    const MERGED: &str = "ld.h r0, [12]\n ld.h r1, [14]\n jgt r1, 5, L3, L4\nL3:\n ret r0\nL4:\n ld.h r2, [16]\n jeq r2, 1, L6, L7\nL6:\n ld.h r2, [18]\n jmp L7\nL7:\n jeq r2, 3, L9, L10\nL9:\n ret 1\nL10:\n ret 0\n";

    #[test]
    fn arithmetic_and_returns_need_network_order() {
        // r0 is returned; r1 is compared with `jgt`.
        let (_, f) = flow(MERGED);
        assert_eq!(f.native_order[0], None);
        assert_eq!(f.native_order[1], None);
    }

    #[test]
    fn loads_merged_and_compared_with_constants_keep_native_order() {
        let (_, f) = flow(MERGED);
        assert!(f.escaped[4] && f.escaped[6]);
        assert_eq!(f.web(6), f.web(4));
        assert_eq!(f.native_order[4], Some(Width::Half));
        assert_eq!(f.native_order[6], Some(Width::Half));
        // The merged read sees the web; the read before the merge sees its own load.
        assert_eq!(f.native_read(8, 0), Some(Width::Half));
        assert_eq!(f.native_read(5, 0), Some(Width::Half));
    }

    #[test]
    fn a_web_needs_one_width_and_only_order_keeping_reads() {
        let wider = MERGED.replace("ld.h r2, [18]", "ld.w r2, [18]");
        let compared = MERGED.replace("jeq r2, 3,", "jgt r2, 3,");
        let masked = MERGED.replace("ld.h r2, [18]", "ld.h r2, [18]\n and r2, r2, 255");
        let returned = MERGED.replace("L9:\n ret 1", "L9:\n ret r2");
        for text in [wider, compared, masked, returned] {
            let (p, f) = flow(&text);
            let merged: Vec<usize> = (0..p.code.len()).filter(|&i| f.escaped[i]).collect();
            assert_eq!(merged.len(), 2, "{text}");
            for i in merged {
                assert_eq!(f.native_order[i], None, "{text}");
            }
        }
    }

    #[test]
    fn dead_values_at_merges_do_not_escape() {
        let (_, f) = flow(
            "ld.h r0, [12]\n jeq r0, 1, L2, L4\nL2:\n ld.h r0, [14]\n jeq r0, 2, L4, L5\nL4:\n ret 0\nL5:\n ret 1\n",
        );
        assert!(!f.escaped[0] && !f.escaped[2]);
        assert_eq!(f.use_count[0], 1);
        assert!(f.native_order[0].is_some() && f.native_order[2].is_some());
    }
}
