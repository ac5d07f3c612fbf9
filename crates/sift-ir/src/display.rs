//! The text form of the IR, for `sift debug ir` and file-based tests. [`crate::parse_function`]
//! reads it back.
//!
//! ```text
//! block0:
//!     v0 = load.h [12]
//!     v1 = const 0x800
//!     br eq v0, v1, block1, block2
//! block1:
//!     ret 262144
//! block2:
//!     ret 0
//! ```
//!
//! A function that calls coprocessors lists its tables first, one pattern or set per line
//! (`pattern p0 = nocase "get"`, `set s0 w32 = 0x50, 0x1f40-0x1fa4`); the calls name them
//! (`v3 = contains p0.1, v2`: pattern 1 of set 0; `v4 = member s0, v1`).

use std::fmt;

use std::sync::Arc;

use crate::coproc::{KeyWidth, Pattern, PatternSet, ValueSet};
use crate::function::{BinOp, CmpOp, Function, Inst, LoadSize, Target, Terminator};

impl BinOp {
    pub fn name(self) -> &'static str {
        match self {
            BinOp::Add => "add",
            BinOp::Sub => "sub",
            BinOp::Mul => "mul",
            BinOp::Div => "div",
            BinOp::Mod => "mod",
            BinOp::And => "and",
            BinOp::Or => "or",
            BinOp::Xor => "xor",
            BinOp::Shl => "shl",
            BinOp::Shr => "shr",
        }
    }

    /// Every operator. The bytecode encodes an ALU opcode as a base plus the position in this
    /// list (`docs/bytecode.md`): the order is part of that format.
    pub const ALL: [BinOp; 10] = [
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::Div,
        BinOp::Mod,
        BinOp::And,
        BinOp::Or,
        BinOp::Xor,
        BinOp::Shl,
        BinOp::Shr,
    ];
}

impl CmpOp {
    pub fn name(self) -> &'static str {
        match self {
            CmpOp::Eq => "eq",
            CmpOp::Ne => "ne",
            CmpOp::Gt => "gt",
            CmpOp::Ge => "ge",
            CmpOp::Lt => "lt",
            CmpOp::Le => "le",
            CmpOp::Set => "set",
        }
    }

    /// The bytecode's jump mnemonic: the name after a `j` (`jeq`, `jset`).
    pub fn mnemonic(self) -> &'static str {
        match self {
            CmpOp::Eq => "jeq",
            CmpOp::Ne => "jne",
            CmpOp::Gt => "jgt",
            CmpOp::Ge => "jge",
            CmpOp::Lt => "jlt",
            CmpOp::Le => "jle",
            CmpOp::Set => "jset",
        }
    }

    /// In the bytecode's encoding order (an opcode is a base plus the position in this list).
    pub const ALL: [CmpOp; 7] = [
        CmpOp::Eq,
        CmpOp::Ne,
        CmpOp::Gt,
        CmpOp::Ge,
        CmpOp::Lt,
        CmpOp::Le,
        CmpOp::Set,
    ];
}

impl LoadSize {
    pub fn suffix(self) -> &'static str {
        match self {
            LoadSize::Byte => "b",
            LoadSize::Half => "h",
            LoadSize::Word => "w",
        }
    }
}

fn write_const(f: &mut fmt::Formatter<'_>, k: u32) -> fmt::Result {
    if k < 256 {
        write!(f, "{k}")
    } else {
        write!(f, "{k:#x}")
    }
}

struct TargetDisplay<'a>(&'a Target);

impl fmt::Display for TargetDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0.block)?;
        if !self.0.args.is_empty() {
            write!(f, "(")?;
            for (i, a) in self.0.args.iter().enumerate() {
                if i > 0 {
                    write!(f, ", ")?;
                }
                write!(f, "{a}")?;
            }
            write!(f, ")")?;
        }
        Ok(())
    }
}

/// Writes bytes as a quoted string: printable ASCII as is, except `"`, `\\` and `;` (the text
/// forms' comment character), which are escaped as `\xNN` like every other byte.
fn write_quoted(f: &mut impl fmt::Write, bytes: &[u8]) -> fmt::Result {
    f.write_char('"')?;
    for &b in bytes {
        if (0x20..0x7f).contains(&b) && !matches!(b, b'"' | b'\\' | b';') {
            f.write_char(char::from(b))?;
        } else {
            write!(f, "\\x{b:02x}")?;
        }
    }
    f.write_char('"')
}

/// Writes coprocessor tables in the text form the IR and the bytecode share, one line per
/// pattern (`{directive}pattern pN = [nocase |regex ]"..."`; a bare `pattern pN` for an empty
/// pattern set) and per value set (`{directive}set sN wW = lo-hi, ...`). `directive` is what
/// precedes the keyword (`.` in the bytecode's assembler).
pub fn write_tables(
    f: &mut impl fmt::Write,
    patterns: &[Arc<PatternSet>],
    sets: &[Arc<ValueSet>],
    directive: &str,
) -> fmt::Result {
    for (i, set) in patterns.iter().enumerate() {
        if set.is_empty() {
            writeln!(f, "{directive}pattern p{i}")?;
        }
        for p in set.patterns() {
            write!(f, "{directive}pattern p{i} = ")?;
            match p {
                Pattern::Literal { bytes, nocase } => {
                    if *nocase {
                        f.write_str("nocase ")?;
                    }
                    write_quoted(f, bytes)?;
                }
                Pattern::Regex(re) => {
                    f.write_str("regex ")?;
                    write_quoted(f, re.as_bytes())?;
                }
            }
            writeln!(f)?;
        }
    }
    for (i, set) in sets.iter().enumerate() {
        let width = match set.width() {
            KeyWidth::W32 => 32,
            KeyWidth::W128 => 128,
        };
        write!(f, "{directive}set s{i} w{width} =")?;
        for (j, &(lo, hi)) in set.ranges().iter().enumerate() {
            let sep = if j == 0 { " " } else { ", " };
            if lo == hi {
                write!(f, "{sep}{lo:#x}")?;
            } else {
                write!(f, "{sep}{lo:#x}-{hi:#x}")?;
            }
        }
        writeln!(f)?;
    }
    Ok(())
}

impl fmt::Display for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_tables(f, &self.patterns, &self.sets, "")?;
        for (i, block) in self.blocks.iter().enumerate() {
            write!(f, "block{i}")?;
            if !block.params.is_empty() {
                write!(f, "(")?;
                for (j, p) in block.params.iter().enumerate() {
                    if j > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{p}")?;
                }
                write!(f, ")")?;
            }
            writeln!(f, ":")?;
            for &v in &block.insts {
                write!(f, "    {v} = ")?;
                match &self.values[v.index()] {
                    &Inst::Const(k) => {
                        write!(f, "const ")?;
                        write_const(f, k)?;
                    }
                    Inst::WireLen => write!(f, "len")?,
                    &Inst::Load {
                        index,
                        offset,
                        size,
                    } => {
                        write!(f, "load.{} [", size.suffix())?;
                        if let Some(x) = index {
                            write!(f, "{x}+")?;
                        }
                        write!(f, "{offset}]")?;
                    }
                    Inst::Binary(op, a, b) => write!(f, "{} {a}, {b}", op.name())?,
                    Inst::Neg(a) => write!(f, "neg {a}")?,
                    Inst::Param(b) => write!(f, "param {b}")?,
                    Inst::Contains {
                        set,
                        pattern,
                        start,
                    } => write!(f, "contains p{set}.{pattern}, {start}")?,
                    Inst::Protochain {
                        chain,
                        base,
                        proto,
                        offset,
                        target,
                    } => write!(
                        f,
                        "protochain.{} {proto}, [{offset}+{base}], {target}",
                        chain.name()
                    )?,
                    Inst::Member { set, key } => {
                        write!(f, "member s{set}")?;
                        for k in key {
                            write!(f, ", {k}")?;
                        }
                    }
                }
                writeln!(f)?;
            }
            match &block.term {
                Terminator::Unset => writeln!(f, "    unset")?,
                Terminator::Return(k) => writeln!(f, "    ret {k}")?,
                Terminator::ReturnValue(v) => writeln!(f, "    ret {v}")?,
                Terminator::Switch {
                    value,
                    cases,
                    default,
                } => {
                    write!(f, "    switch {value}, default {}", TargetDisplay(default))?;
                    for (k, t) in cases {
                        write!(f, ", ")?;
                        write_const(f, *k)?;
                        write!(f, ": {}", TargetDisplay(t))?;
                    }
                    writeln!(f)?;
                }
                Terminator::Jump(t) => writeln!(f, "    jump {}", TargetDisplay(t))?,
                Terminator::Branch {
                    op,
                    lhs,
                    rhs,
                    then_,
                    else_,
                } => writeln!(
                    f,
                    "    br {} {lhs}, {rhs}, {}, {}",
                    op.name(),
                    TargetDisplay(then_),
                    TargetDisplay(else_)
                )?,
            }
        }
        Ok(())
    }
}
