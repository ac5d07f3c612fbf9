//! Value numbering through one block's statements (libpcap's `opt_blk` and `opt_stmt`).
//!
//! Every statement gets the value number of what it computes; with `alter` (the second,
//! statement-rewriting loop of the optimizer) statements are also simplified: known constants
//! are folded in, indexed loads with a known X become absolute loads, and a statement storing
//! the value its destination already holds is deleted. Note what "already holds" means: the
//! *number* is equal, and numbers of indexed loads and of operations on unknown operands can
//! be equal for different run-time values (see [`crate::values`]).

use sift_bpf::code;

use crate::atoms::{class, mode, op, src, A, N_ATOMS, X};
use crate::error::OptimizeError;
use crate::graph::{BlockId, Stmt};
use crate::state::{Optimizer, Progress};
use crate::values::Values;

impl Optimizer {
    /// Optimizes block `b`: inherit the predecessors' exit values, number (and with
    /// `do_stmts` rewrite) the statements, then either drop all statements (see below) or run
    /// the peepholes and dead-store elimination.
    pub fn opt_blk(&mut self, b: BlockId, do_stmts: bool) -> Result<(), OptimizeError> {
        let mut val = self.entry_values(b);
        let (a_in, x_in) = (val[A], val[X]);
        let mut stmts = std::mem::take(&mut self.g.blocks[b].stmts);
        let mut result = Ok(());
        for s in &mut stmts {
            result = number_stmt(s, &mut val, do_stmts, &mut self.values, &mut self.progress);
            if result.is_err() {
                break;
            }
        }
        let block = &mut self.g.blocks[b];
        block.stmts = stmts;
        block.val = val;
        result?;

        // libpcap's special case: when no successor reads anything (by the summaries from the
        // start of the pass) and the block leaves A and X with the numbers they came in with
        // (both known), or when the block is a return, every statement goes - including stores
        // and X loads whose values the numbering only *believes* unchanged.
        let unchanged = block.out_use == 0
            && a_in != 0
            && block.val[A] == a_in
            && x_in != 0
            && block.val[X] == x_in;
        if do_stmts && (unchanged || block.is_return()) {
            if !block.stmts.is_empty() {
                block.stmts.clear();
                self.progress.changed();
            }
        } else {
            self.peephole(b)?;
            self.dead_stores(b);
        }

        // What the branch compares A with, for folding branches later in the pass.
        let block = &self.g.blocks[b];
        let oval = if src(block.code) == code::K {
            let k = block.k;
            self.values.constant_number(k)
        } else {
            block.val[X]
        };
        let block = &mut self.g.blocks[b];
        block.oval = oval;
        block.edge_code = block.code;
        Ok(())
    }

    /// Values on entry: the common exit value of all predecessors, unknown (0) where they
    /// disagree; all unknown for the root.
    fn entry_values(&self, b: BlockId) -> [u32; N_ATOMS] {
        let preds = &self.g.blocks[b].preds;
        let Some((&first, rest)) = preds.split_first() else {
            return [0; N_ATOMS];
        };
        let mut val = self.g.blocks[first].val;
        for &p in rest {
            let other = &self.g.blocks[p].val;
            for (v, o) in val.iter_mut().zip(other) {
                if *v != *o {
                    *v = 0;
                }
            }
        }
        val
    }
}

/// Records `new` as the value of `slot`; with `alter`, a statement storing a known value the
/// slot already holds is deleted instead (without counting as progress, as in libpcap).
fn store(s: &mut Stmt, slot: &mut u32, new: u32, alter: bool) {
    if alter && new != 0 && *slot == new {
        s.code = None;
    } else {
        *slot = new;
    }
}

/// Numbers one statement and, with `alter`, simplifies it.
fn number_stmt(
    s: &mut Stmt,
    val: &mut [u32; N_ATOMS],
    alter: bool,
    values: &mut Values,
    progress: &mut Progress,
) -> Result<(), OptimizeError> {
    let Some(c) = s.code else { return Ok(()) };
    match c {
        _ if class(c) == code::LD && mode(c) == code::ABS && c & 0x18 != 0x18 => {
            let v = values.number(c, s.k, 0);
            store(s, &mut val[A], v, alter);
        }
        _ if class(c) == code::LD && mode(c) == code::IND && c & 0x18 != 0x18 => {
            let x = val[X];
            let v = match values.constant(x) {
                Some(xk) if alter => {
                    // X is known: the load becomes an absolute one.
                    let abs = code::LD | code::ABS | (c & 0x18);
                    s.code = Some(abs);
                    s.k = s.k.wrapping_add(xk);
                    progress.changed();
                    values.number(abs, s.k, 0)
                }
                _ => values.number(c, s.k, x),
            };
            store(s, &mut val[A], v, alter);
        }
        0x80 => {
            // ld #pktlen
            let v = values.number(c, 0, 0);
            store(s, &mut val[A], v, alter);
        }
        0x00 => {
            let v = values.constant_number(s.k);
            store(s, &mut val[A], v, alter);
        }
        0x01 => {
            let v = values.constant_number(s.k);
            store(s, &mut val[X], v, alter);
        }
        0xb1 => {
            // ldxb 4*([k]&0xf)
            let v = values.number(c, s.k, 0);
            store(s, &mut val[X], v, alter);
        }
        0x84 => match values.constant(val[A]) {
            // neg
            Some(a) if alter => {
                s.code = Some(code::LD | code::IMM);
                s.k = 0u32.wrapping_sub(a);
                val[A] = values.constant_number(s.k);
            }
            _ => val[A] = values.number(c, val[A], 0),
        },
        _ if class(c) == code::ALU && src(c) == code::K => {
            alu_k(s, c, val, alter, values, progress)?
        }
        _ if class(c) == code::ALU => alu_x(s, c, val, alter, values, progress)?,
        0x87 => {
            // txa
            let x = val[X];
            store(s, &mut val[A], x, alter);
        }
        0x60 | 0x61 => {
            // ld M[k] / ldx M[k]; a known constant is loaded as an immediate.
            let v = val[s.k as usize];
            if alter {
                if let Some(m) = values.constant(v) {
                    s.code = Some(if c == 0x60 { code::LD } else { code::LDX } | code::IMM);
                    s.k = m;
                    progress.changed();
                }
            }
            let dst = if c == 0x60 { A } else { X };
            store(s, &mut val[dst], v, alter);
        }
        0x07 => {
            // tax
            let a = val[A];
            store(s, &mut val[X], a, alter);
        }
        0x02 | 0x03 => {
            // st / stx
            let v = if c == 0x02 { val[A] } else { val[X] };
            let k = s.k as usize;
            store(s, &mut val[k], v, alter);
        }
        // ldx len and anything else: libpcap neither numbers nor rewrites it, so the values
        // it writes keep their old numbers.
        _ => {}
    }
    Ok(())
}

/// `A op= k`.
fn alu_k(
    s: &mut Stmt,
    c: u16,
    val: &mut [u32; N_ATOMS],
    alter: bool,
    values: &mut Values,
    progress: &mut Progress,
) -> Result<(), OptimizeError> {
    let operation = op(c);
    if alter {
        if s.k == 0 {
            match operation {
                // Identities; "sub #0" is kept (libpcap: code generation may rely on it).
                code::ADD | code::LSH | code::RSH | code::OR | code::XOR => {
                    s.code = None;
                    return Ok(());
                }
                code::MUL | code::AND => {
                    s.code = Some(code::LD | code::IMM);
                    val[A] = values.constant_number(s.k);
                    return Ok(());
                }
                code::DIV => return Err(OptimizeError::DivisionByZero),
                code::MOD => return Err(OptimizeError::ModulusByZero),
                _ => {}
            }
        }
        if let Some(a) = values.constant(val[A]) {
            fold(s, operation, a, s.k, progress)?;
            val[A] = values.constant_number(s.k);
            return Ok(());
        }
    }
    let kv = values.constant_number(s.k);
    val[A] = values.number(c, val[A], kv);
    Ok(())
}

/// `A op= X`.
fn alu_x(
    s: &mut Stmt,
    c: u16,
    val: &mut [u32; N_ATOMS],
    alter: bool,
    values: &mut Values,
    progress: &mut Progress,
) -> Result<(), OptimizeError> {
    let operation = op(c);
    if alter {
        if let Some(x) = values.constant(val[X]) {
            if let Some(a) = values.constant(val[A]) {
                fold(s, operation, a, x, progress)?;
                val[A] = values.constant_number(s.k);
            } else {
                let kc = code::ALU | code::K | operation;
                s.code = Some(kc);
                s.k = x;
                if matches!(operation, code::LSH | code::RSH) && x > 31 {
                    return Err(OptimizeError::ShiftTooLarge);
                }
                progress.changed();
                let kv = values.constant_number(x);
                val[A] = values.number(kc, val[A], kv);
            }
            return Ok(());
        }
        // A known to be 0: `0 op X` simplifies to X or to 0.
        if values.constant(val[A]) == Some(0) {
            match operation {
                code::ADD | code::OR | code::XOR => {
                    s.code = Some(code::MISC | code::TXA);
                    let x = val[X];
                    store(s, &mut val[A], x, alter);
                    return Ok(());
                }
                code::MUL | code::DIV | code::MOD | code::AND | code::LSH | code::RSH => {
                    s.code = Some(code::LD | code::IMM);
                    s.k = 0;
                    let zero = values.constant_number(0);
                    store(s, &mut val[A], zero, alter);
                    return Ok(());
                }
                _ => {}
            }
        }
    }
    val[A] = values.number(c, val[A], val[X]);
    Ok(())
}

/// Folds `a op b` into `ld #result`.
fn fold(
    s: &mut Stmt,
    operation: u16,
    a: u32,
    b: u32,
    progress: &mut Progress,
) -> Result<(), OptimizeError> {
    let r = match operation {
        code::ADD => a.wrapping_add(b),
        code::SUB => a.wrapping_sub(b),
        code::MUL => a.wrapping_mul(b),
        code::DIV => a.checked_div(b).ok_or(OptimizeError::DivisionByZero)?,
        code::MOD => a.checked_rem(b).ok_or(OptimizeError::ModulusByZero)?,
        code::AND => a & b,
        code::OR => a | b,
        code::XOR => a ^ b,
        // libpcap 1.10 shifts everything out for amounts of 32 and more.
        code::LSH => a.checked_shl(b).unwrap_or(0),
        code::RSH => a.checked_shr(b).unwrap_or(0),
        _ => {
            return Err(OptimizeError::LibpcapAborts {
                reason: "folding an unknown ALU operation",
            })
        }
    };
    s.k = r;
    s.code = Some(code::LD | code::IMM);
    progress.changed();
    Ok(())
}
