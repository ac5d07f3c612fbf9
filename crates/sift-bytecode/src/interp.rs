//! The interpreter: pre-decoded instructions and a tight dispatch loop.
//!
//! Verification fixes everything the loop would otherwise check: register numbers are below 16
//! (so `r[x & 15]` needs no bounds check and the mask changes nothing), scratch slots are below
//! 256 (the [`Cache`] holds a fixed array of 256 words, indexed by a `u8`), targets lie inside the
//! code, and every path ends in a return. Only packet loads are checked at run time.
//!
//! Pre-decoding flattens each instruction's operation, condition and operand kind into one
//! variant of [`Op`], so each step is a single `match` on a 16-byte value.

use crate::insn::{AluOp, Cond, Insn, Operand, Program, Width, MAX_SCRATCH};
use crate::verify::VerifiedProgram;

/// Per-thread scratch memory for [`VerifiedProgram::run`], kept out of the shared program (as
/// the regex crate's `Cache`). One cache serves any number of programs, one run at a time.
#[derive(Clone, Debug)]
pub struct Cache {
    scratch: Box<[u32; MAX_SCRATCH as usize]>,
}

impl Cache {
    pub fn new() -> Cache {
        Cache {
            scratch: Box::new([0; MAX_SCRATCH as usize]),
        }
    }
}

impl Default for Cache {
    fn default() -> Cache {
        Cache::new()
    }
}

/// One pre-decoded step. Registers are `u8` (verified `< 16`), slots `u8` (verified `< 256`),
/// targets absolute indices (verified in bounds).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Op {
    MovR { d: u8, s: u8 },
    MovI { d: u8, k: u32 },
    Len { d: u8 },
    Neg { d: u8, s: u8 },
    Ldm { d: u8, slot: u8 },
    Stm { slot: u8, s: u8 },
    Ld { w: Width, d: u8, k: u32 },
    LdX { w: Width, d: u8, b: u8, k: u32 },
    AluR { op: AluOp, d: u8, a: u8, b: u8 },
    AluI { op: AluOp, d: u8, a: u8, k: u32 },
    Jmp { t: u32 },
    BrR { cond: Cond, a: u8, b: u8, t: u32, f: u32 },
    BrI { cond: Cond, a: u8, k: u32, t: u32, f: u32 },
    Switch { key: u8, table: u32, default: u32 },
    RetI { k: u32 },
    RetR { s: u8 },
}

/// The pre-decoded form of a verified program: ops and flattened tables.
#[derive(Clone, Debug)]
pub(crate) struct Code {
    ops: Vec<Op>,
    /// Per table: range of `keys`/`targets`.
    tables: Vec<(usize, usize)>,
    keys: Vec<u32>,
    targets: Vec<u32>,
}

impl Code {
    /// Pre-decodes a program that passed the verifier's checks.
    pub(crate) fn new(p: &Program) -> Code {
        let mut keys = Vec::new();
        let mut targets = Vec::new();
        let mut tables = Vec::with_capacity(p.tables.len());
        for t in &p.tables {
            let start = keys.len();
            for &(k, target) in &t.entries {
                keys.push(k);
                targets.push(target);
            }
            tables.push((start, keys.len()));
        }
        let ops: Vec<Op> = p.code.iter().map(predecode).collect();
        Code {
            ops,
            tables,
            keys,
            targets,
        }
    }
}

fn predecode(insn: &Insn) -> Op {
    // Register numbers and slots are verified to fit; the casts cannot truncate.
    match *insn {
        Insn::Mov {
            dst,
            src: Operand::Reg(s),
        } => Op::MovR { d: dst.0, s: s.0 },
        Insn::Mov {
            dst,
            src: Operand::Imm(k),
        } => Op::MovI { d: dst.0, k },
        Insn::WireLen { dst } => Op::Len { d: dst.0 },
        Insn::Neg { dst, src } => Op::Neg { d: dst.0, s: src.0 },
        Insn::LoadScratch { dst, slot } => Op::Ldm {
            d: dst.0,
            slot: slot as u8,
        },
        Insn::StoreScratch { slot, src } => Op::Stm {
            slot: slot as u8,
            s: src.0,
        },
        Insn::Load {
            width,
            dst,
            base: None,
            offset,
        } => Op::Ld {
            w: width,
            d: dst.0,
            k: offset,
        },
        Insn::Load {
            width,
            dst,
            base: Some(b),
            offset,
        } => Op::LdX {
            w: width,
            d: dst.0,
            b: b.0,
            k: offset,
        },
        Insn::Alu {
            op,
            dst,
            lhs,
            rhs: Operand::Reg(b),
        } => Op::AluR {
            op,
            d: dst.0,
            a: lhs.0,
            b: b.0,
        },
        Insn::Alu {
            op,
            dst,
            lhs,
            rhs: Operand::Imm(k),
        } => Op::AluI {
            op,
            d: dst.0,
            a: lhs.0,
            k,
        },
        Insn::Jump { target } => Op::Jmp { t: target },
        Insn::Branch {
            cond,
            lhs,
            rhs: Operand::Reg(b),
            then_,
            else_,
        } => Op::BrR {
            cond,
            a: lhs.0,
            b: b.0,
            t: then_,
            f: else_,
        },
        Insn::Branch {
            cond,
            lhs,
            rhs: Operand::Imm(k),
            then_,
            else_,
        } => Op::BrI {
            cond,
            a: lhs.0,
            k,
            t: then_,
            f: else_,
        },
        Insn::Switch {
            key,
            table,
            default,
        } => Op::Switch {
            key: key.0,
            table,
            default,
        },
        Insn::Return {
            value: Operand::Imm(k),
        } => Op::RetI { k },
        Insn::Return {
            value: Operand::Reg(s),
        } => Op::RetR { s: s.0 },
    }
}

/// Reads `w` bytes big-endian at `at`, or `None` if they are not all inside `pkt`.
#[inline(always)]
fn load(pkt: &[u8], at: u64, w: Width) -> Option<u32> {
    let at = usize::try_from(at).ok()?;
    let rest = pkt.get(at..)?;
    match w {
        Width::Byte => rest.first().map(|&b| u32::from(b)),
        Width::Half => rest
            .first_chunk::<2>()
            .map(|b| u32::from(u16::from_be_bytes(*b))),
        Width::Word => rest.first_chunk::<4>().map(|b| u32::from_be_bytes(*b)),
    }
}

impl VerifiedProgram {
    /// Runs the program on a packet: `packet` holds the captured bytes, `wire_len` the length
    /// on the wire. Returns the number of bytes to keep; 0 rejects (also on an out-of-bounds
    /// load or a division by zero).
    pub fn run(&self, cache: &mut Cache, packet: &[u8], wire_len: u32) -> u32 {
        let code = &self.code;
        let ops = &code.ops[..];
        let scratch = &mut *cache.scratch;
        let mut r = [0u32; 16];
        let mut pc = 0usize;
        macro_rules! reg {
            ($x:expr) => {
                r[usize::from($x & 15)]
            };
        }
        loop {
            match ops[pc] {
                Op::BrI { cond, a, k, t, f } => {
                    pc = if cond.eval(reg!(a), k) { t } else { f } as usize;
                }
                Op::Ld { w, d, k } => {
                    let Some(x) = load(packet, u64::from(k), w) else {
                        return 0;
                    };
                    reg!(d) = x;
                    pc += 1;
                }
                Op::LdX { w, d, b, k } => {
                    let Some(x) = load(packet, u64::from(reg!(b)) + u64::from(k), w) else {
                        return 0;
                    };
                    reg!(d) = x;
                    pc += 1;
                }
                Op::AluI { op, d, a, k } => {
                    let Some(x) = op.apply(reg!(a), k) else {
                        return 0;
                    };
                    reg!(d) = x;
                    pc += 1;
                }
                Op::AluR { op, d, a, b } => {
                    let Some(x) = op.apply(reg!(a), reg!(b)) else {
                        return 0;
                    };
                    reg!(d) = x;
                    pc += 1;
                }
                Op::BrR { cond, a, b, t, f } => {
                    pc = if cond.eval(reg!(a), reg!(b)) { t } else { f } as usize;
                }
                Op::Jmp { t } => pc = t as usize,
                Op::RetI { k } => return k,
                Op::RetR { s } => return reg!(s),
                Op::MovR { d, s } => {
                    reg!(d) = reg!(s);
                    pc += 1;
                }
                Op::MovI { d, k } => {
                    reg!(d) = k;
                    pc += 1;
                }
                Op::Len { d } => {
                    reg!(d) = wire_len;
                    pc += 1;
                }
                Op::Neg { d, s } => {
                    reg!(d) = reg!(s).wrapping_neg();
                    pc += 1;
                }
                Op::Ldm { d, slot } => {
                    reg!(d) = scratch[usize::from(slot)];
                    pc += 1;
                }
                Op::Stm { slot, s } => {
                    scratch[usize::from(slot)] = reg!(s);
                    pc += 1;
                }
                Op::Switch {
                    key,
                    table,
                    default,
                } => {
                    let (start, end) = code.tables[table as usize];
                    pc = match code.keys[start..end].binary_search(&reg!(key)) {
                        Ok(i) => code.targets[start + i],
                        Err(_) => default,
                    } as usize;
                }
            }
        }
    }
}
