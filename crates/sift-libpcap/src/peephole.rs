//! Peepholes and dead stores within one block (libpcap's `opt_peep` and `opt_deadstores`).
//!
//! Both run in every pass, including the first loop where statements are otherwise only
//! numbered, and both decide with the use summaries from the start of the pass.

use sift_bpf::code;

use crate::atoms::{bit, class, defines, mode, src, uses, Use, A, N_ATOMS, X};
use crate::error::OptimizeError;
use crate::graph::BlockId;
use crate::state::Optimizer;

/// The first live statement at or after `i`.
fn live_from(stmts: &[crate::graph::Stmt], i: usize) -> Option<usize> {
    (i..stmts.len()).find(|&j| stmts[j].code.is_some())
}

impl Optimizer {
    /// Statement-pair rewrites, then simplifications of the branch.
    pub fn peephole(&mut self, b: BlockId) -> Result<(), OptimizeError> {
        let block = &mut self.g.blocks[b];
        if block.stmts.is_empty() {
            // libpcap returns early for a null list: none of the branch rewrites below apply
            // to a block without statements (a list of deleted statements is not null).
            return Ok(());
        }
        let stmts = &mut block.stmts;
        // The statement the branch rewrites look at: the last live one *paired* in the walk
        // below, or else the first statement of the list even if it is deleted.
        let mut last = 0;
        let mut cursor = 0;
        while let Some(s) = live_from(stmts, cursor) {
            let Some(next) = live_from(stmts, s + 1) else {
                break;
            };
            last = next;
            cursor = next;
            // st M[k]; ldx M[k]  ->  st M[k]; tax
            if stmts[s].is(code::ST)
                && stmts[next].is(code::LDX | code::MEM)
                && stmts[s].k == stmts[next].k
            {
                self.progress.changed();
                stmts[next].code = Some(code::MISC | code::TAX);
            }
            // ld #k; tax  ->  ldx #k; txa
            if stmts[s].is(code::LD | code::IMM) && stmts[next].is(code::MISC | code::TAX) {
                stmts[s].code = Some(code::LDX | code::IMM);
                stmts[next].code = Some(code::MISC | code::TXA);
                self.progress.changed();
            }
            // ld #k; [ldxb ..;] add x; tax; ld [x + k']  ->  [ldxb ..;] ld [x + k + k']
            // (libpcap's constant-offset `tcp[k]` case), unless X is read below the block.
            if stmts[s].is(code::LD | code::IMM) {
                if block.out_use & bit(X) != 0 {
                    continue;
                }
                let add = if stmts[next].is(code::LDX | code::MSH | code::B) {
                    live_from(stmts, next + 1)
                } else {
                    Some(next)
                };
                let Some(add) = add.filter(|&i| stmts[i].is(code::ALU | code::ADD | code::X))
                else {
                    continue;
                };
                let Some(tax) =
                    live_from(stmts, add + 1).filter(|&i| stmts[i].is(code::MISC | code::TAX))
                else {
                    continue;
                };
                let Some(ild) = live_from(stmts, tax + 1).filter(|&i| {
                    let c = stmts[i].code.unwrap_or(0);
                    class(c) == code::LD && mode(c) == code::IND
                }) else {
                    continue;
                };
                stmts[ild].k = stmts[ild].k.wrapping_add(stmts[s].k);
                stmts[s].code = None;
                stmts[add].code = None;
                stmts[tax].code = None;
                self.progress.changed();
            }
        }

        // Branch rewrites when nothing below reads the A this block leaves.
        if block.code == code::JMP | code::JEQ | code::K && block.out_use & bit(A) == 0 {
            let l = &mut stmts[last];
            if l.is(code::ALU | code::SUB | code::X) {
                if let Some(x) = self.values.constant(block.val[X]) {
                    // sub x; jeq #y  ->  jeq #(y + x)
                    block.k = block.k.wrapping_add(x);
                    l.code = None;
                    self.progress.changed();
                } else if block.k == 0 {
                    // sub x; jeq #0  ->  jeq x
                    l.code = None;
                    block.code = code::JMP | code::JEQ | code::X;
                    self.progress.changed();
                }
            } else if l.is(code::ALU | code::SUB | code::K) {
                // sub #x; jeq #y  ->  jeq #(y + x)
                l.code = None;
                block.k = block.k.wrapping_add(l.k);
                self.progress.changed();
            } else if l.is(code::ALU | code::AND | code::K) && block.k == 0 {
                // and #k; jeq #0  ->  jset #k with the targets swapped
                block.k = l.k;
                block.code = code::JMP | code::JSET | code::K;
                l.code = None;
                self.progress.changed();
                std::mem::swap(&mut block.jt, &mut block.jf);
            }
        }
        // jset #0 never jumps, jset #0xffffffff always does (not counted as progress).
        if block.code == code::JMP | code::JSET | code::K {
            if block.k == 0 {
                block.jt = block.jf;
            }
            if block.k == 0xffff_ffff {
                block.jf = block.jt;
            }
        }
        // A comparison with a known X compares with the constant.
        if let Some(x) = self.values.constant(block.val[X]) {
            if src(block.code) == code::X {
                block.code &= !code::X;
                block.k = x;
            }
        }
        // A known A decides the branch.
        if let Some(a) = self.values.constant(block.val[A]) {
            if src(block.code) == code::K {
                let taken = match block.code & 0xf0 {
                    code::JEQ => a == block.k,
                    code::JGT => a > block.k,
                    code::JGE => a >= block.k,
                    code::JSET => a & block.k != 0,
                    _ => {
                        return Err(OptimizeError::LibpcapAborts {
                            reason: "deciding a branch that is not a conditional jump",
                        })
                    }
                };
                if block.jf != block.jt {
                    self.progress.changed();
                }
                if taken {
                    block.jf = block.jt;
                } else {
                    block.jt = block.jf;
                }
            }
        }
        Ok(())
    }

    /// Deletes statements whose result is overwritten before being read, and the last write
    /// of each atom no successor reads (by the summaries from the start of the pass).
    pub fn dead_stores(&mut self, b: BlockId) {
        let block = &mut self.g.blocks[b];
        let mut last: [Option<usize>; N_ATOMS] = [None; N_ATOMS];
        let n = block.stmts.len();
        // Index `n` stands for the branch, which reads but never writes.
        for i in 0..=n {
            let (c, k) = if i < n {
                let s = block.stmts[i];
                match s.code {
                    Some(c) => (c, s.k),
                    None => continue,
                }
            } else {
                (block.code, block.k)
            };
            match uses(c, k) {
                Use::Nothing => {}
                Use::One(atom) => last[atom] = None,
                Use::Both => {
                    last[A] = None;
                    last[X] = None;
                }
            }
            if i < n {
                if let Some(atom) = defines(c, k) {
                    if let Some(prev) = last[atom] {
                        self.progress.changed();
                        block.stmts[prev].code = None;
                    }
                    last[atom] = Some(i);
                }
            }
        }
        for (atom, l) in last.iter().enumerate() {
            if let Some(i) = l {
                if block.out_use & bit(atom) == 0 {
                    block.stmts[*i].code = None;
                    self.progress.changed();
                }
            }
        }
    }
}
