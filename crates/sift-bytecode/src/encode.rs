//! The binary encoding (versions 1 and 2) and its decoder.
//!
//! ```text
//! header   "SFBC"  version:u16  scratch_words:u16
//! section  kind:u8  length:u32  payload[length]
//!          (kind 1 = code, then optionally 2 = tables, 3 = patterns, 4 = sets, in that order)
//! code     instructions, back to back, until the end of the payload
//! tables   count:u32, then per table: entries:u32, then (key:u32, target:u32) per entry
//! patterns count:u32, then per set: patterns:u32, then per pattern: kind:u8 len:u32 bytes[len]
//! sets     count:u32, then per set: width:u8 ranges:u32, then (lo, hi) per range (u32 or u128)
//! ```
//!
//! Integers are little-endian. Each instruction is an opcode byte followed by a fixed layout
//! for that opcode (see `docs/bytecode.md`). Version 2 adds the coprocessor calls (`contains`,
//! `member`) and the pattern and set sections; a program is written in the lowest version that
//! expresses it, so programs without coprocessors stay version 1, byte for byte. The decoder
//! accepts exactly the output of the encoder: every accepted input re-encodes to the same bytes
//! (so it refuses version-2 features in a version-1 input, a version-2 input that version 1
//! could express, duplicate patterns and set ranges that are not sorted, disjoint and apart).
//! It checks structure only (opcodes, lengths, section order, that each pattern compiles);
//! whether the program may run is the verifier's business.

use std::fmt;
use std::sync::Arc;

use sift_ir::{Chain, KeyWidth, Pattern, PatternError, PatternSet, ValueSet};

use crate::insn::{AluOp, Cond, Insn, Key, Operand, Program, Reg, Table, Width};

/// The first four bytes of every encoded program.
pub const MAGIC: [u8; 4] = *b"SFBC";
/// The newest encoding version this crate reads and writes (it also reads and writes version
/// 1: programs without coprocessor calls or tables).
pub const VERSION: u16 = 2;
/// The version of programs without coprocessors.
const VERSION_PLAIN: u16 = 1;

const SECTION_CODE: u8 = 1;
const SECTION_TABLES: u8 = 2;
const SECTION_PATTERNS: u8 = 3;
const SECTION_SETS: u8 = 4;

/// Pattern kinds in the patterns section.
const PATTERN_LITERAL: u8 = 0;
const PATTERN_NOCASE: u8 = 1;
const PATTERN_REGEX: u8 = 2;

mod op {
    pub const MOV_REG: u8 = 0x01;
    pub const MOV_IMM: u8 = 0x02;
    pub const WIRE_LEN: u8 = 0x03;
    pub const NEG: u8 = 0x04;
    pub const LOAD_SCRATCH: u8 = 0x05;
    pub const STORE_SCRATCH: u8 = 0x06;
    /// Plus 0 (byte), 1 (half) or 2 (word).
    pub const LOAD_ABS: u8 = 0x10;
    pub const LOAD_IND: u8 = 0x14;
    /// Plus the position of the operation in `AluOp::ALL`.
    pub const ALU_REG: u8 = 0x20;
    pub const ALU_IMM: u8 = 0x30;
    pub const JUMP: u8 = 0x40;
    /// Plus the position of the condition in `Cond::ALL`.
    pub const BRANCH_REG: u8 = 0x50;
    pub const BRANCH_IMM: u8 = 0x58;
    pub const SWITCH: u8 = 0x60;
    pub const RETURN_IMM: u8 = 0x70;
    pub const RETURN_REG: u8 = 0x71;
    /// Version 2: the coprocessor calls.
    pub const CONTAINS: u8 = 0x80;
    pub const MEMBER_W32: u8 = 0x81;
    pub const MEMBER_W128: u8 = 0x82;
    /// The header-chain walks, in every version.
    pub const PROTOCHAIN_IP: u8 = 0x90;
    pub const PROTOCHAIN_IP6: u8 = 0x91;
}

/// Why bytes are not an encoded program, and where (a byte offset into the input).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    pub offset: usize,
    pub kind: DecodeErrorKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeErrorKind {
    BadMagic,
    UnsupportedVersion(u16),
    /// The input ends inside a header, section, instruction or table.
    Truncated,
    /// A section kind other than code (1) and tables (2), or one out of order or repeated.
    UnexpectedSection(u8),
    MissingCode,
    /// The instruction at `index` starts with an opcode version 1 does not define.
    UnknownOpcode {
        index: usize,
        opcode: u8,
    },
    /// A tables section with no tables (the encoder omits the section instead).
    EmptyTables,
    /// Bytes left over inside the tables section after its last table.
    TrailingBytes,
    /// A version-2 encoding of a program version 1 expresses (the encoder writes version 1).
    NeedlessVersion,
    /// Pattern `pattern` of pattern set `set` cannot be used (empty, invalid regex, or not
    /// UTF-8).
    InvalidPattern {
        set: usize,
        pattern: usize,
        error: PatternError,
    },
    /// A pattern kind byte other than 0 (literal), 1 (literal ignoring case), 2 (regex).
    UnknownPatternKind(u8),
    /// Pattern `pattern` of set `set` repeats an earlier one.
    DuplicatePattern {
        set: usize,
        pattern: usize,
    },
    /// A width byte other than 0 (32-bit keys) and 1 (128-bit keys).
    UnknownKeyWidth(u8),
    /// The ranges of value set `set` are not sorted, disjoint and non-adjacent.
    NonCanonicalSet(usize),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "byte {}: ", self.offset)?;
        match &self.kind {
            DecodeErrorKind::BadMagic => write!(f, "not sift bytecode (bad magic)"),
            DecodeErrorKind::UnsupportedVersion(v) => {
                write!(
                    f,
                    "encoding version {v} is not supported (this is {VERSION})"
                )
            }
            DecodeErrorKind::Truncated => write!(f, "unexpected end of input"),
            DecodeErrorKind::UnexpectedSection(k) => write!(f, "unexpected section kind {k}"),
            DecodeErrorKind::MissingCode => write!(f, "no code section"),
            DecodeErrorKind::UnknownOpcode { index, opcode } => {
                write!(f, "instruction {index}: unknown opcode {opcode:#04x}")
            }
            DecodeErrorKind::EmptyTables => write!(f, "tables section without tables"),
            DecodeErrorKind::TrailingBytes => write!(f, "trailing bytes in section"),
            DecodeErrorKind::NeedlessVersion => {
                write!(f, "version 2 for a program without coprocessors")
            }
            DecodeErrorKind::InvalidPattern {
                set,
                pattern,
                error,
            } => write!(f, "pattern p{set}.{pattern}: {error}"),
            DecodeErrorKind::UnknownPatternKind(k) => write!(f, "unknown pattern kind {k}"),
            DecodeErrorKind::DuplicatePattern { set, pattern } => {
                write!(f, "pattern p{set}.{pattern} repeats an earlier one")
            }
            DecodeErrorKind::UnknownKeyWidth(w) => write!(f, "unknown key width {w}"),
            DecodeErrorKind::NonCanonicalSet(s) => {
                write!(f, "ranges of set s{s} not sorted, disjoint and apart")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

/// Whether the program needs version 2.
fn needs_coprocessors(p: &Program) -> bool {
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

fn encode_insn(insn: &Insn, out: &mut Vec<u8>) {
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

/// A cursor over the input that reports truncation with the offset where it happened.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn error(&self, kind: DecodeErrorKind) -> DecodeError {
        DecodeError {
            offset: self.pos,
            kind,
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        match self.bytes.get(self.pos..self.pos.saturating_add(n)) {
            Some(s) => {
                self.pos += n;
                Ok(s)
            }
            None => Err(self.error(DecodeErrorKind::Truncated)),
        }
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn reg(&mut self) -> Result<Reg, DecodeError> {
        self.u8().map(Reg)
    }

    fn u16(&mut self) -> Result<u16, DecodeError> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u128(&mut self) -> Result<u128, DecodeError> {
        let b: [u8; 16] = self.take(16)?.try_into().unwrap_or([0; 16]);
        Ok(u128::from_le_bytes(b))
    }

    fn at_end(&self) -> bool {
        self.pos >= self.bytes.len()
    }
}

/// Decodes an encoded program. Never panics; allocates at most in proportion to the input.
pub fn decode(bytes: &[u8]) -> Result<Program, DecodeError> {
    let mut r = Reader { bytes, pos: 0 };
    if r.take(4).map_err(|_| r.error(DecodeErrorKind::BadMagic))? != MAGIC {
        return Err(DecodeError {
            offset: 0,
            kind: DecodeErrorKind::BadMagic,
        });
    }
    let version = r.u16()?;
    if version != VERSION && version != VERSION_PLAIN {
        return Err(DecodeError {
            offset: 4,
            kind: DecodeErrorKind::UnsupportedVersion(version),
        });
    }
    let scratch_words = r.u16()?;
    let mut program = Program {
        scratch_words,
        ..Program::default()
    };

    let coprocessors = version == VERSION;
    // The last section kind read; sections come in increasing kind order, each at most once.
    let mut last = 0u8;
    while !r.at_end() {
        let kind_at = r.pos;
        let kind = r.u8()?;
        let len = r.u32()? as usize;
        let start = r.pos;
        let payload = r.take(len)?;
        let in_order = kind > last && (last != 0 || kind == SECTION_CODE);
        match kind {
            SECTION_CODE if in_order => {
                program.code = decode_code(payload, start, coprocessors)?;
            }
            SECTION_TABLES if in_order => {
                program.tables = decode_tables(payload, start)?;
            }
            SECTION_PATTERNS if in_order && coprocessors => {
                program.patterns = decode_patterns(payload, start)?;
            }
            SECTION_SETS if in_order && coprocessors => {
                program.sets = decode_sets(payload, start)?;
            }
            _ => {
                return Err(DecodeError {
                    offset: kind_at,
                    kind: DecodeErrorKind::UnexpectedSection(kind),
                })
            }
        }
        last = kind;
    }
    if last == 0 {
        return Err(r.error(DecodeErrorKind::MissingCode));
    }
    if coprocessors && !needs_coprocessors(&program) {
        return Err(DecodeError {
            offset: 4,
            kind: DecodeErrorKind::NeedlessVersion,
        });
    }
    Ok(program)
}

/// Decodes a code section whose payload starts at byte `base` of the input; `coprocessors`:
/// the call opcodes are allowed (version 2).
fn decode_code(payload: &[u8], base: usize, coprocessors: bool) -> Result<Vec<Insn>, DecodeError> {
    let mut r = Reader {
        bytes: payload,
        pos: 0,
    };
    let shift = |mut e: DecodeError| {
        e.offset += base;
        e
    };
    let mut code = Vec::new();
    while !r.at_end() {
        let insn = decode_insn(&mut r, code.len(), coprocessors).map_err(shift)?;
        code.push(insn);
    }
    Ok(code)
}

fn decode_insn(r: &mut Reader<'_>, index: usize, coprocessors: bool) -> Result<Insn, DecodeError> {
    let at = r.pos;
    let opcode = r.u8()?;
    let unknown = DecodeError {
        offset: at,
        kind: DecodeErrorKind::UnknownOpcode { index, opcode },
    };
    Ok(match opcode {
        op::MOV_REG => Insn::Mov {
            dst: r.reg()?,
            src: Operand::Reg(r.reg()?),
        },
        op::MOV_IMM => Insn::Mov {
            dst: r.reg()?,
            src: Operand::Imm(r.u32()?),
        },
        op::WIRE_LEN => Insn::WireLen { dst: r.reg()? },
        op::NEG => Insn::Neg {
            dst: r.reg()?,
            src: r.reg()?,
        },
        op::LOAD_SCRATCH => Insn::LoadScratch {
            dst: r.reg()?,
            slot: r.u16()?,
        },
        op::STORE_SCRATCH => {
            let src = r.reg()?;
            Insn::StoreScratch {
                slot: r.u16()?,
                src,
            }
        }
        _ if (op::LOAD_ABS..op::LOAD_ABS + 3).contains(&opcode) => Insn::Load {
            width: Width::ALL[usize::from(opcode - op::LOAD_ABS)],
            dst: r.reg()?,
            base: None,
            offset: r.u32()?,
        },
        _ if (op::LOAD_IND..op::LOAD_IND + 3).contains(&opcode) => Insn::Load {
            width: Width::ALL[usize::from(opcode - op::LOAD_IND)],
            dst: r.reg()?,
            base: Some(r.reg()?),
            offset: r.u32()?,
        },
        _ if (op::ALU_REG..op::ALU_REG + 10).contains(&opcode) => Insn::Alu {
            op: AluOp::ALL[usize::from(opcode - op::ALU_REG)],
            dst: r.reg()?,
            lhs: r.reg()?,
            rhs: Operand::Reg(r.reg()?),
        },
        _ if (op::ALU_IMM..op::ALU_IMM + 10).contains(&opcode) => Insn::Alu {
            op: AluOp::ALL[usize::from(opcode - op::ALU_IMM)],
            dst: r.reg()?,
            lhs: r.reg()?,
            rhs: Operand::Imm(r.u32()?),
        },
        op::JUMP => Insn::Jump { target: r.u32()? },
        _ if (op::BRANCH_REG..op::BRANCH_REG + 7).contains(&opcode) => Insn::Branch {
            cond: Cond::ALL[usize::from(opcode - op::BRANCH_REG)],
            lhs: r.reg()?,
            rhs: Operand::Reg(r.reg()?),
            then_: r.u32()?,
            else_: r.u32()?,
        },
        _ if (op::BRANCH_IMM..op::BRANCH_IMM + 7).contains(&opcode) => Insn::Branch {
            cond: Cond::ALL[usize::from(opcode - op::BRANCH_IMM)],
            lhs: r.reg()?,
            rhs: Operand::Imm(r.u32()?),
            then_: r.u32()?,
            else_: r.u32()?,
        },
        op::SWITCH => Insn::Switch {
            key: r.reg()?,
            table: r.u32()?,
            default: r.u32()?,
        },
        op::RETURN_IMM => Insn::Return {
            value: Operand::Imm(r.u32()?),
        },
        op::RETURN_REG => Insn::Return {
            value: Operand::Reg(r.reg()?),
        },
        op::CONTAINS if coprocessors => Insn::Contains {
            dst: r.reg()?,
            start: r.reg()?,
            set: r.u32()?,
            pattern: r.u32()?,
        },
        op::MEMBER_W32 if coprocessors => Insn::Member {
            dst: r.reg()?,
            key: Key::W32(r.reg()?),
            set: r.u32()?,
        },
        op::MEMBER_W128 if coprocessors => Insn::Member {
            dst: r.reg()?,
            key: Key::W128([r.reg()?, r.reg()?, r.reg()?, r.reg()?]),
            set: r.u32()?,
        },
        op::PROTOCHAIN_IP | op::PROTOCHAIN_IP6 => Insn::Protochain {
            chain: if opcode == op::PROTOCHAIN_IP {
                Chain::Ip
            } else {
                Chain::Ip6
            },
            dst: r.reg()?,
            proto: r.reg()?,
            offset: r.reg()?,
            base: r.u32()?,
            target: r.u32()?,
        },
        _ => return Err(unknown),
    })
}

/// A reader over a table section's payload (found at `base` in the input), and the number of
/// tables the section announces, which must not be 0.
fn open_section(payload: &[u8], base: usize) -> Result<(Reader<'_>, usize), DecodeError> {
    let mut r = Reader {
        bytes: payload,
        pos: 0,
    };
    let shift = shifted(base);
    let count = r.u32().map_err(&shift)? as usize;
    if count == 0 {
        return Err(shift(r.error(DecodeErrorKind::EmptyTables)));
    }
    Ok((r, count))
}

fn decode_tables(payload: &[u8], base: usize) -> Result<Vec<Table>, DecodeError> {
    let (mut r, count) = open_section(payload, base)?;
    let shift = shifted(base);
    // Each table takes at least 4 bytes: never reserve more than the input can hold.
    let mut tables = Vec::with_capacity(count.min(payload.len() / 4));
    for _ in 0..count {
        let n = r.u32().map_err(shift)? as usize;
        let mut entries = Vec::with_capacity(n.min(payload.len() / 8));
        for _ in 0..n {
            let key = r.u32().map_err(shift)?;
            let target = r.u32().map_err(shift)?;
            entries.push((key, target));
        }
        tables.push(Table { entries });
    }
    if !r.at_end() {
        return Err(shift(r.error(DecodeErrorKind::TrailingBytes)));
    }
    Ok(tables)
}

/// Shifts an error's offset from a section's payload to the input.
fn shifted(base: usize) -> impl Fn(DecodeError) -> DecodeError + Copy {
    move |mut e| {
        e.offset += base;
        e
    }
}

fn decode_patterns(payload: &[u8], base: usize) -> Result<Vec<Arc<PatternSet>>, DecodeError> {
    let (mut r, count) = open_section(payload, base)?;
    let shift = shifted(base);
    // Each set takes at least 4 bytes, each pattern at least 5.
    let mut sets = Vec::with_capacity(count.min(payload.len() / 4));
    for s in 0..count {
        let n = r.u32().map_err(&shift)? as usize;
        let mut set = PatternSet::new();
        for i in 0..n {
            let at = r.pos;
            let kind = r.u8().map_err(&shift)?;
            let len = r.u32().map_err(&shift)? as usize;
            let bytes = r.take(len).map_err(&shift)?.to_vec();
            let error = |kind| shift(DecodeError { offset: at, kind });
            let invalid = |error| DecodeErrorKind::InvalidPattern {
                set: s,
                pattern: i,
                error,
            };
            let pattern = match kind {
                PATTERN_LITERAL | PATTERN_NOCASE => Pattern::Literal {
                    bytes,
                    nocase: kind == PATTERN_NOCASE,
                },
                PATTERN_REGEX => match String::from_utf8(bytes) {
                    Ok(re) => Pattern::Regex(re),
                    Err(_) => {
                        let e = PatternError::Regex("not UTF-8".into());
                        return Err(error(invalid(e)));
                    }
                },
                k => return Err(error(DecodeErrorKind::UnknownPatternKind(k))),
            };
            match set.add(pattern) {
                Ok(index) if index as usize == i => {}
                Ok(_) => {
                    let kind = DecodeErrorKind::DuplicatePattern { set: s, pattern: i };
                    return Err(error(kind));
                }
                Err(e) => return Err(error(invalid(e))),
            }
        }
        sets.push(Arc::new(set));
    }
    if !r.at_end() {
        return Err(shift(r.error(DecodeErrorKind::TrailingBytes)));
    }
    Ok(sets)
}

fn decode_sets(payload: &[u8], base: usize) -> Result<Vec<Arc<ValueSet>>, DecodeError> {
    let (mut r, count) = open_section(payload, base)?;
    let shift = shifted(base);
    let mut sets = Vec::with_capacity(count.min(payload.len() / 5));
    for s in 0..count {
        let at = r.pos;
        let width = match r.u8().map_err(&shift)? {
            0 => KeyWidth::W32,
            1 => KeyWidth::W128,
            w => {
                let kind = DecodeErrorKind::UnknownKeyWidth(w);
                return Err(shift(DecodeError { offset: at, kind }));
            }
        };
        let n = r.u32().map_err(&shift)? as usize;
        let mut ranges = Vec::with_capacity(n.min(payload.len() / 8));
        for _ in 0..n {
            let mut bound = || match width {
                KeyWidth::W32 => r.u32().map(u128::from),
                KeyWidth::W128 => r.u128(),
            };
            let lo = bound().map_err(&shift)?;
            let hi = bound().map_err(&shift)?;
            ranges.push((lo, hi));
        }
        let set = ValueSet::new(width, ranges.iter().copied());
        if set.ranges() != ranges.as_slice() {
            let kind = DecodeErrorKind::NonCanonicalSet(s);
            return Err(shift(DecodeError { offset: at, kind }));
        }
        sets.push(Arc::new(set));
    }
    if !r.at_end() {
        return Err(shift(r.error(DecodeErrorKind::TrailingBytes)));
    }
    Ok(sets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Program {
        Program {
            scratch_words: 2,
            code: vec![
                Insn::Load {
                    width: Width::Half,
                    dst: Reg(0),
                    base: None,
                    offset: 12,
                },
                Insn::Switch {
                    key: Reg(0),
                    table: 0,
                    default: 3,
                },
                Insn::Return {
                    value: Operand::Imm(96),
                },
                Insn::Return {
                    value: Operand::Imm(0),
                },
            ],
            tables: vec![Table {
                entries: vec![(0x800, 2), (0x86dd, 2)],
            }],
            ..Program::default()
        }
    }

    #[test]
    fn round_trip() {
        let p = sample();
        let bytes = encode(&p);
        assert_eq!(&bytes[..4], b"SFBC");
        assert_eq!(decode(&bytes).unwrap(), p);
    }

    #[test]
    fn alu_opcodes_follow_the_documented_order() {
        // docs/bytecode.md: 0 add, 1 sub, 2 mul, 3 div, 4 mod, 5 and, 6 or, 7 xor, 8 shl, 9 shr.
        for (i, name) in [
            "add", "sub", "mul", "div", "mod", "and", "or", "xor", "shl", "shr",
        ]
        .into_iter()
        .enumerate()
        {
            let p = crate::assemble(&format!("    {name} r0, r0, 1\n    ret r0\n")).unwrap();
            let mut bytes = Vec::new();
            encode_insn(&p.code[0], &mut bytes);
            assert_eq!(bytes[0], op::ALU_IMM + i as u8, "{name}");
        }
    }

    #[test]
    fn protochain_round_trips_through_binary_and_text() {
        let text = "    ld.b r0, [20]\n    mov r1, 40\n    protochain.ip6 r2, r0, [r1+14], 6\n    ret r2\n";
        let p = crate::assemble(text).unwrap();
        assert!(matches!(
            p.code[2],
            Insn::Protochain {
                chain: Chain::Ip6,
                base: 14,
                target: 6,
                ..
            }
        ));
        assert_eq!(p.to_string(), text);
        let bytes = encode(&p);
        assert_eq!(u16::from_le_bytes([bytes[4], bytes[5]]), VERSION_PLAIN);
        assert_eq!(decode(&bytes).unwrap(), p);
    }

    #[test]
    fn every_prefix_is_an_error_inside_the_input_or_a_whole_program() {
        let bytes = encode(&sample());
        for n in 0..bytes.len() {
            match decode(&bytes[..n]) {
                // Cutting exactly after the code section leaves a program without tables.
                Ok(p) => assert_eq!(encode(&p), &bytes[..n]),
                Err(e) => assert!(e.offset <= n, "{n}: {e}"),
            }
        }
    }

    #[test]
    fn unknown_opcode_names_the_instruction() {
        let mut bytes = encode(&Program {
            scratch_words: 0,
            code: vec![
                Insn::Return {
                    value: Operand::Reg(Reg(1)),
                },
                Insn::Return {
                    value: Operand::Reg(Reg(1)),
                },
            ],
            ..Program::default()
        });
        // header (8) + section header (5) + first instruction (2)
        bytes[15] = 0xff;
        let e = decode(&bytes).unwrap_err();
        assert_eq!(e.offset, 15);
        assert_eq!(
            e.kind,
            DecodeErrorKind::UnknownOpcode {
                index: 1,
                opcode: 0xff
            }
        );
    }

    #[test]
    fn version_and_sections_are_checked() {
        let mut bytes = encode(&sample());
        assert_eq!(bytes[4], 1, "no coprocessors: version 1");
        bytes[4] = 3;
        assert_eq!(
            decode(&bytes).unwrap_err().kind,
            DecodeErrorKind::UnsupportedVersion(3)
        );
        bytes[4] = 2;
        assert_eq!(
            decode(&bytes).unwrap_err().kind,
            DecodeErrorKind::NeedlessVersion
        );
        assert_eq!(
            decode(b"SFBC\x01\x00\x00\x00").unwrap_err().kind,
            DecodeErrorKind::MissingCode
        );
        assert_eq!(
            decode(b"SFBC\x01\x00\x00\x00\x02\x00\x00\x00\x00")
                .unwrap_err()
                .kind,
            DecodeErrorKind::UnexpectedSection(2)
        );
    }
}
