//! The assembler: text form to [`Program`] (the inverse of the disassembler in `disasm`).
//!
//! One statement per line; `;` starts a comment. A line may start with `label:`. Directives:
//! `.scratch N` (once, before the code) and `.table NAME` (after the code; the following lines
//! are `key -> target` entries). Targets are labels or absolute `@index`; tables are referenced
//! by name or by absolute `#index`. Numbers are decimal or `0x` hexadecimal. The assembler checks
//! syntax and names only; the verifier checks the rest (a backward label is assembled as written).
//!
//! Coprocessor tables are declared before the code: `.pattern pN = [nocase|regex] "..."` adds
//! a pattern to pattern set `N` (a bare `.pattern pN` declares the set, possibly empty), and
//! `.set sN w32|w128 = k, lo-hi, ...` defines value set `N`; sets are numbered in order. The
//! calls name them: `contains rD, pN.M, rS` and `member rD, sN, rK` (or four key registers).

mod coprocessor;
mod insn;
mod operands;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use sift_ir::PatternError;

use crate::insn::{Insn, Program, Table};

use coprocessor::CoprocessorTables;
use insn::{parse_insn, Parsed};
use operands::{is_name, split_operands, Line, Pending, Ref, Word};

/// A syntax or naming error at a line and column (both 1-based).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AsmError {
    pub line: usize,
    pub column: usize,
    pub kind: AsmErrorKind,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AsmErrorKind {
    UnknownMnemonic(String),
    UnknownDirective(String),
    /// `expected` operands, `found` given.
    OperandCount {
        expected: usize,
        found: usize,
    },
    /// The operand is not of the kind the instruction needs (`what` names it).
    Expected(&'static str),
    DuplicateLabel(String),
    UndefinedLabel(String),
    DuplicateTable(String),
    UndefinedTable(String),
    /// `.scratch` given twice or after the first instruction.
    MisplacedScratch,
    /// An instruction or label after the first `.table`.
    CodeAfterTables,
    /// A label not followed by an instruction.
    LabelAtEnd(String),
    /// A `.pattern` or `.set` after the first instruction.
    MisplacedCoprocessorTable,
    /// A pattern or value set named out of order (`.set s2` before `s1`), or a value set
    /// defined twice.
    TableOutOfOrder(String),
    /// A pattern sift-ir refuses (an empty literal, an invalid regular expression).
    InvalidPattern(PatternError),
    /// A pattern already in its set (sets hold distinct patterns, so indices stay as written).
    DuplicatePattern,
}

impl fmt::Display for AsmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: ", self.line, self.column)?;
        match &self.kind {
            AsmErrorKind::UnknownMnemonic(m) => write!(f, "unknown instruction `{m}`"),
            AsmErrorKind::UnknownDirective(d) => write!(f, "unknown directive `{d}`"),
            AsmErrorKind::OperandCount { expected, found } => {
                write!(f, "expected {expected} operands, found {found}")
            }
            AsmErrorKind::Expected(what) => write!(f, "expected {what}"),
            AsmErrorKind::DuplicateLabel(l) => write!(f, "label `{l}` defined twice"),
            AsmErrorKind::UndefinedLabel(l) => write!(f, "undefined label `{l}`"),
            AsmErrorKind::DuplicateTable(t) => write!(f, "table `{t}` defined twice"),
            AsmErrorKind::UndefinedTable(t) => write!(f, "undefined table `{t}`"),
            AsmErrorKind::MisplacedScratch => {
                write!(f, "`.scratch` must appear once, before the code")
            }
            AsmErrorKind::CodeAfterTables => write!(f, "code after the first `.table`"),
            AsmErrorKind::LabelAtEnd(l) => write!(f, "label `{l}` does not label an instruction"),
            AsmErrorKind::MisplacedCoprocessorTable => {
                write!(f, "`.pattern` and `.set` must appear before the code")
            }
            AsmErrorKind::TableOutOfOrder(t) => {
                write!(f, "`{t}` is out of order or defined twice")
            }
            AsmErrorKind::InvalidPattern(e) => write!(f, "{e}"),
            AsmErrorKind::DuplicatePattern => write!(f, "pattern already in its set"),
        }
    }
}

impl std::error::Error for AsmError {}

/// Assembles the text form into a program.
pub fn assemble(text: &str) -> Result<Program, AsmError> {
    let mut scratch: Option<u16> = None;
    let mut code: Vec<Parsed> = Vec::new();
    let mut labels: HashMap<String, u32> = HashMap::new();
    let mut open_labels: Vec<Pending> = Vec::new();
    let mut tables: Vec<Vec<(u32, Ref)>> = Vec::new();
    let mut table_names: HashMap<String, u32> = HashMap::new();
    let mut coprocessor = CoprocessorTables::default();

    for (i, raw) in text.lines().enumerate() {
        let line = Line { number: i + 1 };
        let content = raw.split(';').next().unwrap_or("");
        let indent = content.len() - content.trim_start().len();
        let mut rest = content.trim();
        let mut column = indent + 1;
        if rest.is_empty() {
            continue;
        }
        if let Some(directive) = rest.strip_prefix('.') {
            let (name, arg) = directive
                .split_once(char::is_whitespace)
                .unwrap_or((directive, ""));
            let arg_column = column + 1 + name.len() + (arg.len() - arg.trim_start().len()) + 1;
            let arg = Word {
                text: arg.trim(),
                column: arg_column,
            };
            match name {
                "scratch" => {
                    if scratch.is_some() || !code.is_empty() || !open_labels.is_empty() {
                        return Err(line.err(column, AsmErrorKind::MisplacedScratch));
                    }
                    let n = line.number(&arg, "a word count")?;
                    let n = u16::try_from(n).map_err(|_| {
                        line.err(arg.column, AsmErrorKind::Expected("a count below 65536"))
                    })?;
                    scratch = Some(n);
                }
                "table" => {
                    if !is_name(arg.text) {
                        return Err(line.err(arg.column, AsmErrorKind::Expected("a table name")));
                    }
                    let index = tables.len() as u32;
                    if table_names.insert(arg.text.to_owned(), index).is_some() {
                        let name = arg.text.to_owned();
                        return Err(line.err(arg.column, AsmErrorKind::DuplicateTable(name)));
                    }
                    tables.push(Vec::new());
                }
                "pattern" | "set" => {
                    if !code.is_empty() || !open_labels.is_empty() || !tables.is_empty() {
                        return Err(line.err(column, AsmErrorKind::MisplacedCoprocessorTable));
                    }
                    if name == "pattern" {
                        coprocessor.pattern(&line, &arg)?;
                    } else {
                        coprocessor.set(&line, &arg)?;
                    }
                }
                _ => {
                    let d = name.to_owned();
                    return Err(line.err(column, AsmErrorKind::UnknownDirective(d)));
                }
            }
            continue;
        }
        if let Some(entries) = tables.last_mut() {
            // Inside a table: `key -> target`.
            let Some((key, target)) = rest.split_once("->") else {
                return Err(line.err(column, AsmErrorKind::CodeAfterTables));
            };
            let key_word = Word {
                text: key.trim(),
                column,
            };
            let target_column = column + key.len() + 2 + (target.len() - target.trim_start().len());
            let target_word = Word {
                text: target.trim(),
                column: target_column,
            };
            let key = line.number(&key_word, "a key")?;
            entries.push((key, line.target(&target_word, '@')?));
            continue;
        }
        if let Some((label, after)) = rest.split_once(':') {
            let label = label.trim();
            if is_name(label) {
                if labels.contains_key(label) || open_labels.iter().any(|p| p.name == label) {
                    let l = label.to_owned();
                    return Err(line.err(column, AsmErrorKind::DuplicateLabel(l)));
                }
                open_labels.push(Pending {
                    name: label.to_owned(),
                    line: line.number,
                    column,
                });
                column += rest.len() - after.len();
                column += after.len() - after.trim_start().len();
                rest = after.trim();
                if rest.is_empty() {
                    continue;
                }
            }
        }
        let (mnemonic, operands) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let ops_column = column + mnemonic.len() + 1;
        let ops = split_operands(operands, ops_column);
        let parsed = parse_insn(&line, mnemonic, column, &ops)?;
        let index = code.len() as u32;
        for l in open_labels.drain(..) {
            labels.insert(l.name, index);
        }
        code.push(parsed);
    }
    if let Some(l) = open_labels.into_iter().next() {
        return Err(AsmError {
            line: l.line,
            column: l.column,
            kind: AsmErrorKind::LabelAtEnd(l.name),
        });
    }

    let resolve = |r: &Ref| -> Result<u32, AsmError> {
        match r {
            Ref::Index(i) => Ok(*i),
            Ref::Name(p) => labels.get(&p.name).copied().ok_or_else(|| AsmError {
                line: p.line,
                column: p.column,
                kind: AsmErrorKind::UndefinedLabel(p.name.clone()),
            }),
        }
    };
    let mut program = Program {
        scratch_words: scratch.unwrap_or(0),
        code: Vec::with_capacity(code.len()),
        tables: Vec::with_capacity(tables.len()),
        patterns: coprocessor.patterns.into_iter().map(Arc::new).collect(),
        sets: coprocessor.sets.into_iter().map(Arc::new).collect(),
    };
    for p in code {
        let mut insn = p.insn;
        for (slot, r) in &p.targets {
            let t = resolve(r)?;
            match (&mut insn, slot) {
                (Insn::Jump { target }, _) => *target = t,
                (Insn::Branch { then_, .. }, 0) => *then_ = t,
                (Insn::Branch { else_, .. }, _) => *else_ = t,
                (Insn::Switch { default, .. }, _) => *default = t,
                _ => {}
            }
        }
        if let (Insn::Switch { table, .. }, Some(r)) = (&mut insn, &p.table) {
            *table = match r {
                Ref::Index(i) => *i,
                Ref::Name(n) => *table_names.get(&n.name).ok_or_else(|| AsmError {
                    line: n.line,
                    column: n.column,
                    kind: AsmErrorKind::UndefinedTable(n.name.clone()),
                })?,
            };
        }
        program.code.push(insn);
    }
    for entries in tables {
        let entries = entries
            .iter()
            .map(|(k, r)| Ok((*k, resolve(r)?)))
            .collect::<Result<Vec<_>, AsmError>>()?;
        program.tables.push(Table { entries });
    }
    Ok(program)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::insn::{Cond, Operand, Reg};

    const TEXT: &str = "\
.scratch 1
    ld.h r0, [12]
    jeq r0, 2048, L2, L5
L2:
    ld.b r1, [r0+23] ; indexed
    stm m0, r1
    switch r1, T0, L5
L5:
    ret 0
L6:
    ret r1
.table T0
    6 -> L6
    17 -> L6
";

    #[test]
    fn assembles_and_prints_back() {
        let p = assemble(TEXT).unwrap();
        assert_eq!(p.scratch_words, 1);
        assert_eq!(p.code.len(), 7);
        assert_eq!(
            p.code[1],
            Insn::Branch {
                cond: Cond::Eq,
                lhs: Reg(0),
                rhs: Operand::Imm(2048),
                then_: 2,
                else_: 5
            }
        );
        let printed = p.to_string();
        assert_eq!(assemble(&printed).unwrap(), p);
        assert_eq!(printed, TEXT.replace(" ; indexed", ""));
    }

    #[test]
    fn absolute_targets_and_hex() {
        let p = assemble("start: jmp @9\n mov r1, 0x10\n switch r1, #3, start\n").unwrap();
        assert_eq!(p.code[0], Insn::Jump { target: 9 });
        assert_eq!(
            p.code[1],
            Insn::Mov {
                dst: Reg(1),
                src: Operand::Imm(16)
            }
        );
        assert_eq!(
            p.code[2],
            Insn::Switch {
                key: Reg(1),
                table: 3,
                default: 0
            }
        );
        assert_eq!(assemble(&p.to_string()).unwrap(), p);
    }

    #[test]
    fn errors_have_positions() {
        let e = assemble("  ret 0\n  frob r1\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 3));
        assert_eq!(e.kind, AsmErrorKind::UnknownMnemonic("frob".into()));

        let e = assemble("  add r1, r2, x9\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 15));

        let e = assemble("  jmp nowhere\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 7));
        assert_eq!(e.kind, AsmErrorKind::UndefinedLabel("nowhere".into()));

        let e = assemble("a:\n ret 0\na: ret 1\n").unwrap_err();
        assert_eq!(e.kind, AsmErrorKind::DuplicateLabel("a".into()));

        let e = assemble(" ret 0\nend:\n").unwrap_err();
        assert_eq!(e.kind, AsmErrorKind::LabelAtEnd("end".into()));

        let e = assemble(" ret 0, 1\n").unwrap_err();
        assert_eq!(
            e.kind,
            AsmErrorKind::OperandCount {
                expected: 1,
                found: 2
            }
        );
    }
}
