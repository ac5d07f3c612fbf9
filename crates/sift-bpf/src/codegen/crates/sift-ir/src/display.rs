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

use std::fmt;

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

impl fmt::Display for Function {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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
                match self.values[v.index()] {
                    Inst::Const(k) => {
                        write!(f, "const ")?;
                        write_const(f, k)?;
                    }
                    Inst::WireLen => write!(f, "len")?,
                    Inst::Load {
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
