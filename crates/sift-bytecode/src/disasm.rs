//! The disassembler: a program's canonical text form (`Display` for [`Program`]).
//!
//! ```text
//! .scratch 1
//!     ld.h r0, [12]
//!     jeq r0, 2048, L2, L3
//! L2:
//!     ret 262144
//! L3:
//!     ret 0
//! ```
//!
//! Every instruction some branch, jump or table targets gets the label `L<index>`; targets outside
//! the code print as `@<index>` and references to missing tables as `#<index>`, so that even
//! programs the verifier rejects print and re-assemble to themselves. Tables follow the code, as
//! `.table T<index>` and one `key -> label` line per entry. `.scratch` is omitted when 0.
//!
//! Coprocessor tables come before the code, after `.scratch`: one `.pattern pN = ...` line per
//! pattern (`"GET"`, `nocase "host:"`, `regex "^HTTP/1\x5c.[01]"`; a set without patterns is
//! declared by a bare `.pattern pN`), then one `.set sN w32 = 0x50, 0x1f40-0x1fa4` line per value
//! set (`w128` for 128-bit keys; ranges in hexadecimal, as the IR prints them). In quoted strings,
//! bytes outside printable ASCII and `"`, `\` and `;` (the comment character) are written `\xNN`.

use std::fmt;

use crate::insn::{Insn, Operand, Program, Reg};

impl fmt::Display for Reg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}", self.0)
    }
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Reg(r) => write!(f, "{r}"),
            Operand::Imm(k) => write!(f, "{k}"),
        }
    }
}

/// A target as text: a label inside the code, an absolute `@index` outside it.
struct Target(u32, usize);

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if (self.0 as usize) < self.1 {
            write!(f, "L{}", self.0)
        } else {
            write!(f, "@{}", self.0)
        }
    }
}

/// The instructions that need a label (targets inside the code).
fn labelled(p: &Program) -> Vec<bool> {
    let n = p.code.len();
    let mut marks = vec![false; n];
    let mut mark = |t: u32| {
        if let Some(m) = marks.get_mut(t as usize) {
            *m = true;
        }
    };
    for insn in &p.code {
        match *insn {
            Insn::Jump { target } => mark(target),
            Insn::Branch { then_, else_, .. } => {
                mark(then_);
                mark(else_);
            }
            Insn::Switch { default, .. } => mark(default),
            _ => {}
        }
    }
    for t in &p.tables {
        for &(_, target) in &t.entries {
            mark(target);
        }
    }
    marks
}

/// Formats one instruction; `n` is the code length (to tell labels from absolute targets) and
/// `tables` the number of tables.
pub(crate) fn write_insn(
    f: &mut impl fmt::Write,
    insn: &Insn,
    n: usize,
    tables: usize,
) -> fmt::Result {
    match *insn {
        Insn::Mov { dst, src } => write!(f, "mov {dst}, {src}"),
        Insn::WireLen { dst } => write!(f, "len {dst}"),
        Insn::Load {
            width,
            dst,
            base,
            offset,
        } => match base {
            None => write!(f, "ld.{} {dst}, [{offset}]", width.suffix()),
            Some(b) => write!(f, "ld.{} {dst}, [{b}+{offset}]", width.suffix()),
        },
        Insn::Alu { op, dst, lhs, rhs } => write!(f, "{} {dst}, {lhs}, {rhs}", op.name()),
        Insn::Neg { dst, src } => write!(f, "neg {dst}, {src}"),
        Insn::LoadScratch { dst, slot } => write!(f, "ldm {dst}, m{slot}"),
        Insn::StoreScratch { slot, src } => write!(f, "stm m{slot}, {src}"),
        Insn::Jump { target } => write!(f, "jmp {}", Target(target, n)),
        Insn::Branch {
            cond,
            lhs,
            rhs,
            then_,
            else_,
        } => write!(
            f,
            "{} {lhs}, {rhs}, {}, {}",
            cond.mnemonic(),
            Target(then_, n),
            Target(else_, n)
        ),
        Insn::Switch {
            key,
            table,
            default,
        } => {
            if (table as usize) < tables {
                write!(f, "switch {key}, T{table}, {}", Target(default, n))
            } else {
                write!(f, "switch {key}, #{table}, {}", Target(default, n))
            }
        }
        Insn::Return { value } => write!(f, "ret {value}"),
        Insn::Contains {
            dst,
            set,
            pattern,
            start,
        } => write!(f, "contains {dst}, p{set}.{pattern}, {start}"),
        Insn::Protochain {
            dst,
            chain,
            base,
            proto,
            offset,
            target,
        } => write!(
            f,
            "protochain.{} {dst}, {proto}, [{offset}+{base}], {target}",
            chain.name()
        ),
        Insn::Member { dst, set, key } => {
            write!(f, "member {dst}, s{set}")?;
            for r in key.regs() {
                write!(f, ", {r}")?;
            }
            Ok(())
        }
    }
}

impl fmt::Display for Program {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.code.len();
        if self.scratch_words != 0 {
            writeln!(f, ".scratch {}", self.scratch_words)?;
        }
        sift_ir::write_tables(f, &self.patterns, &self.sets, ".")?;
        let labels = labelled(self);
        for (i, insn) in self.code.iter().enumerate() {
            if labels[i] {
                writeln!(f, "L{i}:")?;
            }
            f.write_str("    ")?;
            write_insn(f, insn, n, self.tables.len())?;
            f.write_str("\n")?;
        }
        for (i, t) in self.tables.iter().enumerate() {
            writeln!(f, ".table T{i}")?;
            for &(key, target) in &t.entries {
                writeln!(f, "    {key} -> {}", Target(target, n))?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for Insn {
    /// One instruction with absolute targets (`@index`), for error messages and debugging.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_insn(f, self, 0, usize::MAX)
    }
}
