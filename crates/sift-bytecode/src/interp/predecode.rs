//! Pre-decoding: a verified program turned, once, into the form the interpreter's loop runs.
//!
//! Each instruction becomes one [`Op`] in the same slot, with its width, operation, condition
//! and operand kind folded into the variant, so a step is a single `match`. Branches against an
//! immediate are normalized to four conditions (`jne`, `jlt`, `jle` become `jeq`, `jge`, `jgt`
//! with their targets exchanged), and jumps to a jump or a return are threaded.
//!
//! Then the common sequences of filter code become superinstructions in the slot of their first
//! instruction ([`super::fuse`]).

use crate::insn::{AluOp, Cond, Insn, Key, Operand, Program, Width};

use super::fuse::{fuse, fuse_msh, normalize};
use super::lookup::{Budget, Lookup};
use super::op::Op;

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

/// Where control really goes from `t`: past any chain of unconditional jumps.
fn destination(code: &[Insn], mut t: u32) -> u32 {
    // Jumps are forward (verified), so the chain ends.
    while let Some(&Insn::Jump { target }) = code.get(t as usize) {
        t = target;
    }
    t
}

/// `op` with its targets threaded through jumps, and a jump to a return replaced by the return.
pub(super) fn thread(code: &[Insn], op: Op) -> Op {
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
