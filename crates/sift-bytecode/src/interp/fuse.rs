//! Superinstructions: the common sequences of filter code, each recognized at the slot of its
//! first instruction and replaced there by one op:
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

use crate::insn::{AluOp, Cond, Insn, Operand, Program, Table, Width};

use super::op::Op;
use super::predecode::thread;

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
pub(super) fn normalize(cond: Cond, t: u32, f: u32) -> (Cond, u32, u32) {
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
pub(super) fn fuse_msh(msh: Op, next: Op) -> Option<Op> {
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
pub(super) fn fuse(p: &Program, i: usize) -> Option<Op> {
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
