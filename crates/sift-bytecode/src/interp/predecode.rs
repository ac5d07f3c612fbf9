//! Pre-decoding: a verified program turned, once, into the form the interpreter's loop runs.
//!
//! Each instruction becomes one [`Op`] in the same slot, with its width, operation, condition
//! and operand kind folded into the variant, so a step is a single `match`. Branches against an
//! immediate are normalized to four conditions (`jne`, `jlt`, `jle` become `jeq`, `jge`, `jgt`
//! with their targets exchanged), and jumps to a jump or a return are threaded.
//!
//! Then the common sequences of filter code become superinstructions in the slot of their first
//! instruction:
//!
//! | sequence | op |
//! |---|---|
//! | `ld [k]` ; `jcc rd, imm` | `LdHJeq`, `LdBJeq`, `LdWJeq`, `LdHJset`, `LdBr` |
//! | `ld [k]` ; `and rd, rd, m` ; `jcc rd, imm` | `LdWAndJeq`, `LdBr` |
//! | `ld [k]` ; `jeq rd, k1` else `jeq rd, k2` | `LdHJeq2`, `LdBJeq2` |
//! | `ld.b [k]` ; `and rd, rd, 15` ; `shl rd, rd, 2` | `Msh` (classic BPF's `ldx 4*([k]&0xf)`) |
//! | `ld [rb+k]` ; `jcc rd, imm` | `LdXHJeq`, `LdXBJset`, `LdXBr` |
//! | `ld [rb+k]` ; a range test (below) | `LdXRange` |
//! | `ld [k]` ; `switch rd` | `LdSwitch`; `LdHIn3` for a set of up to three keys |
//! | `Msh` ; `and` ; `shl` ; an indexed `LdX…` op based on its register | `MshLdX…` |
//! | `jeq ra, k1` else `jeq ra, k2` | `Jeq2` |
//! | `jge ra, lo` then `jgt ra, hi` (either order) | `InRange` (one unsigned compare) |
//!
//! A fused op does everything its instructions do (it writes every register they write, with
//! the same values, and rejects on the same out-of-bounds loads in the same order), so the
//! instructions it absorbed keep their own slots unchanged: a branch that lands on one of them
//! still runs it on its own, and no target needs renumbering.

use sift_ir::Chain;

use crate::insn::{AluOp, Cond, Insn, Key, Operand, Program, Table, Width};

use super::lookup::{Budget, Lookup};

/// One pre-decoded step. Registers are `u8` (verified `< 16`), slots `u8` (verified `< 256`),
/// targets absolute slot indices (verified in bounds and forward). Aligned to 32 bytes, so that
/// finding slot `i` is a shift (at 28 bytes it took three instructions on the dispatch path) and
/// no op straddles a cache line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(align(32))]
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
    /// `d = (byte [off] & 15) << 2`, then continue after the three instructions it stands for.
    Msh {
        d: u8,
        off: u32,
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
    JgtI {
        a: u8,
        k: u32,
        t: u32,
        f: u32,
    },
    JgeI {
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
    BrR {
        cond: Cond,
        a: u8,
        b: u8,
        t: u32,
        f: u32,
    },
    /// `a == k1` to `t1`, else `a == k2` to `t2`, else `f`.
    Jeq2 {
        a: u8,
        k1: u32,
        t1: u32,
        k2: u32,
        t2: u32,
        f: u32,
    },
    /// `a - lo < span` (wrapping; that is, `lo <= a < lo + span`) to `t`, else `f`.
    InRange {
        a: u8,
        lo: u32,
        span: u32,
        t: u32,
        f: u32,
    },
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
    LdHJset {
        d: u8,
        off: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    LdHJeq2 {
        d: u8,
        off: u32,
        k1: u32,
        t1: u32,
        k2: u32,
        t2: u32,
        f: u32,
    },
    LdBJeq2 {
        d: u8,
        off: u32,
        k1: u32,
        t1: u32,
        k2: u32,
        t2: u32,
        f: u32,
    },
    /// `d = word [off] & mask`, then `d == k`.
    LdWAndJeq {
        d: u8,
        off: u32,
        mask: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    /// Any other absolute load, masked (`mask` is all ones without an `and`), then a branch.
    LdBr {
        w: Width,
        cond: Cond,
        d: u8,
        off: u32,
        mask: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    LdXHJeq {
        d: u8,
        b: u8,
        off: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    LdXBJset {
        d: u8,
        b: u8,
        off: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    LdXBr {
        w: Width,
        cond: Cond,
        d: u8,
        b: u8,
        off: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    LdXRange {
        w: Width,
        d: u8,
        b: u8,
        off: u32,
        lo: u32,
        span: u32,
        t: u32,
        f: u32,
    },
    /// `d = half [off]`, then `d` in `keys` (a table of one to three keys, one target).
    LdHIn3 {
        d: u8,
        off: u32,
        keys: [u32; 3],
        t: u32,
        f: u32,
    },
    /// `Msh` (writing `xd`) and then the op after it, an indexed load based on `xd` and a test:
    /// the transport-port idiom `ldx 4*([14]&0xf); ldh [x+k]; jeq`.
    MshLdXHJeq {
        xd: u8,
        xoff: u32,
        d: u8,
        off: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    MshLdXBJset {
        xd: u8,
        xoff: u32,
        d: u8,
        off: u32,
        k: u32,
        t: u32,
        f: u32,
    },
    MshLdXHRange {
        xd: u8,
        xoff: u32,
        d: u8,
        off: u32,
        lo: u32,
        span: u32,
        t: u32,
        f: u32,
    },
    Switch {
        key: u8,
        table: u32,
        default: u32,
    },
    LdSwitch {
        w: Width,
        d: u8,
        off: u32,
        table: u32,
        default: u32,
    },
    RetI {
        k: u32,
    },
    RetR {
        s: u8,
    },
    /// `d = contains p<set>.<pattern>, s`.
    Contains {
        d: u8,
        s: u8,
        set: u32,
        pattern: u32,
    },
    /// `d = member s<set>, k` (a 32-bit key).
    Member {
        d: u8,
        k: u8,
        set: u32,
    },
    /// `d = member s<set>, k[0], k[1], k[2], k[3]` (a 128-bit key).
    Member4 {
        d: u8,
        k: [u8; 4],
        set: u32,
    },
    /// `d = protochain.<chain> p, [x+base], target`.
    Protochain {
        d: u8,
        p: u8,
        x: u8,
        chain: Chain,
        base: u32,
        target: u32,
    },
}

/// The pre-decoded form of a verified program: one op per instruction, searchable tables.
#[derive(Clone, Debug)]
pub(crate) struct Code {
    /// As many ops as instructions, padded with `ret 0` to a power of two so that the loop can
    /// index with a mask instead of a bounds check (the padding is never reached).
    pub(crate) ops: Box<[Op]>,
    pub(crate) lookups: Box<[Lookup]>,
    /// Some instruction calls a coprocessor: runs start a new packet in the memo.
    pub(crate) has_calls: bool,
}

impl Code {
    /// Pre-decodes a program that passed the verifier's checks.
    pub(crate) fn new(p: &Program) -> Code {
        let plain: Vec<Op> = p
            .code
            .iter()
            .map(|&i| thread(&p.code, predecode(i)))
            .collect();
        let mut ops: Vec<Op> = (0..plain.len())
            .map(|i| fuse(p, i).unwrap_or(plain[i]))
            .collect();
        for i in 0..ops.len() {
            if let Some(&next) = ops.get(i + 3) {
                ops[i] = fuse_msh(ops[i], next).unwrap_or(ops[i]);
            }
        }
        ops.resize(ops.len().next_power_of_two(), Op::RetI { k: 0 });
        let entries = p.tables.iter().map(|t| t.entries.len()).sum();
        let mut budget = Budget::new(entries);
        let lookups = p
            .tables
            .iter()
            .map(|t| Lookup::new(&t.entries, &mut budget))
            .collect();
        Code {
            ops: ops.into_boxed_slice(),
            lookups,
            has_calls: p.has_calls(),
        }
    }
}

/// A branch against an immediate, normalized: `Eq`, `Gt`, `Ge` or `Set`.
#[derive(Clone, Copy, Debug)]
struct Test {
    cond: Cond,
    reg: u8,
    k: u32,
    t: u32,
    f: u32,
}

/// The normalized test of a branch against an immediate.
fn test(insn: &Insn) -> Option<Test> {
    let Insn::Branch {
        cond,
        lhs,
        rhs: Operand::Imm(k),
        then_: t,
        else_: f,
    } = *insn
    else {
        return None;
    };
    let (cond, t, f) = normalize(cond, t, f);
    Some(Test {
        cond,
        reg: lhs.0,
        k,
        t,
        f,
    })
}

/// `cond` as `Eq`, `Gt`, `Ge` or `Set`, exchanging the targets where needed.
fn normalize(cond: Cond, t: u32, f: u32) -> (Cond, u32, u32) {
    match cond {
        Cond::Ne => (Cond::Eq, f, t),
        Cond::Lt => (Cond::Ge, f, t),
        Cond::Le => (Cond::Gt, f, t),
        c => (c, t, f),
    }
}

/// A test as `reg >= bound ? t : f`, if it is one (`x > k` is `x >= k + 1`).
fn at_least(t: &Test) -> Option<(u32, u32, u32)> {
    match t.cond {
        Cond::Ge => Some((t.k, t.t, t.f)),
        Cond::Gt => Some((t.k.checked_add(1)?, t.t, t.f)),
        _ => None,
    }
}

/// Two tests of the same register, the second reached from the first, that together say
/// `lo <= x < hi`: `(lo, span, inside, outside)`.
fn range(code: &[Insn], first: &Test) -> Option<(u32, u32, u32, u32)> {
    let (c1, p, q) = at_least(first)?;
    // Lower bound first: x >= c1 ? (x >= c2 ? out : in) : out.
    if let Some(second) = code.get(p as usize).and_then(test) {
        if let Some((c2, r, s)) = at_least(&second) {
            if second.reg == first.reg && r == q && c1 < c2 {
                return Some((c1, c2 - c1, s, q));
            }
        }
    }
    // Upper bound first: x >= c1 ? out : (x >= c2 ? in : out).
    if let Some(second) = code.get(q as usize).and_then(test) {
        if let Some((c2, r, s)) = at_least(&second) {
            if second.reg == first.reg && s == p && c2 < c1 {
                return Some((c2, c1 - c2, r, p));
            }
        }
    }
    None
}

/// `x == k1 ? t1 : (x == k2 ? t2 : f)` from an equality test whose else reaches another.
fn eq_chain(code: &[Insn], first: &Test) -> Option<(u32, u32, u32, u32, u32)> {
    if first.cond != Cond::Eq {
        return None;
    }
    let second = code.get(first.f as usize).and_then(test)?;
    (second.cond == Cond::Eq && second.reg == first.reg)
        .then_some((first.k, first.t, second.k, second.t, second.f))
}

/// `Msh` followed (three slots on, past its `and` and `shl`) by an indexed load from the
/// register it writes, fused into one op.
fn fuse_msh(msh: Op, next: Op) -> Option<Op> {
    let Op::Msh { d: xd, off: xoff } = msh else {
        return None;
    };
    Some(match next {
        Op::LdXHJeq { d, b, off, k, t, f } if b == xd => Op::MshLdXHJeq {
            xd,
            xoff,
            d,
            off,
            k,
            t,
            f,
        },
        Op::LdXBJset { d, b, off, k, t, f } if b == xd => Op::MshLdXBJset {
            xd,
            xoff,
            d,
            off,
            k,
            t,
            f,
        },
        Op::LdXRange {
            w: Width::Half,
            d,
            b,
            off,
            lo,
            span,
            t,
            f,
        } if b == xd => Op::MshLdXHRange {
            xd,
            xoff,
            d,
            off,
            lo,
            span,
            t,
            f,
        },
        _ => return None,
    })
}

/// A table of one to three keys that all lead to one target: `(keys, target)`, the keys padded
/// by repeating the first.
fn small_set(table: &Table) -> Option<([u32; 3], u32)> {
    let (&(k0, target), rest) = table.entries.split_first()?;
    if rest.len() > 2 || rest.iter().any(|&(_, t)| t != target) {
        return None;
    }
    let mut keys = [k0; 3];
    for (slot, &(k, _)) in keys[1..].iter_mut().zip(rest) {
        *slot = k;
    }
    Some((keys, target))
}

/// The superinstruction starting at slot `i`, if a known sequence starts there.
fn fuse(p: &Program, i: usize) -> Option<Op> {
    let code = &p.code[..];
    let at = |j: usize| code.get(j);
    let thread_ops = |op: Op| thread(code, op);
    let fused = match *at(i)? {
        Insn::Load {
            width: w,
            dst,
            base: None,
            offset: off,
        } => {
            let d = dst.0;
            let and_self = |j: usize| match at(j) {
                Some(&Insn::Alu {
                    op: AluOp::And,
                    dst: x,
                    lhs: y,
                    rhs: Operand::Imm(m),
                }) if x == dst && y == dst => Some(m),
                _ => None,
            };
            let mask = and_self(i + 1);
            if let (Width::Byte, Some(15)) = (w, mask) {
                if let Some(&Insn::Alu {
                    op: AluOp::Shl,
                    dst: x,
                    lhs: y,
                    rhs: Operand::Imm(2),
                }) = at(i + 2)
                {
                    if x == dst && y == dst {
                        return Some(Op::Msh { d, off });
                    }
                }
            }
            let next = i + 1 + usize::from(mask.is_some());
            if let (
                None,
                Some(&Insn::Switch {
                    key,
                    table,
                    default,
                }),
            ) = (mask, at(next))
            {
                let set = p.tables.get(table as usize).and_then(small_set);
                if let (true, Width::Half, Some((keys, target))) = (key == dst, w, set) {
                    return Some(thread_ops(Op::LdHIn3 {
                        d,
                        off,
                        keys,
                        t: target,
                        f: default,
                    }));
                }
                if key == dst {
                    return Some(thread_ops(Op::LdSwitch {
                        w,
                        d,
                        off,
                        table,
                        default,
                    }));
                }
            }
            let t = at(next).and_then(test).filter(|t| t.reg == d)?;
            let mask = mask.unwrap_or(u32::MAX);
            let plain_mask = mask == u32::MAX;
            match (w, t.cond, plain_mask, eq_chain(code, &t)) {
                (Width::Half, _, true, Some((k1, t1, k2, t2, f))) => Op::LdHJeq2 {
                    d,
                    off,
                    k1,
                    t1,
                    k2,
                    t2,
                    f,
                },
                (Width::Byte, _, true, Some((k1, t1, k2, t2, f))) => Op::LdBJeq2 {
                    d,
                    off,
                    k1,
                    t1,
                    k2,
                    t2,
                    f,
                },
                (Width::Half, Cond::Eq, true, _) => Op::LdHJeq {
                    d,
                    off,
                    k: t.k,
                    t: t.t,
                    f: t.f,
                },
                (Width::Byte, Cond::Eq, true, _) => Op::LdBJeq {
                    d,
                    off,
                    k: t.k,
                    t: t.t,
                    f: t.f,
                },
                (Width::Word, Cond::Eq, true, _) => Op::LdWJeq {
                    d,
                    off,
                    k: t.k,
                    t: t.t,
                    f: t.f,
                },
                (Width::Half, Cond::Set, true, _) => Op::LdHJset {
                    d,
                    off,
                    k: t.k,
                    t: t.t,
                    f: t.f,
                },
                (Width::Word, Cond::Eq, false, _) => Op::LdWAndJeq {
                    d,
                    off,
                    mask,
                    k: t.k,
                    t: t.t,
                    f: t.f,
                },
                (w, cond, _, _) => Op::LdBr {
                    w,
                    cond,
                    d,
                    off,
                    mask,
                    k: t.k,
                    t: t.t,
                    f: t.f,
                },
            }
        }
        Insn::Load {
            width: w,
            dst,
            base: Some(b),
            offset: off,
        } => {
            let (d, b) = (dst.0, b.0);
            let t = at(i + 1).and_then(test).filter(|t| t.reg == d)?;
            if let Some((lo, span, inside, outside)) = range(code, &t) {
                return Some(thread_ops(Op::LdXRange {
                    w,
                    d,
                    b,
                    off,
                    lo,
                    span,
                    t: inside,
                    f: outside,
                }));
            }
            match (w, t.cond) {
                (Width::Half, Cond::Eq) => Op::LdXHJeq {
                    d,
                    b,
                    off,
                    k: t.k,
                    t: t.t,
                    f: t.f,
                },
                (Width::Byte, Cond::Set) => Op::LdXBJset {
                    d,
                    b,
                    off,
                    k: t.k,
                    t: t.t,
                    f: t.f,
                },
                (w, cond) => Op::LdXBr {
                    w,
                    cond,
                    d,
                    b,
                    off,
                    k: t.k,
                    t: t.t,
                    f: t.f,
                },
            }
        }
        ref insn @ Insn::Branch { .. } => {
            let t = test(insn)?;
            if let Some((k1, t1, k2, t2, f)) = eq_chain(code, &t) {
                Op::Jeq2 {
                    a: t.reg,
                    k1,
                    t1,
                    k2,
                    t2,
                    f,
                }
            } else if let Some((lo, span, inside, outside)) = range(code, &t) {
                Op::InRange {
                    a: t.reg,
                    lo,
                    span,
                    t: inside,
                    f: outside,
                }
            } else {
                return None;
            }
        }
        _ => return None,
    };
    Some(thread_ops(fused))
}

/// Where control really goes from `t`: past any chain of unconditional jumps.
fn destination(code: &[Insn], mut t: u32) -> u32 {
    // Jumps are forward (verified), so the chain ends.
    while let Some(&Insn::Jump { target }) = code.get(t as usize) {
        t = target;
    }
    t
}

/// `op` with its targets threaded through jumps, and a jump to a return replaced by the return.
fn thread(code: &[Insn], op: Op) -> Op {
    let d = |t: &mut u32| *t = destination(code, *t);
    let mut op = op;
    match &mut op {
        Op::Jmp { t } => {
            d(t);
            if let Some(&Insn::Return { value }) = code.get(*t as usize) {
                return predecode(Insn::Return { value });
            }
        }
        Op::JeqI { t, f, .. }
        | Op::JgtI { t, f, .. }
        | Op::JgeI { t, f, .. }
        | Op::JsetI { t, f, .. }
        | Op::BrR { t, f, .. }
        | Op::InRange { t, f, .. }
        | Op::LdHJeq { t, f, .. }
        | Op::LdBJeq { t, f, .. }
        | Op::LdWJeq { t, f, .. }
        | Op::LdHJset { t, f, .. }
        | Op::LdWAndJeq { t, f, .. }
        | Op::LdBr { t, f, .. }
        | Op::LdXHJeq { t, f, .. }
        | Op::LdXBJset { t, f, .. }
        | Op::LdXBr { t, f, .. }
        | Op::LdXRange { t, f, .. }
        | Op::LdHIn3 { t, f, .. }
        | Op::MshLdXHJeq { t, f, .. }
        | Op::MshLdXBJset { t, f, .. }
        | Op::MshLdXHRange { t, f, .. } => {
            d(t);
            d(f);
        }
        Op::Jeq2 { t1, t2, f, .. }
        | Op::LdHJeq2 { t1, t2, f, .. }
        | Op::LdBJeq2 { t1, t2, f, .. } => {
            d(t1);
            d(t2);
            d(f);
        }
        Op::Switch { default, .. } | Op::LdSwitch { default, .. } => d(default),
        _ => {}
    }
    op
}

/// The op of one instruction on its own.
fn predecode(insn: Insn) -> Op {
    // Register numbers and slots are verified to fit; the casts cannot truncate.
    match insn {
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
            then_,
            else_,
        } => {
            let a = lhs.0;
            match normalize(cond, then_, else_) {
                (Cond::Eq, t, f) => Op::JeqI { a, k, t, f },
                (Cond::Gt, t, f) => Op::JgtI { a, k, t, f },
                (Cond::Ge, t, f) => Op::JgeI { a, k, t, f },
                (_, t, f) => Op::JsetI { a, k, t, f },
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
        Insn::Contains {
            dst,
            set,
            pattern,
            start,
        } => Op::Contains {
            d: dst.0,
            s: start.0,
            set,
            pattern,
        },
        Insn::Member {
            dst,
            set,
            key: Key::W32(k),
        } => Op::Member {
            d: dst.0,
            k: k.0,
            set,
        },
        Insn::Member {
            dst,
            set,
            key: Key::W128(k),
        } => Op::Member4 {
            d: dst.0,
            k: k.map(|r| r.0),
            set,
        },
        Insn::Protochain {
            dst,
            chain,
            base,
            proto,
            offset,
            target,
        } => Op::Protochain {
            d: dst.0,
            p: proto.0,
            x: offset.0,
            chain,
            base,
            target,
        },
    }
}
