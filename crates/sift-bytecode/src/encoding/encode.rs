//! The encoder: a program as the bytes of the lowest version that expresses it.

use sift_ir::{Chain, KeyWidth, Pattern};

use super::{
    op, MAGIC, PATTERN_LITERAL, PATTERN_NOCASE, PATTERN_REGEX, SECTION_CODE, SECTION_PATTERNS,
    SECTION_SETS, SECTION_TABLES, VERSION, VERSION_PLAIN,
};
use crate::insn::{AluOp, Cond, Insn, Key, Operand, Program, Width};

/// Whether the program needs version 2.
pub(super) fn needs_coprocessors(p: &Program) -> bool {
    p.has_calls() || p.has_coprocessor_tables()
}

/// Encodes a program (any program, verified or not).
pub fn encode(p: &Program) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + p.code.len() * 8);
    out.extend(MAGIC);
    let version = if needs_coprocessors(p) {
        VERSION
    } else {
        VERSION_PLAIN
    };
    out.extend(version.to_le_bytes());
    out.extend(p.scratch_words.to_le_bytes());

    let mut code = Vec::with_capacity(p.code.len() * 8);
    for insn in &p.code {
        encode_insn(insn, &mut code);
    }
    push_section(&mut out, SECTION_CODE, &code);

    if !p.tables.is_empty() {
        let mut t = Vec::new();
        t.extend(len_u32(p.tables.len()).to_le_bytes());
        for table in &p.tables {
            t.extend(len_u32(table.entries.len()).to_le_bytes());
            for &(key, target) in &table.entries {
                t.extend(key.to_le_bytes());
                t.extend(target.to_le_bytes());
            }
        }
        push_section(&mut out, SECTION_TABLES, &t);
    }
    if !p.patterns.is_empty() {
        let mut t = Vec::new();
        t.extend(len_u32(p.patterns.len()).to_le_bytes());
        for set in &p.patterns {
            t.extend(len_u32(set.len()).to_le_bytes());
            for pattern in set.patterns() {
                let (kind, bytes) = match pattern {
                    Pattern::Literal {
                        bytes,
                        nocase: false,
                    } => (PATTERN_LITERAL, bytes.as_slice()),
                    Pattern::Literal {
                        bytes,
                        nocase: true,
                    } => (PATTERN_NOCASE, bytes.as_slice()),
                    Pattern::Regex(re) => (PATTERN_REGEX, re.as_bytes()),
                };
                t.push(kind);
                t.extend(len_u32(bytes.len()).to_le_bytes());
                t.extend(bytes);
            }
        }
        push_section(&mut out, SECTION_PATTERNS, &t);
    }
    if !p.sets.is_empty() {
        let mut t = Vec::new();
        t.extend(len_u32(p.sets.len()).to_le_bytes());
        for set in &p.sets {
            t.push(match set.width() {
                KeyWidth::W32 => 0,
                KeyWidth::W128 => 1,
            });
            t.extend(len_u32(set.ranges().len()).to_le_bytes());
            for &(lo, hi) in set.ranges() {
                for bound in [lo, hi] {
                    match set.width() {
                        // Ranges of a 32-bit set are clipped to 32 bits.
                        KeyWidth::W32 => t.extend((bound as u32).to_le_bytes()),
                        KeyWidth::W128 => t.extend(bound.to_le_bytes()),
                    }
                }
            }
        }
        push_section(&mut out, SECTION_SETS, &t);
    }
    out
}

/// Lengths are bounded by the verifier's limits; an unverified program beyond 2^32 entries
/// cannot exist in memory on the platforms we support, so saturating is only a formality.
fn len_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn push_section(out: &mut Vec<u8>, kind: u8, payload: &[u8]) {
    out.push(kind);
    out.extend(len_u32(payload.len()).to_le_bytes());
    out.extend(payload);
}

fn position<T: PartialEq>(all: &[T], x: T) -> u8 {
    all.iter().position(|y| *y == x).unwrap_or(0) as u8
}

fn width_code(w: Width) -> u8 {
    position(&Width::ALL, w)
}

pub(super) fn encode_insn(insn: &Insn, out: &mut Vec<u8>) {
    match *insn {
        Insn::Mov {
            dst,
            src: Operand::Reg(s),
        } => out.extend([op::MOV_REG, dst.0, s.0]),
        Insn::Mov {
            dst,
            src: Operand::Imm(k),
        } => {
            out.extend([op::MOV_IMM, dst.0]);
            out.extend(k.to_le_bytes());
        }
        Insn::WireLen { dst } => out.extend([op::WIRE_LEN, dst.0]),
        Insn::Neg { dst, src } => out.extend([op::NEG, dst.0, src.0]),
        Insn::LoadScratch { dst, slot } => {
            out.extend([op::LOAD_SCRATCH, dst.0]);
            out.extend(slot.to_le_bytes());
        }
        Insn::StoreScratch { slot, src } => {
            out.extend([op::STORE_SCRATCH, src.0]);
            out.extend(slot.to_le_bytes());
        }
        Insn::Load {
            width,
            dst,
            base: None,
            offset,
        } => {
            out.extend([op::LOAD_ABS + width_code(width), dst.0]);
            out.extend(offset.to_le_bytes());
        }
        Insn::Load {
            width,
            dst,
            base: Some(b),
            offset,
        } => {
            out.extend([op::LOAD_IND + width_code(width), dst.0, b.0]);
            out.extend(offset.to_le_bytes());
        }
        Insn::Alu {
            op: alu,
            dst,
            lhs,
            rhs: Operand::Reg(r),
        } => out.extend([op::ALU_REG + position(&AluOp::ALL, alu), dst.0, lhs.0, r.0]),
        Insn::Alu {
            op: alu,
            dst,
            lhs,
            rhs: Operand::Imm(k),
        } => {
            out.extend([op::ALU_IMM + position(&AluOp::ALL, alu), dst.0, lhs.0]);
            out.extend(k.to_le_bytes());
        }
        Insn::Jump { target } => {
            out.push(op::JUMP);
            out.extend(target.to_le_bytes());
        }
        Insn::Branch {
            cond,
            lhs,
            rhs,
            then_,
            else_,
        } => {
            let c = position(&Cond::ALL, cond);
            match rhs {
                Operand::Reg(r) => out.extend([op::BRANCH_REG + c, lhs.0, r.0]),
                Operand::Imm(k) => {
                    out.extend([op::BRANCH_IMM + c, lhs.0]);
                    out.extend(k.to_le_bytes());
                }
            }
            out.extend(then_.to_le_bytes());
            out.extend(else_.to_le_bytes());
        }
        Insn::Switch {
            key,
            table,
            default,
        } => {
            out.extend([op::SWITCH, key.0]);
            out.extend(table.to_le_bytes());
            out.extend(default.to_le_bytes());
        }
        Insn::Return {
            value: Operand::Imm(k),
        } => {
            out.push(op::RETURN_IMM);
            out.extend(k.to_le_bytes());
        }
        Insn::Return {
            value: Operand::Reg(r),
        } => out.extend([op::RETURN_REG, r.0]),
        Insn::Contains {
            dst,
            set,
            pattern,
            start,
        } => {
            out.extend([op::CONTAINS, dst.0, start.0]);
            out.extend(set.to_le_bytes());
            out.extend(pattern.to_le_bytes());
        }
        Insn::Protochain {
            dst,
            chain,
            base,
            proto,
            offset,
            target,
        } => {
            let opcode = match chain {
                Chain::Ip => op::PROTOCHAIN_IP,
                Chain::Ip6 => op::PROTOCHAIN_IP6,
            };
            out.extend([opcode, dst.0, proto.0, offset.0]);
            out.extend(base.to_le_bytes());
            out.extend(target.to_le_bytes());
        }
        Insn::Member {
            dst,
            set,
            key: Key::W32(k),
        } => {
            out.extend([op::MEMBER_W32, dst.0, k.0]);
            out.extend(set.to_le_bytes());
        }
        Insn::Member {
            dst,
            set,
            key: Key::W128(k),
        } => {
            out.extend([op::MEMBER_W128, dst.0, k[0].0, k[1].0, k[2].0, k[3].0]);
            out.extend(set.to_le_bytes());
        }
    }
}
