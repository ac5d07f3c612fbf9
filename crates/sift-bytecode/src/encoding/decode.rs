//! The decoder: exactly the encoder's output back into a program, or the byte offset where
//! the input stops being one.

use std::fmt;
use std::sync::Arc;

use sift_ir::{Chain, KeyWidth, Pattern, PatternError, PatternSet, ValueSet};

use super::encode::needs_coprocessors;
use super::{
    op, MAGIC, PATTERN_LITERAL, PATTERN_NOCASE, PATTERN_REGEX, SECTION_CODE, SECTION_PATTERNS,
    SECTION_SETS, SECTION_TABLES, VERSION, VERSION_PLAIN,
};
use crate::insn::{AluOp, Cond, Insn, Key, Operand, Program, Reg, Table, Width};

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
