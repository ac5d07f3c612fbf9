//! The interpreter: pre-decoded instructions and a tight dispatch loop.
//!
//! Verification fixes everything the loop would otherwise check: register numbers are below 16
//! (so `r[x & 15]` needs no bounds check and the mask changes nothing), scratch slots are below
//! 256 (the [`Cache`] holds a fixed array of 256 words, indexed by a `u8`), targets lie inside the
//! code, and every path ends in a return. Only packet loads are checked at run time.
//!
//! Pre-decoding flattens each instruction's width, operation, condition and operand kind into
//! one variant of [`Op`], so each step is a single `match` (one indirect jump) on a 20-byte
//! value. The common pair "load a packet field, compare it with a constant and branch" is fused
//! into one step. The fused step still writes the loaded register, and the branch keeps its
//! own slot for any jump that lands on it, so indices and semantics are unchanged.

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
/// targets absolute indices (verified in bounds). Rare shapes keep a nested operation or
/// condition; the frequent ones get a variant each.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Op {
    MovR {
        d: u8,
        s: u8,
    },
    MovI {
        d: u8,
        k: u32,
    },
    Len {
        d: u8,
    },
    Neg {
        d: u8,
        s: u8,
    },
    Ldm {
        d: u8,
        slot: u8,
    },
    Stm {
        slot: u8,
        s: u8,
    },
    LdB {
        d: u8,
        k: u32,
    },
    LdH {
        d: u8,
        k: u32,
    },
    LdW {
        d: u8,
        k: u32,
    },
    LdXB {
        d: u8,
        b: u8,
        k: u32,
    },
    LdXH {
        d: u8,
        b: u8,
        k: u32,
    },
    LdXW {
        d: u8,
        b: u8,
        k: u32,
    },
    AndI {
        d: u8,
        a: u8,
        k: u32,
    },
    AddI {
        d: u8,
        a: u8,
        k: u32,
    },
    ShlI {
        d: u8,
        a: u8,
        k: u32,
    },
    ShrI {
        d: u8,
        a: u8,
        k: u32,
    },
    AluI {
        op: AluOp,
        d: u8,
        a: u8,
        k: u32,
    },
    AluR {
        op: AluOp,
        d: u8,
        a: u8,
        b: u8,
    },
    Jmp {
        t: u32,
    },
    JeqI {
        a: u8,
        k: u32,
        t: u32,
        f: u32,
    },
    JneI {
        a: u8,
        k: u32,
        t: u32,
        f: u32,
    },
    JgtI {
        a: u8,
        k: u32,
        t: u32,
        f: u32,
    },
    JsetI {
        a: u8,
        k: u32,
        t: u32,
        f: u32,
    },
    BrI {
        cond: Cond,
        a: u8,
        k: u32,
        t: u32,
        f: u32,
    },
    BrR {
        cond: Cond,
        a: u8,
        b: u8,
        t: u32,
        f: u32,
    },
    /// `ld.h d, [off]` then `jeq d, k, t, f`.
    LdHJeq {
        d: u8,
        off: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    LdBJeq {
        d: u8,
        off: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    LdWJeq {
        d: u8,
        off: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    /// Any other absolute load followed by a branch of its register against an immediate.
    LdBr {
        w: Width,
        cond: Cond,
        d: u8,
        off: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    Switch {
        key: u8,
        table: u32,
        default: u32,
    },
    RetI {
        k: u32,
    },
    RetR {
        s: u8,
    },
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
        let mut ops: Vec<Op> = p.code.iter().map(predecode).collect();
        for (i, pair) in p.code.windows(2).enumerate() {
            if let Some(fused) = fuse(&pair[0], &pair[1]) {
                ops[i] = fused;
            }
        }
        Code {
            ops,
            tables,
            keys,
            targets,
        }
    }
}

/// The fused step for "absolute load, then branch on the loaded register against a constant".
fn fuse(load: &Insn, branch: &Insn) -> Option<Op> {
    let (
        &Insn::Load {
            width,
            dst,
            base: None,
            offset: off,
        },
        &Insn::Branch {
            cond,
            lhs,
            rhs: Operand::Imm(k),
            then_: t,
            else_: f,
        },
    ) = (load, branch)
    else {
        return None;
    };
    if lhs != dst {
        return None;
    }
    let d = dst.0;
    Some(match (width, cond) {
        (Width::Half, Cond::Eq) => Op::LdHJeq { d, off, k, t, f },
        (Width::Byte, Cond::Eq) => Op::LdBJeq { d, off, k, t, f },
        (Width::Word, Cond::Eq) => Op::LdWJeq { d, off, k, t, f },
        (w, cond) => Op::LdBr {
            w,
            cond,
            d,
            off,
            k,
            t,
            f,
        },
    })
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
            offset: k,
        } => {
            let d = dst.0;
            match width {
                Width::Byte => Op::LdB { d, k },
                Width::Half => Op::LdH { d, k },
                Width::Word => Op::LdW { d, k },
            }
        }
        Insn::Load {
            width,
            dst,
            base: Some(b),
            offset: k,
        } => {
            let (d, b) = (dst.0, b.0);
            match width {
                Width::Byte => Op::LdXB { d, b, k },
                Width::Half => Op::LdXH { d, b, k },
                Width::Word => Op::LdXW { d, b, k },
            }
        }
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
        } => {
            let (d, a) = (dst.0, lhs.0);
            match op {
                AluOp::And => Op::AndI { d, a, k },
                AluOp::Add => Op::AddI { d, a, k },
                AluOp::Shl => Op::ShlI { d, a, k },
                AluOp::Shr => Op::ShrI { d, a, k },
                op => Op::AluI { op, d, a, k },
            }
        }
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
            then_: t,
            else_: f,
        } => {
            let a = lhs.0;
            match cond {
                Cond::Eq => Op::JeqI { a, k, t, f },
                Cond::Ne => Op::JneI { a, k, t, f },
                Cond::Gt => Op::JgtI { a, k, t, f },
                Cond::Set => Op::JsetI { a, k, t, f },
                cond => Op::BrI { cond, a, k, t, f },
            }
        }
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

/// The byte at `at`, if captured.
#[inline(always)]
fn byte(pkt: &[u8], at: usize) -> Option<u32> {
    pkt.get(at).map(|&b| u32::from(b))
}

/// The big-endian half-word at `at`, if captured.
#[inline(always)]
fn half(pkt: &[u8], at: usize) -> Option<u32> {
    let b = pkt.get(at..)?.first_chunk::<2>()?;
    Some(u32::from(u16::from_be_bytes(*b)))
}

/// The big-endian word at `at`, if captured.
#[inline(always)]
fn word(pkt: &[u8], at: usize) -> Option<u32> {
    let b = pkt.get(at..)?.first_chunk::<4>()?;
    Some(u32::from_be_bytes(*b))
}

#[inline(always)]
fn load(pkt: &[u8], at: usize, w: Width) -> Option<u32> {
    match w {
        Width::Byte => byte(pkt, at),
        Width::Half => half(pkt, at),
        Width::Word => word(pkt, at),
    }
}

/// `base + offset` without wrapping; an address beyond `usize` is outside any packet.
#[inline(always)]
fn indexed(base: u32, offset: u32) -> usize {
    usize::try_from(u64::from(base) + u64::from(offset)).unwrap_or(usize::MAX)
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
        // Register numbers are verified below 16: the mask only tells the compiler so.
        macro_rules! reg {
            ($x:expr) => {
                r[usize::from($x & 15)]
            };
        }
        // Writes a loaded (or computed) value and continues, or rejects the packet.
        macro_rules! set {
            ($d:expr, $v:expr) => {{
                let Some(x) = $v else { return 0 };
                reg!($d) = x;
                pc += 1;
            }};
        }
        macro_rules! branch {
            ($c:expr, $t:expr, $f:expr) => {
                pc = if $c { $t } else { $f } as usize
            };
        }
        macro_rules! load_branch {
            ($d:expr, $v:expr, $cmp:expr, $t:expr, $f:expr) => {{
                let Some(x) = $v else { return 0 };
                reg!($d) = x;
                branch!($cmp(x), $t, $f);
            }};
        }
        loop {
            match ops[pc] {
                Op::LdHJeq { d, off, k, t, f } => {
                    load_branch!(d, half(packet, off as usize), |x| x == k, t, f)
                }
                Op::LdBJeq { d, off, k, t, f } => {
                    load_branch!(d, byte(packet, off as usize), |x| x == k, t, f)
                }
                Op::LdWJeq { d, off, k, t, f } => {
                    load_branch!(d, word(packet, off as usize), |x| x == k, t, f)
                }
                Op::LdBr {
                    w,
                    cond,
                    d,
                    off,
                    k,
                    t,
                    f,
                } => load_branch!(d, load(packet, off as usize, w), |x| cond.eval(x, k), t, f),
                Op::JeqI { a, k, t, f } => branch!(reg!(a) == k, t, f),
                Op::JneI { a, k, t, f } => branch!(reg!(a) != k, t, f),
                Op::JgtI { a, k, t, f } => branch!(reg!(a) > k, t, f),
                Op::JsetI { a, k, t, f } => branch!(reg!(a) & k != 0, t, f),
                Op::BrI { cond, a, k, t, f } => branch!(cond.eval(reg!(a), k), t, f),
                Op::BrR { cond, a, b, t, f } => branch!(cond.eval(reg!(a), reg!(b)), t, f),
                Op::LdB { d, k } => set!(d, byte(packet, k as usize)),
                Op::LdH { d, k } => set!(d, half(packet, k as usize)),
                Op::LdW { d, k } => set!(d, word(packet, k as usize)),
                Op::LdXB { d, b, k } => set!(d, byte(packet, indexed(reg!(b), k))),
                Op::LdXH { d, b, k } => set!(d, half(packet, indexed(reg!(b), k))),
                Op::LdXW { d, b, k } => set!(d, word(packet, indexed(reg!(b), k))),
                Op::AndI { d, a, k } => set!(d, Some(reg!(a) & k)),
                Op::AddI { d, a, k } => set!(d, Some(reg!(a).wrapping_add(k))),
                Op::ShlI { d, a, k } => set!(d, Some(reg!(a).checked_shl(k).unwrap_or(0))),
                Op::ShrI { d, a, k } => set!(d, Some(reg!(a).checked_shr(k).unwrap_or(0))),
                Op::AluI { op, d, a, k } => set!(d, op.apply(reg!(a), k)),
                Op::AluR { op, d, a, b } => set!(d, op.apply(reg!(a), reg!(b))),
                Op::Jmp { t } => pc = t as usize,
                Op::RetI { k } => return k,
                Op::RetR { s } => return reg!(s),
                Op::MovR { d, s } => set!(d, Some(reg!(s))),
                Op::MovI { d, k } => set!(d, Some(k)),
                Op::Len { d } => set!(d, Some(wire_len)),
                Op::Neg { d, s } => set!(d, Some(reg!(s).wrapping_neg())),
                Op::Ldm { d, slot } => set!(d, Some(scratch[usize::from(slot)])),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{assemble, verify};

    fn run(text: &str, pkt: &[u8]) -> u32 {
        let p = verify(assemble(text).unwrap()).unwrap();
        p.run(&mut Cache::new(), pkt, pkt.len() as u32)
    }

    #[test]
    fn op_stays_small() {
        assert!(
            std::mem::size_of::<Op>() <= 20,
            "{}",
            std::mem::size_of::<Op>()
        );
    }

    #[test]
    fn fused_load_branch_writes_its_register_and_keeps_the_branch_slot() {
        let text = "ld.h r0, [0]\n jeq r0, 258, L3, L2\nL2:\n ret 0\nL3:\n ret r0\n";
        assert_eq!(run(text, &[1, 2]), 258);
        assert_eq!(run(text, &[1, 3]), 0);
        assert_eq!(run(text, &[1]), 0, "short packet");
        // A jump straight to the branch still works (its slot is not fused away).
        let text = "mov r0, 7\n jset r0, 1, L3, L2\nL2:\n ld.b r0, [0]\n jeq r0, 7, L3, L4\nL3:\n ret 1\nL4:\n ret 2\n";
        assert_eq!(run(text, &[7]), 1);
    }

    #[test]
    fn loads_at_the_edge_of_the_packet_and_of_the_address_space() {
        assert_eq!(run("ld.w r0, [0]\n ret r0\n", &[0, 0, 1, 2]), 258);
        assert_eq!(run("ld.w r0, [1]\n ret r0\n", &[0, 0, 1, 2]), 0);
        let far = "mov r1, 4294967295\n ld.b r0, [r1+4294967295]\n ret 1\n";
        assert_eq!(run(far, &[0; 8]), 0);
        let wrap = "mov r1, 4294967295\n ld.b r0, [r1+1]\n ret 1\n";
        assert_eq!(run(wrap, &[0; 8]), 0, "no wrap-around to offset 0");
    }

    #[test]
    fn switch_finds_keys_and_defaults() {
        let text = "ld.b r0, [0]\n switch r0, T0, L4\nL2:\n ret 2\nL3:\n ret 3\nL4:\n ret 4\n.table T0\n 1 -> L2\n 9 -> L3\n 200 -> L2\n";
        assert_eq!(run(text, &[1]), 2);
        assert_eq!(run(text, &[9]), 3);
        assert_eq!(run(text, &[200]), 2);
        assert_eq!(run(text, &[5]), 4);
    }
}
